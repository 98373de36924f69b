"""What the page remembers of a workspace, in ``<home>/serving/history.sqlite``: conversations
and query traces, each belonging to the user who made it (``owner``; ``local`` where nobody signs
in).

- conversations: each with its messages (question, answer, and the passages an answer cited,
  so a reopened conversation shows its evidence as it was);
- traces: one row per query, with the query, filters, every fused candidate with its dense,
  sparse and fused scores, rerank scores, the chosen passages and the time each stage took.

SQLite because the page writes one row at a time from several threads, and users can query it
(``sqlite3 data/serving/history.sqlite 'select * from traces'``).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serving.retrieval import Retrieval

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY, title TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL,
    owner TEXT NOT NULL DEFAULT 'local'
);
CREATE TABLE IF NOT EXISTS messages (
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    sources TEXT,
    PRIMARY KEY (conversation_id, position)
);
CREATE TABLE IF NOT EXISTS traces (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    query TEXT NOT NULL,
    filters TEXT NOT NULL,
    candidates TEXT NOT NULL,
    chosen TEXT NOT NULL,
    reranker TEXT,
    timings_ms TEXT NOT NULL,
    answer_backend TEXT,
    owner TEXT NOT NULL DEFAULT 'local'
);
"""
# Columns added since the first release, for history files that predate them.
_ADDED_COLUMNS = {"conversations": "owner", "traces": "owner"}


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    id: str
    title: str
    updated: float


@dataclass(frozen=True, slots=True)
class StoredMessage:
    role: str
    content: str
    sources: list[dict[str, Any]]  # the cited passages of an answer, as the page shows them


class History:
    def __init__(self, home: Path) -> None:
        self.path = home / "serving" / "history.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.path, timeout=30, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(_SCHEMA)
        for table, column in _ADDED_COLUMNS.items():
            columns = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if column not in columns:
                self._db.execute(
                    f"ALTER TABLE {table} ADD COLUMN {column} TEXT NOT NULL DEFAULT 'local'"
                )

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- conversations ---------------------------------------------------------------------

    def new_conversation(self, title: str, owner: str) -> str:
        conversation_id = uuid.uuid4().hex
        now = time.time()
        with self._transaction() as db:
            db.execute(
                "INSERT INTO conversations (id, title, created, updated, owner) "
                "VALUES (?, ?, ?, ?, ?)",
                (conversation_id, _title(title), now, now, owner),
            )
        return conversation_id

    def owns(self, conversation_id: str, owner: str) -> bool:
        with self._lock:
            found = self._db.execute(
                "SELECT 1 FROM conversations WHERE id = ? AND owner = ?", (conversation_id, owner)
            ).fetchone()
        return found is not None

    def add_message(
        self,
        conversation_id: str,
        role: str,
        content: str,
        sources: list[dict[str, Any]] | None = None,
    ) -> None:
        with self._transaction() as db:
            (position,) = db.execute(
                "SELECT COALESCE(MAX(position) + 1, 0) FROM messages WHERE conversation_id = ?",
                (conversation_id,),
            ).fetchone()
            db.execute(
                "INSERT INTO messages VALUES (?, ?, ?, ?, ?)",
                (
                    conversation_id,
                    position,
                    role,
                    content,
                    json.dumps(sources or [], ensure_ascii=False),
                ),
            )
            db.execute(
                "UPDATE conversations SET updated = ? WHERE id = ?", (time.time(), conversation_id)
            )

    def conversations(self, owner: str, limit: int = 100) -> list[ConversationSummary]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, title, updated FROM conversations WHERE owner = ? "
                "ORDER BY updated DESC LIMIT ?",
                (owner, limit),
            ).fetchall()
        return [ConversationSummary(*row) for row in rows]

    def conversation_count(self) -> int:
        """Every user's conversations, counted (what deleting the workspace deletes)."""
        with self._lock:
            (count,) = self._db.execute("SELECT COUNT(*) FROM conversations").fetchone()
        return int(count)

    def messages(self, conversation_id: str, owner: str) -> list[StoredMessage]:
        """The conversation's messages; none when ``owner`` does not own it."""
        with self._lock:
            rows = self._db.execute(
                "SELECT role, content, sources FROM messages JOIN conversations "
                "ON conversations.id = messages.conversation_id "
                "WHERE conversation_id = ? AND owner = ? ORDER BY position",
                (conversation_id, owner),
            ).fetchall()
        return [
            StoredMessage(role, content, json.loads(sources or "[]"))
            for role, content, sources in rows
        ]

    def delete_conversation(self, conversation_id: str, owner: str) -> None:
        with self._transaction() as db:
            db.execute(
                "DELETE FROM conversations WHERE id = ? AND owner = ?", (conversation_id, owner)
            )

    # -- traces ----------------------------------------------------------------------------

    def record_trace(
        self, retrieval: Retrieval, owner: str, answer_backend: str | None = None
    ) -> int:
        candidates = [
            {
                "point_id": candidate.point_id,
                "chunk_id": candidate.payload.get("chunk_id"),
                "dense_rank": candidate.dense_rank,
                "dense_score": candidate.dense_score,
                "sparse_rank": candidate.sparse_rank,
                "sparse_score": candidate.sparse_score,
                "image_rank": candidate.image_rank,
                "image_score": candidate.image_score,
                "multilingual_rank": candidate.multilingual_rank,
                "multilingual_score": candidate.multilingual_score,
                "fused_score": candidate.fused_score,
                "page_score": candidate.page_score,
                "rerank_score": candidate.rerank_score,
                "freshness_score": candidate.freshness_score,
            }
            for candidate in retrieval.candidates
        ]
        chosen = [passage.payload.get("chunk_id") for passage in retrieval.passages]
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO traces (at, query, filters, candidates, chosen, reranker, "
                "timings_ms, answer_backend, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    time.time(),
                    retrieval.query,
                    json.dumps(retrieval.query_filter.describe(), ensure_ascii=False),
                    json.dumps(candidates),
                    json.dumps(chosen, ensure_ascii=False),
                    retrieval.reranker,
                    json.dumps(retrieval.timings_ms),
                    answer_backend,
                    owner,
                ),
            )
            return int(cursor.lastrowid or 0)

    def traces(self, owner: str, limit: int = 20) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, at, query, filters, candidates, chosen, reranker, timings_ms, "
                "answer_backend FROM traces WHERE owner = ? ORDER BY id DESC LIMIT ?",
                (owner, limit),
            ).fetchall()
        keys = ("id", "at", "query", "filters", "candidates", "chosen", "reranker", "timings_ms")
        traces = []
        for row in rows:
            trace = dict(zip((*keys, "answer_backend"), row, strict=True))
            for key in ("filters", "candidates", "chosen", "timings_ms"):
                trace[key] = json.loads(trace[key])
            traces.append(trace)
        return traces

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _title(question: str) -> str:
    words = " ".join(question.split())
    return words if len(words) <= 60 else words[:57] + "…"
