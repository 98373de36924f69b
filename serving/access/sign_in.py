"""The sign-in form for browsers (a plain HTML form, no script), its twin for ``gradio_client``'s
``auth=`` (``/login``), and signing out.

A right name and password open a session (:class:`~serving.access.sessions.Sessions`) whose
token the browser keeps in a cookie: ``HttpOnly``, ``SameSite=Strict``, ``Secure`` when the
request came over TLS (directly or through a proxy saying so in ``X-Forwarded-Proto``), expiring
after ``access.session_hours``. The password is checked as HTTP Basic's is: in the hashing
thread, throttled per user name and client address, except for a browser whose device cookie
(:mod:`~serving.access.devices`) shows it signed this name in before. ``/login`` signs in the
same way, its fields named as ``gradio_client`` sends them. The middleware refuses a
form posted from another site's page (its ``Origin`` check covers every unsafe method).
"""

from __future__ import annotations

import html
import math
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from serving.access.authenticator import Authenticator
from serving.access.devices import DEVICE_COOKIE, DEVICE_DAYS
from serving.access.sessions import SESSION_COOKIE
from serving.access.throttle import Throttled
from serving.access.users import User

SIGN_IN = "/sign-in"
SIGN_OUT = "/sign-out"
LOGIN = "/login"  # where gradio_client signs in (``auth=``)

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

    async def password_user(request: Request, name: str, password: str) -> User | None:
        """The user a name and password sign in, throttled; the device cookie of a browser (or
        client) that signed this name in here before spares it the waits of others' guesses."""
        client = request.client.host if request.client else ""
        device = request.cookies.get(DEVICE_COOKIE)
        return await authenticator.off_loop(
            authenticator.password_user, name, password, client, device
        )

    def open_session(response: Response, request: Request, user: User) -> Response:
        """``response`` with the new session's cookie, and the device cookie, sent back to the
        route that signed in alone: the client known there from now on, across restarts."""
        response.set_cookie(
            SESSION_COOKIE,
            authenticator.start_session(user),
            max_age=round(authenticator.access.session_hours * 3600),
            path="/",
            secure=_over_tls(request),
            httponly=True,
            samesite="strict",
        )
        response.set_cookie(
            DEVICE_COOKIE,
            authenticator.devices.issue(user.name),
            max_age=DEVICE_DAYS * 86_400,
            path=request.url.path,
            secure=_over_tls(request),
            httponly=True,
            samesite="strict",
        )
        return response

    @router.post(SIGN_IN)
    async def sign_in(request: Request) -> Response:
        fields = await _form_fields(request)
        if fields is None:
            return _form("/", "The form was too large.", status=413)
        name, password, back = (fields.get(key, "") for key in ("name", "password", "next"))
        try:
            user = await password_user(request, name, password)
        except Throttled as throttled:
            return _form(back, f"{str(throttled).capitalize()}.", name, 429, _retry(throttled))
        if user is None:
            return _form(back, "Wrong user name or password.", name, 401)
        return open_session(RedirectResponse(_local(back), status_code=303), request, user)

    @router.post(LOGIN)
    async def login(request: Request) -> Response:
        """``gradio_client.Client(url, auth=(name, password))``: the form's sign-in, answered as
        Gradio's own ``/login`` answers (the session's cookie, 401 for a wrong password)."""
        fields = await _form_fields(request)
        if fields is None:
            return JSONResponse({"detail": "the form was too large"}, status_code=413)
        try:
            user = await password_user(
                request, fields.get("username", ""), fields.get("password", "")
            )
        except Throttled as throttled:
            return JSONResponse({"detail": str(throttled)}, 429, headers=_retry(throttled))
        if user is None:
            return JSONResponse({"detail": "wrong user name or password"}, status_code=401)
        return open_session(JSONResponse({"success": True}), request, user)

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


def _retry(throttled: Throttled) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(throttled.seconds)))}


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
