"""The order in which annotators meet a project's tasks: part of the instrument, so decided here, never by the order
of a published file.

Through the gateway (participant_order, choose), per participant:

- Each participant has an order of their own: a permutation of the part's tasks drawn from a seed that is theirs
  (the study's secret salt, the participant and the part): two participants meet the tasks in different orders,
  and the same participant meets the same order after a reload, a new sign-in or a restart of the gateway.
- No two tasks of one context (one `item_id`: the responses to one dialogue context, the explanations of one
  answer) come back to back where the part has tasks of other contexts to put between them: the permutation is
  drawn so, and serving keeps it (the task after one of context c is of another context whenever one is left).
- No system has a fixed place: within a context the versions are shuffled per participant, so the human reference
  (or any system) is first for some participants and last for others.
- An attention check (a spoiled copy of a task, protocols/attention.py) goes only to a participant who answered or
  holds its original, at a later place in their order (checks_after, open_checks): it is scored only beside it.
- Breadth first, as Label Studio's own stream: with an overlap above one, tasks that others have started come
  before untouched ones (in the participant's own order), so a study with a quota fills tasks up instead of
  leaving many with one answer.

Design check: with counts n_c of tasks per context and n tasks in all, an order with no adjacent pair of one context
exists if and only if max n_c <= ceil(n / 2); the draw below keeps that condition true at every step, so it never
paints itself into a corner, and where the design does not allow it (one context holds most tasks) it puts the
fewest such pairs it can.

In Label Studio itself (send_order): the import sends the tasks in an order that puts no two tasks of one context
back to back and no system in a fixed place, so that Label Studio's sequential stream (`order: sequential`) shows
them so to everyone. Label Studio's random stream (`order: random`) gives each annotator an order of their own but
may put two tasks of one context back to back: it cannot have both, the gateway can.
"""

from __future__ import annotations

import hashlib
import heapq
import random

from evalstudio.crowd.ledger import Load, task_load


