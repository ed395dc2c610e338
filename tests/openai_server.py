"""A local OpenAI-compatible chat-completions server for `evalstudio judge`: a real process on loopback speaking the
real wire format (model weights cannot be fetched here). Run: python -m tests.openai_server PORT [LOG].

It answers the judge's form: it reads the JSON schema at the end of the system prompt and fills every property
(a number in range, a label, a text), chosen from a hash of the prompt, the property and the request's seed, so
answers vary between tasks and samples but a prompt asked again gets the same answer. `usage` counts a token per
4 characters. The model name chooses the behaviour (several may be combined with "+", e.g. "judge+429"):

  judge      a valid answer
  first      a pairwise judge with position bias: always the first label
  fenced     the answer in a ```json fence
  malformed  prose instead of JSON, the first time a prompt is asked (then valid)
  broken     prose every time
  off-scale  a rating above the scale every time
  429        429 with Retry-After: 0.2 the first time a prompt is asked (then valid)
  500        500 the first time a prompt is asked (then valid)
  fail       500 every time
  timeout    the first time a prompt is asked, no answer for 30 s (then valid)
  slow       every answer after 200 ms (the benchmark's latency)
  stall      answers 10 requests, then holds every further one until POST /release
  nojson     400 when response_format is asked for (a server without JSON mode)
  unmended   prose every time until POST /mend (an endpoint whose answers were broken, then mended)
  toolong    400 "maximum context length" for a prompt holding TOO-LONG (a request refused for its size)
  misquote   a span question answered with words that are not in the text, every time
  clean      every span question of half the prompts (chosen by the prompt) answered with no span: no error

A span question (MQM, ESA) is answered with one or two spans, each one or two words of the text it names, quoted
exactly, with a label and the per-region answers.

GET /stats gives the number of chat requests (and how many were answered) (all, and per prompt digest); every request body is appended to LOG
(JSON Lines) when given."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import sys
from collections import Counter

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

REQUESTS: Counter = Counter()
SEEN: Counter = Counter()
LOG: list = []
RELEASED: list = []  # the event that lets stalled requests go (made in the server's loop)
STALL_AFTER = 10
MENDED: list = []  # POST /mend: the "unmended" behaviour answers valid JSON from then on


def _pick(seed: str, n: int) -> int:
    return int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16) % n


def marked(user: str, name: str, spec: dict, key: str, behaviours: set[str]) -> list[dict]:
    """A span question's answer (a list of quoted errors): one or two words of the text the question names, quoted
    exactly (misquote: words that are not in it), each with a label and its per-region answers."""
    question = re.search(r'\[Question "' + re.escape(name) + r'" [^\n]*?the text \[(\w+)\]', user)
    text = re.search(r"^\[" + re.escape(question.group(1)) + r"\] (.*)$", user, re.M) if question else None
    words = text.group(1).split() if text else []
    if not words or ("clean" in behaviours and _pick(user + "|clean", 2) == 0):
        return []
    out = []
    for n in range(1 + _pick(key + "|n", 2)):
        at = _pick(f"{key}|{n}", len(words))
        quote = " ".join(words[at:at + 1 + _pick(f"{key}|{n}|len", 2)])
        span = {"text": "WORDS-NOT-IN-THE-TEXT" if "misquote" in behaviours else quote}
        span.update(answer_properties(spec["items"]["properties"], f"{key}|{n}", None, behaviours,
                                      skip=("text", "occurrence")))
        out.append(span)
    return out


def answer(system: str, user: str, seed, behaviours: set[str]) -> dict:
    schema = json.loads(system.rsplit("The form (JSON schema):\n", 1)[1])
    return answer_properties(schema["properties"], user, seed, behaviours, user=user)


def answer_properties(properties: dict, base: str, seed, behaviours: set[str], skip=(), user: str = "") -> dict:
    out = {}
    for name, spec in properties.items():
        key = f"{base}|{name}|{seed}"
        if name in skip:
            continue
        if spec.get("type") == "array" and spec["items"].get("type") == "object":
            out[name] = marked(user, name, spec, key, behaviours)
        elif "enum" in spec or spec.get("type") == "array":
            labels = spec.get("enum") or spec["items"]["enum"]
            label = labels[0] if "first" in behaviours else labels[_pick(key, len(labels))]
            out[name] = [label] if spec.get("type") == "array" else label
        elif spec.get("type") in ("integer", "number"):
            low, high = spec["minimum"], spec["maximum"]
            step = spec.get("multipleOf", 1)
            steps = int(round((high - low) / step))
            value = low + _pick(key, steps + 1) * step
            out[name] = high + 1 if "off-scale" in behaviours else (int(value) if spec["type"] == "integer"
                                                                     else round(value, 6))
        else:
            out[name] = f"judged {name}"
    return out


async def chat(request: Request) -> JSONResponse:
    body = await request.json()
    REQUESTS["all"] += 1
    if LOG:
        with open(LOG[0], "a", encoding="utf-8") as log:
            log.write(json.dumps(body) + "\n")
    behaviours = set(str(body.get("model", "")).split("+"))
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()
    key = f"{digest}|{body.get('seed')}"
    SEEN[key] += 1
    REQUESTS[digest] += 1
    first = SEEN[key] == 1
    if "toolong" in behaviours and "TOO-LONG" in user:
        return JSONResponse({"error": {"message": "This model's maximum context length is 4096 tokens. However, your "
                                       "messages resulted in 9000 tokens. Please reduce the length of the messages.",
                                       "type": "invalid_request_error"}}, status_code=400)
    if "nojson" in behaviours and "response_format" in body:
        return JSONResponse({"error": {"message": "response_format is not supported"}}, status_code=400)
    if "fail" in behaviours or ("500" in behaviours and first):
        return JSONResponse({"error": {"message": "overloaded"}}, status_code=500)
    if "429" in behaviours and first:
        return JSONResponse({"error": {"message": "rate limited"}}, status_code=429, headers={"Retry-After": "0.2"})
    if "timeout" in behaviours and first:
        await asyncio.sleep(30)
    if "slow" in behaviours:
        await asyncio.sleep(0.2)
    if "stall" in behaviours and REQUESTS["answered"] >= STALL_AFTER:
        if not RELEASED:
            RELEASED.append(asyncio.Event())
        await RELEASED[0].wait()
    REQUESTS["answered"] += 1
    content = json.dumps(answer(system, user, body.get("seed"), behaviours))
    if "fenced" in behaviours:
        content = f"```json\n{content}\n```"
    if "broken" in behaviours or ("malformed" in behaviours and first) or ("unmended" in behaviours and not MENDED):
        content = "I would give this a 7 out of 10."
    tokens_in = sum(len(m["content"]) for m in body["messages"]) // 4
    return JSONResponse({"id": "chatcmpl-local", "object": "chat.completion", "model": body.get("model"),
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": tokens_in, "completion_tokens": len(content) // 4,
                                   "total_tokens": tokens_in + len(content) // 4}})


async def stats(request: Request) -> JSONResponse:
    return JSONResponse({"requests": REQUESTS["all"], "answered": REQUESTS["answered"],
                         "per_prompt": {k: v for k, v in REQUESTS.items() if k not in ("all", "answered")}})


async def release(request: Request) -> JSONResponse:
    if not RELEASED:
        RELEASED.append(asyncio.Event())
    RELEASED[0].set()
    return JSONResponse({"released": True})


async def mend(request: Request) -> JSONResponse:
    MENDED.append(True)
    return JSONResponse({"mended": True})


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/stats", stats),
                        Route("/release", release, methods=["POST"]), Route("/mend", mend, methods=["POST"]),
                        Route("/health", health)])

if __name__ == "__main__":
    import uvicorn

    if len(sys.argv) > 2:
        LOG.append(sys.argv[2])
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False,
                backlog=2048, limit_concurrency=4096)
