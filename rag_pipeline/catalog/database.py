"""The catalog's database: SQLite under the home folder by default, PostgreSQL when configured.

One schema for both, written in the SQL they share; statements use ``?`` placeholders, turned
into psycopg2's ``%s`` for PostgreSQL. SQLite runs in WAL mode, so queries, the chat page and
``status`` read while an indexing run writes, and see each transaction whole or not at all.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

SCHEMA_VERSION = "4"

_TABLES = (
    """CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS collections (
        name TEXT PRIMARY KEY,
        layout TEXT NOT NULL,
        models TEXT NOT NULL,
        state TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        live_at DOUBLE PRECISION
    )""",
    """CREATE TABLE IF NOT EXISTS documents (
        collection TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        source TEXT NOT NULL,
        relative_path TEXT NOT NULL,
        file_type TEXT NOT NULL,
        size BIGINT NOT NULL,
        mtime_ns BIGINT NOT NULL,
        sha256 TEXT NOT NULL,
        version TEXT NOT NULL,
        state TEXT NOT NULL,
        indexed_version TEXT,
        error TEXT,
        title TEXT,
        pages BIGINT,
        chunks BIGINT NOT NULL,
        tokens BIGINT NOT NULL,
        attempts BIGINT NOT NULL,
        retry_at DOUBLE PRECISION,
        reindex_reason TEXT,
        updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (collection, doc_id)
    )""",
    """CREATE TABLE IF NOT EXISTS chunks (
        collection TEXT NOT NULL,
        chunk_id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        version TEXT NOT NULL,
        chunk_index BIGINT NOT NULL,
        text TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        page_start BIGINT,
        page_end BIGINT,
        bboxes TEXT NOT NULL,
        section TEXT NOT NULL,
        token_count BIGINT NOT NULL,
        lang TEXT,
        kinds TEXT NOT NULL,
        modality TEXT NOT NULL,
        image_sha256 TEXT,
        image_file TEXT,
        phash TEXT,
        PRIMARY KEY (collection, chunk_id)
    )""",
    # A document's chunks in order; with their versions and ids in the index itself, `check`
    # and the page's replica read every chunk's keys without its row (text, boxes).
    """CREATE INDEX IF NOT EXISTS chunk_keys_of_document
        ON chunks (collection, doc_id, chunk_index, version, chunk_id)""",
    """DROP INDEX IF EXISTS chunks_of_document""",  # its first columns, before schema 3
    # Every pass sums the points a collection should hold: from this index alone, not the rows.
    """CREATE INDEX IF NOT EXISTS documents_indexed_chunks
        ON documents (collection, chunks) WHERE indexed_version IS NOT NULL""",
    # `status` counts documents by state and lists those not indexed as they are: from these
    # indexes, not every document's row (seconds at a million documents).
    """CREATE INDEX IF NOT EXISTS documents_by_state ON documents (collection, state)""",
    # Every pass asks when a document last changed (``Catalog.pass_state``). Not led by the
    # collection: the queries by collection would take it instead of the indexes made for them.
    """CREATE INDEX IF NOT EXISTS documents_by_time ON documents (updated_at)""",
    """CREATE INDEX IF NOT EXISTS documents_unsettled ON documents (collection, doc_id)
        WHERE state <> 'indexed' OR reindex_reason IS NOT NULL""",
    # Documents whose points in a collection may differ from what the catalog names live there
    # (a write under way, or interrupted): their other versions' points are deleted on repair.
    # Documents and chunks operators took out of search (archived, rejected) or put back;
    # text_hash is '' for a whole document.
    """CREATE TABLE IF NOT EXISTS availability (
        doc_id TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        state TEXT NOT NULL,
        changed_by TEXT NOT NULL,
        changed_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (doc_id, text_hash)
    )""",
    """CREATE TABLE IF NOT EXISTS store_repairs (
        collection TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        PRIMARY KEY (collection, doc_id)
    )""",
)


class Database(Protocol):
    """What the catalog needs of a database connection."""

    def rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows a query returns (outside any transaction: a consistent snapshot)."""

    @contextmanager
    def transaction(self) -> Iterator[Executor]:
        """A transaction: committed when the block ends, rolled back if it raises."""

    def close(self) -> None: ...

    def starts_with(self, column: str, prefix: str) -> tuple[str, tuple[Any, ...]]:
        """A condition that ``column`` starts with ``prefix`` (exact, case-sensitive), and its
        parameters."""


class Executor(Protocol):
    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...


def open_database(url: str | None, home: Path, schema: str | None = None) -> Database:
    """PostgreSQL when ``url`` names one (in ``schema``, created if need be, when given), else
    SQLite at ``<home>/catalog/catalog.sqlite``."""
    if url:
        return PostgresDatabase(url, schema)
    return SqliteDatabase(home / "catalog" / "catalog.sqlite")


