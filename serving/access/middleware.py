"""The door: every request is signed in or refused (a browser's visit sent to the sign-in form),
a write from another site's page refused, and every response sent with the page headers; with
nobody to sign in, no serving beyond loopback (:func:`check_binding`)."""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import quote

from rag_pipeline.config import AccessSettings
from serving.access.authenticator import Authenticator
from serving.access.permissions import OPEN_ROUTES
from serving.access.sign_in import SIGN_IN
from serving.access.throttle import Throttled
from serving.access.users import AccessError

_REALM = 'Basic realm="rag-pipeline", charset="UTF-8"'


def check_binding(host: str, access: AccessSettings) -> None:
    """Refuse to serve beyond loopback when nobody has to sign in."""
    if access.configured:
        return
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise AccessError(
            f"refusing to serve on {host} without sign-in: add a user first "
            "(`rag-pipeline user add NAME --workspace ID`), or set access.proxy_user_header "
            "behind a reverse proxy that signs users in"
        )


Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class AccessMiddleware:
    """Every HTTP and WebSocket request is signed in, or refused with 401; a browser visiting a
    page is sent to the sign-in form instead, which, with the open routes (signing in and out),
    is open to anyone. Routes
    ask the authenticator again for the user (a cached lookup) to scope what they answer."""

    def __init__(self, app: Callable[..., Awaitable[None]], authenticator: Authenticator) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in scope.get("headers", [])
        }
        if _foreign_origin(scope, headers):
            await _refuse(scope, send, status=403, detail="a request from another site")
            return
        send = _with_page_headers(send)
        if scope["type"] == "http" and scope["path"] in OPEN_ROUTES:
            await self.app(scope, receive, send)
            return
        client = (scope.get("client") or ("",))[0] or ""
        try:
            if self.authenticator.checks_password(headers):
                user = await self.authenticator.off_loop(self.authenticator.user, headers, client)
            else:
                user = self.authenticator.user(headers, client)
        except Throttled as throttled:
            await _refuse(scope, send, retry_after=throttled.seconds)
            return
        if user is None and _visits_a_page(scope, headers) and self.authenticator.offers_sign_in:
            await _to_sign_in(scope, send)
        elif user is None:
            await _refuse(scope, send)
        else:
            await self.app(scope, receive, send)


# On every response: no framing (clickjacking), no sniffing, no full URL sent elsewhere.
PAGE_HEADERS = {
    b"content-security-policy": b"frame-ancestors 'none'",
    b"x-frame-options": b"DENY",
    b"x-content-type-options": b"nosniff",
    b"referrer-policy": b"same-origin",
}
_UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def _foreign_origin(scope: dict[str, Any], headers: Mapping[str, str]) -> bool:
    """A browser's write (an upload, a Gradio event) or WebSocket from a page of another site:
    its ``Origin`` is neither the ``Host`` asked for nor the ``X-Forwarded-Host`` a reverse
    proxy that rewrites ``Host`` passes on (a page of another site cannot set that header
    without a preflight, which is refused). A request without ``Origin`` is no browser's
    cross-site one (agents, gradio_client)."""
    origin = headers.get("origin")
    if origin is None:
        return False
    if scope["type"] == "http" and scope.get("method", "GET") not in _UNSAFE_METHODS:
        return False
    scheme, _, host = origin.lower().partition("://")
    allowed = {headers.get("host", ""), *headers.get("x-forwarded-host", "").split(",")[:1]}
    return _without_default_port(scheme, host.rstrip("/")) not in {
        _without_default_port(scheme, name.strip().lower()) for name in allowed if name
    }


def _visits_a_page(scope: dict[str, Any], headers: Mapping[str, str]) -> bool:
    """A browser opening a page (rather than a script's or an agent's request)."""
    if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
        return False
    mode = headers.get("sec-fetch-mode")
    return mode == "navigate" if mode else "text/html" in headers.get("accept", "")


async def _to_sign_in(scope: dict[str, Any], send: Send) -> None:
    """303 to the sign-in form, which comes back here once signed in."""
    query = scope.get("query_string", b"").decode("latin-1")
    asked = scope["path"] + (f"?{query}" if query else "")
    location = f"{SIGN_IN}?next={quote(asked, safe='')}"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", location.encode()), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})


def _without_default_port(scheme: str, host: str) -> str:
    default = {"http": ":80", "https": ":443"}.get(scheme)
    return host.removesuffix(default) if default else host


def _with_page_headers(send: Send) -> Send:
    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            present = {name.lower() for name, _ in message.get("headers", [])}
            message = message | {
                "headers": [
                    *message.get("headers", []),
                    *((name, value) for name, value in PAGE_HEADERS.items() if name not in present),
                ]
            }
        await send(message)

    return sending


async def _refuse(
    scope: dict[str, Any],
    send: Send,
    *,
    retry_after: float | None = None,
    status: int = 401,
    detail: str = "sign in: a user name and password, or a bearer token",
) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    headers = [(b"www-authenticate", _REALM.encode())] if status == 401 else []
    if retry_after is not None:
        status, detail = 429, str(Throttled(retry_after))
        headers = [(b"retry-after", str(max(1, math.ceil(retry_after))).encode())]
    headers += list(PAGE_HEADERS.items())
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps({"detail": detail}).encode()})
