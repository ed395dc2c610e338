"""Asking an LLM (a judge, or the model that writes judged outputs): any OpenAI-compatible chat-completions endpoint (vLLM, SGLang, llama.cpp's server, Ollama,
hosted APIs), with a resumable cache.

- **Concurrency and pace.** At most `concurrency` requests in flight, and at most `per_minute` started a minute.
- **Retries.** 429 waits for the server's Retry-After (at most 60 s) and asks again; 5xx, timeouts and broken
  connections back off (0.5 s doubling to 30 s). After `retries` attempts the answer is missing, with its reason.
- **The cache** is a SQLite database (0600 in a 0700 folder). Its key is the endpoint, the model, the sampling
  (temperature, sample number, max tokens) and the prompt's digest, so a second run asks nothing again, and a run
  stopped with Ctrl-C (or killed) asks only what it did not have. A writer thread commits the answers in batches as
  they arrive, off the event loop (one fsync for every answer that came in during the last one); a killed process
  loses at most the batch not yet committed, asked again next time. An answer the caller finds malformed is
  forgotten (`ChatClient.forget`): asked again next time. A valid answer to a later attempt (the first was
  malformed) is kept under that attempt, and the next run finds it (`ChatClient.recall`) instead of asking the
  first attempt again. Several processes may share one cache.
- **Tokens and cost** are read from each answer's `usage` and added up per judge (cached answers cost nothing now;
  what they cost when asked is kept).

The API key comes from the environment only (the variable the judge names, default OPENAI_API_KEY); it is never
put in argv, logs, the cache or an error message."""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import os
import queue
import re
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from evalstudio.base.credentials import private_dir
from evalstudio.base.errors import BadInput, EvalstudioError

MAX_RETRY_AFTER = 60.0
MOST_BACKOFF = 30.0
PER_POOL = 16  # connections per HTTP client (see ChatClient)
# a 400 that names the response format: a server without JSON mode (any other 400, e.g. a prompt longer than the
# model's context, is that request's refusal and leaves JSON mode on)
NO_JSON_MODE = re.compile(r"response[_ ]?format|json[_ ]?(object|mode|schema)", re.I)


class CacheError(EvalstudioError):
    """The answer cache cannot be opened or written."""
    pass


@dataclass(frozen=True)
class Judge:
    """One judge: a model behind an endpoint, with its sampling."""
    name: str  # how reports and predictions name it (model_version judge:NAME)
    model: str
    base_url: str
    key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int = 1024
    json_mode: bool = True  # response_format json_object (retried without when the server refuses it)
    api_key: str | None = field(default=None, repr=False)  # else read from key_env (never shown)

    def key(self) -> str | None:
        """The judge's API key: the one given, else the environment variable named by key_env (None if neither)."""
        return self.api_key or os.environ.get(self.key_env) or None


@dataclass
class Answer:
    """One answer of a chat endpoint: its text, tokens in and out, and whether it came from the cache."""
    content: str | None
    tokens_in: int = 0
    tokens_out: int = 0
    cached: bool = False
    error: str | None = None  # why there is no content


