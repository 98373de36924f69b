"""The catalog: which version of each document is live in which collection, with its chunks.

It is the index's source of truth. An indexing run writes a document's new points to the vector
store first, then switches the document to its new version in one transaction here, then
deletes the old points; retrieval keeps only points of the versions named live here. So a query
never sees a half-written document or two versions of one, and whatever a crash interrupts, the
``store_repairs`` rows written before the store was touched tell the next run what to tidy up.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import astuple
from typing import Any

from rag_pipeline.batching import batched
from rag_pipeline.catalog.database import Executor, open_database
from rag_pipeline.catalog.records import (
    CHUNK_FIELDS,
    DOCUMENT_FIELDS,
    KNOWN_FILE_FIELDS,
    Availability,
    AvailabilityRecord,
    CollectionRecord,
    DocumentRecord,
    KnownFile,
    PassState,
    chunk_from_sql,
    chunk_to_sql,
    collection_from_sql,
)
from rag_pipeline.config import Settings
from rag_pipeline.faults import fault_point

logger = logging.getLogger(__name__)

_IN_BATCH = 500  # values in one IN (...) list
_INSERT_BATCH = 1000  # chunk rows per executemany

_DOCUMENT_COLUMNS = ", ".join(DOCUMENT_FIELDS)
_KNOWN_FILE_COLUMNS = ", ".join(KNOWN_FILE_FIELDS)
_CHUNK_COLUMNS = ", ".join(CHUNK_FIELDS)
_UPSERT_DOCUMENT = (
    f"INSERT INTO documents (collection, {_DOCUMENT_COLUMNS}) "
    f"VALUES (?, {', '.join('?' * len(DOCUMENT_FIELDS))}) "
    "ON CONFLICT (collection, doc_id) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in DOCUMENT_FIELDS if name != "doc_id")
)
_INSERT_CHUNK = (
    f"INSERT INTO chunks (collection, {_CHUNK_COLUMNS}) "
    f"VALUES (?, {', '.join('?' * len(CHUNK_FIELDS))})"
)


class Catalog:
    def __init__(self, settings: Settings) -> None:
        _forget_parquet_catalog(settings)
        self.database = open_database(settings.catalog.url, settings.home, settings.catalog_schema)

    def close(self) -> None:
        self.database.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- collections ---------------------------------------------------------------------------

    def collections(self) -> list[CollectionRecord]:
        rows = self.database.rows(
            "SELECT name, layout, models, state, created_at, live_at FROM collections "
            "ORDER BY created_at"
        )
        return [collection_from_sql(row) for row in rows]

    def live_collection(self) -> CollectionRecord | None:
        return next((c for c in self.collections() if c.state == "live"), None)

    def target_collection(
        self, name: str, layout: dict[str, Any], models: dict[str, dict[str, Any]]
    ) -> CollectionRecord:
        """The collection runs write to for these models, recorded if new.

        The first collection is live at once (there is nothing to keep answering meanwhile);
        any later one is built beside the live one. A collection being built for models the
        settings no longer name is retired.
        """
        current = next((c for c in self.collections() if c.name == name), None)
        if current is not None and current.state != "retired":
            return current  # the usual case: a read, which never waits for a writer
        with self.database.transaction() as executor:
            known = {
                row[0]: collection_from_sql(row)
                for row in executor.execute(
                    "SELECT name, layout, models, state, created_at, live_at FROM collections"
                )
            }
            current = known.get(name)
            if current is not None and current.state != "retired":
                return current
            executor.execute(
                "UPDATE collections SET state = 'retired' WHERE state = 'building' AND name <> ?",
                (name,),
            )
            live = any(c.state == "live" and c.name != name for c in known.values())
            now = time.time()
            state = "building" if live else "live"
            executor.execute(
                "INSERT INTO collections (name, layout, models, state, created_at, live_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET state = excluded.state",
                (
                    name,
                    json.dumps(layout, sort_keys=True),
                    json.dumps(models, sort_keys=True),
                    state,
                    now,
                    None if live else now,
                ),
            )
        return CollectionRecord(name, layout, models, state, now, None if live else now)

    def promote(self, name: str) -> None:
        """Make ``name`` the live collection; the previous live one is retired."""
        with self.database.transaction() as executor:
            executor.execute("UPDATE collections SET state = 'retired' WHERE state = 'live'")
            executor.execute(
                "UPDATE collections SET state = 'live', live_at = ? WHERE name = ?",
                (time.time(), name),
            )

    def forget_collection(self, name: str) -> None:
        """Delete a collection's rows (once the store has dropped its points)."""
        with self.database.transaction() as executor:
            for table in ("chunks", "documents", "store_repairs"):
                executor.execute(f"DELETE FROM {table} WHERE collection = ?", (name,))
            executor.execute("DELETE FROM collections WHERE name = ?", (name,))

    # -- reading -------------------------------------------------------------------------------

    def documents(
        self, collection: str, doc_ids: Iterable[str] | None = None
    ) -> dict[str, DocumentRecord]:
        """The collection's documents by id; with ``doc_ids``, only those (a run's own: a
        small change then reads a few rows, not the whole table)."""
        if doc_ids is None:
            rows = self.database.rows(
                f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE collection = ? ORDER BY doc_id",
                (collection,),
            )
            return {row[0]: DocumentRecord(*row) for row in rows}
        found: dict[str, DocumentRecord] = {}
        for batch in batched(sorted(set(doc_ids)), _IN_BATCH):
            rows = self.database.rows(
                f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE collection = ? "
                f"AND doc_id IN ({_marks(batch)})",
                (collection, *batch),
            )
            found.update((row[0], DocumentRecord(*row)) for row in rows)
        return dict(sorted(found.items()))

    def known_files(
        self,
        collection: str,
        doc_ids: Iterable[str] | None = None,
        *,
        under: Iterable[str] = (),
    ) -> dict[str, KnownFile]:
        """The collection's documents by id, read as far as a scan of their files needs; with
        ``doc_ids`` or ``under`` (prefixes of ids: a folder's documents), only those."""
        select = f"SELECT doc_id, {_KNOWN_FILE_COLUMNS} FROM documents WHERE collection = ?"
        if doc_ids is None and not under:
            rows = self.database.rows(f"{select} ORDER BY doc_id", (collection,))
            return {row[0]: KnownFile._make(row[1:]) for row in rows}
        rows = []
        for batch in batched(sorted(set(doc_ids or ())), _IN_BATCH):
            rows += self.database.rows(
                f"{select} AND doc_id IN ({_marks(batch)})", (collection, *batch)
            )
        for prefix in under:
            condition, parameters = self.database.starts_with("doc_id", prefix)
            rows += self.database.rows(f"{select} AND {condition}", (collection, *parameters))
        return dict(sorted((row[0], KnownFile._make(row[1:])) for row in rows))

    def document_counts(self, collection: str) -> dict[str, int]:
        """How many of the collection's documents are in each state, in one grouped read."""
        rows = self.database.rows(
            "SELECT state, COUNT(*) FROM documents WHERE collection = ? GROUP BY state",
            (collection,),
        )
        return dict(rows)

    def unsettled_documents(self, collection: str) -> dict[str, DocumentRecord]:
        """The collection's documents that are not indexed as they are: failed, or to be
        indexed again."""
        rows = self.database.rows(
            f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE collection = ? "
            "AND (state <> 'indexed' OR reindex_reason IS NOT NULL) ORDER BY doc_id",
            (collection,),
        )
        return {row[0]: DocumentRecord(*row) for row in rows}

    def live_documents(self) -> dict[str, DocumentRecord]:
        """The documents of the live collection (none before the first one is built)."""
        live = self.live_collection()
        return self.documents(live.name) if live else {}

    def document(self, collection: str, doc_id: str) -> DocumentRecord | None:
        rows = self.database.rows(
            f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE collection = ? AND doc_id = ?",
            (collection, doc_id),
        )
        return DocumentRecord(*rows[0]) if rows else None

    def indexed_chunks(self, collection: str) -> dict[str, tuple[str, int]]:
        """doc id → (its indexed version, its chunks), for every document that has one."""
        rows = self.database.rows(
            "SELECT doc_id, indexed_version, chunks FROM documents WHERE collection = ? "
            "AND indexed_version IS NOT NULL",
            (collection,),
        )
        return {doc_id: (version, chunks) for doc_id, version, chunks in rows}

    def live_versions(
        self, collection: str, doc_ids: Iterable[str] | None = None
    ) -> dict[str, str]:
        """doc id → the version whose points may be returned, for the documents that have one
        (of ``doc_ids``, else of the whole collection: two columns of every row)."""
        if doc_ids is None:
            return dict(
                self.database.rows(
                    "SELECT doc_id, indexed_version FROM documents WHERE collection = ? "
                    "AND indexed_version IS NOT NULL",
                    (collection,),
                )
            )
        live: dict[str, str] = {}
        for batch in batched(list(dict.fromkeys(doc_ids)), _IN_BATCH):
            rows = self.database.rows(
                "SELECT doc_id, indexed_version FROM documents WHERE collection = ? "
                f"AND indexed_version IS NOT NULL AND doc_id IN ({_marks(batch)})",
                (collection, *batch),
            )
            live.update(rows)
        return live

    def chunk_batches(
        self, collection: str, doc_id: str, size: int = _INSERT_BATCH
    ) -> Iterator[list[dict[str, Any]]]:
        """The chunks of a document's indexed version, in order, ``size`` at a time (each batch
        its own read: compare versions when the document may be committed meanwhile)."""
        after = -1
        while True:
            rows = self.database.rows(
                f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE collection = ? AND doc_id = ? "
                "AND chunk_index > ? ORDER BY chunk_index LIMIT ?",
                (collection, doc_id, after, size),
            )
            if not rows:
                return
            batch = [chunk_from_sql(row) for row in rows]
            yield batch
            after = batch[-1]["chunk_index"]

    def table_chunks(self, collection: str, doc_id: str) -> list[dict[str, Any]]:
        """The chunks of a document that hold a table, in order: their text, kinds and first
        page (what :func:`rag_pipeline.chunking.table_captions` reads)."""
        rows = self.database.rows(
            "SELECT text, kinds, page_start FROM chunks WHERE collection = ? AND doc_id = ? "
            "AND kinds LIKE ? ORDER BY chunk_index",
            (collection, doc_id, '%"table"%'),
        )
        return [
            {"text": text, "kinds": json.loads(kinds), "page_start": page}
            for text, kinds, page in rows
        ]

    def chunk_context(
        self, collection: str, chunk_id: str
    ) -> tuple[list[dict[str, Any]], int] | None:
        """A chunk with the ones before and after it, and its position among them."""
        found = self.database.rows(
            "SELECT doc_id, chunk_index FROM chunks WHERE collection = ? AND chunk_id = ?",
            (collection, chunk_id),
        )
        if not found:
            return None
        doc_id, index = found[0]
        rows = self.database.rows(
            f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE collection = ? AND doc_id = ? "
            "AND chunk_index BETWEEN ? AND ? ORDER BY chunk_index",
            (collection, doc_id, index - 1, index + 1),
        )
        window = [chunk_from_sql(row) for row in rows]
        return window, next(i for i, row in enumerate(window) if row["chunk_id"] == chunk_id)

    def page_chunks(self, collection: str, doc_id: str, page: int) -> list[dict[str, Any]]:
        """The chunks of a document that lie on ``page`` (wholly or in part)."""
        rows = self.database.rows(
            f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE collection = ? AND doc_id = ? "
            "AND page_start <= ? AND COALESCE(page_end, page_start) >= ? ORDER BY chunk_index",
            (collection, doc_id, page, page),
        )
        return [chunk_from_sql(row) for row in rows]

    def set_availability(
        self, doc_id: str, state: Availability, changed_by: str, text_hash: str = ""
    ) -> AvailabilityRecord:
        """Take a document (or the chunk whose text has ``text_hash``) out of search, or put it
        back; who did it and when are kept."""
        record = AvailabilityRecord(doc_id, text_hash, state, changed_by, time.time())
        with self.database.transaction() as executor:
            executor.execute(
                "INSERT INTO availability (doc_id, text_hash, state, changed_by, changed_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (doc_id, text_hash) DO UPDATE SET "
                "state = excluded.state, changed_by = excluded.changed_by, "
                "changed_at = excluded.changed_at",
                (doc_id, text_hash, state, changed_by, record.changed_at),
            )
        return record

    def forget_availability_if_deleted(self, doc_id: str) -> None:
        """Forget whether a document no collection holds any more was taken out of search."""
        with self.database.transaction() as executor:
            executor.execute(
                "DELETE FROM availability WHERE doc_id = ? "
                "AND NOT EXISTS (SELECT 1 FROM documents WHERE doc_id = ?)",
                (doc_id, doc_id),
            )

    def availability(self) -> list[AvailabilityRecord]:
        """Every document and chunk whose availability was ever set, by document."""
        rows = self.database.rows(
            "SELECT doc_id, text_hash, state, changed_by, changed_at FROM availability "
            "ORDER BY doc_id, text_hash"
        )
        return [AvailabilityRecord(*row) for row in rows]

    def offline(self, collection: str) -> tuple[list[str], list[str]]:
        """What search must leave out now: the offline documents, and the chunk ids of the
        offline chunks of the live versions."""
        documents = self.database.rows(
            "SELECT doc_id FROM availability WHERE text_hash = '' AND state <> 'active'"
        )
        # The few offline passages first, then their documents' chunks by key: a join let
        # SQLite read every chunk of the collection to probe the availability of each, at
        # every search.
        passages = set(
            self.database.rows(
                "SELECT doc_id, text_hash FROM availability "
                "WHERE text_hash <> '' AND state <> 'active'"
            )
        )
        chunks: list[str] = []
        for batch in batched(sorted({doc_id for doc_id, _ in passages}), _IN_BATCH):
            rows = self.database.rows(
                "SELECT chunk_id, doc_id, text_hash FROM chunks WHERE collection = ? "
                f"AND doc_id IN ({_marks(batch)})",
                (collection, *batch),
            )
            chunks += [chunk_id for chunk_id, *passage in rows if tuple(passage) in passages]
        return [row[0] for row in documents], chunks

    def live_offline(self) -> tuple[set[str], set[str]]:
        """:meth:`offline` for the live collection: (document ids, chunk ids); none before a
        live collection exists."""
        live = self.live_collection()
        if live is None:
            return set(), set()
        documents, chunks = self.offline(live.name)
        return set(documents), set(chunks)

    def expected_points(self, collection: str) -> int:
        """How many points the collection should hold: the indexed versions' chunks."""
        rows = self.database.rows(
            "SELECT COALESCE(SUM(chunks), 0) FROM documents "
            "WHERE collection = ? AND indexed_version IS NOT NULL",
            (collection,),
        )
        return int(rows[0][0])

    def change_stamp(self, collection: str) -> tuple[Any, ...]:
        """Changes whenever a document of the collection is committed, failed or deleted."""
        return tuple(
            self.database.rows(
                "SELECT COUNT(*), MAX(updated_at) FROM documents WHERE collection = ?",
                (collection,),
            )[0]
        )

    def pass_state(self, collection: str) -> PassState:
        """The state a pass that found nothing to do records (``manifest.QuietPass``): each
        part from an index, not the collection's rows. The last update is any collection's
        (one step down an index): a change elsewhere only costs the next pass a comparison."""
        count, last_update, next_retry_at, flagged = self.database.rows(
            "SELECT (SELECT COUNT(*) FROM documents WHERE collection = ?), "
            "(SELECT MAX(updated_at) FROM documents), "
            "(SELECT MIN(retry_at) FROM documents WHERE collection = ? AND state = 'failed'), "
            # The condition of the partial index documents_unsettled, for the planner to take it.
            "(SELECT COUNT(reindex_reason) FROM documents WHERE collection = ? "
            "AND (state <> 'indexed' OR reindex_reason IS NOT NULL))",
            (collection,) * 3,
        )[0]
        return PassState(collection, count, last_update, next_retry_at, flagged)

    def repairs(self, collection: str) -> list[str]:
        """Documents whose points in ``collection`` may hold versions other than the live one."""
        rows = self.database.rows(
            "SELECT doc_id FROM store_repairs WHERE collection = ? ORDER BY doc_id", (collection,)
        )
        return [doc_id for (doc_id,) in rows]

    # -- writing (each call one transaction) ---------------------------------------------------

    def mark_for_repair(self, collection: str, doc_ids: Iterable[str]) -> None:
        with self.database.transaction() as executor:
            executor.execute_many(
                "INSERT INTO store_repairs (collection, doc_id) VALUES (?, ?) "
                "ON CONFLICT (collection, doc_id) DO NOTHING",
                [(collection, doc_id) for doc_id in doc_ids],
            )

    def clear_repairs(self, collection: str, doc_ids: Sequence[str]) -> None:
        with self.database.transaction() as executor:
            for batch in batched(list(doc_ids), _IN_BATCH):
                executor.execute(
                    "DELETE FROM store_repairs WHERE collection = ? "
                    f"AND doc_id IN ({_marks(batch)})",
                    (collection, *batch),
                )

    def commit_document(
        self, collection: str, record: DocumentRecord, rows: Iterable[dict[str, Any]]
    ) -> None:
        """Make ``record`` (an indexed version) and its chunk ``rows`` live, in one transaction.

        Call only once the version's points are durably in the store.
        """
        with self.database.transaction() as executor:
            executor.execute(
                "DELETE FROM chunks WHERE collection = ? AND doc_id = ?",
                (collection, record.doc_id),
            )
            for batch in batched(rows, _INSERT_BATCH):
                executor.execute_many(
                    _INSERT_CHUNK, [(collection, *chunk_to_sql(row)) for row in batch]
                )
            fault_point("inside-catalog-commit")
            _upsert(executor, collection, record)

    def record_document(self, collection: str, record: DocumentRecord) -> None:
        """Update a document's row alone (a failure; its indexed version and chunks stay)."""
        with self.database.transaction() as executor:
            _upsert(executor, collection, record)

    def flag_for_reindex(self, collection: str, reasons: dict[str, str]) -> None:
        """Have the next run index these documents again whatever their version (and say why)."""
        with self.database.transaction() as executor:
            executor.execute_many(
                "UPDATE documents SET reindex_reason = ? WHERE collection = ? AND doc_id = ?",
                [(reason, collection, doc_id) for doc_id, reason in reasons.items()],
            )

    def delete_documents(self, doc_ids: Sequence[str]) -> dict[str, list[str]]:
        """Forget documents in every collection; returns collection → the documents it held,
        each marked for repair there (its points are to be deleted). Whether they were taken out
        of search is kept: a watched file that comes back is still out of it."""
        held: dict[str, list[str]] = {}
        with self.database.transaction() as executor:
            # Collection by collection: the tables' keys start with it, so each statement
            # looks its rows up instead of reading the whole table (every chunk's text).
            for (collection,) in executor.execute("SELECT name FROM collections"):
                for batch in batched(list(doc_ids), _IN_BATCH):
                    where = f"WHERE collection = ? AND doc_id IN ({_marks(batch)})"
                    found = executor.execute(
                        f"SELECT doc_id FROM documents {where}", (collection, *batch)
                    )
                    for (doc_id,) in found:
                        held.setdefault(collection, []).append(doc_id)
                    for table in ("documents", "chunks"):
                        executor.execute(f"DELETE FROM {table} {where}", (collection, *batch))
            executor.execute_many(
                "INSERT INTO store_repairs (collection, doc_id) VALUES (?, ?) "
                "ON CONFLICT (collection, doc_id) DO NOTHING",
                [(collection, doc_id) for collection, docs in held.items() for doc_id in docs],
            )
        return held

    # -- for the Parquet export ----------------------------------------------------------------

    def document_batches(
        self, collection: str, size: int = _INSERT_BATCH
    ) -> Iterator[list[DocumentRecord]]:
        """Every document of the collection by id, ``size`` at a time (each batch its own
        read, so memory stays flat however many documents there are)."""
        after = ""
        while rows := self.database.rows(
            f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE collection = ? AND doc_id > ? "
            "ORDER BY doc_id LIMIT ?",
            (collection, after, size),
        ):
            yield [DocumentRecord(*row) for row in rows]
            after = rows[-1][0]

    def chunk_rows(self, collection: str, size: int = _INSERT_BATCH) -> Iterator[dict[str, Any]]:
        """Every chunk of the collection, document by document, ``size`` rows a read."""
        for rows in self._chunk_batches(collection, _CHUNK_COLUMNS, size):
            yield from (chunk_from_sql(row) for row in rows)

    def chunk_keys(
        self, collection: str, size: int = _INSERT_BATCH
    ) -> Iterator[tuple[str, str, str]]:
        """(doc id, version, chunk id) of every chunk of the collection, document by document,
        ``size`` rows a read."""
        for rows in self._chunk_batches(collection, "doc_id, version, chunk_id", size):
            yield from rows

    def _chunk_batches(
        self, collection: str, columns: str, size: int
    ) -> Iterator[list[tuple[Any, ...]]]:
        """``columns`` of the collection's chunks in batches of ``size``, along the chunks'
        index (doc id, chunk index): a read per batch, not per document."""
        after: tuple[str, int] = ("", -1)
        while rows := self.database.rows(
            f"SELECT {columns}, doc_id, chunk_index FROM chunks WHERE collection = ? "
            "AND (doc_id, chunk_index) > (?, ?) ORDER BY doc_id, chunk_index LIMIT ?",
            (collection, *after, size),
        ):
            yield [row[:-2] for row in rows]
            after = rows[-1][-2:]


def _upsert(executor: Executor, collection: str, record: DocumentRecord) -> None:
    record.updated_at = time.time()
    executor.execute(_UPSERT_DOCUMENT, (collection, *astuple(record)))


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))


def _forget_parquet_catalog(settings: Settings) -> None:
    """A home indexed before the catalog moved to SQLite is indexed afresh: drop the old files."""
    old = settings.home / "catalog" / "documents.parquet"
    if not old.exists():
        return
    logger.warning("this home was indexed by an earlier version of rag-pipeline: indexing it anew")
    for folder in (
        settings.home / "catalog" / "chunks",
        settings.home / "qdrant" / settings.store.collection,
        settings.home / "serving" / "replica" / settings.store.collection,
    ):
        shutil.rmtree(folder, ignore_errors=True)
    old.unlink()
