"""Predictors: what the ML backend prefills. Each returns control -> value for one task, or raises NoPrediction.

stored   model outputs the importers carried in the task (projects.yaml `model_output` / `model_rationale`)
learner  scikit-learn models (TF-IDF + ridge / logistic regression per control) trained on the project's annotations
llm      a judge behind an OpenAI-compatible chat-completions API, prompted with the protocol's rubric
"""

from __future__ import annotations

import html
import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evalstudio.protocols.registry import Project
from evalstudio.values.controls import control_range, control_step
from evalstudio.values.results import dotted_get, task_fields

from ..exporters.tables.tidy import result_values

log = logging.getLogger(__name__)


class NoPrediction(Exception):
    """The task gets no prediction; the reason is logged."""


@dataclass
class Output:
    """A prediction: the value per control and the model version that made it."""
    values: dict[str, object]
    model_version: str
    score: float | None = None
    scores: dict[str, float] = field(default_factory=dict)


def task_text(project: Project, data: dict) -> str:
    """The text an annotator reads: every data field the config shows, dialogue turns as 'speaker: text'."""
    parts = []
    for key in sorted(project.data_fields()):
        value = data.get(key)
        if isinstance(value, list):
            parts += [f"{t.get('speaker', '')}: {t.get('text', '')}" if isinstance(t, dict) else str(t) for t in value]
        elif value is not None:
            parts.append(f"{key}: {value}")
    return "\n".join(parts)


def task_features(project: Project, data: dict) -> str:
    """Learner input: each word prefixed with its field (answer__no, interpretation__yes), so the model can tell
    a 'No' in Y's answer from a 'No' as the shown interpretation."""
    words = []
    for key in sorted(project.data_fields()):
        value = data.get(key)
        text = " ".join(t.get("text", "") if isinstance(t, dict) else str(t) for t in value) if isinstance(value, list) else str(value or "")
        words += [f"{key}__{w}" for w in re.findall(r"\w+", text.lower())]
    return " ".join(words)


def prediction_of(project: Project, task: dict, chosen) -> tuple[dict, list[str]]:
    """(Label Studio prediction of `chosen` for `task`, the values left out): every value is checked against its
    control as an annotation's would be (a value the control refuses, or a control the config lacks, is left out
    and named); NoPrediction when nothing is left. The ML backend and the import (`stored` predictor) both use it."""
    from evalstudio.values.results import region

    output = chosen.predict(project, task)
    results, skipped = [], []
    for control, value in output.values.items():
        try:
            results.append(region(project.interface, control, value))
        except (ValueError, KeyError) as e:  # not in this config, or out of range
            skipped.append(f"{control}: {e}")
    if not results:
        raise NoPrediction("no valid value for any control" + (f" ({'; '.join(skipped)})" if skipped else ""))
    prediction = {"result": results, "model_version": output.model_version}
    if output.score is not None:
        prediction["score"] = output.score
    return prediction, skipped


class StoredPredictor:
    """Predicts the ratings a task carries in its data (a model's own scores, stored at import)."""
    name = "stored"

    def predict(self, project: Project, task: dict) -> Output:
        """The model outputs the task carries at the projects.yaml paths as control values; NoPrediction if none."""
        data = task_fields(task)
        values, looked_for = {}, []
        for slot in project.slots():
            for path, target in ((slot.model_output, slot.control), (slot.model_rationale, slot.rationale)):
                if not path or not target:
                    continue
                looked_for.append(path)
                value = dotted_get(data, path)
                if value is not None:
                    values[target] = value
        if not values:
            fields = ", ".join(dict.fromkeys(looked_for)) or "(none configured in projects.yaml)"
            raise NoPrediction(f"the task carries none of the model fields {fields}")
        return Output(values, str(data.get("model_version") or "stored"))


