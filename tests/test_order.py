"""The order in which annotators meet the tasks (evalstudio/tasks/order.py), without a server: each participant's order
through the gateway, the gateway's choice under overlap, and the order the import sends to Label Studio, per
protocol. (Through real gateways: tests/test_order_live.py.)"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from evalstudio import importers
from evalstudio.crowd.ledger import Load
from evalstudio.tasks.importing import _in_send_order
from evalstudio.tasks.order import choose, participant_order, seed_of, send_order
from evalstudio.tasks.scanning import scan

from .conftest import PROJECTS, example_files


def adjacent(order: list, context_of) -> int:
    return sum(context_of(a) == context_of(b) for a, b in zip(order, order[1:]))


def fewest_adjacent(contexts: list) -> int:
    """The fewest back-to-back pairs of one context any order of these tasks can have: max(0, 2m - n - 1)."""
    counts = Counter(contexts)
    n, m = len(contexts), max(counts.values(), default=0)
    return max(0, 2 * m - n - 1)


def _design(sizes: list[int]) -> dict[int, str]:
    """Task id -> context, for contexts of the given sizes (the ids in context order, as a file lists them)."""
    contexts = [f"c{i}" for i, size in enumerate(sizes) for _ in range(size)]
    return dict(enumerate(contexts))


designs = st.lists(st.integers(1, 6), min_size=1, max_size=12).map(_design)


@settings(max_examples=300, deadline=None)
@given(designs, st.integers(0, 2**63))
def test_each_participant_order_is_a_permutation_with_the_fewest_back_to_back_contexts(tasks, seed):
    order = participant_order(tasks, seed)
    assert sorted(order) == sorted(tasks)
    assert adjacent(order, tasks.get) == fewest_adjacent(list(tasks.values()))
    assert participant_order(tasks, seed) == order  # the same participant: the same order, in any process


def test_orders_differ_between_participants_and_no_system_has_a_fixed_place():
    """Five contexts with four versions each (health's design), the reference always listed first in the file: over
    400 participants its position within its context is uniform (chi-square), and no two of 50 participants share
    an order."""
    tasks = {i: f"scenario{i // 4}" for i in range(20)}  # task 4k is scenario k's reference
    positions = Counter()
    orders = set()
    for participant in range(400):
        order = participant_order(tasks, seed_of("salt", f"P{participant}", "health"))
        orders.add(tuple(order)) if participant < 50 else None
        for k in range(5):
            positions[[t for t in order if tasks[t] == f"scenario{k}"].index(4 * k)] += 1
    assert len(orders) == 50
    assert chisquare([positions[p] for p in range(4)]).pvalue > 0.001, positions
    assert seed_of("salt", "P1", "health") != seed_of("other salt", "P1", "health")  # the salt is the study's


def test_the_choice_respects_overlap_and_what_the_participant_had_and_fills_started_tasks_first():
    contexts = {1: "a", 2: "a", 3: "b", 4: "c"}
    order = [2, 1, 3, 4]
    # 2 is the participant's already, 1 is full (one answer in Label Studio, one through the gateway)
    assert choose(order, contexts, {1: 2}, {1: Load(1, 0)}, {2}, 2, None) == 3
    # breadth first where the quota cannot cover the 3 open tasks: 4 was started by someone (held), so it comes
    # before untouched 1 and 3
    assert choose(order, contexts, {}, {4: Load(0, 1)}, {2}, 2, None, quota_left=2) == 4
    # otherwise the participant's own order: whoever started first does not set everyone's order
    assert choose(order, contexts, {}, {4: Load(0, 1)}, {2}, 2, None, quota_left=3) == 1
    assert choose(order, contexts, {}, {4: Load(0, 1)}, {2}, 2, None) == 1
    # never the last task's context while another is left: after an "a", a "b" although 1 comes first
    assert choose(order, contexts, {}, {}, {2}, 1, "a") == 3
    # only the last context left: served anyway (the design allows no other)
    assert choose(order, contexts, {}, {3: Load(1, 0), 4: Load(0, 1)}, {2}, 1, "a") == 1
    assert choose(order, contexts, {}, {1: Load(1, 0), 3: Load(1, 0), 4: Load(1, 0)}, {2}, 1, None) is None


@given(st.lists(st.tuples(st.text(min_size=1, max_size=5), st.sampled_from("abcdef")), max_size=60,
                unique_by=lambda t: t[0]))
def test_the_import_order_has_the_fewest_back_to_back_contexts(tasks):
    order = send_order(tasks)
    assert sorted(order) == list(range(len(tasks)))
    assert adjacent(order, lambda p: tasks[p][1]) == fewest_adjacent([c for _, c in tasks])
    assert send_order(tasks) == order


@pytest.mark.parametrize("protocol", PROJECTS)
def test_the_import_sends_no_context_twice_in_a_row_and_no_system_first(reg, protocol):
    """What Label Studio's sequential stream shows everyone: the order the import sends the example files in. The
    fewest back-to-back tasks of one context the design allows, and in a file that lists its systems in the same
    order for every context (the dialogue and health examples: the human reference first), that system is not
    first in every context."""
    for part in reg.parts(protocol):
        checked = scan(part, importers.get(part.importer), example_files(part.entry), spool=True)
        try:
            sent = [json.loads(line.split("\t", 3)[3]) for line in _in_send_order(checked.spool, checked.items)]
        finally:
            checked.discard()
        contexts = [t["data"]["item_id"] for t in sent]
        assert len(sent) == checked.tasks
        assert adjacent(contexts, lambda c: c) == fewest_adjacent(contexts)
        first_system: dict[str, str] = {}
        for task in sent:
            first_system.setdefault(task["data"]["item_id"], task["meta"].get("system"))
        several = [c for c, n in Counter(contexts).items() if n > 1]
        if len(several) > 1:
            assert len({first_system[c] for c in several}) > 1, first_system
