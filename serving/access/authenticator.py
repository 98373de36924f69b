"""Who is asking: the user a request's headers prove (a trusted proxy's header, a bearer token,
a user name and password, or the session cookie the sign-in form set), from the installation's
settings read anew when they change."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import hmac
import logging
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from starlette.requests import cookie_parser

from rag_pipeline.config import SETTINGS_FILE, AccessSettings, load_settings
from serving.access.devices import DeviceCookies
from serving.access.sessions import SESSION_COOKIE, Sessions
from serving.access.throttle import Throttle, Throttled
from serving.access.users import LOCAL_USER, User, hash_password, token_hash, verify_password

_VERIFIED_SECONDS = 300.0  # a checked password is not hashed again on each request meanwhile
# A password checked right this recently is not held back by the waits of its user name or its
# client address; it is hashed again all the same.
_REMEMBERED_SECONDS = 86_400.0
_HASHING_NICENESS = 10


logger = logging.getLogger("rag_pipeline.serving.access")

_Checked = TypeVar("_Checked")


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
        self.sessions = Sessions()
        self.devices = DeviceCookies.of_home(root)
        # Password hashing, one at a time and at a low CPU priority: guesses queue here, not on
        # the event loop, and take only the CPU that signed-in users leave.
        self._hashing = ThreadPoolExecutor(
            1, thread_name_prefix="password-check", initializer=_lower_own_priority
        )
        self._reload()

    @property
    def access(self) -> AccessSettings:
        self._reload()
        return self._access

    @property
    def offers_sign_in(self) -> bool:
        """Whether browsers sign in with the form: some user has a password."""
        return any(grants.password_hash for grants in self.access.users.values())

    async def off_loop(self, check: Callable[..., _Checked], *arguments: object) -> _Checked:
        """``check(*arguments)`` (one that hashes a password) in the hashing thread."""
        return await asyncio.get_running_loop().run_in_executor(
            self._hashing, functools.partial(check, *arguments)
        )

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
        remembered = self._remembered(credentials.strip())
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
        token = _cookie(headers, SESSION_COOKIE)
        return self._session(access, token) if token else None

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

    def _session(self, access: AccessSettings, token: str) -> User | None:
        session = self.sessions.find(token)
        grants = access.users.get(session.name) if session else None
        if session is None or grants is None or grants.password_hash != session.password_hash:
            return None  # none, expired, or its user removed or given a new password since
        return User(session.name, grants)

    def password_user(
        self, name: str, password: str, client: str = "", device_cookie: str | None = None
    ) -> User | None:
        """The user this name and password sign in (the sign-in form's check: slow, run it
        :meth:`off_loop`), None when they sign in nobody. Raises :class:`Throttled` for a try
        that must wait. ``device_cookie``: the browser's (:mod:`~serving.access.devices`);
        one that signed this name in before waits only for its own wrong passwords."""
        credentials = base64.b64encode(f"{name}:{password}".encode()).decode()
        device = self.devices.device(device_cookie)
        known = f"device:{device.id}" if device is not None and device.name == name else None
        return self._password(self.access, credentials, name, password, client, known)

    def start_session(self, user: User) -> str:
        """A new session for a user just signed in by password: its token, for the cookie."""
        if user.grants is None or not user.grants.password_hash:
            raise ValueError(f"{user.name} signs in without a password: no session")
        return self.sessions.start(user.name, user.grants.password_hash, self.access.session_hours)

    def _basic(self, access: AccessSettings, credentials: str, client: str) -> User | None:
        remembered = self._remembered(credentials)
        if remembered and time.monotonic() - remembered[1] < _VERIFIED_SECONDS:
            return self._named(access, remembered[0])
        try:
            name, _, password = base64.b64decode(credentials).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return self._password(access, credentials, name, password, client)

    def _password(
        self,
        access: AccessSettings,
        credentials: str,
        name: str,
        password: str,
        client: str,
        known_device: str | None = None,
    ) -> User | None:
        """The password check, throttled, of HTTP Basic and the sign-in form alike;
        ``credentials``: the Basic form of the name and password, remembered once right;
        ``known_device``: the throttle's key of a browser that signed this name in before,
        whose tries are counted and held back by it alone."""
        now = time.monotonic()
        remembered = self._remembered(credentials)
        throttle = self._throttle
        keys = [known_device] if known_device else [f"user:{name}", f"client:{client}"]
        known_good = (
            remembered is not None
            and remembered[0] == name
            and now - remembered[1] < _REMEMBERED_SECONDS
        )
        # The exact name and password found right this recently wait for nothing: a guesser of
        # the name, or one behind the same address (NAT, a proxy), must not lock its owner out.
        if not known_good and (wait := throttle.wait(keys)) > 0:
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
        # The name's count (and the device's): the address's stays (see Throttle).
        throttle.succeeded([f"user:{name}", *([known_device] if known_device else [])])
        with self._lock:
            if self._access is access:  # not a password the settings changed while it was hashed
                self._verified[token_hash(credentials)] = (name, now)
        return User(name, grants)

    def _remembered(self, credentials: str) -> tuple[str, float] | None:
        """(the user, when) these HTTP Basic credentials were last found right, if they were."""
        with self._lock:
            return self._verified.get(token_hash(credentials))


def _cookie(headers: Mapping[str, str], name: str) -> str | None:
    return cookie_parser(headers.get("cookie", "")).get(name) or None


def _lower_own_priority() -> None:
    """Lowers the calling thread's CPU priority by ``_HASHING_NICENESS`` (Linux gives each
    thread its own nice value); where that is refused, the thread keeps its priority."""
    if sys.platform == "linux":
        thread = threading.get_native_id()
        lowered = min(os.getpriority(os.PRIO_PROCESS, thread) + _HASHING_NICENESS, 19)
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, thread, lowered)


def _throttle_of(access: AccessSettings) -> Throttle:
    return Throttle(
        access.free_sign_in_tries, access.sign_in_delay_seconds, access.sign_in_max_delay_seconds
    )


@functools.cache
def _unmatchable_hash() -> str:
    return hash_password(secrets.token_urlsafe(32))
