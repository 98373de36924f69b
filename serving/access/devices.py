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
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DEVICE_COOKIE = "rag_device"
DEVICE_DAYS = 90


@dataclass(frozen=True, slots=True)
class Device:
    name: str  # the user it signed in
    id: str  # the browser's, random


class DeviceCookies:
    def __init__(self, key: bytes, clock: Callable[[], float] = time.time) -> None:
        self._key, self._clock = key, clock

    @classmethod
    def of_home(cls, root: Path) -> DeviceCookies:
        """With the home's key, made now if it has none."""
        path = root / "serving" / "device-key"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another server of the home made it meanwhile
                pass
            else:
                with os.fdopen(descriptor, "wb") as handle:
                    handle.write(secrets.token_bytes(32))
        return cls(path.read_bytes())

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


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")
