"""The WSGI app: label-studio-ml's Flask server with the evalstudio model, guarded.

Secure by default (`evalstudio ml-backend` always sets a secret):
- every route but /health needs HTTP basic auth (Label Studio sends it on /predict and /setup; `connect` puts it
  in the header of the project's /webhook);
- request bodies are bounded (EVALSTUDIO_ML_MAX_BODY bytes, default 32 MB); malformed bodies get a 4xx with a
  short message, never a traceback;
- /webhook accepts annotation events only for Label Studio projects that set this backend up (/setup), and
  trains in one background thread per process with a bounded queue (one pending retraining per project; a file
  lock keeps processes from training at once); nothing of the request is written to disk;
- /health says only that the backend is up.
"""

from __future__ import annotations

import fcntl
import hmac
import json
import logging
import os
import queue
import threading

from label_studio_ml.api import init_app

from evalstudio.base.credentials import ML_AUTH_ENV, basic_auth_header, check_basic_auth, private_dir, write_private

from .model import MODEL_DIR_ENV, EvalstudioModel, model_dir, warm_up

log = logging.getLogger("evalstudio.ml_backend")
BASIC_AUTH_ENV = ML_AUTH_ENV  # "user:password"
MAX_BODY_ENV = "EVALSTUDIO_ML_MAX_BODY"
DEFAULT_MAX_BODY = 32 * 1024 * 1024
MAX_GENERATE_BODY = 8 * 1024 * 1024  # bytes per /generate request
MAX_TASKS = 1000  # per /predict request
TRAIN_EVENTS = {"ANNOTATION_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_CREATED", "START_TRAINING"}
CONNECTED = "connected.json"  # Label Studio project ids that called /setup


def create_app(basic_auth: str | None = None, max_body: int | None = None):
    """Flask app serving /predict, /setup, /webhook, /health and /generate. With basic_auth ("user:password", or
    $EVALSTUDIO_ML_BASIC_AUTH) every route but /health requires it."""
    os.environ.setdefault("LABEL_STUDIO_ML_BACKEND_V2", "true")
    directory = private_dir(model_dir())
    os.environ.setdefault(MODEL_DIR_ENV, str(directory))
    app = init_app(model_class=EvalstudioModel, model_dir=str(directory))
    # load the model now: label-studio-ml 1.0.9 answers /predict with a 500 until Label Studio has called /setup,
    # and our model needs no setup (the protocol comes with every request's label config)
    from label_studio_ml.api import _manager

    _manager.fetch()
    warm_up()
    basic_auth = basic_auth if basic_auth is not None else os.environ.get(BASIC_AUTH_ENV) or None
    app.config["EVALSTUDIO_AUTH"] = basic_auth_header(check_basic_auth(basic_auth, "basic auth")) if basic_auth else None
    app.config["MAX_CONTENT_LENGTH"] = max_body or int(os.environ.get(MAX_BODY_ENV) or DEFAULT_MAX_BODY)
    if not app.config.get("EVALSTUDIO_WIRED"):  # label-studio-ml's app is a module global: wire it once
        app.config["EVALSTUDIO_WIRED"] = True
        _wire(app)
    return app


def _wire(app) -> None:
    from flask import abort, jsonify, request
    from werkzeug.exceptions import HTTPException

    original = {name: app.view_functions[name] for name in ("_predict", "_setup")}

    @app.before_request
    def _check_auth_and_size():
        expected = app.config.get("EVALSTUDIO_AUTH")
        if expected and request.endpoint != "health" and \
                not hmac.compare_digest(request.headers.get("Authorization", "").encode(), expected.encode()):
            response = jsonify(error="authentication required")
            response.status_code, response.headers["WWW-Authenticate"] = 401, 'Basic realm="evalstudio"'
            return response
        limit = app.config["MAX_CONTENT_LENGTH"]
        if (request.content_length or 0) > limit:  # declared size: refused before anything is read
            abort(413)
        if request.content_length is None and request.headers.get("Transfer-Encoding"):  # chunked: size unknown
            abort(411)

    @app.errorhandler(HTTPException)
    def _http_error(e):  # 404, 405, 413...: a short JSON message
        messages = {413: f"request body larger than {app.config['MAX_CONTENT_LENGTH']} bytes",
                    411: "send the body with a Content-Length header"}
        return jsonify(error=messages.get(e.code, e.description)), e.code

    @app.errorhandler(Exception)
    def _internal_error(e):  # never a traceback or a server path to the client
        log.exception("request %s failed", request.path)
        return jsonify(error="internal error; see the ML backend's log"), 500

    def predict():
        body = request.get_json(silent=True)
        problem = _predict_problem(body)
        if problem:
            return jsonify(error=problem), 400
        return original["_predict"]()

    def setup():
        body = request.get_json(silent=True)
        if not isinstance(body, dict) or not isinstance(body.get("project"), str) or \
                not isinstance(body.get("schema", ""), (str, type(None))):
            return jsonify(error='expected a JSON object {"project": "ID.TIMESTAMP", "schema": LABEL_CONFIG}'), 400
        project_id = _project_id(body["project"])
        if project_id is not None:
            _remember(project_id)
        return original["_setup"]()

    def health():
        return jsonify(status="UP")

    def train():
        return jsonify(error="/train is not used: Label Studio's annotation webhooks (/webhook) retrain the learner"), 410

    app.view_functions.update(_predict=predict, _setup=setup, webhook=_webhook, _train=train, health=health)
    app.add_url_rule("/generate", "generate", _generate, methods=["POST"])


