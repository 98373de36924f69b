"""Who is asking, and which workspaces they may use.

Users are named in the installation's settings (``access.users``, written by ``rag-pipeline user
add``): a salted scrypt hash of their password, the SHA-256 of their bearer token, and the
workspaces granted to them. A request proves who it is by one of:

- ``Authorization: Bearer <token>``: the search API, agents, ``gradio_client``;
- ``Authorization: Basic …`` (user name and password): the browser asks once per session;
- the header a trusted reverse proxy sets (``access.proxy_user_header``), when configured.

One ASGI middleware checks every request, the page, Gradio's own routes and the API alike, so no
route can be forgotten. A password is hashed (scrypt, on purpose slow) in a thread of its own, never
on the event loop, so guesses do not hold up other requests; wrong ones are throttled per user
name and per client address (:class:`Throttle`), and an unknown name costs the same hashing as a
known one, so timing tells no names. With nobody configured the server only binds to loopback
(``check_binding``), and whoever reaches it is the local user, who may use every workspace.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import os
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_pipeline.config import (
    SETTINGS_FILE,
    AccessSettings,
    UserSettings,
    load_settings,
    stored_settings,
    write_stored_settings,
)

_SCRYPT = {"n": 2**14, "r": 8, "p": 1}
_REALM = 'Basic realm="rag-pipeline", charset="UTF-8"'
_VERIFIED_SECONDS = 300.0  # a checked password is not hashed again on each request meanwhile
# A password checked right this recently is not held back by its user name's wait (a guesser of
# that name must not lock its owner out); it is hashed again all the same.
_REMEMBERED_SECONDS = 86_400.0


logger = logging.getLogger("rag_pipeline.serving.access")


class AccessError(ValueError):
    """A user or binding that cannot be; the message says why."""


class Throttled(Exception):
    """Too many wrong passwords: no password is checked for ``seconds`` more."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"too many wrong passwords: try again in {seconds:.0f} s")
        self.seconds = seconds


class Throttle:
    """Wrong passwords counted per key (a user name, a client address): ``free`` in a row cost
    nothing more; after that each try waits ``delay`` seconds, doubling with every further wrong
    one, up to ``cap``. A right password clears its keys."""

    _MOST_KEYS = 100_000  # beyond this, keys quiet for longer than the cap are forgotten

    def __init__(
        self,
        free: int,
        delay: float,
        cap: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.free, self.delay, self.cap, self._clock = free, delay, cap, clock
        self._lock = threading.Lock()
        self._wrong: dict[str, tuple[int, float]] = {}  # key -> (wrong in a row, allowed from)
        self._pruned = float("-inf")

    def wait(self, keys: Iterable[str]) -> float:
        """Seconds until a try with ``keys`` is allowed (0: now)."""
        now = self._clock()
        with self._lock:
            return max([0.0, *(self._wrong.get(key, (0, now))[1] - now for key in keys)])

    def failed(self, keys: Iterable[str]) -> float:
        """Count a wrong password for ``keys``; the wait it brings (0 while tries are free)."""
        now = self._clock()
        waits = []
        with self._lock:
            if len(self._wrong) > self._MOST_KEYS and now - self._pruned > self.cap:
                # A key still being guessed (allowed again within a cap) keeps its count.
                self._wrong = {k: v for k, v in self._wrong.items() if v[1] + self.cap > now}
                self._pruned = now
            for key in keys:
                count = self._wrong.get(key, (0, now))[0] + 1
                beyond = min(count - self.free, 64)  # 2**64 × any delay is past any cap
                wait = 0.0 if beyond <= 0 else min(self.cap, self.delay * 2 ** (beyond - 1))
                self._wrong[key] = (count, now + wait)
                waits.append(wait)
        return max(waits, default=0.0)

    def succeeded(self, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                self._wrong.pop(key, None)


@dataclass(frozen=True, slots=True)
class User:
    name: str
    grants: UserSettings | None  # None: the local user of an installation without access set up

    def may_use(self, workspace: str) -> bool:
        return self.grants is None or self.grants.may_use(workspace)

    def may_govern(self, workspace: str) -> bool:
        return self.grants is None or self.grants.may_govern(workspace)


LOCAL_USER = User("local", None)


def hash_password(password: str) -> str:
    salt = os.urandom(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, **_SCRYPT)
    return f"scrypt${salt.hex()}${digest.hex()}"


def verify_password(password: str, hashed: str) -> bool:
    try:
        kind, salt, digest = hashed.split("$")
        expected = bytes.fromhex(digest)
        computed = hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), **_SCRYPT)
    except ValueError:
        return False
    return kind == "scrypt" and hmac.compare_digest(computed, expected)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


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


# -- users in the installation's settings --------------------------------------------------------


def add_user(
    root: Path,
    name: str,
    password: str | None,
    workspaces: list[str],
    govern: list[str] | None = None,
) -> str:
    """Add or replace a user; returns their new bearer token (shown once, stored hashed)."""
    if not name or any(character in name for character in ":\r\n"):
        raise AccessError("a user name must be non-empty, without ':' or line breaks")
    token = secrets.token_urlsafe(32)
    user = UserSettings(
        password_hash=hash_password(password) if password else None,
        token_hash=token_hash(token),
        workspaces=workspaces,
        govern=govern or [],
    )
    _update_users(root, lambda users: users | {name: user.model_dump()})
    return token


def remove_user(root: Path, name: str) -> None:
    def without(users: dict[str, Any]) -> dict[str, Any]:
        if name not in users:
            raise AccessError(f"no user {name!r}")
        return {other: user for other, user in users.items() if other != name}

    _update_users(root, without)


