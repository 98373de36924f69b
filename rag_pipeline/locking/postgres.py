"""Locks that are PostgreSQL's session-level advisory locks, their holders in a table."""

from __future__ import annotations

import hashlib
import time
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from rag_pipeline.locking.places import _retry

_HOLDERS_TABLE = "rag_pipeline_lock_holders"
# Run under a transaction-level advisory lock of its own: two first holders creating the table at
# once would otherwise collide in PostgreSQL's catalog.
_CREATE_HOLDERS = (
    f"CREATE TABLE IF NOT EXISTS {_HOLDERS_TABLE} (place TEXT NOT NULL, name TEXT NOT NULL, "
    "holder TEXT NOT NULL, changed DOUBLE PRECISION NOT NULL, PRIMARY KEY (place, name))"
)
_CREATION_KEY = int.from_bytes(hashlib.sha256(_HOLDERS_TABLE.encode()).digest()[:8], signed=True)
# A lock held over the network is let go when PostgreSQL notices the holder gone: a process that
# ends closes its connection at once; a machine that dies is found out by TCP keepalives.
_KEEPALIVES = (
    "SET tcp_keepalives_idle = 30",
    "SET tcp_keepalives_interval = 10",
    "SET tcp_keepalives_count = 3",
)
_prepared: set[str] = set()  # the databases whose holders' table this process has made sure of


@dataclass(frozen=True, slots=True)
class DatabaseLocks:
    """Session-level advisory locks in the PostgreSQL database at ``url``, one key per lock name
    within ``place`` (the workspace's collection prefix) and the connection's schema (the
    catalog's: installations may share a database in schemas of their own); holders record
    themselves in a table of that schema. A lock is as good as its connection: one PostgreSQL
    ends (a restart, a pooler in transaction mode, an idle-session timeout) lets go of it."""

    url: str
    place: str

    def key(self, cursor: Any, name: str) -> tuple[int, int]:
        """The lock's two keys, in the schema ``cursor``'s connection works in."""
        cursor.execute("SELECT current_schema()")
        (schema,) = cursor.fetchone()
        digest = hashlib.sha256(f"{schema}\0{self.place}\0{name}".encode()).digest()
        return int.from_bytes(digest[:4], signed=True), int.from_bytes(digest[4:8], signed=True)

    def connect(self) -> Any:
        """A connection of its own (autocommit), the holders' table made if need be."""
        import psycopg2

        connection = psycopg2.connect(self.url)
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute("; ".join(_KEEPALIVES))
                if self.url not in _prepared:
                    cursor.execute("BEGIN")
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATION_KEY,))
                    cursor.execute(_CREATE_HOLDERS)
                    cursor.execute("COMMIT")
                    _prepared.add(self.url)
        except BaseException:
            connection.close()
            raise
        return connection

    def _rows(
        self, sql: str, parameters: tuple[Any, ...], *, name: str | None = None
    ) -> list[tuple[Any, ...]]:
        """The rows of ``sql``; with ``name``, the lock's keys come first in its parameters."""
        with closing(self.connect()) as connection, connection.cursor() as cursor:
            keys = self.key(cursor, name) if name is not None else ()
            cursor.execute(sql, (*keys, *parameters))
            return cursor.fetchall() if cursor.description else []

    def lock(self, name: str) -> AdvisoryLock:
        return AdvisoryLock(self, name)

    def is_locked(self, name: str) -> bool:
        # pg_locks shows a two-key lock's keys as unsigned oids.
        return bool(
            self._rows(
                "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND classid::bigint = (%s::bigint & 4294967295) "
                "AND objid::bigint = (%s::bigint & 4294967295)",
                (),
                name=name,
            )
        )

    def holder(self, name: str) -> tuple[str, float] | None:
        rows = self._rows(
            f"SELECT holder, changed FROM {_HOLDERS_TABLE} WHERE place = %s AND name = %s",
            (self.place, name),
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def holders(self, prefix: str) -> list[str]:
        rows = self._rows(
            f"SELECT name FROM {_HOLDERS_TABLE} WHERE place = %s AND starts_with(name, %s)",
            (self.place, prefix),
        )
        return [name for (name,) in rows]

    def forget(self, name: str) -> None:
        self._rows(
            f"DELETE FROM {_HOLDERS_TABLE} WHERE place = %s AND name = %s", (self.place, name)
        )

    def __str__(self) -> str:  # never the URL: it may hold a password
        return f"PostgreSQL's advisory locks of {self.place}"


class AdvisoryLock:
    """A session-level advisory lock, held by a connection of its own."""

    def __init__(self, place: DatabaseLocks, name: str) -> None:
        self.place = place
        self.name = name
        self._connection: Any = None

    def acquire(
        self, timeout_seconds: float, *, waiting: str | None = None, shared: bool = False
    ) -> bool:
        connection = self.place.connect()
        function = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
        try:
            with connection.cursor() as cursor:
                keys = self.place.key(cursor, self.name)

            def attempt() -> bool:
                with connection.cursor() as cursor:
                    cursor.execute(f"SELECT {function}(%s, %s)", keys)
                    return bool(cursor.fetchone()[0])

            # Not as often as a file lock: each try is a round trip to the database.
            taken = _retry(attempt, timeout_seconds, waiting, interval_seconds=0.25)
        except BaseException:
            connection.close()
            raise
        if not taken:
            connection.close()
            return False
        self._connection = connection
        return True

    def describe_holder(self, text: str) -> None:
        if self._connection is None:
            raise RuntimeError("describe_holder() without holding the lock")
        with self._connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {_HOLDERS_TABLE} (place, name, holder, changed) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (place, name) DO UPDATE "
                "SET holder = excluded.holder, changed = excluded.changed",
                (self.place.place, self.name, text, time.time()),
            )

    def release(self) -> None:
        if self._connection is not None:
            self._connection.close()  # a session's advisory locks end with it
            self._connection = None