@dataclass
class Usage:
    """Requests, cached answers and tokens of one judge's run, summed."""
    requests: int = 0
    cached: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    failed: int = 0
    retried: int = 0
    seconds: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)

    def add(self, other: "Usage") -> None:
        """`other`'s counts added to these."""
        for name in ("requests", "cached", "tokens_in", "tokens_out", "failed", "retried", "seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for reason, n in other.reasons.items():
            self.reasons[reason] = self.reasons.get(reason, 0) + n

    def cost(self, price_in: float | None, price_out: float | None) -> float | None:
        """US$ (or whatever the prices are in) of the tokens asked this run; None without prices."""
        if price_in is None and price_out is None:
            return None
        return self.tokens_in / 1e6 * (price_in or 0.0) + self.tokens_out / 1e6 * (price_out or 0.0)


class Cache:
    """Answers by key, in SQLite (WAL, a busy timeout: several processes at once).

    `put` returns at once: a writer thread commits what was put, in batches (everything that arrived while the last
    commit was being made, one transaction and one fsync for all), off the caller's event loop. An answer counts as
    cached once committed; a killed process loses at most the batch not yet committed, which the next run asks
    again. `get` sees what was put before it, committed or not. `flush` waits for every put so far; `close` flushes.
    A commit that fails is raised by the next `put`, `flush` or `close` (never lost in silence)."""

    BATCH = 512  # answers committed at most in one transaction

    def __init__(self, path: Path):
        private_dir(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
        self.path = path
        self._db = sqlite3.connect(path, timeout=60, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()  # the reading connection
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, content TEXT NOT NULL, "
                             "tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, at REAL NOT NULL)")
        self._pending: dict[str, Answer | None] = {}  # put or forgotten, not yet committed (None: forgotten)
        self._pending_lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._failed: BaseException | None = None
        self._said = False
        self._closed = False
        self._writer = threading.Thread(target=self._write, name=f"cache writer {path.name}", daemon=True)
        self._writer.start()
        atexit.register(self.close)  # (an interpreter that ends without close still commits what was put)

    def get(self, key: str) -> Answer | None:
        """The cached answer to `key` (put but not yet committed ones too; None when absent or forgotten)."""
        return self.get_many([key]).get(key)

    def get_many(self, keys: list[str]) -> dict[str, Answer]:
        """The answers kept under any of `keys`, by key (one query; a key without an answer is left out)."""
        found, asked = {}, []
        with self._pending_lock:
            for key in keys:
                if key in self._pending:
                    if (put := self._pending[key]) is not None:
                        found[key] = Answer(put.content, put.tokens_in, put.tokens_out, cached=True)
                else:
                    asked.append(key)
        if asked:
            with self._lock:
                rows = self._db.execute("SELECT key, content, tokens_in, tokens_out FROM answers WHERE key IN "
                                        f"({', '.join('?' * len(asked))})", asked).fetchall()
            found.update((row[0], Answer(row[1], row[2], row[3], cached=True)) for row in rows)
        return found

    def put(self, key: str, answer: Answer) -> None:
        """Kept (committed by the writer thread soon after; the first answer of a key stays)."""
        self._raise_failed()
        with self._pending_lock:
            if self._pending.get(key, None) is not None:
                return
            self._pending[key] = answer
        self._queue.put(("put", key, answer))

    def forget(self, key: str) -> None:
        """An answer that proved malformed: asked again next time."""
        self._raise_failed()
        with self._pending_lock:
            self._pending[key] = None
        self._queue.put(("forget", key, None))

    def flush(self) -> None:
        """Returns when everything put or forgotten so far is committed."""
        self._wait_committed()
        self._raise_failed()

    def _wait_committed(self) -> None:
        if self._writer.is_alive():
            done = threading.Event()
            self._queue.put(("flush", "", done))
            done.wait()

    def close(self) -> None:
        """Everything put committed, then closed (a failed commit not said before is raised)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        try:
            self._wait_committed()
            self._raise_failed(unless_said=True)  # (a failure a put already raised is not raised again)
        finally:
            self._queue.put(("stop", "", None))
            self._writer.join()
            with self._lock:
                self._db.close()

    def _raise_failed(self, unless_said: bool = False) -> None:
        if self._failed is not None and not (unless_said and self._said):
            self._said = True
            raise CacheError(f"{self.path}: answers could not be written to the cache ({self._failed}); the answers "
                             "of this run since are asked again next time") from self._failed

    def _write(self) -> None:
        try:
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        except Exception as e:  # (every put is then refused with the reason; flushes still return)
            db, self._failed = None, e
        try:
            stop = False
            while not stop:
                batch = [self._queue.get()]
                while len(batch) < self.BATCH:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                done = [event for op, _, event in batch if op == "flush"]
                stop = any(op == "stop" for op, _, _ in batch)
                changes = [(op, key, answer) for op, key, answer in batch if op in ("put", "forget")]
                if changes and self._failed is None:
                    try:
                        self._commit(db, changes)
                    except Exception as e:  # (said by the next put, flush or close; the thread goes on)
                        self._failed = e
                with self._pending_lock:
                    for op, key, answer in changes:
                        if self._pending.get(key, "absent") is answer:  # (not put again meanwhile)
                            del self._pending[key]
                for event in done:
                    event.set()
        finally:
            if db is not None:
                db.close()

    @staticmethod
    def _commit(db: sqlite3.Connection, changes: list) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            for op, key, answer in changes:
                if op == "put":
                    db.execute("INSERT INTO answers (key, content, tokens_in, tokens_out, at) VALUES (?, ?, ?, ?, ?) "
                               "ON CONFLICT (key) DO NOTHING",
                               (key, answer.content, answer.tokens_in, answer.tokens_out, time.time()))
                else:
                    db.execute("DELETE FROM answers WHERE key = ?", (key,))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise


def digest(messages) -> str:
    """sha256 of a prompt's messages: what the cache and every answer cite."""
    import json

    return hashlib.sha256(json.dumps(list(messages), sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def cache_key(judge: Judge, digest: str, sample: int, attempt: int = 0) -> str:
    """The cache's key: endpoint, model, sampling, the prompt's digest (`attempt`: a malformed answer's retry)."""
    parts = [judge.base_url.rstrip("/"), judge.model, f"{judge.temperature:g}", str(judge.max_tokens), str(sample),
             digest, str(attempt)]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


class Pace:
    """At most `per_minute` requests started in any minute (None: no limit)."""

    def __init__(self, per_minute: int | None):
        self.gap = 60.0 / per_minute if per_minute else 0.0
        self.next = 0.0
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        """Wait until the next request may start within the pace (at once when there is no limit)."""
        if not self.gap:
            return
        async with self._lock:
            now = time.monotonic()
            start = max(now, self.next)
            self.next = start + self.gap
        if start > now:
            await asyncio.sleep(start - now)


class ChatClient:
    """Asks one endpoint's chat-completions (one client per run; `ask` is safe to call concurrently)."""

    def __init__(self, cache: Cache, concurrency: int = 8, per_minute: int | None = None, retries: int = 6,
                 timeout: float = 120.0):
        if concurrency < 1:
            raise BadInput("--concurrency: at least 1")
        self.cache, self.retries, self.timeout, self.concurrency = cache, retries, timeout, concurrency
        self._slots = asyncio.Semaphore(concurrency)
        self._pace = Pace(per_minute)
        # connections in pools of at most PER_POOL: httpcore assigns requests to connections by scanning every
        # connection for every waiting request, which at 128 connections in one pool costs more CPU than the
        # rest of the judging (benchmarks/judge.py)
        pools = -(-concurrency // PER_POOL)
        size = -(-concurrency // pools)
        self._webs = [httpx.AsyncClient(timeout=timeout, follow_redirects=False,
                                        limits=httpx.Limits(max_connections=size, max_keepalive_connections=size))
                      for _ in range(pools)]
        self._turn = 0
        self.usage: dict[str, Usage] = {}  # per judge, the whole run (`ask` also counts into the usage it is given)
        self._no_json_mode: set[str] = set()

    async def close(self) -> None:
        """Close the client's HTTP connections."""
        for web in self._webs:
            await web.aclose()

    async def ask(self, judge: Judge, messages: tuple[dict, ...], digest: str, sample: int,
                  attempt: int = 0, usage: Usage | None = None) -> tuple[Answer, str]:
        """(the answer, its cache key): from the cache, else asked (and then cached). Counted in `self.usage` and,
        when given, in `usage` (e.g. one part's of a study)."""
        tallies = self._tallies(judge, usage)
        key = cache_key(judge, digest, sample, attempt)
        found = self.cache.get(key)
        if found is not None:
            for tally in tallies:
                tally.cached += 1
            return found, key
        spent = Usage()
        async with self._slots:
            answer = await self._post(judge, messages, sample, spent)
        if answer.content is not None:
            self.cache.put(key, answer)
            spent.tokens_in, spent.tokens_out = answer.tokens_in, answer.tokens_out
        else:
            spent.failed = 1
            spent.reasons[answer.error or "?"] = 1
        for tally in tallies:
            tally.add(spent)
        return answer, key

    def recall(self, judge: Judge, digest: str, sample: int, attempts: int,
               usage: Usage | None = None) -> list[tuple[int, Answer, str]]:
        """(attempt, answer, cache key) of every answer cached for attempts 0 .. `attempts` - 1 of a prompt, in
        their order, each counted as cached: a malformed first attempt is forgotten and a valid later one kept, and
        the next run must find that one rather than ask the first attempt again."""
        keys = {attempt: cache_key(judge, digest, sample, attempt) for attempt in range(attempts)}
        found = self.cache.get_many(list(keys.values()))
        out = [(attempt, found[key], key) for attempt, key in keys.items() if key in found]
        for tally in self._tallies(judge, usage):
            tally.cached += len(out)
        return out

    def _tallies(self, judge: Judge, usage: Usage | None) -> list[Usage]:
        return [self.usage.setdefault(judge.name, Usage())] + ([usage] if usage is not None else [])

    def forget(self, key: str) -> None:
        """An answer the caller found malformed: out of the cache, asked again next time (what it cost stays
        counted)."""
        self.cache.forget(key)

    async def _post(self, judge: Judge, messages, sample: int, usage: Usage) -> Answer:
        payload = {"model": judge.model, "messages": list(messages), "temperature": judge.temperature,
                   "max_tokens": judge.max_tokens}
        if judge.temperature > 0:
            payload["seed"] = sample  # where the server takes it: sample k is the same draw when asked again
        headers = {"Authorization": f"Bearer {judge.key()}"} if judge.key() else {}
        url = judge.base_url.rstrip("/") + "/chat/completions"
        reason = "not asked"
        for attempt in range(self.retries + 1):
            if attempt:
                usage.retried += 1
            if judge.json_mode and judge.name not in self._no_json_mode:
                payload["response_format"] = {"type": "json_object"}
            else:
                payload.pop("response_format", None)
            await self._pace.wait()
            started = time.monotonic()
            wait = min(0.5 * 2 ** attempt, MOST_BACKOFF)
            try:
                self._turn = (self._turn + 1) % len(self._webs)
                response = await self._webs[self._turn].post(url, json=payload, headers=headers)
            except httpx.TimeoutException:
                reason = f"no answer within {self.timeout:g} s"
            except httpx.TransportError as e:
                reason = f"connection failed ({type(e).__name__})"
            else:
                usage.requests += 1
                usage.seconds += time.monotonic() - started
                if response.status_code == 200:
                    return _answer(response)
                reason = f"HTTP {response.status_code}"
                if response.status_code == 429:
                    wait = _retry_after(response, wait)
                elif response.status_code == 400 and "response_format" in payload and \
                        NO_JSON_MODE.search(_said(response)):
                    self._no_json_mode.add(judge.name)  # a server without JSON mode: asked without it
                    continue
                elif response.status_code < 500 and response.status_code not in (408, 409):
                    return Answer(None, error=f"{reason}: the server refused the request ({_said(response)})")
            if attempt < self.retries:
                await asyncio.sleep(wait)
        return Answer(None, error=f"{reason} after {self.retries + 1} attempts")


def _retry_after(response: httpx.Response, default: float) -> float:
    try:
        return min(max(float(response.headers.get("retry-after", default)), 0.0), MAX_RETRY_AFTER)
    except ValueError:
        return default


def _said(response: httpx.Response) -> str:
    try:
        body = response.json()
        message = body.get("error", body) if isinstance(body, dict) else body
        message = message.get("message", message) if isinstance(message, dict) else message
        return " ".join(str(message).split())[:200]
    except ValueError:
        return " ".join(response.text.split())[:200]


def _answer(response: httpx.Response) -> Answer:
    try:
        body = response.json()
        content = body["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return Answer(None, error="the server's answer has no choices[0].message.content")
    if not isinstance(content, str):
        return Answer(None, error="the message content is not text")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    count = lambda k: int(usage.get(k) or 0) if isinstance(usage.get(k), (int, float)) else 0  # noqa: E731
    return Answer(content, count("prompt_tokens"), count("completion_tokens"))

