"""The WSGI app: label-studio-ml's Flask server with the evalstudio model and optional basic auth."""

from __future__ import annotations

import base64
import hmac
import os

from label_studio_ml.api import init_app

from .model import MODEL_DIR_ENV, EvalstudioModel, model_dir, warm_up

MAX_GENERATE_BODY = 8 * 1024 * 1024  # bytes per /generate request

BASIC_AUTH_ENV = "EVALSTUDIO_ML_BASIC_AUTH"  # "user:password"


def create_app(basic_auth: str | None = None):
    """Flask app serving /predict, /setup, /webhook, /health and /generate. With basic_auth ("user:password"), every
    request must carry it (set the same user and password on the ML backend in Label Studio)."""
    os.environ.setdefault("LABEL_STUDIO_ML_BACKEND_V2", "true")
    directory = model_dir()
    directory.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault(MODEL_DIR_ENV, str(directory))
    app = init_app(model_class=EvalstudioModel, model_dir=str(directory))
    # load the model now: label-studio-ml 1.0.9 answers /predict with a 500 until Label Studio has called /setup,
    # and our model needs no setup (the protocol comes with every request's label config)
    from label_studio_ml.api import _manager

    _manager.fetch()
    warm_up()
    app.add_url_rule("/generate", "generate", _generate, methods=["POST"])
    basic_auth = basic_auth if basic_auth is not None else os.environ.get(BASIC_AUTH_ENV)
    if basic_auth:
        if ":" not in basic_auth:
            raise ValueError(f"basic auth must be 'user:password', got no ':' in {BASIC_AUTH_ENV}")
        expected = "Basic " + base64.b64encode(basic_auth.encode()).decode()
        from flask import Response, request

        @app.before_request
        def _check_auth():
            if not hmac.compare_digest(request.headers.get("Authorization", ""), expected):
                return Response("authentication required", 401, {"WWW-Authenticate": 'Basic realm="evalstudio"'})
    return app


def _generate():
    """POST {"project": NAME, "items": [{input fields}, ...]} -> {"model_version", "results": [{"output": {...}} or
    {"error": "..."}, ...]}: the judged outputs of projects.yaml `generate` for each item (see generators.py)."""
    from flask import jsonify, request

    from .generators import GenerationError, Generator, check_items
    from .model import _registry
    from .predictors import NoPrediction

    if (request.content_length or 0) > MAX_GENERATE_BODY:
        return jsonify(error=f"request body larger than {MAX_GENERATE_BODY} bytes"), 413
    body = request.get_json(silent=True)
    if not isinstance(body, dict) or not isinstance(body.get("project"), str):
        return jsonify(error='expected a JSON object {"project": NAME, "items": [...]}'), 400
    reg = _registry()
    if body["project"] not in reg.projects:
        return jsonify(error=f"unknown project {body['project'][:100]!r}"), 400
    project = reg.projects[body["project"]]
    if not project.generate:
        return jsonify(error=f"{project.name} has nothing to generate (no `generate` in projects.yaml)"), 400
    try:
        items = check_items(project.generate, body.get("items"))
    except GenerationError as e:
        return jsonify(error=str(e)), 400
    generator = Generator()
    results = []
    for item in items:
        try:
            results.append({"output": generator.generate(project.generate, item)})
        except NoPrediction as e:
            results.append({"error": str(e)})
    return jsonify(model_version=generator.model_version, results=results)
