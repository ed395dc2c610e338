"""The participant gateway: what crowd participants reach instead of Label Studio. Uses evalstudio.crowd (the
study's ledger), evalstudio.labelstudio, protocols, values, tasks (the serving order) and base; Starlette, uvicorn.

Label Studio Community has no roles: every account can read every task's `meta` (model ratings, gold answers,
system names), every annotation and export, the webhooks (with the ML backend's secret), and can change projects,
tasks and other people's annotations. A crowd study's participants are strangers, so they never get a Label Studio
session or token. They sign in at the gateway (a personal link, or the study link for self sign-up); the gateway
holds their Label Studio credentials on this machine and makes, on their behalf, the few calls labeling needs:

* the next task of a study project: chosen by the gateway (gateway/serving.py: the participant's own order, from
  evalstudio.tasks.order; at most the overlap per task, served from the ledger in one transaction across processes) and
  read from Label Studio as that participant, of which only the data fields the labeling config displays are
  passed on;
* creating the participant's annotation on the task they were given, and updating an annotation the gateway
  created for them (checked against the project's controls first);
* Label Studio's front-end files (`/react-app/`, `/static/`), streamed as they are, to render the labeling view.

Every other path and method is answered by the gateway itself (404 or 405) and never reaches Label Studio. What a
study needs (the order, the quota per participant, Part I before Part II, one complete answer per participant and
task, at most the overlap per task, the time on a task) the gateway decides, from the study's ledger
(evalstudio.crowd.ledger), never from what the browser sends. The gateway keeps nothing in its memory that a restart or a
second gateway process would need: any number of them can serve one study (`--workers`).
"""

from .app import build_app  # noqa: F401
from .setup import GatewayConfig, Part, load_parts  # noqa: F401
