"""The ML backend run as a server (`evalstudio ml-backend`): its environment set (projects.yaml, model folder,
basic auth from a private file or $EVALSTUDIO_ML_BASIC_AUTH, never from argv), its WSGI app made, and served by
gunicorn (or Flask's development server). Uses ml_backend.app, evalstudio.base.credentials and
evalstudio.protocols."""

from __future__ import annotations

import os
from pathlib import Path

from evalstudio.base.credentials import ML_AUTH_ENV, ML_AUTH_FILE, ml_auth
from evalstudio.protocols.registry import load as load_registry


def backend_app(model_dir: Path, basic_auth_file: Path | None, projects: Path | None):
    """(the Flask app, where its credentials are: "$EVALSTUDIO_ML_BASIC_AUTH" or the file): the environment the app
    and gunicorn's workers read (projects.yaml, model folder, the basic auth, made once in the file when missing),
    logging as one line per record, and the app."""
    import logging

    if projects:
        os.environ["EVALSTUDIO_PROJECTS"] = str(projects.resolve())
    os.environ["EVALSTUDIO_MODEL_DIR"] = str(model_dir.resolve())
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    from .app import create_app

    auth_file = basic_auth_file or model_dir.resolve().parent / ML_AUTH_FILE
    from_env = bool(os.environ.get(ML_AUTH_ENV, "").strip())
    load_registry(projects)
    os.environ[ML_AUTH_ENV] = ml_auth(auth_file, create=True)  # gunicorn's workers inherit it; argv stays clean
    flask_app = create_app()
    return flask_app, "$" + ML_AUTH_ENV if from_env else str(auth_file)


def serve_backend(flask_app, host: str, port: int, workers: int, dev: bool) -> None:
    """Serve the app until stopped: gunicorn with `workers` processes of 8 threads, or (dev) Flask's
    single-process development server with keep-alive."""
    if dev:
        from werkzeug.serving import WSGIRequestHandler

        WSGIRequestHandler.protocol_version = "HTTP/1.1"  # keep-alive: no new TCP connection per prediction
        flask_app.run(host=host, port=port, threaded=True)
        return
    from gunicorn.app.base import BaseApplication

    class Server(BaseApplication):
        def load_config(self):
            for key, value in {"bind": f"{host}:{port}", "workers": workers, "worker_class": "gthread", "threads": 8,
                               "timeout": 120, "loglevel": "info"}.items():
                self.cfg.set(key, value)
            # gunicorn >= 25 opens a control socket at one path per user ($XDG_RUNTIME_DIR or ~/.gunicorn/gunicorn.ctl):
            # every backend of the user would share it (the last started takes it over). Nothing here uses it.
            if "control_socket_disable" in self.cfg.settings:
                self.cfg.set("control_socket_disable", True)

        def load(self):
            return flask_app

    Server().run()
