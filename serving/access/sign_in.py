"""The sign-in form for browsers (a plain HTML form, no script) and signing out.

A right name and password open a session (:class:`~serving.access.sessions.Sessions`) whose
token the browser keeps in a cookie: ``HttpOnly``, ``SameSite=Strict``, ``Secure`` when the
request came over TLS (directly or through a proxy saying so in ``X-Forwarded-Proto``), expiring
after ``access.session_hours``. The password is checked as HTTP Basic's is: in the hashing
thread, throttled per user name and client address, except for a browser whose device cookie
(:mod:`~serving.access.devices`) shows it signed this name in before. The middleware refuses a
form posted from another site's page (its ``Origin`` check covers every unsafe method).
"""

from __future__ import annotations

import html
import math
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from serving.access.authenticator import Authenticator
from serving.access.devices import DEVICE_COOKIE, DEVICE_DAYS
from serving.access.sessions import SESSION_COOKIE
from serving.access.throttle import Throttled

SIGN_IN = "/sign-in"
SIGN_OUT = "/sign-out"

_MOST_FORM_BYTES = 8192  # a name, a password and a path back
# The form alone: no script, nothing loaded, posted only here, never framed.
_FORM_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
)
_FORM = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · rag-pipeline</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 22em; margin: 4em auto; padding: 0 1em; }}
label {{ display: block; margin: 0.9em 0 0.2em; }}
input {{ width: 100%; padding: 0.45em; box-sizing: border-box; font: inherit; }}
button {{ margin-top: 1.2em; padding: 0.45em 1.4em; font: inherit; }}
.refused {{ color: #b00020; }}
</style></head>
<body><h1>Sign in</h1>
{message}<form method="post" action="{action}">
<input type="hidden" name="next" value="{back}">
<label for="name">User name</label>
<input id="name" name="name" value="{name}" autocomplete="username" required autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit" id="sign-in">Sign in</button>
</form></body></html>
"""


def sign_in_routes(authenticator: Authenticator) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get(SIGN_IN)
    def form(
        request: Request,
        back: str = Query("/", alias="next"),
        signed_out: bool = Query(False, alias="signed-out"),
    ) -> Response:
        # Straight on when nobody signs in with a password here, or when the browser's session
        # is valid (Back after signing in comes here). Only the cookie: no password is hashed.
        session = {"cookie": request.headers.get("cookie", "")}
        if not authenticator.offers_sign_in or authenticator.user(session) is not None:
            return RedirectResponse(_local(back), status_code=303)
        return _form(back, notice="You are signed out." if signed_out else "")

    @router.post(SIGN_IN)
    async def sign_in(request: Request) -> Response:
        fields = await _form_fields(request)
        if fields is None:
            return _form("/", "The form was too large.", status=413)
        name, password, back = (fields.get(key, "") for key in ("name", "password", "next"))
        client = request.client.host if request.client else ""
        device = request.cookies.get(DEVICE_COOKIE)
        try:
            user = await authenticator.off_loop(
                authenticator.password_user, name, password, client, device
            )
        except Throttled as throttled:
            retry = {"Retry-After": str(max(1, math.ceil(throttled.seconds)))}
            return _form(back, f"{str(throttled).capitalize()}.", name, 429, retry)
        if user is None:
            return _form(back, "Wrong user name or password.", name, 401)
        signed_in = RedirectResponse(_local(back), status_code=303)
        signed_in.set_cookie(
            SESSION_COOKIE,
            authenticator.start_session(user),
            max_age=round(authenticator.access.session_hours * 3600),
            path="/",
            secure=_over_tls(request),
            httponly=True,
            samesite="strict",
        )
        # This browser, known at the form from now on, across restarts (sent to the form alone).
        signed_in.set_cookie(
            DEVICE_COOKIE,
            authenticator.devices.issue(user.name),
            max_age=DEVICE_DAYS * 86_400,
            path=SIGN_IN,
            secure=_over_tls(request),
            httponly=True,
            samesite="strict",
        )
        return signed_in

    @router.post(SIGN_OUT)
    def sign_out(request: Request) -> Response:
        token = request.cookies.get(SESSION_COOKIE)
        if token:
            authenticator.sessions.end(token)
        signed_out = RedirectResponse(f"{SIGN_IN}?signed-out=1", status_code=303)
        signed_out.delete_cookie(
            SESSION_COOKIE, path="/", secure=_over_tls(request), httponly=True, samesite="strict"
        )
        return signed_out

    return router


def _form(
    back: str,
    refusal: str = "",
    name: str = "",
    status: int = 200,
    headers: dict[str, str] | None = None,
    *,
    notice: str = "",
) -> HTMLResponse:
    if refusal:
        message = f'<p class="refused" role="alert">{html.escape(refusal)}</p>\n'
    else:
        message = f'<p role="status">{html.escape(notice)}</p>\n' if notice else ""
    page = _FORM.format(
        message=message,
        action=SIGN_IN,
        back=html.escape(_local(back)),
        name=html.escape(name),
    )
    policy = {"Content-Security-Policy": _FORM_POLICY, "Cache-Control": "no-store"}
    return HTMLResponse(page, status_code=status, headers=policy | (headers or {}))


async def _form_fields(request: Request) -> dict[str, str] | None:
    """The posted form's fields (the first of each name), None when it is too large."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MOST_FORM_BYTES:
            return None
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {key: values[0] for key, values in parsed.items()}


def _local(path: str) -> str:
    """``path`` when it leads to a page of this server, else the page: the form never sends a
    browser to another site."""
    local = path.startswith("/") and not path.startswith("//") and "\\" not in path
    return path if local and path.isprintable() else "/"


def _over_tls(request: Request) -> bool:
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"