def _predict_problem(body) -> str | None:
    if not isinstance(body, dict):
        return 'expected a JSON object {"tasks": [...], "label_config": "..."}'
    tasks = body.get("tasks")
    if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
        return "'tasks' must be a list of task objects"
    if len(tasks) > MAX_TASKS:
        return f"at most {MAX_TASKS} tasks per request, got {len(tasks)}"
    if not isinstance(body.get("label_config"), (str, type(None))):
        return "'label_config' must be a string"
    if not isinstance(body.get("params", {}), (dict, type(None))):
        return "'params' must be an object"
    return None


def _project_id(value) -> int | None:
    """Label Studio's project reference: 'ID.TIMESTAMP' in /setup, an int in webhooks."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    head = str(value).split(".", 1)[0]
    # ASCII digits only: str.isdigit() also accepts '²' and other digits int() refuses (found by the long fuzz run)
    return int(head) if head.isascii() and head.isdigit() and len(head) < 12 else None


def _connected_path():
    return model_dir() / CONNECTED


def connected_projects() -> set[int]:
    """The projects `evalstudio connect` connected to this backend (none if unknown)."""
    try:
        return set(json.loads(_connected_path().read_text()).get("projects", []))
    except (OSError, ValueError, AttributeError):
        return set()


def _remember(project_id: int) -> None:
    with _locked("connected.lock"):
        projects = connected_projects()
        if project_id not in projects:
            write_private(_connected_path(), json.dumps({"projects": sorted(projects | {project_id})}))


class _locked:
    """An exclusive lock file in the model folder (serialises processes of one backend)."""

    def __init__(self, name: str):
        self.path = model_dir() / name

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


class Trainer:
    """One training thread per process and a bounded queue; a project already waiting is not queued again (the
    queued run reads the latest annotations when it starts)."""

    def __init__(self, size: int = 64):
        self.queue: queue.Queue = queue.Queue(maxsize=size)
        self.pending: set[int] = set()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def submit(self, project_id: int, label_config: str | None) -> bool:
        """Queue the project's retraining (False if one is pending already), starting the training thread."""
        with self.lock:
            if project_id in self.pending:
                return False
            self.queue.put_nowait((project_id, label_config))  # queue.Full: the caller answers 503
            self.pending.add(project_id)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="evalstudio-trainer", daemon=True)
                self.thread.start()
        return True

    def _run(self):
        from .model import retrain

        while True:
            project_id, label_config = self.queue.get()
            with self.lock:
                self.pending.discard(project_id)
            try:
                with _locked("train.lock"):
                    retrain(label_config, project_id)
            except Exception:
                log.exception("training for project %s failed", project_id)


TRAINER = Trainer()


def _webhook():
    """Label Studio's annotation events: queue a retraining of the project's learner."""
    from flask import jsonify, request

    body = request.get_json(silent=True)
    if not isinstance(body, dict) or not isinstance(body.get("action"), str):
        return jsonify(error='expected a JSON object {"action": EVENT, "project": {...}}'), 400
    if body["action"] not in TRAIN_EVENTS:
        return jsonify(ignored=body["action"][:50]), 200
    project = body.get("project")
    project_id = _project_id(project.get("id")) if isinstance(project, dict) else None
    if project_id is None or not isinstance(project.get("label_config", ""), (str, type(None))):
        return jsonify(error="'project' must be an object with an integer 'id' and the 'label_config'"), 400
    if project_id not in connected_projects():
        log.warning("webhook for project %s refused: it is not connected to this backend", project_id)
        return jsonify(error=f"project {project_id} is not connected to this backend"), 403
    try:
        queued = TRAINER.submit(project_id, project.get("label_config"))
    except queue.Full:
        return jsonify(error="too many trainings waiting; try again later"), 503
    return jsonify(queued=queued), 201


def _generate():
    """POST {"project": NAME, "items": [{input fields}, ...]} -> {"model_version", "results": [{"output": {...}} or
    {"error": "..."}, ...]}: the judged outputs of projects.yaml `generate` for each item (see generators.py)."""
    from flask import jsonify, request

    from .generators import GenerationError, Generator, check_items
    from .model import project_registry, llm_cache
    from .predictors import LLMPredictor, NoPrediction

    if (request.content_length or 0) > MAX_GENERATE_BODY:
        return jsonify(error=f"request body larger than {MAX_GENERATE_BODY} bytes"), 413
    body = request.get_json(silent=True)
    if not isinstance(body, dict) or not isinstance(body.get("project"), str):
        return jsonify(error='expected a JSON object {"project": NAME, "items": [...]}'), 400
    reg = project_registry()
    if body["project"] not in reg.projects:
        return jsonify(error=f"unknown project {body['project'][:100]!r}"), 400
    project = reg.projects[body["project"]]
    if not project.generate:
        return jsonify(error=f"{project.name} has nothing to generate (no `generate` in projects.yaml)"), 400
    try:
        items = check_items(project.generate, body.get("items"))
    except GenerationError as e:
        return jsonify(error=str(e)), 400
    generator = Generator(LLMPredictor(cache=llm_cache()))
    results = []
    for item in items:
        try:
            results.append({"output": generator.generate(project.generate, item)})
        except NoPrediction as e:
            results.append({"error": str(e)})
    return jsonify(model_version=generator.model_version, results=results, usage=generator.usage)