class SqliteDatabase:
    """One connection shared by the threads of a process, one statement at a time."""

    META_EXISTS = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'"

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        # Autocommit: transactions are opened explicitly (BEGIN IMMEDIATE takes the write lock
        # at once, so two writers wait for each other rather than fail half-way).
        self._connection = sqlite3.connect(
            path, timeout=60, isolation_level=None, check_same_thread=False
        )
        self._connection.execute("PRAGMA journal_mode=WAL")
        # Durable against a killed process (what the fault suite proves); a power cut may lose
        # the last transactions, never corrupt the file.
        self._connection.execute("PRAGMA synchronous=NORMAL")
        _ensure_schema(self)

    def rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._connection.execute(sql, parameters).fetchall()

    @contextmanager
    def transaction(self) -> Iterator[Executor]:
        with self._lock:
            self._connection.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteExecutor(self._connection)
            except BaseException:
                self._connection.execute("ROLLBACK")
                raise
            self._connection.execute("COMMIT")

    def starts_with(self, column: str, prefix: str) -> tuple[str, tuple[Any, ...]]:
        # Text compares byte by byte here (BINARY): the documents under a prefix are a range of
        # the keys, which an index finds, where a function of the column reads every row.
        if prefix and ord(prefix[-1]) < _LAST_BEFORE_SURROGATES:
            after = prefix[:-1] + chr(ord(prefix[-1]) + 1)
            return f"{column} >= ? AND {column} < ?", (prefix, after)
        return _substring_equals(column, prefix)

    def close(self) -> None:
        with self._lock:
            self._connection.close()


class _SqliteExecutor:
    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._connection.execute(sql, parameters).fetchall()

    def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._connection.executemany(sql, rows)


class PostgresDatabase:
    META_EXISTS = (
        "SELECT count(*) FROM information_schema.tables "
        "WHERE table_name = 'meta' AND table_schema = current_schema()"
    )

    def __init__(self, url: str, schema: str | None = None) -> None:
        import psycopg2

        self._lock = threading.RLock()
        self._connection = psycopg2.connect(url)
        if schema is not None:
            with self._connection.cursor() as cursor:
                cursor.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                cursor.execute(f'SET search_path TO "{schema}"')
            self._connection.commit()
        _ensure_schema(self)

    def rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock, self._connection.cursor() as cursor:
            cursor.execute(_postgres(sql), parameters)
            found = cursor.fetchall()
            self._connection.rollback()  # end the read's snapshot
            return found

    @contextmanager
    def transaction(self) -> Iterator[Executor]:
        with self._lock, self._connection.cursor() as cursor:
            try:
                yield _PostgresExecutor(cursor)
            except BaseException:
                self._connection.rollback()
                raise
            self._connection.commit()

    def starts_with(self, column: str, prefix: str) -> tuple[str, tuple[Any, ...]]:
        # Not a range of keys: under a linguistic collation text does not sort by its bytes.
        return _substring_equals(column, prefix)

    def close(self) -> None:
        with self._lock:
            self._connection.close()


class _PostgresExecutor:
    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self._cursor.execute(_postgres(sql), parameters)
        return self._cursor.fetchall() if self._cursor.description else []

    def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        from psycopg2.extras import execute_batch

        execute_batch(self._cursor, _postgres(sql), rows, page_size=500)


_LAST_BEFORE_SURROGATES = 0xD7FF  # a character past which ``chr(n + 1)`` may not be encoded


def _substring_equals(column: str, prefix: str) -> tuple[str, tuple[Any, ...]]:
    """``starts_with`` read from each row: exact and case-sensitive on SQLite and PostgreSQL."""
    return f"substr({column}, 1, ?) = ?", (len(prefix), prefix)


def _postgres(sql: str) -> str:
    return sql.replace("?", "%s")


def _ensure_schema(database: SqliteDatabase | PostgresDatabase) -> None:
    """Create the tables unless this schema version is there (reads first, which never wait)."""
    has_meta = database.rows(database.META_EXISTS)[0][0]
    if has_meta and database.rows("SELECT value FROM meta WHERE key = 'schema'") == [
        (SCHEMA_VERSION,)
    ]:
        return
    with database.transaction() as executor:
        for statement in _TABLES:
            executor.execute(statement)
        executor.execute(
            "INSERT INTO meta (key, value) VALUES ('schema', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (SCHEMA_VERSION,),
        )


def drop_schema(url: str, schema: str) -> None:
    """Delete a PostgreSQL schema with every catalog table in it (a deleted workspace's)."""
    import psycopg2

    connection = psycopg2.connect(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        connection.commit()
    finally:
        connection.close()
