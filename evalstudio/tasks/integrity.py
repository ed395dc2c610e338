"""Tamper evidence for a running study: what `import` put into Label Studio is recorded on the researcher's disk,
and `status` checks the live projects against it and against projects.yaml.

- Tasks: for every task, a digest of its data (what annotators see) and one of each field of its meta (gold
  answers, model outputs and ratings, system names), recorded by `import` in `.evalstudio/records/` (one file per
  Label Studio server and project, private to the researcher). A participant who changes a gold answer in Label
  Studio cannot change this record.
- Annotations: Label Studio stamps every annotation with who last changed it (`updated_by`); an annotation last
  changed by someone other than its author or the study's own account (the researcher's, which the gateway writes
  participants' answers as) has been edited by another account.
- Project settings: the labeling config, instructions and overlap are compared with projects.yaml (the Client
  does it, as `setup` does when it brings a project up to date).

Pure functions on plain task dicts, apart from the record file's IO."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from evalstudio.base.errors import BadInput

RECORD_DIR = Path(".evalstudio") / "records"  # $EVALSTUDIO_RECORDS names another folder


def record_folder() -> Path:
    """Where import records are kept ($EVALSTUDIO_RECORDS, else .evalstudio/records)."""
    return Path(os.environ.get("EVALSTUDIO_RECORDS") or RECORD_DIR)
DIGEST_CHARS = 20  # 80 bits of SHA-256: no accidental collision, no crafted value matching a recorded one


# a value's canonical JSON, which its digest hashes (built once: json.dumps(**options) builds an encoder per call)
CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def digest_text(canonical: str) -> str:
    """The digest of a value from its canonical JSON (`CANONICAL.encode(value)`)."""
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:DIGEST_CHARS]


def encode_task(task: dict) -> tuple[str, dict]:
    """A task ({data, meta}) as canonical JSON, the text an import sends, and its `task_digest`, from one encoding
    of each part: the digest hashes the very text that is sent. ValueError, TypeError or RecursionError when JSON
    cannot hold a value (NaN, infinity, an object, keys that cannot be sorted)."""
    data = CANONICAL.encode(task.get("data") or {})
    meta = [(str(key), CANONICAL.encode(value)) for key, value in (task.get("meta") or {}).items()]
    text = '{"data":' + data + ',"meta":{' + ",".join(f"{CANONICAL.encode(key)}:{value}" for key, value in meta) + "}}"
    return text, {"data": digest_text(data), "meta": {key: digest_text(value) for key, value in meta}}


def task_digest(task: dict) -> dict:
    """A task's fingerprint: one digest of its data, one of each of its meta fields."""
    return encode_task(task)[1]


def record_path(url: str, project_id: int, folder: Path | None = None) -> Path:
    """The record file of one project on one Label Studio server."""
    folder = record_folder() if folder is None else folder
    server = hashlib.sha256(url.rstrip("/").encode("utf-8")).hexdigest()[:12]
    return Path(folder) / f"{server}-project-{int(project_id)}.json"


def save_record(path: Path, url: str, project_id: int, digests: dict[str, dict | str],
                extra: dict | None = None) -> Path:
    """Add `digests` (evalstudio id -> task digest, or the JSON text of one, as the import's spool holds it, which
    evalstudio wrote itself) to the record of one project; private to its owner (the folder 0700 if evalstudio
    makes it, the file 0600), written whole or not at all."""
    from evalstudio.base.credentials import private_dir

    path = Path(path)
    private_dir(path.parent)
    record = load_record(path) or {"url": url.rstrip("/"), "project_id": int(project_id), "tasks": {}}
    record["tasks"].update(digests)
    record.update(extra or {})
    # written member by member, a digest given as text as it is (json.dumps: json.dump encodes in Python, 3x slower)
    text = lambda digest: digest if isinstance(digest, str) else json.dumps(digest, separators=(",", ":"))
    members = [f"{json.dumps(key)}:{json.dumps(value)}" for key, value in record.items() if key != "tasks"]
    members.append('"tasks":{' + ",".join(f"{json.dumps(key)}:{text(digest)}" for key, digest in record["tasks"].items()) + "}")
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write("{" + ",".join(members) + "}")
    os.replace(temporary, path)
    return path


def mark_moving(path: Path, keys: dict[str, str]) -> None:
    """Note in a project's record the tasks an import asked the researcher to delete (evalstudio id -> the project
    their item moves to): when they are gone, that is the move the tool asked for, not tampering."""
    record = load_record(path)
    if record is None:
        return
    moving = {**record.get("moving", {}), **keys}
    save_record(path, record["url"], record["project_id"], {}, extra={"moving": moving})


def load_record(path: Path) -> dict | None:
    """The record of one project, or None if there is none."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise BadInput(f"{path}: not a record evalstudio wrote ({type(e).__name__}); move it away to start a new one")
    if not isinstance(record, dict) or not isinstance(record.get("tasks"), dict):
        raise BadInput(f"{path}: not a record evalstudio wrote; move it away to start a new one")
    return record


def changed_tasks(tasks: list[dict], record: dict, id_field: str) -> list[str]:
    """What differs between the project's tasks and the record of what was imported: one sentence per task."""
    recorded: dict[str, dict] = record["tasks"]
    found, problems = set(), []
    for task in tasks:
        key = str((task.get("data") or {}).get(id_field, ""))
        if key not in recorded:
            problems.append(f"task {task['id']} ({id_field} {key!r}) was not imported by evalstudio here")
            continue
        found.add(key)
        now, then = task_digest(task), recorded[key]
        what = []
        if now["data"] != then.get("data"):
            what.append("its data (what annotators see)")
        meta_then = then.get("meta") or {}
        changed = sorted(k for k in set(now["meta"]) | set(meta_then) if now["meta"].get(k) != meta_then.get(k))
        if changed:
            what.append("its meta field(s) " + ", ".join(changed))
        if what:
            problems.append(f"task {task['id']} ({id_field} {key!r}): {' and '.join(what)} changed since import")
    gone = set(recorded) - found
    moving = record.get("moving") or {}
    missing = len(gone - set(moving))  # (those an import asked to delete, to move their item, are no finding)
    if missing:
        problems.append(f"{missing} imported task(s) are gone from the project")
    return problems


def foreign_edits(tasks: list[dict], own: frozenset[int] = frozenset()) -> list[str]:
    """Annotations that Label Studio says were last changed by someone other than their author or the study's `own`
    accounts (the researcher's: the gateway writes the participants' answers as it)."""
    def user(value):
        return value.get("id") if isinstance(value, dict) else value

    problems = []
    for task in tasks:
        for annotation in task.get("annotations") or []:
            author, editor = user(annotation.get("completed_by")), user(annotation.get("updated_by"))
            if editor is not None and author is not None and editor != author and editor not in own:
                problems.append(f"annotation {annotation.get('id')} on task {task['id']} (by user {author}) was last "
                                f"changed by user {editor}")
    return problems
