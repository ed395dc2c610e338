"""The label-studio-ml model: one backend for every protocol.

Each /predict request carries the project's label config; the protocol is the projects.yaml entry whose config
it is (by control names), and results are built only for controls that exist, with values checked against the
control (range, choices) when built. A task the predictor cannot serve gets no prediction and a logged reason.
"""

from __future__ import annotations

import logging
import os
from functools import lru_cache
from pathlib import Path

from label_studio_ml.model import LabelStudioMLBase

from evalstudio.base.errors import EvalstudioError
from evalstudio.labelstudio.client import Client
from evalstudio.labelstudio.connection import Settings, settings_from_env
from evalstudio.protocols import registry

from .predictors import LearnerPredictor, LLMPredictor, NoPrediction, StoredPredictor, prediction_of

log = logging.getLogger("evalstudio.ml_backend")
MODEL_DIR_ENV = "EVALSTUDIO_MODEL_DIR"


def model_dir() -> Path:
    """Where trained models are kept ($EVALSTUDIO_MODEL_DIR, else .evalstudio/models)."""
    return Path(os.environ.get(MODEL_DIR_ENV) or ".evalstudio/models")


@lru_cache(maxsize=1)
def project_registry() -> registry.Registry:
    """The protocol registry, read once per process."""
    return registry.load()


@lru_cache(maxsize=None)
def predictor(name: str):
    """The predictor of that name (stored, learner or LLM), made once per process."""
    if name == "stored":
        return StoredPredictor()
    if name == "learner":
        return LearnerPredictor(model_dir())
    return LLMPredictor(cache=llm_cache())


def llm_cache() -> Path:
    """The LLM's answer cache, in the backend's model folder (`generate` and the llm predictor ask once)."""
    return model_dir() / "llm-cache.sqlite3"


def warm_up() -> None:
    """Parse projects.yaml and every labeling config now rather than on the first request."""
    for project in project_registry():
        project.interface


@lru_cache(maxsize=64)
def identify(label_config: str | None) -> registry.Project:
    """The protocol whose labeling config this is (same controls), else EvalstudioError."""
    if not label_config:
        raise EvalstudioError("the request carries no label_config")
    reg = project_registry()
    for project in reg:
        if project.label_config == label_config.strip():
            return project
    try:
        from label_studio_sdk.label_interface import LabelInterface

        controls = {c.name for c in LabelInterface(label_config).controls}
    except Exception as e:
        raise EvalstudioError(f"cannot parse the project's label config: {e}") from None
    for project in reg:
        if controls == {c.name for c in project.interface.controls}:
            return project
    raise EvalstudioError(f"the label config matches no protocol of {reg.path} (valid: {', '.join(reg.names())})")


def predict_tasks(project: registry.Project, tasks: list[dict], chosen=None) -> list:
    """One entry per task: a prediction dict, or [] (no prediction; the reason is logged)."""
    chosen = chosen or predictor(project.predictor)
    out = []
    for task in tasks:
        try:
            prediction, skipped = prediction_of(project, task, chosen)
            if skipped:
                log.warning("task %s: skipped %s", task.get("id"), "; ".join(skipped))
            out.append(prediction)
        except NoPrediction as e:
            log.info("task %s (%s): no prediction: %s", task.get("id"), project.name, e)
            out.append([])
        except Exception:  # a bug must not turn into a 500 for the whole batch
            log.exception("task %s (%s): prediction failed", task.get("id"), project.name)
            out.append([])
    return out


def fetch_annotated_tasks(project: registry.Project, settings: Settings, project_id: int | None = None) -> list[dict]:
    """Tasks with annotations of the Label Studio project `project_id` (default: the one titled like `project`);
    for a project of counterbalanced lists, of every list's project (the lists share one learner)."""
    client = Client(settings)
    if project.list_of and project_id is None:
        found = [client.find_project(p.title) for p in project_registry().parts(project.entry)]
        ids = [pid for pid in found if pid is not None] or [client.require_project(project)]
    else:
        ids = [project_id or client.require_project(project)]
    return [t for pid in ids for t in client.export_tasks(pid) if t["annotations"]]


class EvalstudioModel(LabelStudioMLBase):
    """The label-studio-ml model: predictions and training for evalstudio's protocols."""
    def predict(self, tasks, **kwargs):
        """Predictions for the tasks of the project the request's label config identifies (none if no project)."""
        from flask import has_request_context, request

        config = (request.json or {}).get("label_config") if has_request_context() else self.label_config
        try:
            project = identify(config or self.label_config)
        except EvalstudioError as e:
            log.warning("no predictions for %d task(s): %s", len(tasks), e)
            return [[] for _ in tasks]
        return predict_tasks(project, tasks)


def retrain(label_config: str | None, project_id: int) -> dict:
    """Retrain the learner of Label Studio project `project_id` from its annotations (a webhook's job; other
    predictors have nothing to train). Reads LABEL_STUDIO_URL / LABEL_STUDIO_API_KEY."""
    try:
        project = identify(label_config)
        if project.predictor != "learner":
            return {}
        # a list's project: the entry's learner is trained on the annotations of all its lists
        tasks = fetch_annotated_tasks(project, settings_from_env(), None if project.list_of else project_id)
        summary = LearnerPredictor(model_dir()).train(project, tasks)
        log.info("retrained %s from project %s: %s", project.name, project_id, summary)
        return summary
    except (EvalstudioError, NoPrediction) as e:
        log.warning("training for project %s skipped: %s", project_id, e)
        return {}
