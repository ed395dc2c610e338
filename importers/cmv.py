"""ChangeMyView delta threads with Theory-of-Mind (ToM) extraction.

JSONL, one item per line:
  {"id": "2rppq9-cni44vr",                                  optional, else a content hash
   "post": {"id", "title", "text", "author"},
   "comment": {"id", "text", "author"},                      the comment that received the delta
   "delta_reply": {"text", "author"},                        the OP's reply awarding the delta
   "tom": {"post":    {"beliefs": {"values": [...], "content": "..."}, ... all six categories},
           "comment": {...}},
   "model_answers": {"persuasiveness": "Yes", "beliefs": "No", ...},   optional: the automated metric's answers
   "model_version": "..."}                                   optional
  A non-delta thread (the "not persuasive" contrast): "delta": false, no delta_reply, and optionally
  "op_reply": {"text", "author"} (the OP's reply to the comment).
XML: Reddit threads as <thread ID><title/><OP author>...</OP><reply id author>...</reply>...</thread>
(the Change My View argumentation corpus layout); the delta is found as a reply by the OP containing a delta
sign (∆, Δ or !delta, also written as the double-escaped entity &amp;#8710;), the persuasive comment is the non-OP
reply before it. A thread without a delta is a non-delta thread: its first comment by another author, and the OP's
first reply after it. XML items carry no ToM values (`evalstudio generate cmv` can extract them).

Every thread becomes a cmv_threads task (Q1 only, delta and non-delta mixed: nothing shown says whether there was a
delta; `delta` is in the meta); a delta sample with ToM values also becomes a cmv_tom task (the document's Q1-Q7).
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from evalstudio.base.errors import Problem
from evalstudio.values.sources import FieldError, collect, no_context, one_of, read_jsonl, require, stable_id

NAME = "cmv"
# The record fields this importer reads; any other field is kept with the task as metadata (and reported once).
FIELDS = frozenset({"id", "post", "comment", "delta_reply", "delta", "op_reply", "tom", "tom_generated_by", "model_answers",
                    "model_version"})
CATEGORIES = ("beliefs", "desires", "intentions", "emotions", "knowledge", "perspective_taking")
ANSWERS = ["Yes", "No"]
DELTA = re.compile(r"[∆Δ]|!delta", re.I)
prepare = no_context


def read(path: Path):
    """ChangeMyView records from a thread XML or a JSONL file."""
    if path.suffix.lower() == ".xml":
        yield from _read_thread_xml(path)
    else:
        yield from read_jsonl(path)


def convert(record: dict, project, context) -> list[dict]:
    """One ChangeMyView post and comment as its task(s)."""
    delta = record.get("delta", True)
    if not isinstance(delta, bool):
        raise FieldError("delta", "expected true (the OP awarded a delta) or false")
    post, comment = require(record, "post", dict), require(record, "comment", dict)
    texts = {
        "post_title": require(post, "title").strip(),
        "post": require(post, "text").strip(),
        "comment": require(comment, "text").strip(),
    }
    if delta:
        texts["delta_reply"] = require(require(record, "delta_reply", dict), "text").strip()
        reply = texts["delta_reply"]
    else:  # a non-delta thread: the OP's reply to the comment, if there is one
        reply = require(require(record, "op_reply", dict), "text").strip() if record.get("op_reply") is not None else None
    texts["op_reply"] = reply or NO_REPLY
    item_id = str(record.get("id") or f"{post.get('id', '')}-{comment.get('id', '')}".strip("-")
                  or stable_id(texts["post"], texts["comment"]))
    tom = record.get("tom") or {}
    # Every thread, delta or not, is a cmv_threads task: the blind persuasiveness instrument (Q1 only, nothing shown
    # says whether the OP awarded a delta), so the delta / non-delta contrast is measured by one instrument on a mix
    # of both. A delta thread with ToM values is also a cmv_tom task (the document's Q1-Q7); the gateway never gives
    # one participant an item twice. The thread task holds nothing that `generate` adds (ToM values, the extractor's
    # name): it is the same task before and after ToM values are written, so nothing has to move.
    thread = {"evalstudio_id": f"cmv-{item_id}", "item_id": item_id, "part": "cmv_threads", "delta": delta,
              "system": "thread", **texts}
    if "model_answers" in record and project.entry == "cmv_threads":
        answers = require(record, "model_answers", dict)
        collect(*(_answer_check(answers, name) for name in project.criteria))
        thread["model_answers"] = {name: answers[name] for name in project.criteria}
        thread["model_version"] = record.get("model_version") or "unknown"
    if not (delta and tom):
        return [thread]
    data = {"evalstudio_id": f"cmv-{item_id}", "item_id": item_id, "part": "cmv_tom", "delta": delta,
            "system": record.get("model_version") or "tom-extractor", **texts}
    if not isinstance(tom, dict):
        raise FieldError("tom", "expected {post: {...}, comment: {...}}")
    shown: dict[str, dict[str, str]] = {"post": {}, "comment": {}}
    collect(*(_tom_check(shown[side], tom, side, cat) for side in ("post", "comment") for cat in CATEGORIES))
    # Q2-Q7 judge the comment's values (shown next to each question); the post's are context, in one panel.
    for category in CATEGORIES:
        data[f"comment_{category}"] = shown["comment"][category]
    data["post_tom"] = "\n".join(f"{_TITLES[c]}: {shown['post'][c]}" for c in CATEGORIES)
    data["tom"] = tom
    if record.get("tom_generated_by"):  # ToM values written by `evalstudio generate` (the ML backend's LLM)
        data["tom_generated_by"] = str(record["tom_generated_by"])
    if "model_answers" in record and project.entry == "cmv_tom":
        answers = require(record, "model_answers", dict)
        collect(*(_answer_check(answers, name) for name in project.criteria))
        data["model_answers"] = {name: answers[name] for name in project.criteria}
        data["model_version"] = record.get("model_version") or "unknown"
    # (in a study whose cmv_threads does not share its items with cmv_tom, an item belongs to one of them: cmv_tom)
    shared = project.entry != "cmv_threads" or "cmv_tom" in project.shares_items
    return [data, thread] if shared else [data]


_TITLES = {"beliefs": "Beliefs", "desires": "Desires", "intentions": "Intentions", "emotions": "Emotions",
           "knowledge": "Knowledge", "perspective_taking": "Perspective Taking"}
NOT_EXTRACTED = "No TOM values were extracted for this category."
NO_REPLY = "(The OP did not reply to this comment.)"


def generation_input(record: dict) -> dict | None:
    """What the ML backend needs to extract the ToM values (projects.yaml `generate: tom`), or None when the record
    has them or is a non-delta thread (its task asks Q1 only, so ToM values would never be shown). The values it
    writes are shown read-only next to Q2-Q7, as extracted values always are."""
    if record.get("tom") or record.get("delta", True) is False:
        return None
    post, comment = require(record, "post", dict), require(record, "comment", dict)
    return {"post_title": require(post, "title").strip(), "post": require(post, "text").strip(),
            "comment": require(comment, "text").strip()}


def with_generated(record: dict, output: dict, model_version: str) -> dict:
    """The record with generated theory-of-mind values and the model version that wrote them."""
    return {**record, "tom": output["tom"], "tom_generated_by": model_version}


def write_records(records: list[dict], path: Path) -> None:
    """JSONL, the format `read` takes (one record per line)."""
    import json

    from evalstudio.base.files import open_output

    with open_output(path) as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def _tom_check(out: dict, tom: dict, side: str, category: str):
    def check():
        sides = tom.get(side) or {}
        if not isinstance(sides, dict):
            raise FieldError(f"tom.{side}", "expected {category: {values: [...], content: '...'}}")
        entry = sides.get(category)
        if entry is None:
            out[category] = NOT_EXTRACTED
            return
        field = f"tom.{side}.{category}"
        if not isinstance(entry, dict):
            raise FieldError(field, "expected {values: [...], content: '...'}")
        values = entry.get("values", [])
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise FieldError(f"{field}.values", "expected a list of strings")
        content = entry.get("content", "")
        if not isinstance(content, str):
            raise FieldError(f"{field}.content", "expected a string")
        out[category] = f"Values: {', '.join(values) or 'none'}. Content: {content or '-'}"

    return check


def _answer_check(answers: dict, name: str):
    def check():
        if name not in answers:
            raise FieldError(f"model_answers.{name}", "missing")
        one_of(f"model_answers.{name}", answers[name], ANSWERS)

    return check


def _read_thread_xml(path: Path):
    parsed = _parse_with_lines(path)
    if isinstance(parsed, Problem):
        yield parsed.line or 1, parsed
        return
    root, lines = parsed
    threads = [root] if root.tag == "thread" else root.findall("thread")
    if not threads:
        yield 1, Problem(str(path), lines.get(root, 1), "thread", "no <thread> element")
        return
    for thread in threads:
        line = lines.get(thread, 1)  # the line of the <thread> element, not of the file's first line
        record = _thread_record(thread)
        if isinstance(record, str):
            yield line, Problem(str(path), line, f"thread {thread.get('ID', '?')}", record)
        else:
            yield line, record


def _parse_with_lines(path: Path):
    """(root element, {element: line}) read with expat (no external entities, no DTD parameter entities), or a
    Problem. ElementTree alone does not keep line numbers."""
    from xml.parsers import expat

    builder = ET.TreeBuilder()
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    lines: dict = {}

    def start(tag, attrs):
        lines[builder.start(tag, attrs)] = parser.CurrentLineNumber

    parser.StartElementHandler = start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    try:
        with open(path, "rb") as f:
            parser.ParseFile(f)
        return builder.close(), lines
    except expat.ExpatError as e:
        reason = expat.ErrorString(e.code)
        hint = "; save the file as UTF-8" if "encoding" in reason else ""
        return Problem(str(path), e.lineno, None, f"invalid XML: {reason} (column {e.offset + 1}){hint}")
    except (LookupError, ValueError, UnicodeDecodeError) as e:  # e.g. encoding="bogus-enc"
        return Problem(str(path), 1, None, f"invalid XML: cannot decode the file ({str(e)[:80]}); save it as UTF-8")
    except RecursionError:
        return Problem(str(path), 1, None, "invalid XML: nested too deeply")


def _thread_record(thread) -> dict | str:
    """A delta thread (the OP's reply with ∆/Δ/!delta and the comment before it), else a non-delta thread: the first
    comment by another author and the OP's first reply after it (if any)."""
    op = thread.find("OP")
    if op is None:
        return "no <OP> element"
    author = op.get("author")
    replies = thread.findall("reply")
    post = {"id": thread.get("ID"), "title": _text(thread.find("title")), "text": _text(op), "author": author}
    for i, reply in enumerate(replies):
        text = _text(reply)
        if reply.get("author") == author and DELTA.search(text):
            comment = next((r for r in reversed(replies[:i]) if r.get("author") != author), None)
            if comment is None:
                return "the OP's delta reply has no earlier comment by another author"
            return {
                "id": f"{thread.get('ID', '')}-{comment.get('id', '')}",
                "post": post,
                "comment": {"id": comment.get("id"), "text": _text(comment), "author": comment.get("author")},
                "delta_reply": {"text": text, "author": author},
            }
    first = next((i for i, r in enumerate(replies) if r.get("author") != author and _text(r)), None)
    if first is None:
        return "no comment by another author than the OP"
    comment = replies[first]
    answer = next((r for r in replies[first + 1:] if r.get("author") == author and _text(r)), None)
    return {
        "id": f"{thread.get('ID', '')}-{comment.get('id', '')}",
        "delta": False,
        "post": post,
        "comment": {"id": comment.get("id"), "text": _text(comment), "author": comment.get("author")},
        **({"op_reply": {"text": _text(answer), "author": author}} if answer is not None else {}),
    }


def _text(element) -> str:
    """The element's text with HTML entities resolved: the corpus often double-escapes them (`&amp;#8710;` for ∆)."""
    if element is None:
        return ""
    text = "".join(element.itertext())
    for _ in range(2):  # &amp;#8710; -> &#8710; -> ∆
        text = html.unescape(text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()
