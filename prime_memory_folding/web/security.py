"""The inspector's guard: a secret token, Host and Origin checks, and CSRF tokens.

Every request must carry the secret token: once in the URL (``?token=...``),
which the guard swaps for an ``HttpOnly``, ``SameSite=Strict`` cookie and a
redirect to the same address without it, then in that cookie. Requests whose
``Host`` is not one the server was started for are refused (DNS rebinding),
and so are requests whose ``Origin`` is another site; both checks live in
:mod:`~prime_memory_folding.net.guard`, which the MCP server shares. Forms
that change anything carry a CSRF token as well (see :func:`check_csrf`).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlencode

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ..net.guard import LOOPBACK_HOSTS, HostRules, allowed_hosts, is_loopback

__all__ = [
    "CSRF_FIELD",
    "CSRF_HEADER",
    "LOOPBACK_HOSTS",
    "CsrfError",
    "Guard",
    "Secrets",
    "allowed_hosts",
    "check_csrf",
    "is_loopback",
    "new_token",
]

CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"


def new_token() -> str:
    """A fresh random token for one run of the inspector."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Secrets:
    """The token that opens the inspector, its cookie's name, and the CSRF token of forms."""

    token: str
    cookie: str = "prime_memory_inspector"
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))


class CsrfError(Exception):
    """A state-changing request without the current CSRF token."""


def check_csrf(request: Request, form_value: object, keys: Secrets) -> None:
    """Refuse a POST whose CSRF token (form field or header) is missing or stale.

    Raises:
        CsrfError: the token is missing or is not this run's.
    """
    given = request.headers.get(CSRF_HEADER) or form_value
    if not isinstance(given, str) or not given:
        raise CsrfError("this form carries no CSRF token; reload the page and try again")
    if not hmac.compare_digest(given.encode(), keys.csrf.encode()):
        raise CsrfError(
            "this form's CSRF token is stale (the inspector was restarted since the page "
            "was loaded); reload the page and try again. Nothing was changed"
        )


_REFUSED = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Prime Memory inspector: {title}</title></head><body>
<h1>{title}</h1><p>{message}</p></body></html>"""


def _refuse(status: int, title: str, message: str) -> Response:
    return HTMLResponse(
        _REFUSED.format(title=title, message=message),
        status_code=status,
        headers={"Cache-Control": "no-store", "Referrer-Policy": "same-origin"},
    )


class Guard:
    """ASGI middleware that lets through only requests with the token, from the right host."""

    def __init__(self, app: ASGIApp, keys: Secrets, hosts: Iterable[str]) -> None:
        self.app = app
        self.keys = keys
        self.rules = HostRules.of(hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._check(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _check(self, request: Request) -> Response | None:
        refused = self.rules.refusal(request.headers.get("host"), request.headers.get("origin"))
        if refused == "host":
            return _refuse(
                400,
                "Unknown host",
                "This inspector answers only on the address it printed at start-up.",
            )
        if refused == "origin" or request.headers.get("sec-fetch-site") == "cross-site":
            return _refuse(
                403, "Cross-site request refused", "Requests from other sites are refused."
            )
        given = request.query_params.get("token")
        if given is not None:
            if not hmac.compare_digest(given.encode(), self.keys.token.encode()):
                return self._no_token()
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = URL(path=request.url.path, query=urlencode(rest))
            response = RedirectResponse(str(target), status_code=303)
            response.set_cookie(
                self.keys.cookie,
                self.keys.token,
                httponly=True,
                samesite="strict",
                path="/",
            )
            response.headers["Referrer-Policy"] = "same-origin"
            response.headers["Cache-Control"] = "no-store"
            return response
        cookie = request.cookies.get(self.keys.cookie, "")
        if not hmac.compare_digest(cookie.encode(), self.keys.token.encode()):
            return self._no_token()
        return None

    def _no_token(self) -> Response:
        return _refuse(
            403,
            "Token needed",
            "This inspector needs its token: open the address that "
            "<code>prime-memory ui</code> printed when it started.",
        )
