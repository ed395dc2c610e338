"""`evalstudio generate`: have the ML backend write the model outputs annotators judge where the input lacks them.

The ML backend's `/generate` (ml_backend/generators.py) writes CMV ToM values or Circa explanations; this module
reads the researcher's files, sends the incomplete records in batches, checks that each completed record converts
into valid tasks, and writes all records (complete ones unchanged) to one file that `evalstudio import` takes.
Nothing is written unless every record is complete and valid. The output file is what annotators will see: keep
it with the study.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from evalstudio.base.credentials import ML_AUTH_ENV as BASIC_AUTH_ENV  # "user:password", as for `evalstudio ml-backend`
from evalstudio.base.credentials import basic_auth_header
from evalstudio.base.errors import BadInput, EvalstudioError, InvalidInput, Problem, ServerError
from evalstudio.base.files import check_output_file
from evalstudio.labelstudio.connection import check_url
from evalstudio.protocols.registry import Project
from evalstudio.values.sources import FieldError

from .scanning import convert_record


@dataclass
class Generated:
    """What `evalstudio generate` did: records read, completed by the backend, its model version, the file written."""
    records: int  # records read
    generated: int  # records the backend completed
    model_version: str | None
    output: Path | None  # None when nothing needed generating (nothing written)


def backend_url(url: str) -> str:
    """The backend's base URL (http or https, no credentials in it)."""
    url = check_url(url, "--ml-url")
    parts = urlsplit(url)
    if parts.username or parts.password:
        raise EvalstudioError(f"--ml-url must not carry credentials; set {BASIC_AUTH_ENV}=user:password instead")
    return url


class BackendClient:
    """POST /generate on an evalstudio ML backend, with its basic auth ('user:password')."""

    def __init__(self, url: str, basic_auth: str | None, timeout: float = 600.0):
        self.url = backend_url(url)
        self.headers = {"Authorization": basic_auth_header(basic_auth)} if basic_auth else {}
        self.timeout = timeout
        # what the backend's LLM was asked for these requests (its answers from its cache cost nothing now)
        self.usage = {"requests": 0, "cached": 0, "tokens_in": 0, "tokens_out": 0}

    def generate(self, project: str, items: list[dict]) -> tuple[list[dict], str]:
        """(one {"output"} or {"error"} per item, the model version)."""
        try:
            response = httpx.post(f"{self.url}/generate", json={"project": project, "items": items},
                                  headers=self.headers, timeout=self.timeout)
        except httpx.HTTPError as e:
            raise ServerError(f"cannot reach the ML backend at {self.url}: {type(e).__name__}") from None
        if response.status_code == 401:
            raise ServerError(f"the ML backend at {self.url} refused the credentials: use the file it wrote "
                              f"(--basic-auth-file) or set {BASIC_AUTH_ENV}=user:password as for the backend")
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code != 200 or not isinstance(body, dict):
            message = body.get("error") if isinstance(body, dict) else None
            raise ServerError(f"the ML backend at {self.url} answered HTTP {response.status_code}"
                              + (f": {str(message)[:300]}" if message else ""))
        results, version = body.get("results"), body.get("model_version")
        spent = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        for key in self.usage:
            count = spent.get(key)
            if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                self.usage[key] += count
        if not isinstance(results, list) or len(results) != len(items) or not isinstance(version, str):
            raise ServerError(f"the ML backend at {self.url} answered without one result per item")
        return results, version


def generate_files(project: Project, importer, paths: Sequence[Path], output: Path, backend: BackendClient,
                   batch_size: int = 4, on_progress: Callable[[int, int], None] | None = None) -> Generated:
    """Complete the records of `paths` and write them all to `output` (see the module docstring)."""
    if not project.generate:
        raise BadInput(f"{project.name} has nothing for a model to generate (no `generate` in projects.yaml)")
    check_output_file(output)
    problems: list[Problem] = [Problem(str(p), None, None, "no such file") for p in map(Path, paths) if not p.is_file()]
    context, readable = importer.prepare([Path(p) for p in paths if Path(p).is_file()])
    problems += context.get("problems", [])
    entries: list[list] = []  # [path, line, record, input or None]
    for path in readable:
        for line, record in importer.read(path):
            if isinstance(record, Problem):
                problems.append(record)
                continue
            try:
                entries.append([path, line, record, importer.generation_input(record)])
            except FieldError as e:
                problems.append(Problem(str(path), line, e.field, e.message))
    if problems:
        raise InvalidInput(problems, "nothing was written")
    todo = [entry for entry in entries if entry[3] is not None]
    if not todo:
        return Generated(len(entries), 0, None, None)
    version = None
    for start in range(0, len(todo), batch_size):
        batch = todo[start:start + batch_size]
        results, version = backend.generate(project.name, [entry[3] for entry in batch])
        for entry, result in zip(batch, results):
            path, line, record, _ = entry
            output_ = result.get("output") if isinstance(result, dict) else None
            if not isinstance(output_, dict):
                reason = result.get("error") if isinstance(result, dict) else None
                problems.append(Problem(str(path), line, project.generate, f"the ML backend wrote nothing: {reason or 'no output'}"))
                continue
            entry[2] = importer.with_generated(record, output_, version)
            problems += _check(project, importer, context, entry)
        if on_progress:
            on_progress(min(start + batch_size, len(todo)), len(todo))
    if problems:
        raise InvalidInput(problems, "nothing was written")
    tmp = output.with_name(f".{output.name}.tmp")
    importer.write_records([entry[2] for entry in entries], tmp)
    os.replace(tmp, output)  # all records or none
    return Generated(len(entries), len(todo), version, output)


def _check(project: Project, importer, context, entry) -> list[Problem]:
    """Problems of a completed record: it must convert into tasks as any input record does."""
    path, line, record, _ = entry
    _, problems = convert_record(importer, record, project, context, path, line)
    return [replace(p, message=f"generated output: {p.message}") for p in problems]