def _update_users(root: Path, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    stored = stored_settings(root)
    access = stored.setdefault("access", {})
    access["users"] = change(access.get("users", {}))
    write_stored_settings(root, stored)


# -- who is asking ---------------------------------------------------------------------------------


class Authenticator:
    """Tells the user a request comes from, reading the installation's settings anew when they
    change (a user added while the server runs can sign in at once)."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._lock = threading.Lock()
        self._stamp: float | None = None
        self._access = AccessSettings()
        self._verified: dict[str, tuple[str, float]] = {}  # hash of the header -> user, when
        self._throttle = _throttle_of(self._access)
        self._reload()

    @property
    def access(self) -> AccessSettings:
        self._reload()
        return self._access

    def _reload(self) -> None:
        path = self._root / SETTINGS_FILE
        stamp = path.stat().st_mtime_ns if path.exists() else None
        with self._lock:
            if stamp != self._stamp:
                access = load_settings(self._root).access
                self._access = access
                self._stamp = stamp
                self._verified.clear()
                throttle = _throttle_of(access)
                if (throttle.free, throttle.delay, throttle.cap) != (
                    self._throttle.free,
                    self._throttle.delay,
                    self._throttle.cap,
                ):  # the counts so far stay unless the limits change
                    self._throttle = throttle

    def checks_password(self, headers: Mapping[str, str]) -> bool:
        """Whether :meth:`user` would hash a password for these headers (slow: run it in a
        thread), rather than find them signed in already."""
        access = self.access
        if not access.configured:
            return False
        if access.proxy_user_header and headers.get(access.proxy_user_header.lower()):
            return False
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic" or not credentials:
            return False
        with self._lock:
            remembered = self._verified.get(token_hash(credentials.strip()))
        return not (remembered and time.monotonic() - remembered[1] < _VERIFIED_SECONDS)

    def user(self, headers: Mapping[str, str], client: str = "") -> User | None:
        """The user a request's headers prove, None when they prove nobody; ``client``: the
        address asking, whose wrong passwords are counted. Raises :class:`Throttled` for a
        password try that must wait."""
        access = self.access
        if not access.configured:
            return LOCAL_USER
        if access.proxy_user_header:
            named = headers.get(access.proxy_user_header.lower())
            if named:
                return self._named(access, named)
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and credentials:
            return self._bearer(access, credentials.strip())
        if scheme.lower() == "basic" and credentials:
            return self._basic(access, credentials.strip(), client)
        return None

    @staticmethod
    def _named(access: AccessSettings, name: str) -> User | None:
        grants = access.users.get(name)
        return User(name, grants) if grants is not None else None

    @staticmethod
    def _bearer(access: AccessSettings, token: str) -> User | None:
        hashed = token_hash(token)
        for name, grants in access.users.items():
            if grants.token_hash and hmac.compare_digest(grants.token_hash, hashed):
                return User(name, grants)
        return None

    def _basic(self, access: AccessSettings, credentials: str, client: str) -> User | None:
        key = token_hash(credentials)
        now = time.monotonic()
        with self._lock:
            remembered = self._verified.get(key)
        if remembered and now - remembered[1] < _VERIFIED_SECONDS:
            return self._named(access, remembered[0])
        try:
            name, _, password = base64.b64decode(credentials).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        throttle = self._throttle
        keys = [f"user:{name}", f"client:{client}"]
        known_good = (
            remembered is not None
            and remembered[0] == name
            and now - remembered[1] < _REMEMBERED_SECONDS
        )
        if (wait := throttle.wait(keys[1:] if known_good else keys)) > 0:
            raise Throttled(wait)
        grants = access.users.get(name)
        known = grants is not None and bool(grants.password_hash)
        # An unknown name is hashed too, against a hash no password matches: it answers in the
        # same time as a wrong password for a known name.
        hashed = grants.password_hash if grants is not None and grants.password_hash else None
        if not verify_password(password, hashed or _unmatchable_hash()) or not known:
            wait = throttle.failed(keys)
            if wait:
                logger.warning(
                    "sign-in: wrong password for %r from %s; tries wait %.0f s", name, client, wait
                )
            return None
        throttle.succeeded(keys)
        with self._lock:
            if self._access is access:  # not a password the settings changed while it was hashed
                self._verified[key] = (name, now)
        return User(name, grants)


def _throttle_of(access: AccessSettings) -> Throttle:
    return Throttle(
        access.free_sign_in_tries, access.sign_in_delay_seconds, access.sign_in_max_delay_seconds
    )


@functools.cache
def _unmatchable_hash() -> str:
    return hash_password(secrets.token_urlsafe(32))


Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class AccessMiddleware:
    """Every HTTP and WebSocket request is signed in, or refused with 401. Routes ask the
    authenticator again for the user (a cached lookup) to scope what they answer."""

    def __init__(self, app: Callable[..., Awaitable[None]], authenticator: Authenticator) -> None:
        self.app = app
        self.authenticator = authenticator
        # Password hashing, one at a time: guesses queue here, not on the event loop.
        self._hashing = ThreadPoolExecutor(1, thread_name_prefix="password-check")

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
        client = (scope.get("client") or ("",))[0] or ""
        try:
            if self.authenticator.checks_password(headers):
                user = await asyncio.get_running_loop().run_in_executor(
                    self._hashing, self.authenticator.user, headers, client
                )
            else:
                user = self.authenticator.user(headers, client)
        except Throttled as throttled:
            await _refuse(scope, send, retry_after=throttled.seconds)
            return
        if user is None:
            await _refuse(scope, send)
            return
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
