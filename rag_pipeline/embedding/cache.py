"""Vectors already computed, keyed by (model, text hash): equal text is embedded once per model.

This is what makes a modified document embed only its changed chunks, and a renamed or copied
file embed nothing. Where it lives (:func:`open_embedding_cache`): a SQLite file under the home
(lookups are by key, and several processes, CLI and Dagster runs, open it one after another), or,
with the catalog on PostgreSQL (``catalog.url``), a table beside the catalog's, which workers on
several machines share.
"""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_pipeline.config import Settings

_BATCH = 500
# Two workers may embed the same text at once: the first vector stays (they are equal).
_INSERT = (
    "INSERT INTO vectors (model, text_hash, vector) VALUES (?, ?, ?) "
    "ON CONFLICT (model, text_hash) DO NOTHING"
)


class EmbeddingCache(ABC):
    """The cache's reads and writes; where the rows are is the subclass's."""

    def get_many(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, bytes] = {}
        for start in range(0, len(wanted), _BATCH):
            batch = wanted[start : start + _BATCH]
            marks = ",".join("?" * len(batch))
            rows = self._select(
                f"SELECT text_hash, vector FROM vectors WHERE model = ? AND text_hash IN ({marks})",
                [model, *batch],
            )
            found.update((text_hash, bytes(vector)) for text_hash, vector in rows)
        return found

    def put_many(self, model: str, vectors: Mapping[str, bytes]) -> None:
        self._insert([(model, text_hash, vector) for text_hash, vector in vectors.items()])

    @abstractmethod
    def _select(self, sql: str, parameters: Sequence[Any]) -> list[tuple[Any, ...]]: ...

    @abstractmethod
    def _insert(self, rows: list[tuple[str, str, bytes]]) -> None: ...

    @abstractmethod
    def close(self) -> None: ...


class SqliteEmbeddingCache(EmbeddingCache):
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=60, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        # A rowid table: WITHOUT ROWID keeps rows in an index b-tree, whose cells hold about a
        # quarter page, so each 1.5 KB dense vector spilled into an overflow page of its own
        # (2.3 times the file for the same vectors, bench/README.md). A file made before keeps
        # its table, which the same statements read.
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors ("
            " model TEXT NOT NULL, text_hash TEXT NOT NULL, vector BLOB NOT NULL,"
            " PRIMARY KEY (model, text_hash))"
        )

    def _select(self, sql: str, parameters: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self._db.execute(sql, parameters).fetchall()

    def _insert(self, rows: list[tuple[str, str, bytes]]) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(_INSERT, rows)

    def close(self) -> None:
        self._db.close()


class PostgresEmbeddingCache(EmbeddingCache):
    """The ``vectors`` table in the catalog's database and schema (the workspace's)."""

    def __init__(self, url: str, schema: str | None) -> None:
        from rag_pipeline.catalog.database import PostgresDatabase

        self._database = PostgresDatabase(url, schema)
        with self._database.transaction() as executor:
            executor.execute(
                "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, text_hash TEXT NOT NULL,"
                " vector BYTEA NOT NULL, PRIMARY KEY (model, text_hash))"
            )

    def _select(self, sql: str, parameters: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self._database.rows(sql, parameters)

    def _insert(self, rows: list[tuple[str, str, bytes]]) -> None:
        with self._database.transaction() as executor:
            executor.execute_many(_INSERT, rows)

    def close(self) -> None:
        self._database.close()


def open_embedding_cache(settings: Settings) -> EmbeddingCache:
    """The workspace's cache: beside its catalog on PostgreSQL, else
    ``<home>/cache/embeddings.sqlite``."""
    if settings.catalog.url:
        return PostgresEmbeddingCache(settings.catalog.url, settings.catalog_schema)
    return SqliteEmbeddingCache(settings.home / "cache" / "embeddings.sqlite")
