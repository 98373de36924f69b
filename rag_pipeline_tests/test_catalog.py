"""The catalog on SQLite (the embedded default) and on a real PostgreSQL, with the same tests."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from rag_pipeline import ids
from rag_pipeline.catalog import Catalog, DocumentRecord, export
from rag_pipeline.catalog.export import export_catalog
from rag_pipeline.config import load_settings
from rag_pipeline.store import IndexPoint
from rag_pipeline.store.consistency import take_census
from rag_pipeline.store.edge import EdgeStore

COLLECTION = "rag_pipeline-test"


@pytest.fixture(params=["sqlite", "postgres"])
def catalog_url(request: pytest.FixtureRequest) -> str | None:
    return request.getfixturevalue("postgres_url") if request.param == "postgres" else None


@pytest.fixture
def catalog(home: Path, catalog_url: str | None) -> Iterator[Catalog]:
    opened = Catalog(load_settings(home, catalog={"url": catalog_url}))
    yield opened
    opened.close()


def _chunks(catalog: Catalog, collection: str, doc_id: str) -> list[dict[str, Any]]:
    return [row for batch in catalog.chunk_batches(collection, doc_id, size=1) for row in batch]


def _record(doc_id: str, version: str, chunks: int = 2, state: str = "indexed") -> DocumentRecord:
    return DocumentRecord(
        doc_id=doc_id,
        source="/docs",
        relative_path=doc_id,
        file_type="text",
        size=10,
        mtime_ns=1,
        sha256="abc",
        version=version,
        state=state,  # type: ignore[arg-type]
        indexed_version=version if state == "indexed" else None,
        error=None if state == "indexed" else "broken",
        chunks=chunks,
    )


def _chunk(doc_id: str, version: str, index: int, text: str = "hello") -> dict[str, Any]:
    return {
        "chunk_id": f"{doc_id}@{version}#{index}",
        "doc_id": doc_id,
        "version": version,
        "chunk_index": index,
        "text": text,
        "text_hash": f"h{index}",
        "page_start": 1,
        "page_end": 1,
        "bboxes": [{"page": 1, "x0": 1.0, "y0": 2.0, "x1": 3.0, "y1": 4.0}],
        "section": ["Intro"],
        "token_count": 1,
        "lang": "en",
        "kinds": ["paragraph"],
        "modality": "text",
        "image_sha256": None,
        "image_file": None,
        "phash": None,
    }


def test_a_commit_switches_a_document_and_its_chunks_to_the_new_version(
    catalog: Catalog,
) -> None:
    catalog.commit_document(COLLECTION, _record("a", "v1"), [_chunk("a", "v1", i) for i in (0, 1)])
    assert catalog.live_versions(COLLECTION, ["a", "b"]) == {"a": "v1"}
    catalog.commit_document(COLLECTION, _record("a", "v2", chunks=1), [_chunk("a", "v2", 0, "new")])
    assert catalog.live_versions(COLLECTION, ["a"]) == {"a": "v2"}
    assert [row["chunk_id"] for row in _chunks(catalog, COLLECTION, "a")] == ["a@v2#0"]
    assert _chunks(catalog, COLLECTION, "a")[0]["bboxes"][0]["x1"] == 3.0
    assert catalog.expected_points(COLLECTION) == 1


def test_a_failure_keeps_the_indexed_version_searchable(catalog: Catalog) -> None:
    catalog.commit_document(COLLECTION, _record("a", "v1"), [_chunk("a", "v1", i) for i in (0, 1)])
    failed = _record("a", "v2", state="failed")
    failed.indexed_version, failed.chunks = "v1", 2
    catalog.record_document(COLLECTION, failed)
    assert catalog.live_versions(COLLECTION, ["a"]) == {"a": "v1"}
    catalog.record_document(COLLECTION, _record("b", "v1", state="failed"))  # none searchable
    assert catalog.live_versions(COLLECTION) == {"a": "v1"}
    assert catalog.documents(COLLECTION)["a"].error == "broken"
    assert len(_chunks(catalog, COLLECTION, "a")) == 2


def test_a_process_killed_inside_a_commit_leaves_the_previous_version_whole(
    home: Path, catalog: Catalog, catalog_url: str | None, kill_at: Callable[..., dict[str, str]]
) -> None:
    catalog.commit_document(COLLECTION, _record("a", "v1"), [_chunk("a", "v1", i) for i in (0, 1)])
    code = (
        "from rag_pipeline.catalog import Catalog\n"
        "from rag_pipeline.config import load_settings\n"
        "from rag_pipeline_tests.test_catalog import COLLECTION, _chunk, _record\n"
        f"settings = load_settings({str(home)!r}, catalog={{'url': {catalog_url!r}}})\n"
        "Catalog(settings).commit_document(\n"
        "    COLLECTION, _record('a', 'v2', chunks=3), [_chunk('a', 'v2', i) for i in range(3)]\n"
        ")\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **kill_at("inside-catalog-commit")},
        timeout=120,
    )
    assert killed.returncode == -9  # SIGKILL, in the middle of the transaction
    assert catalog.live_versions(COLLECTION, ["a"]) == {"a": "v1"}
    assert [row["version"] for row in _chunks(catalog, COLLECTION, "a")] == ["v1", "v1"]


def test_deleting_forgets_a_document_in_every_collection_and_marks_its_points(
    catalog: Catalog,
) -> None:
    catalog.target_collection(COLLECTION, {}, {})
    catalog.target_collection("other", {}, {})
    catalog.commit_document(COLLECTION, _record("a", "v1"), [_chunk("a", "v1", 0)])
    catalog.commit_document("other", _record("a", "v9"), [_chunk("a", "v9", 0)])
    catalog.commit_document(COLLECTION, _record("b", "v1"), [_chunk("b", "v1", 0)])
    held = catalog.delete_documents(["a"])
    assert {name: sorted(docs) for name, docs in held.items()} == {
        COLLECTION: ["a"],
        "other": ["a"],
    }
    assert list(catalog.documents(COLLECTION)) == ["b"]
    assert _chunks(catalog, "other", "a") == []
    assert catalog.repairs(COLLECTION) == ["a"] and catalog.repairs("other") == ["a"]
    catalog.clear_repairs(COLLECTION, ["a"])
    assert catalog.repairs(COLLECTION) == []


@contextmanager
def _traced(catalog: Catalog) -> Iterator[list[str]]:
    """The SQL statements the block runs on the catalog's SQLite connection."""
    connection: sqlite3.Connection = catalog.database._connection  # type: ignore[attr-defined]
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    try:
        yield statements
    finally:
        connection.set_trace_callback(None)


