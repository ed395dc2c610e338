"""WSGI entry for production servers:  gunicorn 'evalstudio.ml_backend.wsgi:app' --workers 2 --bind 127.0.0.1:9090

Reads EVALSTUDIO_MODEL_DIR, EVALSTUDIO_ML_BASIC_AUTH, EVALSTUDIO_PROJECTS and, for the learner, LABEL_STUDIO_URL /
LABEL_STUDIO_API_KEY from the environment."""

from .app import create_app

app = create_app()
