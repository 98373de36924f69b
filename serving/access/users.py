"""The installation's users: who they are and what they may use, their passwords (salted scrypt)
and bearer tokens (SHA-256) as the settings store them, and adding or removing one."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_pipeline.config import UserSettings, stored_settings, write_stored_settings
from serving.access.permissions import LEAST_ROLE, Action, Role

_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


class AccessError(ValueError):
    """A user or binding that cannot be; the message says why."""


@dataclass(frozen=True, slots=True)
class User:
    name: str
    grants: UserSettings | None  # None: the local user of an installation without access set up

    def may_use(self, workspace: str) -> bool:
        return self.grants is None or self.grants.may_use(workspace)

    @property
    def is_admin(self) -> bool:
        """Granted every workspace (the local user is too): manages the workspaces."""
        return self.may_use("*")

    def role(self, workspace: str) -> Role | None:
        """The user's role in the workspace, by their grants for it (an admin's too: being one
        makes them no more than a reader in it); None: they may not use it."""
        if self.grants is None:  # the local user does everything
            return Role.GOVERNOR
        if not self.grants.may_use(workspace):
            return None
        if self.grants.may_govern(workspace):
            return Role.GOVERNOR
        return Role.CONTRIBUTOR if self.grants.may_contribute(workspace) else Role.READER

    def may(self, action: Action, workspace: str | None = None) -> bool:
        """Whether the user may do ``action`` in ``workspace`` (:data:`LEAST_ROLE`): managing
        workspaces takes an admin; the rest, a role in the workspace at least the least one
        (never ``ADMIN``: no role in a workspace)."""
        least = LEAST_ROLE[action]
        if least is Role.SIGNED_IN:
            return True
        if least is Role.ADMIN:
            return self.is_admin
        role = self.role(workspace) if workspace is not None else None
        return role is not None and role >= least


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


# -- users in the installation's settings --------------------------------------------------------


def add_user(
    root: Path,
    name: str,
    password: str | None,
    workspaces: list[str],
    govern: list[str] | None = None,
    contribute: list[str] | None = None,
) -> str:
    """Add or replace a user; returns their new bearer token (shown once, stored hashed)."""
    if not name or any(character in name for character in ":\r\n"):
        raise AccessError("a user name must be non-empty, without ':' or line breaks")
    token = secrets.token_urlsafe(32)
    user = UserSettings(
        password_hash=hash_password(password) if password else None,
        token_hash=token_hash(token),
        workspaces=workspaces,
        contribute=contribute or [],
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
