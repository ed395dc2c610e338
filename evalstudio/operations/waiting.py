"""How a command that reads the live study (status, export, report, approvals) waits for Label Studio: for it to
receive what the gateway acknowledged, then for its answers to the reads, with a line on stderr every few seconds,
giving up at the operator's `--wait`; and what the output lacks of the study's ledger, said after the read
(evalstudio/crowd/reconcile.py). Uses the consoles and evalstudio.base.errors; --wait itself is cli/base.py's."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from evalstudio.base.errors import ServerError

from .consoles import err

WAIT_SECONDS = 60.0  # --wait's default: how long a command waits for Label Studio without an answer
BEAT = 5.0  # a progress line this often while waiting


def say(line: str) -> None:
    """A warning or a progress line on stderr, as the operator reads it."""
    err.print(line, highlight=False, soft_wrap=True)


def wait_for_sync(book, wait: float):
    """The ledger's lag once Label Studio holds everything the gateway acknowledged, or after `wait` seconds."""
    started = time.monotonic()
    lag = book.lag()
    while lag.behind and time.monotonic() - started < wait:
        lag = book.wait_synced(min(BEAT, max(0.0, wait - (time.monotonic() - started))))
        if lag.behind:
            say(f"waiting for Label Studio to receive {lag.answers} answer(s) and {lag.accounts} account(s) the "
                f"gateway acknowledged: {time.monotonic() - started:.0f} s of --wait {wait:g}")
    return lag


def within(wait: float, what: str, read):
    """`read(beat)` (reads of Label Studio, calling `beat()` whenever an answer arrives) on a thread of its own,
    with a progress line every BEAT seconds; given up (ServerError) once Label Studio has not answered for `wait`
    seconds. Nothing the read would have written is written then."""
    box: dict = {}
    last = [time.monotonic()]

    def beat() -> None:
        last[0] = time.monotonic()

    def run() -> None:
        try:
            box["value"] = read(beat)
        except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
            box["error"] = e

    started = time.monotonic()
    thread = threading.Thread(target=run, name="label-studio-read", daemon=True)
    thread.start()
    while True:
        thread.join(BEAT)
        if not thread.is_alive():
            break
        quiet = time.monotonic() - last[0]
        if quiet >= wait:
            raise ServerError(f"{what}: Label Studio has not answered for {quiet:.0f} s (--wait {wait:g}); it may be "
                              "stopped or overloaded. Nothing was written: run this again once it answers, or with "
                              "a larger --wait")
        say(f"{what}: waiting for Label Studio, {time.monotonic() - started:.0f} s so far ({quiet:.0f} s without an "
            f"answer; gives up after --wait {wait:g} s without one)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


class LedgerCheck:
    """The study's ledger's answers as the read begins, to compare with what the read holds once it ended."""

    def __init__(self, folder: Path):
        from evalstudio.crowd import ledger

        book = ledger.open_ledger(folder)
        self.answers = [r for r in book.answers() if r.answered is not None]
        self.users = {a.participant_id.lower(): a.user_id for a in book.accounts().values()}
        self.conditions = book.conditions()  # whether each answer was shown with the prediction (prefill)
        self.read: list[dict] = []

    def keep(self, tasks: list[dict]) -> list[dict]:
        """`tasks` as read, noted for the comparison, without annotations that are not the ledger's answer (another
        annotation of a participant on a task whose answer the ledger holds: written twice), and with the ledger's
        record of whether each answer was shown with the prediction (reconcile.with_conditions)."""
        from evalstudio.crowd import reconcile

        self.read += [{"id": t["id"], "annotations": [
            {k: a.get(k) for k in ("id", "completed_by", "result", "was_cancelled")}
            for a in t.get("annotations") or []]} for t in tasks]
        surplus = reconcile.surplus_ids(self.answers, self.users, tasks)
        if surplus:
            tasks = [{**t, "annotations": [a for a in t.get("annotations") or [] if a.get("id") not in surplus]}
                     for t in tasks]
        return reconcile.with_conditions(tasks, self.conditions)

    def lines(self) -> list[str]:
        """What the output lacks of the ledger's answers, and the answers written twice."""
        from evalstudio.crowd import reconcile

        return reconcile.compare(self.answers, self.users, self.read).lines()
