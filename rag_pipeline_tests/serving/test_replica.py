"""The page's copy of the embedded index: it answers while a run writes, and catches up after."""

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import pytest

from rag_pipeline import ids
from rag_pipeline.catalog import Catalog
from rag_pipeline.cli import main
from rag_pipeline.config import Settings, load_settings
from rag_pipeline.embedding import open_embedding_cache
from rag_pipeline.store import EmbeddedReplica, embedded_path, open_vector_store
from rag_pipeline.store.edge import EdgeStore
from rag_pipeline.store.points import VectorModels, points_from_cache
from rag_pipeline.store.schema import DocumentFacts
from rag_pipeline_tests.index_state import live_name
from rag_pipeline_tests.serving.conftest import write_corpus
from serving.retrieval import Retriever


def _found(retriever: Retriever, query: str) -> set[str]:
    return {passage.payload["doc_id"] for passage in retriever.retrieve(query).passages}


def test_the_replica_answers_during_an_indexing_run_and_catches_up_after_it(
    tmp_path: Path, index_process: Callable[[Path], subprocess.Popen[str]]
) -> None:
    home, settings = _indexed_corpus(tmp_path)
    catalog = Catalog(settings)
    replica = EmbeddedReplica(settings, catalog)
    try:
        assert replica.refresh().copied == 0  # it starts as a copy of the index's files
        retriever = Retriever(settings, replica)
        assert "docs/guide.md" in _found(retriever, "when do owls hunt")

        source = tmp_path / "docs"
        (source / "storks.md").write_text("# Storks\n\nStorks nest on rooftops.", encoding="utf-8")
        (source / "guide.md").unlink()
        run = index_process(home)
        answered, reports = 0, []
        while run.poll() is None:  # the run holds the index's own store meanwhile
            assert "docs/report.pdf" in _found(retriever, "hybrid search product codes")
            reports.append(replica.refresh())
            answered += 1
        output = run.stdout.read() if run.stdout else ""
        assert run.returncode == 0, output
        assert answered > 0 and "added 1" in output and "deleted 1" in output

        started = time.monotonic()
        reports.append(replica.refresh())
        assert time.monotonic() - started < 30
        assert sum(report.copied for report in reports) == 1
        assert sum(report.removed for report in reports) == 1
        assert "docs/storks.md" in _found(retriever, "where do storks nest")
        assert "docs/guide.md" not in _found(retriever, "when do owls hunt")
    finally:
        replica.close()
        catalog.close()
    # The index's own store was never opened by the page: a later run can always open it.
    store = open_vector_store(settings, live_name(home), wait_seconds=0)
    store.close()


def test_a_refresh_with_nothing_new_copies_nothing(tmp_path: Path) -> None:
    source = write_corpus(tmp_path / "docs")
    home = tmp_path / "home"
    main(["index", "--home", str(home), "--source", str(source)])
    settings = load_settings(home)
    with Catalog(settings) as catalog:
        replica = EmbeddedReplica(settings, catalog)
        try:
            replica.refresh()
            assert replica.refresh().copied == 0
        finally:
            replica.close()
        reopened = EmbeddedReplica(settings, catalog)  # what it holds survives a restart
        try:
            assert reopened.refresh().copied == 0
        finally:
            reopened.close()


def test_a_first_replica_copied_with_points_no_run_committed_keeps_only_the_committed_ones(
    tmp_path: Path,
) -> None:
    home, settings = _indexed_corpus(tmp_path)
    name = live_name(home)
    with Catalog(settings) as catalog:
        # A run killed after writing a new version's points, before the catalog's commit.
        record = catalog.documents(name)["docs/guide.md"]
        committed = [row for batch in catalog.chunk_batches(name, record.doc_id) for row in batch]
        # Ids that a scroll (in the order of point ids) reads before the committed points: a
        # replica that took the last version it read for a document's would keep this one.
        first = min(UUID(ids.point_id(row["chunk_id"])) for row in committed)
        suffix = next(
            f"-uncommitted-{n}"
            for n in range(10_000)
            if all(
                UUID(ids.point_id(f"{row['chunk_id']}-uncommitted-{n}")) < first
                for row in committed
            )
        )
        rows = [
            row | {"version": "uncommitted", "chunk_id": f"{row['chunk_id']}{suffix}"}
            for row in committed
        ]
        facts = DocumentFacts(
            doc_id=record.doc_id,
            file_path=str(record.file_path),
            file_type=record.file_type,
            title=record.title or "",
            version="uncommitted",
            sha256=record.sha256,
            mtime=0.0,
        )
        cache = open_embedding_cache(settings)
        uncommitted = points_from_cache(rows, facts, cache, VectorModels.of(settings))
        cache.close()
        assert uncommitted
        store = open_vector_store(settings, name, wait_seconds=0)
        store.upsert(uncommitted)
        store.close()

        replica = EmbeddedReplica(settings, catalog)
        try:
            assert replica.refresh().copied == 1  # the one document held at two versions
            held = {version for _, version in _replica_points(replica)}
            assert held == {r.indexed_version for r in catalog.documents(name).values()}
            assert "uncommitted" not in held
            retriever = Retriever(settings, replica)
            assert "docs/guide.md" in _found(retriever, "when do owls hunt")
        finally:
            replica.close()


