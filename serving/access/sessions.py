"""Browser sessions opened by the sign-in form: a random token in the browser's cookie, only its
hash kept here, in the server's memory (a restart signs everyone out)."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from serving.access.users import token_hash

SESSION_COOKIE = "rag_session"


@dataclass(frozen=True, slots=True)
class Session:
    name: str  # the user signed in
    password_hash: str  # the password it was opened with: a changed password ends it
    expires: float  # on the clock of :class:`Sessions`


class Sessions:
    """The open sessions, by the SHA-256 of their token; an expired one is forgotten when next
    asked for, or when another opens."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._open: dict[str, Session] = {}

    def start(self, name: str, password_hash: str, hours: float) -> str:
        """A new session's token (32 random bytes), for the browser's cookie alone."""
        token = secrets.token_urlsafe(32)
        now = self._clock()
        with self._lock:
            self._open = {key: s for key, s in self._open.items() if s.expires > now}
            self._open[token_hash(token)] = Session(name, password_hash, now + hours * 3600)
        return token

    def find(self, token: str) -> Session | None:
        """The session of this token, None when there is none or it has expired."""
        key = token_hash(token)
        with self._lock:
            session = self._open.get(key)
            if session is not None and session.expires <= self._clock():
                del self._open[key]
                return None
        return session

    def end(self, token: str) -> None:
        with self._lock:
            self._open.pop(token_hash(token), None)
