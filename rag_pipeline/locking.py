"""Inter-process locks: released when their holder lets go or dies.

- :class:`FileLock`: an OS file lock, one holder at a time, whoever it is (another process, or
  another object in this process); what the embedded vector store needs, since its engine damages
  a shard that another process opens at the same time (see ``store/edge.py``). Shared holders,
  if asked.
- A workspace's indexing locks live in a :class:`LockPlace`: files in its home
  (:class:`HomeLocks`, the embedded default: the processes of one host, or of hosts sharing a
  file system with working ``flock``) or, with the catalog on PostgreSQL, advisory locks in that
  database (:class:`DatabaseLocks`: held across machines, and let go when the holder's
  connection ends, its process or machine gone). :func:`lock_place` picks it from the settings.
- :func:`index_lock`: the workspace to oneself, for planning (repairs, finding changes) and for
  the CLI's in-process run, whoever starts it (CLI, sensor); re-entrant within a thread, so the
  CLI can hold it across planning and the Dagster run it then executes in-process (in the same
  thread), while two threads (a daemon's sensor and schedule) exclude each other.
- :func:`run_lock`: what a Dagster run holds while it runs: the index lock shared with the other
  runs of a plan (their documents are disjoint: one plan made them), and a lock of its own that
  tells whether its process still lives (:func:`run_lock_state`).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rag_pipeline.config import Settings

logger = logging.getLogger(__name__)

INDEX = "index"
_RUN = "run/"


class LockTimeout(Exception):
    pass


class Lock(Protocol):
    def acquire(
        self, timeout_seconds: float, *, waiting: str | None = None, shared: bool = False
    ) -> bool:
        """Take the lock within ``timeout_seconds``; False if another holder kept it.

        ``waiting`` is logged once when the lock is not free at first. A ``shared`` holder
        admits other shared holders, and excludes exclusive ones.
        """

    def describe_holder(self, text: str) -> None:
        """Record who holds the lock, and when (read back by :meth:`LockPlace.holder`)."""

    def release(self) -> None: ...


class LockPlace(Protocol):
    """Where a workspace's indexing locks live; hashable, so equal places are one place."""

    def lock(self, name: str) -> Lock: ...

    def is_locked(self, name: str) -> bool:
        """Whether some holder holds the lock ``name`` now."""

    def holder(self, name: str) -> tuple[str, float] | None:
        """What the lock's last holder recorded, and when (seconds since the epoch)."""

    def holders(self, prefix: str) -> list[str]:
        """The names, starting with ``prefix``, of the locks whose holders recorded themselves."""

    def forget(self, name: str) -> None:
        """Drop what the lock's holders recorded."""


def _retry(
    attempt: Callable[[], bool],
    timeout_seconds: float,
    waiting: str | None,
    interval_seconds: float = 0.05,
) -> bool:
    """Call ``attempt`` every ``interval_seconds`` until it succeeds or ``timeout_seconds`` have
    passed."""
    deadline = time.monotonic() + timeout_seconds
    announced = False
    while not attempt():
        if time.monotonic() >= deadline:
            return False
        if waiting and not announced:
            logger.warning(waiting)
            announced = True
        time.sleep(interval_seconds)
    return True


class FileLock:
    """An ``flock`` on ``path``, taken through a descriptor of its own.

    ``flock`` belongs to the open file, so two holders in one process exclude each other like
    two processes do, and the descriptor is not inherited across ``exec``.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._descriptor: int | None = None

    def acquire(
        self, timeout_seconds: float, *, waiting: str | None = None, shared: bool = False
    ) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB

        def attempt() -> bool:
            try:
                fcntl.flock(descriptor, mode)
            except BlockingIOError:
                return False
            return True

        if not _retry(attempt, timeout_seconds, waiting):
            os.close(descriptor)
            return False
        self._descriptor = descriptor
        return True

    def describe_holder(self, text: str) -> None:
        """Write ``text`` into the lock's file (its time says when)."""
        if self._descriptor is None:
            raise RuntimeError("describe_holder() without holding the lock")
        os.ftruncate(self._descriptor, 0)
        os.pwrite(self._descriptor, text.encode(), 0)

    def release(self) -> None:
        if self._descriptor is not None:
            fcntl.flock(self._descriptor, fcntl.LOCK_UN)
            os.close(self._descriptor)
            self._descriptor = None

    @property
    def held(self) -> bool:
        return self._descriptor is not None


@dataclass(frozen=True, slots=True)
class HomeLocks:
    """Lock files in the workspace's home: ``index.lock``, ``run-locks/<run id>.lock``."""

    home: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "home", self.home.resolve())

    def path(self, name: str) -> Path:
        if name.startswith(_RUN):
            return self.home / "run-locks" / f"{name.removeprefix(_RUN)}.lock"
        return self.home / f"{name}.lock"

    def lock(self, name: str) -> FileLock:
        return FileLock(self.path(name))

    def is_locked(self, name: str) -> bool:
        path = self.path(name)
        if not path.exists():
            return False
        probe = FileLock(path)
        if probe.acquire(0):
            probe.release()
            return False
        return True

    def holder(self, name: str) -> tuple[str, float] | None:
        path = self.path(name)
        try:
            return path.read_text(), path.stat().st_mtime
        except OSError:
            return None

    def holders(self, prefix: str) -> list[str]:
        folder = self.path(f"{prefix}-").parent
        return [f"{prefix}{path.stem}" for path in folder.glob("*.lock")] if folder.is_dir() else []

    def __str__(self) -> str:
        return str(self.path(INDEX))

    def forget(self, name: str) -> None:
        self.path(name).unlink(missing_ok=True)


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


