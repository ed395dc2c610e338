"""A local OpenAI-compatible chat-completions server for the LLM-judge tests (loopback, started by the tests).

It answers like a careful judge would in form: it reads the JSON answer schema at the end of the system prompt
and rates every control at the bottom of its range (or its first label). The model name chooses the behaviour:
  judge-ok      a valid JSON answer
  judge-fenced  the same inside a ```json fence
  judge-broken  prose instead of JSON
  judge-500     HTTP 500 every time (to exercise retries)
A prompt whose form has no "ratings" is a generation request (ml_backend/generators.py): every "string" of the
form is filled with a phrase quoting the start of the user's text, so a test can tell which item it came from.
A user text containing BROKEN-OUTPUT gets an answer with the wrong form.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def answer_for(system_prompt: str, user: str = "") -> dict:
    schema = json.loads(system_prompt.rsplit("\n", 1)[1])
    if "ratings" not in schema:
        if "BROKEN-OUTPUT" in user:
            return {"something": "else"}
        return fill(schema, "generated from " + " ".join(user.split()[:6]))
    ratings = {c: (spec["minimum"] if "minimum" in spec else spec["enum"][0]) for c, spec in schema["ratings"].items()}
    return {"ratings": ratings, "rationales": {c: f"judged {c} from the conversation" for c in schema["rationales"]}}


def fill(form, phrase: str):
    if form == "string":
        return phrase
    if isinstance(form, list):
        return [fill(f, phrase) for f in form]
    return {k: fill(v, phrase) for k, v in form.items()}


class FakeLLM:
    def __init__(self):
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": "not found"})
                model = body["model"]
                if model == "judge-500":
                    return self._send(500, {"error": "overloaded"})
                content = json.dumps(answer_for(body["messages"][0]["content"], body["messages"][-1]["content"]))
                if model == "judge-fenced":
                    content = f"```json\n{content}\n```"
                elif model == "judge-broken":
                    content = "I would give this conversation a 7 out of 10."
                self._send(200, {"id": "x", "object": "chat.completion", "model": model,
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]})

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