def _replica_points(replica: EmbeddedReplica) -> list[tuple[str, str]]:
    assert replica._mirror is not None
    store = replica._mirror.store
    return list(store.owners_of(store.point_ids()).values())


def test_a_first_replica_is_written_point_by_point_while_a_run_holds_the_index(
    tmp_path: Path,
) -> None:
    home, settings = _indexed_corpus(tmp_path)
    running = open_vector_store(settings, live_name(home), wait_seconds=0)  # as a run holds it
    try:
        with Catalog(settings) as catalog:
            replica = EmbeddedReplica(settings, catalog)
            try:
                assert replica.refresh().copied == 3
                assert "docs/guide.md" in _found(Retriever(settings, replica), "when do owls hunt")
            finally:
                replica.close()
    finally:
        running.close()


def test_a_first_replica_takes_the_disk_the_index_takes_not_its_files_preallocated_size(
    tmp_path: Path,
) -> None:
    home, settings = _indexed_corpus(tmp_path)
    index = embedded_path(settings, live_name(home))
    with Catalog(settings) as catalog:
        replica = EmbeddedReplica(settings, catalog)
        try:
            assert replica.refresh().copied == 0
            assert replica._mirror is not None
            copied = replica._mirror.path
        finally:
            replica.close()
    assert _allocated(index) < _apparent(index)  # the engine's files are mostly holes
    assert _allocated(copied) <= 1.1 * _allocated(index)


def _allocated(folder: Path) -> int:
    return sum(path.stat().st_blocks * 512 for path in folder.rglob("*") if path.is_file())


def _apparent(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def test_a_replica_far_behind_the_index_becomes_a_copy_of_it_when_the_page_starts(
    tmp_path: Path,
) -> None:
    home, settings = _indexed_corpus(tmp_path)
    with Catalog(settings) as catalog:
        replica = EmbeddedReplica(settings, catalog)
        replica.refresh()
        replica.close()
        # A large import while the page is down: most of the index is new to the replica.
        for number in range(8):
            (tmp_path / "docs" / f"bird-{number}.md").write_text(
                f"# Bird {number}\n\nBird {number} sings at dawn by the lake.", encoding="utf-8"
            )
        assert main(["index", "--home", str(home)]) == 0
        # The copy's count is the catalog's: what it holds is known without reading a point.
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(EdgeStore, "point_ids", _not_read)
            reopened = EmbeddedReplica(settings, catalog)
        try:
            assert reopened.refresh().copied == 0  # copied as files, not document by document
            found = _found(Retriever(settings, reopened), "which bird sings at dawn")
            assert any(doc_id.startswith("docs/bird-") for doc_id in found)
        finally:
            reopened.close()


def _not_read(store: EdgeStore) -> set[str]:
    raise AssertionError("every point read")


def test_a_page_started_again_reads_what_its_replica_holds_from_its_last_clean_close(
    tmp_path: Path,
) -> None:
    home, settings = _indexed_corpus(tmp_path)
    with Catalog(settings) as catalog:
        replica = EmbeddedReplica(settings, catalog)
        replica.refresh()
        assert replica._mirror is not None
        replica_path = replica._mirror.path
        record = replica_path.with_name(f".{replica_path.name}.held.json")
        replica.close()
        saved = json.loads(record.read_text())
        assert set(saved["held"]) == {"docs/guide.md", "docs/report.pdf", "docs/rivers.txt"}
        # The record is what the next start goes by (here it says one document is stale).
        saved["held"]["docs/guide.md"] = "an older version"
        record.write_text(json.dumps(saved))
        reopened = EmbeddedReplica(settings, catalog)
        try:
            assert reopened.refresh().copied == 1
            assert not record.exists()  # read once: a page that dies leaves none behind
        finally:
            reopened.close()
        # Without a record (a page killed), what it holds is read back from its points.
        record.unlink()
        again = EmbeddedReplica(settings, catalog)
        try:
            assert again.refresh().copied == 0
            assert "docs/guide.md" in _found(Retriever(settings, again), "when do owls hunt")
        finally:
            again.close()
        # A record of a replica that is gone is not believed: its documents are copied again.
        shutil.rmtree(replica_path)
        assert record.exists()
        running = open_vector_store(settings, live_name(home), wait_seconds=0)  # no copy then
        try:
            emptied = EmbeddedReplica(settings, catalog)
            try:
                assert emptied.refresh().copied == 3
            finally:
                emptied.close()
        finally:
            running.close()


def _indexed_corpus(tmp_path: Path) -> tuple[Path, Settings]:
    """A home that has indexed the three-document corpus (its folder ``tmp_path/docs``)."""
    source = write_corpus(tmp_path / "docs")
    home = tmp_path / "home"
    assert main(["index", "--home", str(home), "--source", str(source)]) == 0
    return home, load_settings(home)
