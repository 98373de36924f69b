"""Who is asking, and which workspaces they may use.

Users are named in the installation's settings (``access.users``, written by ``rag-pipeline user
add``): a salted scrypt hash of their password, the SHA-256 of their bearer token, and the
workspaces granted to them. A request proves who it is by one of:

- ``Authorization: Bearer <token>``: the search API, agents, ``gradio_client``;
- ``Authorization: Basic …`` (user name and password): the browser asks once per session;
- the header a trusted reverse proxy sets (``access.proxy_user_header``), when configured.

One ASGI middleware checks every request, the page, Gradio's own routes and the API alike, so no
route can be forgotten. With nobody configured the server only binds to loopback
(``check_binding``), and whoever reaches it is the local user, who may use every workspace.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
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


class AccessError(ValueError):
    """A user or binding that cannot be; the message says why."""


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
                self._access = load_settings(self._root).access
                self._stamp = stamp
                self._verified.clear()

    def user(self, headers: Mapping[str, str]) -> User | None:
        """The user a request's headers prove, None when they prove nobody."""
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
            return self._basic(access, credentials.strip())
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

    def _basic(self, access: AccessSettings, credentials: str) -> User | None:
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
        grants = access.users.get(name)
        if grants is None or not grants.password_hash:
            return None
        if not verify_password(password, grants.password_hash):
            return None
        with self._lock:
            self._verified[key] = (name, now)
        return User(name, grants)


Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class AccessMiddleware:
    """Every HTTP and WebSocket request is signed in, or refused with 401. Routes ask the
    authenticator again for the user (a cached lookup) to scope what they answer."""

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
        if self.authenticator.user(headers) is None:
            await _refuse(scope, send)
            return
        await self.app(scope, receive, send)


async def _refuse(scope: dict[str, Any], send: Send) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = json.dumps({"detail": "sign in: a user name and password, or a bearer token"})
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", _REALM.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body.encode()})