class LearnerPredictor:
    """One scikit-learn model per control, trained on the project's submitted annotations, on TF-IDF features of
    field-prefixed words.

    Numeric controls: ridge regression on the mean human rating (score: 1 - cross-validated RMSE / range).
    Categorical controls: logistic regression on the majority label (score: predicted class probability)."""

    name = "learner"

    def __init__(self, model_dir: Path | str):
        self.model_dir = Path(model_dir)
        self._cache: dict[str, tuple[float, dict]] = {}

    def path(self, project: Project) -> Path:
        """Where the entry's learner is saved (the lists of an entry share one)."""
        return self.model_dir / project.entry / "learner.joblib"  # the lists of an entry share one learner

    def train(self, project: Project, tasks: list[dict]) -> dict:
        """Fit from tasks with annotations (Label Studio task dicts); saves the model and returns a summary."""
        import joblib
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression, Ridge
        from sklearn.model_selection import cross_val_predict

        targets: dict[str, list] = {}
        texts: list[str] = []
        for task in tasks:
            done = [result_values(a.get("result")) for a in task.get("annotations") or [] if not a.get("was_cancelled")]
            if not done:
                continue
            texts.append(task_features(project, task["data"]))
            for slot in project.slots():
                given = [v[slot.control] for v in done if v.get(slot.control) is not None]
                targets.setdefault(slot.control, []).append(_consensus(given, project.criteria[slot.criterion].is_numeric))
        if len(texts) < 4:
            raise NoPrediction(f"the learner needs at least 4 annotated tasks, {project.name} has {len(texts)}")
        vectorizer = TfidfVectorizer(token_pattern=r"\S+", sublinear_tf=True)
        X = vectorizer.fit_transform(texts)
        models, summary = {}, {}
        for slot in project.slots():
            control = slot.control
            y = targets.get(control, [])
            keep = [i for i, v in enumerate(y) if v is not None]
            if len(keep) < 4:
                continue
            Xc, yc = X[keep], [y[i] for i in keep]
            spec = project.criteria[slot.criterion]
            folds = min(5, len(keep))
            if spec.is_numeric:
                model = Ridge(alpha=1.0)
                cv = cross_val_predict(model, Xc, yc, cv=folds)
                rmse = float(np.sqrt(np.mean((np.asarray(yc) - cv) ** 2)))
                models[control] = {"model": model.fit(Xc, yc), "score": max(0.0, 1 - rmse / (spec.max - spec.min))}
            elif len(set(yc)) > 1:
                models[control] = {"model": LogisticRegression(max_iter=1000).fit(Xc, yc)}
            else:
                models[control] = {"constant": yc[0], "score": 1.0}
            summary[control] = len(keep)
        version = f"learner-{time.strftime('%Y%m%d-%H%M%S')}-n{len(texts)}"
        path = self.path(project)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        joblib.dump({"vectorizer": vectorizer, "models": models, "version": version}, tmp)
        os.replace(tmp, path)  # atomic: a running backend never reads half a model
        return {"version": version, "tasks": len(texts), "controls": summary}

    def _load(self, project: Project) -> dict:
        import joblib

        path = self.path(project)
        if not path.is_file():
            raise NoPrediction(f"no trained learner for {project.entry} yet (train with `evalstudio train {project.entry}` "
                               "or submit annotations)")
        mtime = path.stat().st_mtime
        cached = self._cache.get(project.entry)
        if not cached or cached[0] != mtime:
            self._cache[project.entry] = cached = (mtime, joblib.load(path))
        return cached[1]

    def predict(self, project: Project, task: dict) -> Output:
        """The trained learner's value and score per control for the task."""
        bundle = self._load(project)
        X = bundle["vectorizer"].transform([task_features(project, task["data"])])
        values, scores = {}, {}
        for slot in project.slots():
            control = slot.control
            entry = bundle["models"].get(control)
            if entry is None:
                continue
            spec = project.criteria[slot.criterion]
            if "constant" in entry:
                values[control], scores[control] = entry["constant"], entry["score"]
            elif spec.is_numeric:
                control_tag = project.interface.get_control(control)
                lo, hi = control_range(control_tag)
                step = control_step(control_tag) or 0.1  # step="any": one decimal, as the documents' examples
                raw = float(entry["model"].predict(X)[0])
                values[control] = float(np.clip(lo + np.round((raw - lo) / step) * step, lo, hi).round(6))
                scores[control] = entry["score"]
            else:
                proba = entry["model"].predict_proba(X)[0]
                best = int(np.argmax(proba))
                values[control], scores[control] = str(entry["model"].classes_[best]), float(proba[best])
        if not values:
            raise NoPrediction("the learner has no model for any control of this project")
        return Output(values, bundle["version"], float(np.mean(list(scores.values()))), scores)


def _consensus(values: list, numeric: bool):
    if not values:
        return None
    if numeric:
        return float(np.mean(values))
    labels, counts = np.unique(np.asarray(values, dtype=str), return_counts=True)
    return str(labels[np.argmax(counts)])