def lock_place(settings: Settings) -> HomeLocks | DatabaseLocks:
    """The workspace's lock place: beside its catalog when that is on PostgreSQL (shared by
    machines), else its home."""
    if settings.catalog.url:
        return DatabaseLocks(settings.catalog.url, settings.collection_prefix)
    return HomeLocks(settings.home)


# (place, thread id) → (lock, depth)
_held: dict[tuple[Hashable, int], tuple[Lock, int]] = {}
_guard = threading.Lock()


@contextmanager
def index_lock(place: LockPlace, *, timeout_seconds: float = 3600.0) -> Iterator[None]:
    """Hold the workspace's indexing lock, alone: no run, and no other planner, meanwhile."""
    holder = (place, threading.get_ident())
    with _guard:
        lock, depth = _held.get(holder, (None, 0))
        if lock is not None:
            _held[holder] = (lock, depth + 1)
    if lock is None:
        lock = place.lock(INDEX)
        waiting = f"another indexing run is in progress ({place}); waiting for it"
        if not lock.acquire(timeout_seconds, waiting=waiting):
            raise LockTimeout(
                f"another indexing run holds {place} for more than {timeout_seconds:g} s"
            )
        with _guard:
            _held[holder] = (lock, 1)
    try:
        yield
    finally:
        with _guard:
            lock, depth = _held[holder]
            if depth > 1:
                _held[holder] = (lock, depth - 1)
            else:
                del _held[holder]
                lock.release()


_PROBE_SECONDS = 5.0


@contextmanager
def run_lock(
    place: LockPlace, run_id: str, *, alone: bool = False, timeout_seconds: float = 3600.0
) -> Iterator[None]:
    """Hold what a Dagster run holds while it runs: its own lock (first, so that a run waiting
    for a planner counts as alive), then the workspace's indexing lock, shared with the other
    runs of a plan (their documents are disjoint) or, ``alone``, held alone (a run no plan made,
    say from the Dagster UI, may name any document); unless this process holds that lock already
    (the CLI's in-process run, in the thread that planned it)."""
    own = place.lock(_RUN + run_id)
    if not own.acquire(_PROBE_SECONDS):  # a probe (is_locked) may hold it for an instant
        raise LockTimeout(f"run {run_id} is already running")
    shared = None
    try:
        own.describe_holder(_holder())
        with _guard:
            planning = (place, threading.get_ident()) in _held
        if not planning:
            shared = place.lock(INDEX)
            waiting = f"another plan or run holds {place}; waiting for it"
            if not shared.acquire(timeout_seconds, waiting=waiting, shared=not alone):
                raise LockTimeout(f"{place} was held for more than {timeout_seconds:g} s")
        yield
    finally:
        if shared is not None:
            shared.release()
        # Recorded again as it lets go: the time tells a planner that cannot see this process
        # (another container or machine) since when the run has been finishing. A full disk or
        # a lost connection must not keep the lock held.
        with suppress(Exception):
            own.describe_holder(_holder())
        own.release()


def _holder() -> str:
    """``<pid>@<machine>``: what a run lock records of its holder."""
    return f"{os.getpid()}@{_machine()}"


def _machine() -> str:
    """Where process ids mean the same: the host name and, on Linux, the pid namespace (each
    container has its own)."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return f"{socket.gethostname()}/{namespace}"


@dataclass(frozen=True, slots=True)
class RunLockState:
    holding: bool  # a process holds the run's lock now
    pid: int | None  # the process id the run recorded
    here: bool  # that process id is one of this machine's (same host and pid namespace)
    changed: float  # when the run took or let go of its lock (seconds since the epoch)


def run_lock_state(place: LockPlace, run_id: str) -> RunLockState | None:
    """None when the run never took its lock in ``place``; else what its lock records."""
    recorded = place.holder(_RUN + run_id)
    if recorded is None:
        return None
    holder, changed = recorded
    pid, _, machine = holder.partition("@")
    return RunLockState(
        holding=place.is_locked(_RUN + run_id),
        pid=int(pid) if pid.isdigit() else None,
        here=machine in ("", _machine()),  # none recorded: a lock file of an earlier version
        changed=changed,
    )


def forget_run_locks(place: LockPlace, keep: set[str]) -> None:
    """Forget the run locks of the runs not in ``keep`` that no process holds (and that are not
    being taken: those recorded in the last minute stay)."""
    recent = time.time() - 60.0
    for name in place.holders(_RUN):
        recorded = place.holder(name)
        if recorded is None:
            continue
        fresh = recorded[1] > recent
        if name.removeprefix(_RUN) not in keep and not fresh and not place.is_locked(name):
            place.forget(name)


def process_alive(pid: int) -> bool:
    """Whether a process of this id runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, another user's
        return True
    return True
