"""Label Studio receives the study behind the ledger: the sync writer.

The gateway answers participants from the study's ledger alone (a sign-up, an answer and a change of answer are
acknowledged once the ledger has committed them). This writer puts them into Label Studio afterwards, as the
researcher's account (the gateway's key), with each annotation's author (`completed_by`) the participant's own
account and its `lead_time` the time the ledger measured:

- accounts: a participant who joined through the study link gets a Label Studio account made with the users API
  (no password: nobody signs in to Label Studio as them, and no password is hashed per sign-up); a participant of
  `participants add` whose account was not made (a lost answer) is signed up through the invite link as `add`
  does, with the ledger's password. An e-mail Label Studio has already is that participant's account (made by an
  earlier try whose answer was lost): the e-mail is of a reserved domain only evalstudio writes.
- answers: each write carries the ledger's key, the pair (task, participant), and a key Label Studio stores with
  the annotation and keeps unique in its database (`unique_id`, derived from the ledger's reference: `write_key`),
  so a second write of one answer is refused (HTTP 409) however the first one's answer was lost. The ledger marks
  an answer sent before its first write goes out; an answer marked sent whose annotation id the ledger does not have
  (the write's answer was lost: a timeout, a killed process) is looked for first, the participant's annotation of
  that task, once SETTLE seconds have passed since the write went out (so is the answer of a participant of
  `participants add`, who may have annotated the task in Label Studio itself). A look-up that finds the participant
  on the task more than once (written twice by an evalstudio before the key, or a look-up answered before a frozen
  Label Studio stored the first write) keeps one annotation, the oldest, with the ledger's answer, and deletes the
  others when the participant joined through the study link (nobody but this writer writes their annotations);
  those of `participants add` are left and `status` flags them. A change of answer is a PATCH of that annotation.

One writer per study at a time: a thread in every gateway process, of which the one holding the study's sync lease
in the ledger writes (evalstudio/crowd/ledger_sync.py). A write Label Studio refuses (4xx) is recorded with its
reason and tried again later (`status` lists it); one that fails (5xx, timeout, Label Studio down or stopped) is
tried again with a growing pause. Nothing is dropped, and nothing in the ledger is forgotten because a write failed.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import threading
import uuid

import httpx

from evalstudio.crowd.ledger import Ledger, LedgerUnreachable
from evalstudio.crowd.ledger_sync import LEASE_SECONDS, Pending, owner

from .checks import user_id

log = logging.getLogger(__name__)

# one write to Label Studio; well inside the lease, so a writer whose lease another took is not writing (the
# variable: for tests, which wait for a write that timed out)
TIMEOUT = float(os.environ.get("EVALSTUDIO_SYNC_TIMEOUT") or 30.0)
IDLE = 0.25  # seconds between looks at the ledger when there is nothing to write
REFUSED_AGAIN = 60.0  # a refused write is tried again after this
# a write that went out and whose answer never came (a timeout, a writer killed) may still be on its way into Label
# Studio's database: it is looked for, and written again if it is not there, only this long after it went out
SETTLE = 2 * TIMEOUT
MOST_PAUSE = 10.0  # the longest pause after failures in a row (Label Studio down): the lag drains soon after it is back
CONCURRENT = 4  # answers written at once (Label Studio's workers take them side by side; one at a time fell behind)
GATHER = 0.5  # seconds between two rounds at least: the answers acknowledged meanwhile are written in one round
RENEW = LEASE_SECONDS / 8  # the sync lease is renewed after this (it holds LEASE_SECONDS, well beyond one round)


class Refused(Exception):
    """Label Studio refused a write (4xx): its reason."""


class Duplicate(Refused):
    """Label Studio holds an annotation with this write's key already (HTTP 409): an earlier write of the answer."""