class LLMPredictor:
    """An LLM judge behind an OpenAI-compatible `/chat/completions` endpoint.

    Configured by EVALSTUDIO_LLM_BASE_URL (e.g. http://127.0.0.1:8000/v1), EVALSTUDIO_LLM_MODEL and
    EVALSTUDIO_LLM_API_KEY. The prompt holds the protocol's rubric (project instructions and the config's
    help texts) and a JSON schema of the expected answer; the answer is parsed and checked against it. Requests go
    through evalstudio.base.chat, as `evalstudio judge`'s do: retries with backoff on 429 (its Retry-After), 5xx
    and timeouts, and with `cache` (the backend's model folder) an answer is asked once: `generate` run again asks
    nothing it asked before."""

    name = "llm"

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, retries: int = 2, cache: Path | None = None):
        self.base_url = (base_url or os.environ.get("EVALSTUDIO_LLM_BASE_URL") or "").rstrip("/")
        self.model = model or os.environ.get("EVALSTUDIO_LLM_MODEL") or ""
        self.api_key = api_key or os.environ.get("EVALSTUDIO_LLM_API_KEY") or ""
        self.timeout, self.retries = timeout, retries
        self.cache_path = cache
        self._cache = None

    def schema(self, project: Project) -> dict:
        """The JSON shape the LLM must answer in: a rating per control within its range or labels, and rationales."""
        ratings = {}
        for slot in project.slots():
            spec = project.criteria[slot.criterion]
            ratings[slot.control] = ({"type": "number", "minimum": spec.min, "maximum": spec.max} if spec.is_numeric
                                else {"enum": spec.labels})
        return {"ratings": ratings, "rationales": {slot.control: "string" for slot in project.slots() if slot.rationale}}

    def messages(self, project: Project, task: dict) -> list[dict]:
        """The messages: instructions and the config's texts as the system prompt, the task's text as the user's."""
        rubric = re.sub(r"<[^>]+>", " ", html.unescape(project.instructions))
        # every static text of the config (instructions, definitions, anchors, examples), in the order annotators see it
        help_texts = re.findall(r'<Text name="\w+" value="([^"$][^"]*)"', project.label_config)
        system = (
            "You are an expert annotator following this evaluation protocol.\n" + re.sub(r"\s+", " ", rubric).strip()
            + "\n" + "\n".join(html.unescape(t) for t in help_texts)
            + "\nAnswer with one JSON object only, of this form (every rating required, values within range):\n"
            + json.dumps(self.schema(project))
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": task_text(project, task["data"])}]

    @property
    def model_version(self) -> str:
        """'llm:MODEL', the version Label Studio records with the predictions."""
        return f"llm:{self.model}"

    def _answer(self, messages: list[dict], usage):
        import asyncio

        from evalstudio.base.chat import Cache, ChatClient, Judge, digest

        if not self.base_url or not self.model:
            raise NoPrediction("the llm predictor needs EVALSTUDIO_LLM_BASE_URL and EVALSTUDIO_LLM_MODEL")
        if self._cache is None:
            self._cache = Cache(self.cache_path) if self.cache_path is not None else _NoCache()
        judge = Judge(self.model_version, self.model, self.base_url, api_key=self.api_key or None)

        async def ask():
            client = ChatClient(self._cache, concurrency=1, retries=self.retries, timeout=self.timeout)
            try:
                answer, _ = await client.ask(judge, tuple(messages), digest(messages), 0)
            finally:
                await client.close()
            if usage is not None:
                spent = client.usage[judge.name]
                usage["requests"] += spent.requests
                usage["cached"] += spent.cached
                usage["tokens_in"] += spent.tokens_in
                usage["tokens_out"] += spent.tokens_out
            return answer

        answer = asyncio.run(ask())  # (a Flask request thread has no event loop of its own)
        if answer.content is None:
            raise NoPrediction(f"the LLM server gave no answer: {answer.error}")
        return answer.content

    def ask(self, messages: list[dict], usage: dict | None = None) -> tuple[dict, str]:
        """(the JSON object the model answered, its raw text); NoPrediction if there is none. `usage` (requests,
        cached, tokens_in, tokens_out) is added to."""
        content = self._answer(messages, usage)
        return _json_object(content), content

    def predict(self, project: Project, task: dict) -> Output:
        """The LLM's ratings and rationales for the task as control values; NoPrediction if its answer has none."""
        answer, content = self.ask(self.messages(project, task))
        ratings, rationales = answer.get("ratings"), answer.get("rationales") or {}
        if not isinstance(ratings, dict) or not isinstance(rationales, dict):
            raise NoPrediction(f"the LLM answer lacks a 'ratings' object: {content[:200]!r}")
        values = {}
        for slot in project.slots():
            if slot.control in ratings:
                values[slot.control] = ratings[slot.control]
                if slot.rationale and isinstance(rationales.get(slot.control), str):
                    values[slot.rationale] = rationales[slot.control]
        if not values:
            raise NoPrediction(f"the LLM answer rates none of the controls: {content[:200]!r}")
        return Output(values, self.model_version)


class _NoCache:
    """No cache: every question is asked (a predictor made without a cache folder)."""

    def get(self, key):
        return None

    def put(self, key, answer) -> None:
        pass


def _json_object(content: str) -> dict:
    """The JSON object in an LLM answer (a ```json fence is tolerated)."""
    text = re.sub(r"^```(?:json)?\s*|\s*```$", "", content.strip())
    try:
        answer = json.loads(text)
    except json.JSONDecodeError as e:
        raise NoPrediction(f"the LLM answer is not valid JSON ({e.msg}): {content[:200]!r}") from None
    if not isinstance(answer, dict):
        raise NoPrediction(f"the LLM answer is not a JSON object: {content[:200]!r}")
    return answer
