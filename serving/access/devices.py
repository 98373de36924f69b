"""Browsers that signed in before, known across restarts: a signed, expiring cookie.

A right password at the sign-in form also sets a device cookie naming the user, a random id of
the browser and its expiry, signed (HMAC-SHA256) with a key kept in the home
(``<home>/serving/device-key``, made on first use, readable by its owner alone). Its holder's
password tries for that name wait only for that device's own wrong ones, not for the name's or
the address's: a guesser, even right after a restart, cannot lock the owner out. The password is
checked all the same.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DEVICE_COOKIE = "rag_device"
DEVICE_DAYS = 90
KEY_BYTES = 32

logger = logging.getLogger("rag_pipeline.serving.access")


@dataclass(frozen=True, slots=True)
class Device:
    name: str  # the user it signed in
    id: str  # the browser's, random


class DeviceCookies:
    def __init__(self, key: bytes, clock: Callable[[], float] = time.time) -> None:
        if len(key) < KEY_BYTES:  # an empty key signs cookies anyone can forge
            raise ValueError(f"a device key has at least {KEY_BYTES} bytes, not {len(key)}")
        self._key, self._clock = key, clock

    @classmethod
    def of_home(cls, root: Path) -> DeviceCookies:
        """With the home's key, made now if it has none. A key is written whole to a file of
        its own and linked into place: a server starting beside another, or after a crash,
        never reads an empty or partial key (with which anyone could sign a cookie)."""
        path = root / "serving" / "device-key"
        key = path.read_bytes() if path.exists() else b""
        if len(key) < KEY_BYTES:
            if path.exists():  # an older server's write cut short: not a key
                logger.warning("%s holds no whole key: making a new one", path)
            _put_new_key(path, replacing=path.exists())
            key = path.read_bytes()
        return cls(key)

    def issue(self, name: str, days: float = DEVICE_DAYS) -> str:
        """A new device's cookie value for ``name``."""
        expires = int(self._clock() + days * 86_400)
        payload = f"{name}\n{secrets.token_urlsafe(12)}\n{expires}".encode()
        return f"{_b64(payload)}.{_b64(self._signature(payload))}"

    def device(self, value: str | None) -> Device | None:
        """The device a cookie value proves, None when it is forged, altered or expired."""
        if not value:
            return None
        encoded, _, signature = value.partition(".")
        try:
            payload = base64.urlsafe_b64decode(encoded + "==")
            given = base64.urlsafe_b64decode(signature + "==")
            name, device_id, expires = payload.decode().split("\n")
            if not hmac.compare_digest(given, self._signature(payload)):
                return None
            if int(expires) <= self._clock():
                return None
        except ValueError:  # not base64, not UTF-8, not three lines, not a number
            return None
        return Device(name, device_id)

    def _signature(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()


def _put_new_key(path: Path, *, replacing: bool) -> None:
    """A new random key at ``path``, written and synced under a name of its own first. A new
    key is linked in (the first of two servers starting at once wins, the other reads its
    key); one that is not whole is replaced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    written = path.with_name(f".{path.name}-{secrets.token_hex(8)}")
    descriptor = os.open(written, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(secrets.token_bytes(KEY_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
        if replacing:
            os.replace(written, path)
        else:  # another server of the home may have made it meanwhile: theirs stays
            with contextlib.suppress(FileExistsError):
                os.link(written, path)
    finally:
        written.unlink(missing_ok=True)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")