def _plan(catalog: Catalog, statement: str) -> str:
    """SQLite's plan for ``statement``, its steps on one line."""
    connection: sqlite3.Connection = catalog.database._connection  # type: ignore[attr-defined]
    return " ".join(row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {statement}"))


def test_deleting_a_document_looks_its_rows_up_instead_of_reading_every_chunk(
    home: Path,
) -> None:
    """What keeps a deletion cheap in a catalog of millions of chunks: SQLite's own plan for
    each statement a deletion runs uses the tables' keys (a full scan of ``chunks`` reads every
    chunk's text)."""
    catalog = Catalog(load_settings(home))
    catalog.target_collection(COLLECTION, {}, {})
    for doc_id in ("a", "b"):
        catalog.commit_document(COLLECTION, _record(doc_id, "v1"), [_chunk(doc_id, "v1", 0)])
    with _traced(catalog) as statements:
        catalog.delete_documents(["a"])
    searched = [s for s in statements if s.lstrip().upper().startswith(("SELECT", "DELETE"))]
    plans = [_plan(catalog, statement) for statement in searched]
    assert any("chunks" in statement for statement in searched)
    assert [plan for plan in plans if "SCAN documents" in plan or "SCAN chunks" in plan] == []
    assert list(catalog.documents(COLLECTION)) == ["b"]
    catalog.close()


def test_what_search_leaves_out_is_read_by_key_not_from_every_chunk(home: Path) -> None:
    """Read at every search: SQLite's plans must follow the keys of the offline passages'
    documents (a join read every chunk of the collection, even with nothing offline)."""
    catalog = Catalog(load_settings(home))
    catalog.target_collection(COLLECTION, {}, {})
    for doc_id in ("a", "b", "c"):
        chunks = [_chunk(doc_id, "v1", i, text=f"{doc_id} passage {i}") for i in (0, 1)]
        catalog.commit_document(COLLECTION, _record(doc_id, "v1"), chunks)
    rejected = _chunks(catalog, COLLECTION, "b")[1]
    catalog.set_availability("b", "rejected", "admin", text_hash=rejected["text_hash"])
    catalog.set_availability("c", "archived", "admin")
    with _traced(catalog) as statements:
        assert catalog.offline(COLLECTION) == (["c"], [rejected["chunk_id"]])
    plans = [_plan(catalog, statement) for statement in statements if "chunks" in statement]
    # Not "chunk_keys_of_document (collection=?)": every chunk of the collection.
    assert plans and not [plan for plan in plans if "(collection=?)" in plan or "SCAN" in plan]
    catalog.close()


def test_status_counts_and_lists_the_unsettled_documents_from_indexes_not_every_row(
    home: Path,
) -> None:
    """What keeps `status` quick at a million documents: SQLite's plans for its two reads
    follow indexes (a scan of ``documents`` read every document's row)."""
    catalog = Catalog(load_settings(home))
    catalog.target_collection(COLLECTION, {}, {})
    for doc_id in ("a", "b"):
        catalog.commit_document(COLLECTION, _record(doc_id, "v1"), [_chunk(doc_id, "v1", 0)])
    with _traced(catalog) as statements:
        assert catalog.document_counts(COLLECTION) == {"indexed": 2}
        assert catalog.unsettled_documents(COLLECTION) == {}
    plans = [_plan(catalog, statement) for statement in statements]
    # the counts from an index alone; the unsettled from the index of those only (the key's
    # index, "(collection=?)", reads every document of the collection)
    counts, unsettled = plans
    assert "COVERING INDEX" in counts, counts
    assert "documents_unsettled" in unsettled, unsettled
    catalog.close()


def test_a_passs_state_and_the_points_expected_are_read_from_indexes_not_every_row(
    home: Path,
) -> None:
    """Read on every pass: SQLite's plans follow indexes, each the one made for its read (an
    index led by the collection took the others' reads once, a scan of every row)."""
    catalog = Catalog(load_settings(home))
    catalog.target_collection(COLLECTION, {}, {})
    for doc_id in ("a", "b"):
        catalog.commit_document(COLLECTION, _record(doc_id, "v1"), [_chunk(doc_id, "v1", 0)])
    with _traced(catalog) as statements:
        state = catalog.pass_state(COLLECTION)
        expected = catalog.expected_points(COLLECTION)
    assert (state.documents, state.next_retry_at, state.flagged) == (2, None, 0)
    assert expected == sum(record.chunks for record in catalog.documents(COLLECTION).values())
    state_plan, expected_plan = (_plan(catalog, statement) for statement in statements)
    assert "SCAN documents" not in state_plan, state_plan
    for index in ("documents_by_state", "documents_by_time", "documents_unsettled"):
        assert index in state_plan, state_plan
    assert "documents_indexed_chunks" in expected_plan, expected_plan
    catalog.close()


def test_every_chunks_keys_are_read_from_an_index_and_an_older_catalog_gains_it(
    home: Path,
) -> None:
    """What keeps `check` and the page's replica quick at millions of chunks: the keys of
    every chunk come from an index alone (each row holds the chunk's text and boxes); a catalog
    made before that index gains it, without the narrower one it replaces, when it opens."""
    catalog = Catalog(load_settings(home))
    catalog.target_collection(COLLECTION, {}, {})
    catalog.commit_document(COLLECTION, _record("a", "v1"), [_chunk("a", "v1", 0)])
    with _traced(catalog) as statements:
        assert [key[0] for key in catalog.chunk_keys(COLLECTION)] == ["a"]
    plan = _plan(catalog, statements[0])
    assert "COVERING INDEX" in plan, plan
    # as schema 2 left it
    connection: sqlite3.Connection = catalog.database._connection  # type: ignore[attr-defined]
    connection.execute("DROP INDEX chunk_keys_of_document")
    connection.execute(
        "CREATE INDEX chunks_of_document ON chunks (collection, doc_id, chunk_index)"
    )
    connection.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
    catalog.close()
    reopened = Catalog(load_settings(home))
    connection = reopened.database._connection  # type: ignore[attr-defined]
    indexes = {
        row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
    }
    assert "chunk_keys_of_document" in indexes and "chunks_of_document" not in indexes
    assert [key[0] for key in reopened.chunk_keys(COLLECTION)] == ["a"]
    reopened.close()


def test_a_run_reads_the_rows_of_its_own_documents_only(catalog: Catalog) -> None:
    for doc_id in ("a", "b", "c"):
        catalog.commit_document(COLLECTION, _record(doc_id, "v1"), [_chunk(doc_id, "v1", 0)])
    catalog.commit_document("other", _record("d", "v1"), [_chunk("d", "v1", 0)])
    named = catalog.documents(COLLECTION, ["c", "a", "d", "gone", "a"])
    assert list(named) == ["a", "c"] and named["c"].indexed_version == "v1"
    assert catalog.documents(COLLECTION, []) == {}
    assert list(catalog.documents(COLLECTION)) == ["a", "b", "c"]


def test_known_files_are_the_documents_rows_narrowed_to_what_a_scan_compares(
    catalog: Catalog,
) -> None:
    catalog.commit_document(COLLECTION, _record("b", "v1"), [_chunk("b", "v1", 0)])
    catalog.commit_document(COLLECTION, _record("a", "v2", state="failed"), [])
    catalog.commit_document("other", _record("c", "v1"), [_chunk("c", "v1", 0)])
    whole = catalog.documents(COLLECTION)
    known = catalog.known_files(COLLECTION)
    assert list(known) == ["a", "b"]
    for doc_id, row in known.items():
        assert row._asdict() == {name: getattr(whole[doc_id], name) for name in row._fields}
    assert known["a"].state == "failed" and known["b"].version == "v1"


def test_known_files_are_read_by_id_and_under_a_folder_exactly(catalog: Catalog) -> None:
    near = ("docs/Birds/x.md", "docs/birds.md", "docs/birds0.md")  # just beside the folder
    for doc_id in ("docs/a.md", "docs/birds/heron.md", "docs/birds/owl.md", *near):
        catalog.commit_document(COLLECTION, _record(doc_id, "v1"), [_chunk(doc_id, "v1", 0)])
    catalog.commit_document("other", _record("docs/birds/kite.md", "v1"), [])
    assert list(catalog.known_files(COLLECTION, ["docs/a.md", "docs/gone.md"])) == ["docs/a.md"]
    # A folder's prefix: case and LIKE's wildcards matter, as in file names.
    assert list(catalog.known_files(COLLECTION, under=["docs/birds/"])) == [
        "docs/birds/heron.md",
        "docs/birds/owl.md",
    ]
    assert catalog.known_files(COLLECTION, under=["docs/b_rds/", "docs/bird/"]) == {}
    both = catalog.known_files(
        COLLECTION, ["docs/a.md", "docs/birds/owl.md"], under=["docs/birds/"]
    )
    assert list(both) == ["docs/a.md", "docs/birds/heron.md", "docs/birds/owl.md"]


def test_a_folders_documents_are_read_along_the_key_not_from_every_row(home: Path) -> None:
    """What keeps a pass over changed folders quick at a million documents: SQLite's plan for
    the read of a folder's rows follows the documents' key (a function of the column read every
    row, a quarter of a second a folder)."""
    catalog = Catalog(load_settings(home))
    catalog.target_collection(COLLECTION, {}, {})
    for doc_id in ("docs/a.md", "docs/birds/owl.md"):
        catalog.commit_document(COLLECTION, _record(doc_id, "v1"), [_chunk(doc_id, "v1", 0)])
    with _traced(catalog) as statements:
        assert list(catalog.known_files(COLLECTION, under=["docs/birds/"])) == ["docs/birds/owl.md"]
    plans = [_plan(catalog, statement) for statement in statements if "documents" in statement]
    # Not "(collection=?)" alone: every document of the collection.
    assert plans and all("(collection=? AND doc_id>? AND doc_id<?)" in plan for plan in plans)
    catalog.close()


def test_chunk_keys_name_every_chunk_of_the_collection_document_by_document_in_batches(
    catalog: Catalog,
) -> None:
    catalog.commit_document(
        COLLECTION, _record("b", "v2"), [_chunk("b", "v2", 0), _chunk("b", "v2", 1)]
    )
    catalog.commit_document(COLLECTION, _record("a", "v1", chunks=1), [_chunk("a", "v1", 0)])
    catalog.commit_document("other", _record("c", "v1", chunks=1), [_chunk("c", "v1", 0)])
    assert list(catalog.chunk_keys(COLLECTION, size=2)) == [
        ("a", "v1", "a@v1#0"),
        ("b", "v2", "b@v2#0"),
        ("b", "v2", "b@v2#1"),
    ]


class _ReadsRecorded(EdgeStore):
    """The embedded store, remembering which points' payloads were asked for."""

    payloads_read: list[str]

    def owners_of(self, point_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        self.payloads_read = sorted(point_ids)
        return super().owners_of(self.payloads_read)


def _point(doc_id: str, version: str, index: int) -> IndexPoint:
    dense = np.random.default_rng(index).normal(size=8).astype(np.float32)
    return IndexPoint(
        point_id=ids.point_id(ids.chunk_id(doc_id, version, index)),
        dense=dense / np.linalg.norm(dense),
        sparse=(np.array([index]), np.array([1.0], dtype=np.float32)),
        payload={"doc_id": doc_id, "version": version, "modality": "text", "lang": "en"},
    )


def test_a_census_names_points_by_their_ids_and_reads_payloads_only_of_points_no_chunk_names(
    catalog: Catalog, tmp_path: Path
) -> None:
    catalog.commit_document(
        COLLECTION,
        _record("whole", "v1", 2),
        [_chunk("whole", "v1", 0), _chunk("whole", "v1", 1)],
    )
    catalog.commit_document(
        COLLECTION,
        _record("short", "v1", 2),
        [_chunk("short", "v1", 0), _chunk("short", "v1", 1)],
    )
    catalog.commit_document(COLLECTION, _record("moved", "v2", 1), [_chunk("moved", "v2", 0)])
    store = _ReadsRecorded(tmp_path / "edge")
    store.ensure_collection(8)
    stale = _point("moved", "v1", 0)
    store.upsert(
        [
            _point("whole", "v1", 0),
            _point("whole", "v1", 1),
            _point("short", "v1", 0),
            _point("moved", "v2", 0),
            stale,
        ]
    )
    try:
        census = take_census(catalog, store, COLLECTION)
    finally:
        store.close()
    assert census.missing() == {"short": "2 chunks but 1 points"}
    assert census.orphans() == {"moved": "points of version v1 but the catalog has v2"}
    assert census.stray_chunks == []
    assert store.payloads_read == [stale.point_id]


def test_the_export_reads_documents_and_chunks_in_batches_in_order(catalog: Catalog) -> None:
    for doc_id, chunks in (("a", 3), ("b", 1), ("c", 2)):
        catalog.commit_document(
            COLLECTION,
            _record(doc_id, "v1", chunks=chunks),
            [_chunk(doc_id, "v1", index) for index in range(chunks)],
        )
    catalog.commit_document("other", _record("z", "v1"), [_chunk("z", "v1", 0)])
    batches = list(catalog.document_batches(COLLECTION, size=2))
    assert [[record.doc_id for record in batch] for batch in batches] == [["a", "b"], ["c"]]
    assert [(row["doc_id"], row["chunk_index"]) for row in catalog.chunk_rows(COLLECTION, 2)] == [
        ("a", 0),
        ("a", 1),
        ("a", 2),
        ("b", 0),
        ("c", 0),
        ("c", 1),
    ]


def test_the_export_holds_a_batch_of_rows_at_a_time_however_many_documents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``export`` streams: the Python memory it peaks at is about the same for 3,000 documents
    as for 300, batches of 50 rows being read and written at a time."""
    monkeypatch.setattr(export, "_ROWS_PER_GROUP", 50)
    peaks = []
    for documents in (300, 3000):
        catalog = Catalog(load_settings(tmp_path / f"home-{documents}"))
        for number in range(documents):
            doc_id = f"doc-{number:04d}"
            chunk = _chunk(doc_id, "v1", 0)
            catalog.commit_document(COLLECTION, _record(doc_id, "v1", chunks=1), [chunk])
        export.export_catalog(catalog, COLLECTION, tmp_path / "warm-up")  # pyarrow's imports
        tracemalloc.start()
        export.export_catalog(catalog, COLLECTION, tmp_path / f"export-{documents}")
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        catalog.close()
    assert peaks[1] < 1.5 * peaks[0], peaks


def test_the_first_collection_is_live_and_a_later_one_is_built_beside_it(
    catalog: Catalog,
) -> None:
    models: dict[str, dict[str, Any]] = {"embedding": {"dense_model": "m"}}
    first = catalog.target_collection("c-1", {"dense_model": "m1"}, models)
    assert first.state == "live"
    second = catalog.target_collection("c-2", {"dense_model": "m2"}, models)
    assert second.state == "building" and catalog.live_collection().name == "c-1"  # type: ignore[union-attr]
    # The settings went back to the first models before the build ended: it is abandoned.
    assert catalog.target_collection("c-1", {}, models).state == "live"
    assert [c.state for c in catalog.collections()] == ["live", "building"]
    third = catalog.target_collection("c-3", {"dense_model": "m3"}, models)
    assert {c.name: c.state for c in catalog.collections()} == {
        "c-1": "live",
        "c-2": "retired",
        "c-3": "building",
    }
    catalog.promote(third.name)
    assert catalog.live_collection().name == "c-3"  # type: ignore[union-attr]
    assert {c.name: c.state for c in catalog.collections()}["c-1"] == "retired"


def test_the_export_is_queryable_with_duckdb(catalog: Catalog, tmp_path: Path) -> None:
    catalog.commit_document(
        COLLECTION, _record("a.txt", "v1", chunks=1), [_chunk("a.txt", "v1", 0)]
    )
    catalog.record_document(COLLECTION, _record("b.txt", "v1", chunks=0, state="failed"))
    documents, chunks = export_catalog(catalog, COLLECTION, tmp_path / "export")
    assert duckdb.sql(
        f"select state, count(*) from '{documents}' group by state order by state"
    ).fetchall() == [("failed", 1), ("indexed", 1)]
    assert duckdb.sql(f"select text, bboxes[1].x0, section from '{chunks}'").fetchall() == [
        ("hello", 1.0, ["Intro"])
    ]


def test_a_home_indexed_with_the_parquet_catalog_starts_afresh(home: Path) -> None:
    old = home / "catalog" / "documents.parquet"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"PAR1")
    (home / "qdrant" / "rag_pipeline").mkdir(parents=True)
    with Catalog(load_settings(home)) as catalog:
        assert catalog.collections() == []
    assert not old.exists() and not (home / "qdrant" / "rag_pipeline").exists()