def seed_of(salt: str, participant: str, part: str) -> int:
    """A participant's seed for a part: unpredictable without the study's salt, the same in every process."""
    digest = hashlib.sha256(f"{salt}\x00{participant.lower()}\x00{part}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def spread(contexts: list[str], rng: random.Random) -> list[int]:
    """Positions 0..n-1 of tasks with these contexts, in a random order with the fewest back-to-back pairs of one
    context the design allows (none where the largest context holds at most half the tasks, rounded up). Each
    step takes a uniformly random remaining task whose context is not the last one's, unless a context must go now
    for the rest to stay possible (it holds more than half of what is left, rounded down). O(n log contexts)."""
    n = len(contexts)
    remaining = list(range(n))
    at = list(range(n))  # task -> its index in `remaining`
    by_context: dict[str, list[int]] = {}
    for task, context in enumerate(contexts):
        by_context.setdefault(context, []).append(task)
    at_context = {task: i for ids in by_context.values() for i, task in enumerate(ids)}
    counts = {c: len(ids) for c, ids in by_context.items()}
    heap = [(-k, c) for c, k in counts.items()]
    heapq.heapify(heap)

    def largest_but(excluded):
        set_aside, found = [], None
        while heap:
            k, c = heap[0]
            if counts[c] != -k:  # an outdated entry
                heapq.heappop(heap)
            elif c == excluded:
                set_aside.append(heapq.heappop(heap))
            else:
                found = c
                break
        for entry in set_aside:
            heapq.heappush(heap, entry)
        return found

    def take(task: int) -> None:
        i, last_task = at[task], remaining[-1]
        remaining[i], at[last_task] = last_task, i
        remaining.pop()
        ids = by_context[contexts[task]]
        j, last_id = at_context[task], ids[-1]
        ids[j], at_context[last_id] = last_id, j
        ids.pop()
        context = contexts[task]
        counts[context] -= 1
        if counts[context]:
            heapq.heappush(heap, (-counts[context], context))

    out: list[int] = []
    last = None
    for left in range(n, 0, -1):
        must = largest_but(last)
        if must is not None and counts[must] > left // 2:
            task = by_context[must][rng.randrange(counts[must])]
        elif last is None or counts.get(last, 0) < left:
            for _ in range(64):
                task = remaining[rng.randrange(left)]
                if contexts[task] != last:
                    break
            else:  # the last context holds nearly everything left: any other, found directly
                other = next(c for c, k in counts.items() if k and c != last)
                task = by_context[other][rng.randrange(counts[other])]
        else:  # only the last context is left
            task = remaining[rng.randrange(left)]
        take(task)
        out.append(task)
        last = contexts[task]
    return out


def participant_order(tasks: dict[int, str], seed: int) -> list[int]:
    """Task ids (keys of `tasks`, task id -> context) in the order drawn for one participant (see the module)."""
    ids = sorted(tasks)
    return [ids[p] for p in spread([tasks[t] for t in ids], random.Random(seed))]


def choose(order: list[int], contexts: dict[int, str], outside: dict[int, int], taken: dict[int, Load],
           mine: set[int], overlap: int, last_context: str | None, quota_left: int | None = None) -> int | None:
    """The participant's next task: the first in their `order` that they have not had (`mine`), that is not taken
    by `overlap` others (answers stored in Label Studio, `outside`, or through the gateway, plus tasks held by
    others), of a context other than the last one's. When the participant's quota (`quota_left` more answers)
    cannot cover the tasks open to them, tasks others started come first (breadth first), so that a study with a
    quota fills tasks up; otherwise their own order rules, since following what others started would give
    participants who work at the same time the order of whoever started first."""
    available = [t for t in order if t not in mine and task_load(t, outside, taken) < overlap]
    fill = overlap > 1 and quota_left is not None and quota_left < len(available)
    started = [t for t in available if task_load(t, outside, taken) > 0] if fill else []
    for pool in (started, available):
        for task_id in pool:
            if contexts.get(task_id) != last_context:
                return task_id
    return (started or available or [None])[0]


def checks_after(order: list[int], checks: dict[int, int]) -> list[int]:
    """`order` with each attention check (`checks`: copy -> its original, task ids) after its original: where the
    copy came first the two change places. A copy has its original's context, so the contexts' sequence (and the
    rule of no two of one context back to back) is unchanged, and the copy still comes at a random later place."""
    at = {t: i for i, t in enumerate(order)}
    out = list(order)
    for copy, original in checks.items():
        if copy in at and original in at and at[copy] < at[original]:
            out[at[copy]], out[at[original]] = original, copy
    return out


def open_checks(order: list[int], checks: dict[int, int], claims: set[int], needs, quota_left: int | None) -> list[int]:
    """`order` without the attention checks (copy -> original) whose original the participant has not answered or
    holds (`claims`): a check is scored only beside its original's answer by the same participant (ESA's batches hold
    both). With a quota, the checks the participant owes (`needs(task)`: not theirs yet and short of answers) keep
    their places: only those once the quota left cannot hold more, and no original whose check would not fit."""
    kept = [t for t in order if t not in checks or checks[t] in claims]
    if quota_left is None:
        return kept
    owed = [t for t in kept if t in checks and needs(t)]
    if len(owed) >= quota_left:
        return owed
    copy_of = {original: copy for copy, original in checks.items()}
    return [t for t in kept if t in checks or t not in copy_of or not needs(copy_of[t]) or quota_left > len(owed) + 1]


def waiting(order: list[int], outside: dict[int, int], taken: dict[int, Load], mine: set[int],
            overlap: int) -> bool:
    """Whether tasks are left for the participant once others' held tasks are answered or given up: only held
    tasks stand between them and more work, so the participant is asked to wait rather than sent away."""
    return any(t not in mine and max(outside.get(t, 0), taken.get(t, Load()).answered) < overlap for t in order)


def send_order(tasks: list[tuple[str, str]]) -> list[int]:
    """Positions of `tasks` ((key, context) pairs, as the import reads them) in the order the import sends them: the
    fewest back-to-back pairs of one context the design allows, the versions of a context in random order (a system
    listed first in the file is first in about 1/k of the contexts with k versions). Deterministic: drawn from the
    tasks' keys, so a re-run sends the same order."""
    seed = hashlib.sha256("\x00".join(sorted(k for k, _ in tasks)).encode("utf-8")).digest()
    return spread([c for _, c in tasks], random.Random(seed))
