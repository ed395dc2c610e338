"""The datasheet's answers from a study's front matter (projects.yaml crowd: consent, practice, background; the
ledger's record of them, evalstudio/crowd/front_record.py's front_facts): how consent was given (ACL checklist D3),
the evaluators' characteristics as counts (D5, HEDS 3.2.5), the practice round and its pass rate (HEDS 3.2.4).
Never a participant's row."""

from __future__ import annotations

import re

from evalstudio.base.numbers import percent


def _plain(html: str) -> str:
    """The consent wording as one line of text (its HTML tags dropped, its words kept)."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def consent_text(front: dict) -> str:
    """D3: the consent wording, the statements accepted and how consent was given, with the counts."""
    statements = " ".join(f"“{s}”" for s in front["statements"])
    return (f"Yes. Before any task, each participant read this text on the study's gateway: “{_plain(front['consent'])}” "
            f"and ticked each statement ({statements}) and chose “I consent”; the gateway recorded the decision with "
            f"the server's time and served no task without it. {front['consented']} participant(s) consented, "
            f"{front['declined']} declined (they saw no task and were sent back to the platform without a "
            "completion code).")


MIN_GROUP = 5  # answers a question needs before its counts are published: fewer could point at a participant


def _question(q: dict) -> str:
    said = f"“{q['text']}” ({q['answered']} answered"
    if q["answered"] < MIN_GROUP:
        return said + f"; fewer than {MIN_GROUP}: not broken down, so that no participant's answer shows)"
    if q.get("prefer_not_to_say") is not None:  # (asked with "prefer not to say")
        said += f", {q['prefer_not_to_say']} preferred not to say"
    if q["type"] == "choice":
        said += "; " + ", ".join(f"{option}: {n}" for option, n in q["counts"].items() if option != "Prefer not to say")
    elif q["type"] == "number" and q.get("numbers", 0) < MIN_GROUP:
        # the median and middle half of fewer than five numbers (five answers of which some preferred not to say)
        # would show a participant's own number
        said += (f"; {q.get('numbers', 0)} gave a number, fewer than {MIN_GROUP}: no median, so that no participant's "
                 "answer shows")
    elif q["type"] == "number" and "median" in q:
        low, high = q["quartiles"]
        said += f"; median {q['median']:g}, middle half {low:g} to {high:g}"
    elif q["type"] == "text":
        said += "; free text, not released"
    return said + ")"


def demographics(front: dict) -> str:
    """D5 and HEDS 3.2.5: each background question's answers as counts."""
    if not front["background"]:
        return ""
    answered = front["participants_with_background"]
    return (f"From the background questions the gateway asked each participant once ({answered} answered): "
            + "; ".join(_question(q) for q in front["background"]) + ".")


def practice_text(front: dict) -> str:
    """HEDS 3.2.4's practice round: its design and pass rate."""
    p = front.get("practice")
    if not p:
        return ""
    rule = (f"; at least {p['min_correct']} correct were needed to go on (the others were screened out)"
            if p["min_correct"] else "")
    rate = (f" {p['passed']} of {p['finished']} participants who finished it passed ({percent(p['pass_rate'])})."
            if p["pass_rate"] is not None else "")
    return (f" Before the tasks, a practice round of {p['items']} item(s) in the study's own labeling view: after "
            f"each answer the participant saw whether it matched the expected answer and the item's explanation"
            f"{rule}; practice answers are in no analysis.{rate}")