def write_key(study: str, ref: str) -> str:
    """The key Label Studio stores with the annotation of the ledger's reference `ref` (its `unique_id`, unique in
    its database): one annotation per answer, whoever writes it and however often."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"evalstudio:{study}:{ref}"))


class SyncWriter:
    """Writes the ledger's accounts and answers of one study's parts into Label Studio."""

    def __init__(self, ledger: Ledger, url: str, api_key: str, projects: dict[str, int], study: str):
        self.ledger, self.projects, self.study = ledger, dict(projects), study
        self._url, self._key = url.rstrip("/"), api_key
        self.wake = threading.Event()  # set by the gateway when it records something: written without waiting
        self._refused_at: dict[str, float] = {}
        self._web: httpx.Client | None = None
        self._invite: str | None = None
        self._users: dict[str, int | None] | None = None  # e-mail -> user id, listed once, kept while writes land
        self._pool = concurrent.futures.ThreadPoolExecutor(CONCURRENT, thread_name_prefix="evalstudio-sync",
                                                           initializer=name_thread, initargs=("evalstudio-sync",))
        self.written = 0  # writes made by this writer (accounts and answers)

    # ---- the loop ---------------------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Write until `stop` is set: while this process holds the study's sync lease, everything the ledger has
        that Label Studio does not; otherwise look again now and then (another process writes)."""
        import time

        me, failures, renewed = owner(), 0, float("-inf")
        name_thread("evalstudio-sync")
        while not stop.is_set():
            before = self.written
            try:
                # the lease, renewed at most every RENEW seconds (a write of the ledger each): held till well after
                if time.monotonic() - renewed >= RENEW:
                    if not self.ledger.sync_lease(self.study, me):
                        renewed, self._users = float("-inf"), None  # (another writer may make accounts meanwhile)
                        stop.wait(min(5.0, LEASE_SECONDS / 4))
                        continue
                    renewed = time.monotonic()
                started = time.monotonic()
                done = self.once()
                failures = 0
                if not done:
                    self.wake.wait(IDLE)
                    self.wake.clear()
                # answers acknowledged meanwhile are written together in the next round: a look at the ledger per
                # GATHER seconds at most, not one per answer (the participants' requests come first)
                stop.wait(max(0.0, GATHER - (time.monotonic() - started)))
            except (httpx.HTTPError, ServerBusy) as e:
                self._users = None  # a write whose answer was lost may have made an account: listed again
                failures = 1 if self.written > before else failures + 1  # (a round that wrote: not down, a lost answer)
                log.warning("Label Studio did not take the study's writes (%s); trying again", type(e).__name__)
                stop.wait(min(MOST_PAUSE, 0.25 * 2 ** min(failures, 6)))
            except LedgerUnreachable:  # this host cut off from the ledger: written once it is back
                failures += 1
                log.warning("the ledger did not answer the sync writer; trying again")
                stop.wait(min(MOST_PAUSE, 0.25 * 2 ** min(failures, 6)))
            except Exception:  # noqa: BLE001 - the writer must outlive any one failure; logged for the operator
                self._users = None
                failures = 1 if self.written > before else failures + 1
                log.exception("the sync writer failed; trying again")
                stop.wait(min(MOST_PAUSE, 0.25 * 2 ** min(failures, 6)))
        if self._web is not None:
            self._web.close()
        self._pool.shutdown(wait=True)

    def once(self) -> int:
        """One round: the accounts, then the answers waiting, up to CONCURRENT writes at once (each account and each
        answer is written by one thread; the accounts' writes end before the answers' begin, and the round ends when
        every write of it has its answer). Returns how many writes were made."""
        import time

        now = time.monotonic()
        accounts = [(participant, email, signs_in) for participant, email, signs_in in self.ledger.pending_accounts()
                    if now - self._refused_at.get(f"account:{participant.lower()}", -REFUSED_AGAIN) >= REFUSED_AGAIN]
        if accounts:
            self._find_user("")  # Label Studio's accounts, listed once before the writes (kept while writes land)
        done = self._all(self._one_account, [(*account, now) for account in accounts])
        return done + self._all(self._one, [(pending, now)
                                            for pending in self.ledger.pending_answers(list(self.projects))])

    def _all(self, write, items: list[tuple]) -> int:
        """`write(*item)` for every item on the pool's threads; how many wrote. Returns once every write has its
        answer (no write of a round is in flight when the next round looks); the first failure is raised then."""
        futures = [self._pool.submit(write, *item) for item in items]
        concurrent.futures.wait(futures)
        done, failed = 0, None
        for future in futures:
            if future.exception() is not None:
                failed = failed or future.exception()
            elif future.result():
                done += 1
        self.written += done
        if failed is not None:
            raise failed
        return done

    def _one_account(self, participant: str, email: str, signs_in: bool, now: float) -> bool:
        """Make one participant's account (on one of the pool's threads): whether it was made."""
        try:
            made = self._account(participant, email, signs_in)
        except Refused as e:
            self._refused_at[f"account:{participant.lower()}"] = now
            self._users = None  # (another writer may have made it: listed again on the next try)
            self.ledger.account_refused(participant, str(e))
            return False
        self.ledger.account_made(participant, made)
        users = self._users
        if users is not None:
            users[email.lower()] = made
        return True

    def _one(self, pending: Pending, now: float) -> bool:
        """Write one answer (on one of the pool's threads): whether it was written."""
        import time

        if pending.user_id is None:
            return False  # the account first (made above, or refused and listed by status)
        if now - self._refused_at.get(pending.ref, -REFUSED_AGAIN) < REFUSED_AGAIN:
            return False
        if pending.annotation_id is None and pending.sent and time.time() - pending.sent < SETTLE:
            return False  # an earlier write may still land: looked for once it has settled
        try:
            annotation = self._answer(pending)
        except Refused as e:
            self._refused_at[pending.ref] = now
            self.ledger.answer_refused(pending.ref, str(e))
            return False
        self._refused_at.pop(pending.ref, None)
        self.ledger.answer_synced(pending.ref, annotation, pending.version)
        return True

    # ---- Label Studio ---------------------------------------------------------------------------------------
    def _client(self) -> httpx.Client:
        if self._web is None:
            self._web = httpx.Client(base_url=self._url, timeout=TIMEOUT,
                                     headers={"Authorization": f"Token {self._key}"})
        return self._web

    def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        answer = self._client().request(method, path, **kwargs)
        if answer.status_code >= 500 or answer.status_code in (408, 429):
            raise ServerBusy(f"HTTP {answer.status_code}")
        if answer.status_code == 409:
            raise Duplicate(f"Label Studio holds it already (HTTP 409): {_reason(answer)}")
        if answer.status_code >= 400:
            raise Refused(f"Label Studio refused it (HTTP {answer.status_code}): {_reason(answer)}")
        return answer

    def _account(self, participant: str, email: str, signs_in: bool) -> int:
        """The participant's Label Studio account: the one with its e-mail, else made now."""
        found = self._find_user(email)
        if found is not None:
            return found
        if signs_in:  # a participant of `participants add`, who may sign in to Label Studio: with the ledger's password
            from evalstudio.labelstudio.client import Client
            from evalstudio.labelstudio.connection import Settings

            account = self.ledger.account(participant)
            client = Client(Settings(self._url, self._key), timeout=TIMEOUT)
            try:
                self._invite = self._invite or client.invite_token()
                return client.sign_up(email, account.password, self._invite)
            except Exception:  # noqa: BLE001 - its answer may be lost: the next round finds the e-mail
                self._invite = None
                raise ServerBusy("the sign-up did not answer") from None
        made = self._request("POST", "/api/users/", json={"email": email, "username": email.split("@")[0]})
        user = user_id(made.json())
        if user is None:
            raise Refused("Label Studio answered the new account without an id")
        return user

    def _find_user(self, email: str) -> int | None:
        if self._users is None:
            listed = self._request("GET", "/api/users/").json()
            self._users = {str(u.get("email", "")).lower(): user_id(u.get("id")) for u in listed or []
                           if isinstance(u, dict)}
        return self._users.get(email.lower())

    def _answer(self, pending: Pending) -> int:
        """Label Studio's annotation holding this version of the answer: written now, or found (an earlier write
        whose answer was lost)."""
        result = json.loads(pending.result)
        annotation = pending.annotation_id
        if annotation is None:
            mine = self._theirs(pending) if pending.sent or pending.signs_in else []
            if not mine:
                self.ledger.answer_sending(pending.ref)
                try:
                    return self._post(pending, result)
                except Duplicate:  # an earlier write is stored: its answer was lost, or a look-up ran ahead of it
                    mine = self._theirs(pending)
                    if not mine:
                        raise ServerBusy("Label Studio holds the answer but does not list it yet") from None
            keep = self._reconciled(pending, mine)
            if keep.get("result") == result:
                return int(keep["id"])
            annotation = int(keep["id"])
        self._request("PATCH", f"/api/annotations/{annotation}/", json={"result": result})
        return annotation

    def _post(self, pending: Pending, result: list) -> int:
        """The answer written as a new annotation: by the participant, with the ledger's time and write key, and,
        where it started from a prediction (prefill), that prediction as its parent (the export's from_prediction).
        A parent Label Studio no longer has (the judge was run again) is left out, and said in the log: the ledger
        keeps the answer's condition, and its regions their origins."""
        body = {"result": result, "completed_by": pending.user_id, "lead_time": round(pending.seconds or 0.0, 3),
                "unique_id": write_key(self.study, pending.ref)}
        path, params = f"/api/tasks/{pending.task_id}/annotations", {"project": self.projects[pending.part]}
        if pending.prediction is not None:
            try:
                return int(self._request("POST", path, params=params,
                                         json={**body, "parent_prediction": pending.prediction}).json()["id"])
            except Refused as e:
                if isinstance(e, Duplicate) or "parent_prediction" not in str(e):
                    raise
                log.warning("answer %s: Label Studio no longer has prediction %s; written without its parent",
                            pending.ref, pending.prediction)
        return int(self._request("POST", path, params=params, json=body).json()["id"])

    def _theirs(self, pending: Pending) -> list[dict]:
        """The participant's annotations of the task in Label Studio (not skipped), oldest first."""
        listed = self._request("GET", f"/api/tasks/{pending.task_id}/annotations").json()
        return sorted((a for a in listed or [] if isinstance(a, dict) and not a.get("was_cancelled")
                       and user_id(a.get("completed_by")) == pending.user_id), key=lambda a: int(a["id"]))

    def _reconciled(self, pending: Pending, mine: list[dict]) -> dict:
        """The one of the participant's annotations of the task that holds the ledger's answer (the oldest); the
        others are deleted where only this writer writes the participant's annotations (they joined through the
        study link), and left for `status` to flag otherwise (`participants add`: they may annotate in Label
        Studio itself)."""
        keep, surplus = mine[0], mine[1:]
        for extra in surplus if not pending.signs_in else ():
            try:
                self._request("DELETE", f"/api/annotations/{int(extra['id'])}/")
            except Refused as e:
                if "HTTP 404" not in str(e):  # (deleted already: by another writer's round)
                    raise
            log.warning("deleted annotation %s of task %s: the same answer as annotation %s (written twice)",
                        extra["id"], pending.task_id, keep["id"])
        return keep


class ServerBusy(Exception):
    """Label Studio did not take a write now (5xx, 408, 429): tried again."""


def _reason(answer: httpx.Response) -> str:
    try:
        body = answer.json()
    except ValueError:
        return answer.text[:200]
    return json.dumps(body, ensure_ascii=False)[:300]


def name_thread(name: str) -> None:
    """Give the calling thread an OS name (Linux, at most 15 bytes): `top -H` and /proc/<pid>/task/*/comm show the
    writer's CPU apart from the participants' requests."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def start(writer: SyncWriter) -> tuple[threading.Thread, threading.Event]:
    """The writer on a daemon thread of this process; set the event to stop it."""
    stop = threading.Event()
    thread = threading.Thread(target=writer.run, args=(stop,), name=f"sync-{writer.study}", daemon=True)
    thread.start()
    return thread, stop
