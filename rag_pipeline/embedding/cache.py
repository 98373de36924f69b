"""Vectors already computed, keyed by (model, text hash): equal text is embedded once per model.

This is what makes a modified document embed only its changed chunks, and a renamed or copied
file embed nothing. SQLite, because lookups are by key and several processes (CLI, Dagster runs)
may open it one after another.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

_BATCH = 500


class EmbeddingCache:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=60, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors ("
            " model TEXT NOT NULL, text_hash TEXT NOT NULL, vector BLOB NOT NULL,"
            " PRIMARY KEY (model, text_hash)) WITHOUT ROWID"
        )

    def get_many(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, bytes] = {}
        for start in range(0, len(wanted), _BATCH):
            batch = wanted[start : start + _BATCH]
            marks = ",".join("?" * len(batch))
            rows = self._db.execute(
                f"SELECT text_hash, vector FROM vectors WHERE model = ? AND text_hash IN ({marks})",
                [model, *batch],
            )
            found.update(rows)
        return found

    def put_many(self, model: str, vectors: Mapping[str, bytes]) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors (model, text_hash, vector) VALUES (?, ?, ?)",
                [(model, text_hash, vector) for text_hash, vector in vectors.items()],
            )

    def close(self) -> None:
        self._db.close()
