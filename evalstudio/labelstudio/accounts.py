"""Label Studio accounts through its web pages, which the SDK does not cover: Community has no crowd integration,
so participants sign up through the organisation's invite link, sign in with Label Studio's own form, and leave the
organisation as its owner removes them. Mixed into `Client` (client.py), whose connection it uses."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from evalstudio.base.errors import ServerError, Transient

RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class Accounts:
    """Account calls of `Client`: it provides `_base`, `_auth`, `_timeout`, `_call` and `_read`."""


    def invite_token(self) -> str:
        """The organisation's sign-up token (Label Studio's "invite people" link)."""
        def get():
            response = httpx.get(f"{self._base}/api/invite", headers=self._auth, timeout=self._timeout)
            response.raise_for_status()
            return response.json()["token"]
        return self._read("read the organisation's invite link", lambda: self._http(get, "read the invite link"))

    def _http(self, request, action: str):
        try:
            return request()
        except httpx.HTTPStatusError as e:
            kind = Transient if e.response.status_code in RETRY_STATUS else ServerError
            raise kind(f"Label Studio refused to {action} (HTTP {e.response.status_code})") from None
        except (KeyError, ValueError, TypeError):
            raise ServerError(f"Label Studio answered something unexpected while trying to {action}") from None

    def sign_up(self, email: str, password: str, token: str) -> int:
        """Create the account `email` through the sign-up form of the invite link; returns the new user's id.
        Sent once (not retried): a lost answer is found by the caller looking the e-mail up again."""
        action = f"create the account {email}"
        with self._call(action), httpx.Client(base_url=self._base, timeout=self._timeout) as web:
            page = f"/user/signup/?token={token}"
            self._http(lambda: web.get(page).raise_for_status(), action)  # sets the CSRF cookie
            answer = web.post(page, data={"email": email, "password": password,
                                          "csrfmiddlewaretoken": web.cookies.get("csrftoken", "")},
                              headers={"Referer": self._base + page})
            if answer.status_code != 302:  # the form again: Label Studio's reasons are in its error list
                import re

                reasons = [m.strip() for m in re.findall(r"<li>([^<]{1,200})</li>", answer.text)] or \
                    [f"HTTP {answer.status_code}"]
                raise ServerError(f"Label Studio refused to {action}: {'; '.join(reasons)}")
            return self._http(lambda: web.get("/api/current-user/whoami").raise_for_status().json()["id"], action)

    def own_user_id(self) -> int:
        """The user id of the account whose key this client holds (the researcher's)."""
        action = "read which account the key belongs to"

        def get():
            who = httpx.get(f"{self._base}/api/current-user/whoami", headers=self._auth, timeout=self._timeout)
            who.raise_for_status()
            return int(who.json()["id"])
        return self._read(action, lambda: self._http(get, action))

    def remove_member(self, user_id: int) -> bool:
        """Take a user out of the organisation (Label Studio's "remove member", a soft delete, owner only): from then
        on the account opens no project and gets no task; its annotations stay. False if it was already out."""
        action = f"close the access of user {user_id}"

        def call():
            who = httpx.get(f"{self._base}/api/current-user/whoami", headers=self._auth, timeout=self._timeout)
            who.raise_for_status()
            organization = int(who.json()["active_organization"])
            answer = httpx.delete(f"{self._base}/api/organizations/{organization}/memberships/{int(user_id)}/",
                                  headers=self._auth, timeout=self._timeout)
            if answer.status_code == 404:  # "Member not found": removed before
                return False
            answer.raise_for_status()
            return True
        return self._read(action, lambda: self._http(call, action))

    @contextmanager
    def _signed_in(self, email: str, password: str, action: str) -> Iterator[httpx.Client]:
        """An HTTP client holding a browser session of the account `email` (Label Studio's own sign-in form)."""
        with self._call(action), httpx.Client(base_url=self._base, timeout=self._timeout) as web:
            self._http(lambda: web.get("/user/login/").raise_for_status(), action)
            answer = web.post("/user/login/", data={"email": email, "password": password,
                                                   "csrfmiddlewaretoken": web.cookies.get("csrftoken", "")},
                              headers={"Referer": self._base + "/user/login/"})
            if answer.status_code != 302:
                raise ServerError(f"Label Studio refused to {action}: wrong e-mail or password")
            yield web

    def log_in(self, email: str, password: str) -> str:
        """The API token of the account `email` (its own, for acting as that participant)."""
        action = f"sign in as {email}"
        with self._signed_in(email, password, action) as web:
            return self._http(lambda: web.get("/api/current-user/token").raise_for_status().json()["token"], action)

    def front_end_settings(self, email: str, password: str) -> dict:
        """What Label Studio's own pages give its front end as `window.APP_SETTINGS` and that changes how the
        labeling editor renders and behaves: the feature flags, their default value and the edition
        (`sentry_environment`), as the account `email` gets them. Read from a page of Label Studio's app, which
        writes each on one line."""
        action = f"read Label Studio's front-end settings as {email}"
        with self._signed_in(email, password, action) as web:
            page = self._http(lambda: web.get("/projects/").raise_for_status().text, action)
        found = {key: re.search(rf"^\s*{key}: (.*?),?\s*$", page, re.M)
                 for key in ("feature_flags", "feature_flags_default_value", "sentry_environment")}
        try:
            settings = {key: json.loads(match.group(1)) for key, match in found.items() if match}
        except ValueError:
            settings = {}
        if set(settings) != set(found) or not isinstance(settings["feature_flags"], dict):
            raise ServerError(f"cannot {action}: its page does not have them where Label Studio 1.23 writes them")
        return settings
