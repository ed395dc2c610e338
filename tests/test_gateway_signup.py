"""A sign-up through the study link is one ledger transaction (issue 71, item 2): the rate limits, the account and
its session together, whatever the answer; each answer as before. On SQLite and on PostgreSQL. (Label Studio is not
asked during a sign-up: the account there is made behind it by the sync writer, not started here.)"""

from __future__ import annotations

import contextlib

import pytest
from starlette.testclient import TestClient

from evalstudio.crowd import ledger
from evalstudio.crowd.ledger_store import Store
from evalstudio.gateway import build_app
from evalstudio.gateway.setup import GatewayConfig

from .test_ledger import backend  # noqa: F401  (the ledger on SQLite and on PostgreSQL)

KEY = "k" * 24
HEADERS = {"X-Evalstudio": "1"}

CASES = [  # (case, config changes, sign-ups before, the one measured, its status, what it says)
    ("a new id", {}, [], "NEWONE", 200, None),
    ("an id signed up before", {}, ["TWICE"], "twice", 409, "signed up already"),
    ("the study full", {"max_participants": 1}, ["FIRST"], "SECOND", 409, "all the participants it needs"),
    ("the address's limit reached", {"rate_per_minute": 1}, ["EARLY"], "LATE", 429, "Too many sign-ups"),
    ("every sign-up's limit reached", {"joins_per_minute": 1}, ["EARLY"], "LATE", 429, "Too many sign-ups"),
    ("not an id", {}, [], "not an id", 400, "not a participant id"),
    ("an id starting with -", {}, [], "-2-3", 400, "starting with a letter or digit"),
]


@pytest.mark.parametrize("case, changes, before, participant, status, said", CASES, ids=[c[0] for c in CASES])
def test_a_sign_up_is_one_ledger_transaction(backend, tmp_path, monkeypatch, case, changes, before,  # noqa: F811
                                             participant, status, said):
    folder = tmp_path / "participants"
    config = GatewayConfig(study="sign-up", parts=[], label_studio_url="http://127.0.0.1:9", api_key="unused",
                           participants_folder=folder, public_url="http://127.0.0.1:8000", join_key=KEY,
                           **{"rate_per_minute": 300, "joins_per_minute": 1000, **changes})
    ledger.open_ledger(folder)  # (opened before the gateway starts, as `evalstudio gateway` does)
    app = build_app(config)  # (its lifespan, which reads Label Studio, is not run: TestClient outside `with`)
    web = TestClient(app, headers=HEADERS)
    for earlier in before:
        assert web.post("/api/join", json={"key": KEY, "participant": earlier}).status_code == 200
    writes = []
    original = Store._write

    @contextlib.contextmanager
    def counted(self):
        writes.append(self)
        with original(self) as tx:
            yield tx

    with monkeypatch.context() as patched:
        patched.setattr(Store, "_write", counted)
        answer = web.post("/api/join", json={"key": KEY, "participant": participant})
    assert (answer.status_code, len(writes)) == (status, 1), answer.text
    book = ledger.Ledger(folder)
    if status == 200:
        account = book.account(participant)
        assert answer.json()["link"] == f"http://127.0.0.1:8000/s/{participant}/{account.access}"
        assert book.session(answer.cookies["evalstudio_gateway"]) == participant.lower()
        assert account.source == "join" and account.user_id is None
    else:
        assert said in answer.json()["error"]
        assert "evalstudio_gateway" not in answer.cookies
        assert book.count() == len(before)
    # every answer but a refusal by the address's limit counted an attempt of the address, as before
    counted = len(before) + (case != "the address's limit reached")
    assert not book.allow("address:testclient", counted) and book.allow("address:testclient", counted + 1)
    book.close()
