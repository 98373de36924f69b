"""The pipeline end to end, as a user runs it: the CLI, a real Dagster instance, the embedded
Qdrant engine, and files written by the tests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetCheckKey, AssetKey, AssetRecordsFilter, DagsterRunStatus

from rag_pipeline import manifest, walk
from rag_pipeline.catalog import Catalog
from rag_pipeline.cli import main
from rag_pipeline.config import load_settings
from rag_pipeline.defs.instance import get_instance
from rag_pipeline.defs.partitions import DOCUMENTS
from rag_pipeline.ids import DEFAULT_WORKSPACE, partition_key
from rag_pipeline.indexing import checks
from rag_pipeline.indexing.checks import run_checks
from rag_pipeline.indexing.direct import unreported_runs
from rag_pipeline.indexing.planning import find_work
from rag_pipeline.indexing.run import Indexer
from rag_pipeline.manifest import ManifestDiff, find_changes
from rag_pipeline.orchestration.incremental import index_once
from rag_pipeline.store import passed_verification_record
from rag_pipeline_tests.conftest import Cli, IndexedPlaces, dagster_view
from rag_pipeline_tests.documents import (
    docx_file,
    encrypted_pdf,
    two_column_pdf,
    zero_page_pdf,
)
from rag_pipeline_tests.index_state import (
    inconsistencies,
    live_chunks,
    live_records,
    point_count,
)

GUIDE = """# Field guide

## Herons

Herons stand still in shallow water and strike fish with their long bills.

## Kingfishers

Kingfishers dive from a perch and carry the fish back to beat it against a branch.

## Owls

Owls hunt at night; their soft feathers make their flight almost silent.
"""
CHINESE = (
    "长江是中国最长的河流，全长约六千三百公里。三峡大坝位于湖北省宜昌市，是世界上最大的水电站。"
)


def _write_corpus(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    two_column_pdf(folder / "report.pdf")
    (folder / "guide.md").write_text(GUIDE, encoding="utf-8")
    (folder / "rivers.txt").write_bytes(CHINESE.encode("gb18030"))
    (folder / "prices.csv").write_text("item,price\napple,1.20\npear,0.90\n", encoding="utf-8")
    docx_file(
        folder / "policy.docx",
        {"Vacation policy": ["Employees receive twenty days of paid leave."]},
    )
    return folder


@pytest.fixture
def corpus(source: Path) -> Path:
    return _write_corpus(source)


def _index_corpus(root: Path) -> None:
    corpus = _write_corpus(root / "docs")
    assert main(["index", "--home", str(root / "home"), "--source", str(corpus)]) == 0


@pytest.fixture
def indexed(indexed_places: IndexedPlaces) -> tuple[Path, Path]:
    """A fresh copy of the corpus indexed by ``rag-pipeline index``: (home, corpus)."""
    place = indexed_places.fresh("corpus", _index_corpus)
    return place / "home", place / "docs"


def _status(cli: Cli, home: Path) -> dict[str, dict[str, Any]]:
    return {row["doc_id"]: row for row in cli("status", "--home", home, "--json").json()}


def _query(cli: Cli, home: Path, text: str, k: int = 3) -> list[dict[str, Any]]:
    result = cli("query", text, "--home", home, "--top-k", k, "--json")
    assert result.code == 0, result.err
    return result.json()


def _metadata(home: Path, asset: str, doc_id: str) -> list[dict[str, Any]]:
    """Metadata of an asset's materializations for one document, newest first."""
    with dagster_view(home) as instance:
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[doc_id]), limit=100
        ).records
        return [
            {key: value.value for key, value in record.asset_materialization.metadata.items()}
            for record in records
        ]


def _run_count(home: Path) -> int:
    """Runs so far: Dagster's and those without Dagster (not reported yet)."""
    settings = load_settings(home)
    with get_instance(settings) as instance:
        return len(instance.get_runs()) + len(list(unreported_runs(settings)))


def test_first_index_makes_every_document_searchable_with_citations(
    cli: Cli, home: Path, corpus: Path
) -> None:
    result = cli("index", "--home", home, "--source", corpus)
    assert result.code == 0, result.err
    assert "added 5, changed 0, unchanged 0, deleted 0, failed 0" in result.out
    status = _status(cli, home)
    assert {row["state"] for row in status.values()} == {"indexed"}
    hit = _query(cli, home, "dense and sparse keyword vectors find rare product codes")[0]
    assert hit["doc_id"] == "docs/report.pdf"
    assert hit["page"] in (1, 2, 3) and len(hit["bbox"]) == 4
    assert hit["section"].startswith("Section") and hit["modality"] == "text"
    assert {"chunk_id", "file_path", "text", "score"} <= hit.keys()
    # What the Dagster UI shows: one partition per document, per-document metadata, checks.
    with dagster_view(home) as instance:
        assert sorted(instance.get_dynamic_partitions(DOCUMENTS)) == sorted(status)
        checks = instance.event_log_storage.get_asset_check_execution_history(
            __import__("dagster").AssetCheckKey(AssetKey("qdrant_points"), "every_chunk_has_point"),
            limit=1,
        )
        assert checks[0].evaluation.passed  # type: ignore[union-attr]
    parsed = _metadata(home, "parsed_pages", "docs/report.pdf")[0]
    assert parsed["pages"] == 3 and parsed["batch_documents"] == 5


def test_an_unchanged_rerun_starts_no_run_and_embeds_nothing(
    cli: Cli, indexed: tuple[Path, Path]
) -> None:
    home, _ = indexed
    runs = _run_count(home)
    result = cli("index", "--home", home)  # the folder is remembered
    assert "added 0, changed 0, unchanged 5, deleted 0, failed 0" in result.out
    assert _run_count(home) == runs


def test_a_modified_file_reindexes_only_itself_and_embeds_only_its_changed_chunks(
    cli: Cli,
    indexed: tuple[Path, Path],
) -> None:
    home, corpus = indexed
    # Small chunks so that each section of the guide is a chunk of its own.
    os.environ["RAG_PIPELINE_CHUNKING__MAX_TOKENS"] = "32"
    try:
        cli("index", "--home", home)
        before = {doc: len(_metadata(home, "parsed_pages", doc)) for doc in _status(cli, home)}
        guide = corpus / "guide.md"
        guide.write_text(
            GUIDE.replace("Owls hunt at night", "Owls hunt mostly at night"), encoding="utf-8"
        )
        result = cli("index", "--home", home)
    finally:
        del os.environ["RAG_PIPELINE_CHUNKING__MAX_TOKENS"]
    assert "added 0, changed 1, unchanged 4" in result.out
    after = {doc: len(_metadata(home, "parsed_pages", doc)) for doc in before}
    assert after["docs/guide.md"] == before["docs/guide.md"] + 1
    assert all(after[doc] == before[doc] for doc in before if doc != "docs/guide.md")
    dense = _metadata(home, "dense_embeddings", "docs/guide.md")[0]
    assert dense["embedded"] == 1 and dense["cached"] == dense["chunks"] - 1
    assert "mostly at night" in _query(cli, home, "when do owls hunt")[0]["text"]


def test_a_file_moved_to_another_folder_is_not_embedded_again(
    cli: Cli, indexed: tuple[Path, Path]
) -> None:
    # (Renamed, it is: its chunks carry its name.)
    home, corpus = indexed
    (corpus / "archive").mkdir()
    (corpus / "guide.md").rename(corpus / "archive" / "guide.md")
    result = cli("index", "--home", home)
    assert "added 1, changed 0, unchanged 4, deleted 1" in result.out
    dense = _metadata(home, "dense_embeddings", "docs/archive/guide.md")[0]
    assert dense["embedded"] == 0 and dense["cached"] == dense["chunks"] > 0
    assert _query(cli, home, "herons strike fish")[0]["doc_id"] == "docs/archive/guide.md"


def test_a_deleted_file_is_gone_from_points_catalog_and_partitions(
    cli: Cli, indexed: tuple[Path, Path]
) -> None:
    home, corpus = indexed
    assert point_count(home, "docs/guide.md") > 0
    (corpus / "guide.md").unlink()
    result = cli("index", "--home", home)
    assert "deleted 1" in result.out
    assert point_count(home, "docs/guide.md") == 0
    assert "docs/guide.md" not in _status(cli, home)
    assert live_chunks(home, "docs/guide.md") == []
    with dagster_view(home) as instance:
        assert "docs/guide.md" not in instance.get_dynamic_partitions(DOCUMENTS)


def test_a_chunk_size_change_reindexes_every_document(
    cli: Cli,
    indexed: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home, _ = indexed
    monkeypatch.setenv("RAG_PIPELINE_CHUNKING__MAX_TOKENS", "128")
    result = cli("index", "--home", home)
    assert "added 0, changed 5, unchanged 0" in result.out
    versions = {row["version"] for row in _status(cli, home).values()}
    assert all(point_count(home, doc) == row["chunks"] for doc, row in _status(cli, home).items())
    assert len(versions) == 5


def test_check_finds_catalog_chunks_of_a_version_that_is_not_live(
    indexed: tuple[Path, Path],
) -> None:
    home, _ = indexed
    with Catalog(load_settings(home)) as catalog:
        live = catalog.live_collection()
        assert live is not None
        rows = [row for batch in catalog.chunk_batches(live.name, "docs/guide.md") for row in batch]
        with catalog.database.transaction() as executor:  # left behind the catalog's back
            executor.execute(
                "UPDATE chunks SET version = 'stale' WHERE collection = ? AND chunk_id = ?",
                (live.name, rows[0]["chunk_id"]),
            )
    assert inconsistencies(home) == [
        "docs/guide.md: the catalog's chunks are not those of its live version"
    ]


def test_a_pass_finding_the_folders_and_catalog_as_the_last_quiet_pass_left_them_reads_no_row(
    indexed: tuple[Path, Path],
) -> None:
    home, corpus = indexed
    settings = load_settings(home)

    def changes() -> ManifestDiff:
        with Catalog(settings) as catalog:
            live = catalog.live_collection()
            assert live is not None
            return find_changes(settings, catalog, live.name)

    # The run that indexed them recorded the folders as its pass listed them.
    first = changes()
    assert first.quiet and first.also_unchanged == 5 and first.files == {}
    guide = corpus / "guide.md"
    os.utime(guide, ns=(guide.stat().st_atime_ns, guide.stat().st_mtime_ns + 1))
    touched = changes()  # same content, another time: compared again, still unchanged
    assert not touched.quiet and touched.to_process == []
    assert changes().quiet
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        assert live is not None
        catalog.flag_for_reindex(live.name, {"docs/guide.md": "a damaged store"})
    flagged = changes()
    assert not flagged.quiet and flagged.changed == ["docs/guide.md"]
    assert not changes().quiet  # until indexed, the flag keeps each pass comparing


@pytest.mark.parametrize("shared_walk", [False, True], ids=["one process", "worker processes"])
def test_after_a_run_indexed_what_a_pass_found_the_next_compares_only_the_folders_changed_since(
    home: Path, source: Path, shared_walk: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shared_walk:  # however few the documents and cores, the watched folder to a worker
        monkeypatch.setattr(manifest, "_walk_workers", lambda documents: 2)
        monkeypatch.setattr(walk, "_SUBTREES_PER_WORKER", 0)
    for name in ("birds/heron.md", "birds/owl.md", "fish/carp.md"):
        (source / name).parent.mkdir(exist_ok=True)
        (source / name).write_text(f"# {name}\n\nA note on {name}.\n", "utf-8")
    assert main(["index", "--home", str(home), "--source", str(source)]) == 0
    settings = load_settings(home)

    def changes(*, partial: bool = True) -> ManifestDiff:
        with Catalog(settings) as catalog:
            live = catalog.live_collection()
            assert live is not None
            return find_changes(settings, catalog, live.name, partial=partial)

    assert changes().quiet  # the run recorded the folders as the pass listed them
    (source / "birds" / "heron.md").write_text("# Herons\n\nOther words now.\n", "utf-8")
    (source / "fish" / "pike.md").write_text("# Pike\n\nA new note.\n", "utf-8")
    diff = changes()
    assert diff.partial and diff.changed == ["docs/birds/heron.md"]
    assert diff.new == ["docs/fish/pike.md"] and diff.deleted == []
    assert sorted(diff.files) == [  # the changed folders' files alone were described
        "docs/birds/heron.md",
        "docs/birds/owl.md",
        "docs/fish/carp.md",
        "docs/fish/pike.md",
    ]
    whole = changes(partial=False)
    assert not whole.partial and (whole.changed, whole.new) == (diff.changed, diff.new)
    (source / "fish" / "carp.md").unlink()
    assert main(["index", "--home", str(home)]) == 0
    assert changes().quiet
    shutil.rmtree(source / "fish")  # a folder gone: its documents with it
    gone = changes()
    assert gone.partial and gone.deleted == ["docs/fish/pike.md"] and gone.files == {}
    assert gone.unchanged == [] and gone.also_unchanged == 2  # birds/ was not compared


def test_a_folder_a_watcher_pass_could_not_vouch_for_is_compared_once_it_holds_nothing(
    home: Path, source: Path
) -> None:
    birds = source / "birds"
    birds.mkdir()
    for name in ("heron.md", "owl.md"):
        (birds / name).write_text(f"# {name}\n\nA note on {name}.\n", "utf-8")
    assert main(["index", "--home", str(home), "--source", str(source)]) == 0
    settings = load_settings(home)
    (birds / "heron.md").write_text("# Herons\n\nOther words now.\n", "utf-8")
    (birds / "owl.md").write_text("# Owls\n\nChanged, and no event said so.\n", "utf-8")
    index_once(settings, trigger="watch", paths=[birds / "heron.md"])  # birds/ not vouched for
    for name in ("heron.md", "owl.md"):  # then emptied, no event naming it
        (birds / name).unlink()
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        assert live is not None
        diff = find_changes(settings, catalog, live.name, partial=True)
    assert sorted(diff.deleted) == ["docs/birds/heron.md", "docs/birds/owl.md"]


def test_after_a_watcher_pass_the_next_compares_only_what_changed_besides_the_named_paths(
    home: Path, source: Path
) -> None:
    for name in ("birds/heron.md", "birds/owl.md", "birds/swift.md", "fish/carp.md"):
        (source / name).parent.mkdir(exist_ok=True)
        (source / name).write_text(f"# {name}\n\nA note on {name}.\n", "utf-8")
    assert main(["index", "--home", str(home), "--source", str(source)]) == 0
    settings = load_settings(home)

    def changes() -> ManifestDiff:
        with Catalog(settings) as catalog:
            live = catalog.live_collection()
            assert live is not None
            return find_changes(settings, catalog, live.name, partial=True)

    birds, fish = source / "birds", source / "fish"
    (birds / "heron.md").write_text("# Herons\n\nOther words now.\n", "utf-8")
    (birds / "owl.md").unlink()
    (fish / "pike.md").write_text("# Pike\n\nA new note.\n", "utf-8")
    outcome = index_once(
        settings, trigger="watch", paths=[birds / "heron.md", birds / "owl.md", fish / "pike.md"]
    )
    assert outcome.diff.partial and outcome.diff.listing is None  # no walk: the paths alone
    assert changes().quiet  # the folders' record brought up to date: no row read

    # A change no event named, in the folder of one that was: still found by the next pass.
    (birds / "swift.md").write_text("# Swifts\n\nThey sleep in flight.\n", "utf-8")
    (birds / "heron.md").write_text("# Herons\n\nLonger now, and changed again.\n", "utf-8")
    index_once(settings, trigger="watch", paths=[birds / "heron.md"])
    diff = changes()
    assert diff.partial and diff.changed == ["docs/birds/swift.md"]
    assert sorted(diff.files) == ["docs/birds/heron.md", "docs/birds/swift.md"]  # birds/ alone

    # A folder moved away: what was under it leaves the record with its documents.
    assert main(["index", "--home", str(home)]) == 0
    shutil.move(fish, source.parent / "fish")
    index_once(settings, trigger="watch", paths=[fish])
    assert changes().quiet


def test_a_watcher_pass_naming_more_paths_than_a_direct_change_holds_compares_every_file(
    home: Path, source: Path
) -> None:
    (source / "heron.md").write_text("# Herons\n\nHerons stand still.\n", "utf-8")
    assert main(["index", "--home", str(home), "--source", str(source)]) == 0
    settings = load_settings(home, indexing={"direct_documents": 2})
    named = [source / f"note-{number}.md" for number in range(3)]
    for path in named:
        path.write_text(f"# {path.stem}\n\nA note.\n", "utf-8")
    with Catalog(settings) as catalog:
        few = find_work(settings, catalog, partial=True, paths=named[:2])
        many = find_work(settings, catalog, partial=True, paths=named)
    assert few.partial and sorted(few.new) == ["docs/note-0.md", "docs/note-1.md"]
    # Three named: a Dagster run's plan, which needs every document compared.
    assert not many.partial and len(many.new) == 3 and "docs/heron.md" in many.files


def test_a_store_that_lost_points_after_a_run_is_repaired_by_the_next_one(
    cli: Cli, indexed: tuple[Path, Path]
) -> None:
    home, _ = indexed
    indexer = Indexer(load_settings(home))
    try:
        indexer.store.delete_document("docs/guide.md")  # lost behind the catalog's back
    finally:
        indexer.close()
    assert inconsistencies(home) == ["docs/guide.md: 1 chunks but 0 points"]
    result = cli("index", "--home", home)  # nothing changed on disk
    assert "changed 1" in result.out
    assert inconsistencies(home) == []
    assert _query(cli, home, "herons strike fish")[0]["doc_id"] == "docs/guide.md"


def test_a_pass_opens_the_embedded_store_only_when_its_files_or_the_catalog_changed(
    cli: Cli, indexed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, _ = indexed
    settings = load_settings(home)
    opened: list[str] = []
    open_store = checks.open_vector_store
    monkeypatch.setattr(
        checks, "open_vector_store", lambda s, name: opened.append(name) or open_store(s, name)
    )

    def verify() -> None:
        with Catalog(settings) as catalog:
            checks.verify_collections(settings, catalog)

    verify()  # the run without Dagster checked what it wrote and recorded it
    assert opened == []
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        assert live is not None
    passed_verification_record(settings, live.name).unlink()
    verify()  # no record: opened, and found whole
    verify()
    assert len(opened) == 1
    indexer = Indexer(settings)
    try:
        indexer.store.delete_document("docs/guide.md")  # lost behind the catalog's back
    finally:
        indexer.close()
    verify()
    assert len(opened) == 2
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        assert live is not None
        record = catalog.document(live.name, "docs/guide.md")
    assert record is not None and record.reindex_reason == "the store had 1 chunks but 0 points"


def test_bad_inputs_fail_with_clear_reasons_and_the_rest_of_the_batch_is_indexed(
    cli: Cli,
    home: Path,
    source: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (source / "good.md").write_text(GUIDE, encoding="utf-8")
    (source / "latin1.txt").write_bytes("Café crème à Genève, déjà vu.".encode("latin-1"))
    shutil.copy(two_column_pdf(source.parent / "real.pdf"), source / "misnamed.docx")
    (source / "corrupt.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << broken")
    encrypted_pdf(source / "locked.pdf")
    zero_page_pdf(source / "nopages.pdf")
    (source / "empty.txt").write_bytes(b"")
    (source / "binary.txt").write_bytes(bytes(range(256)) * 64)
    (source / "notes.pdf").write_text(
        "plain notes saved with the wrong extension", encoding="utf-8"
    )
    (source / "huge.txt").write_text("word " * 300_000, encoding="utf-8")
    monkeypatch.setenv("RAG_PIPELINE_PARSING__MAX_FILE_MB", "1")

    result = cli("index", "--home", home, "--source", source)
    assert result.code == 0, result.err
    status = _status(cli, home)
    expected_failures = {
        "docs/corrupt.pdf": "not a readable PDF",
        "docs/locked.pdf": "password",
        "docs/nopages.pdf": "no pages",
        "docs/empty.txt": "empty",
        "docs/binary.txt": "binary",
        "docs/notes.pdf": "not a PDF file",
        "docs/huge.txt": "over the 1 MB limit",
    }
    for doc_id, reason in expected_failures.items():
        assert status[doc_id]["state"] == "failed", doc_id
        assert reason in status[doc_id]["error"], (doc_id, status[doc_id]["error"])
        assert f"failed: {doc_id}: " in result.out
    for doc_id in ("docs/good.md", "docs/latin1.txt", "docs/misnamed.docx"):
        assert status[doc_id]["state"] == "indexed", status[doc_id]
    assert f"failed {len(expected_failures)}" in result.out
    # Failures are not retried while the files stay as they are.
    assert "unchanged 10" in cli("index", "--home", home).out


def test_a_parser_that_hangs_is_stopped_by_the_time_limit(
    cli: Cli,
    home: Path,
    source: Path,
    endless_pdf: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shutil.copy(endless_pdf, source / "endless.pdf")
    (source / "quick.md").write_text(GUIDE, encoding="utf-8")
    monkeypatch.setenv("RAG_PIPELINE_PARSING__TIMEOUT_SECONDS", "4")
    cli("index", "--home", home, "--source", source)
    status = _status(cli, home)
    assert "longer than the 4 s limit" in status["docs/endless.pdf"]["error"]
    assert status["docs/quick.md"]["state"] == "indexed"


def test_a_broken_update_keeps_the_previous_version_searchable(
    cli: Cli, indexed: tuple[Path, Path]
) -> None:
    home, corpus = indexed
    (corpus / "guide.md").write_bytes(b"\x00\x01\x02" * 1000)
    result = cli("index", "--home", home)
    assert "failed: docs/guide.md: binary data" in result.out
    row = _status(cli, home)["docs/guide.md"]
    assert row["state"] == "failed" and row["indexed_version"]
    assert _query(cli, home, "herons strike fish")[0]["doc_id"] == "docs/guide.md"
    assert "still searchable" in cli("status", "--home", home).out


def test_a_chinese_document_is_found_by_a_chinese_query(
    cli: Cli, indexed: tuple[Path, Path]
) -> None:
    home, _ = indexed
    hits = _query(cli, home, "三峡大坝在哪里")
    assert hits[0]["doc_id"] == "docs/rivers.txt"
    assert "宜昌" in hits[0]["text"]


def test_the_server_backend_indexes_and_answers_through_qdrant_client(
    cli: Cli,
    home: Path,
    corpus: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAG_PIPELINE_STORE__CLIENT_PATH", str(tmp_path / "qdrant-local"))
    cli("index", "--home", home, "--source", corpus)
    assert not (home / "qdrant").exists()
    assert _query(cli, home, "paid leave days")[0]["doc_id"] == "docs/policy.docx"
    (corpus / "policy.docx").unlink()
    cli("index", "--home", home)
    assert point_count(home, "docs/policy.docx") == 0


def test_the_consistency_checks_name_missing_and_orphan_points_and_flag_their_repair(
    cli: Cli, indexed: tuple[Path, Path]
) -> None:
    home, _ = indexed
    documents = sorted(live_records(home))
    indexer = Indexer(load_settings(home))
    try:
        assert all(outcome.passed for outcome in run_checks(indexer, documents).values())
        # A point left behind by an older version; then a document that lost its points.
        orphan = _guide_points(indexer)[0]
        orphan.point_id = "00000000-0000-0000-0000-00000000beef"
        orphan.payload["version"] = "an-old-version"
        indexer.store.upsert([orphan])
        indexer.store.delete_document("docs/policy.docx")
        outcomes = run_checks(indexer, documents)
    finally:
        indexer.close()
    orphans, missing = outcomes["no_orphan_points"], outcomes["every_chunk_has_point"]
    assert not orphans.passed and "an-old-version" in orphans.failures["docs/guide.md"]
    assert not missing.passed and missing.failures["docs/policy.docx"].endswith("0 points")
    status = _status(cli, home)
    assert "0 points" in status["docs/policy.docx"]["reindex_reason"]
    cli("index", "--home", home)
    assert inconsistencies(home) == []


def test_check_counts_the_store_and_reads_every_point_when_the_count_disagrees_or_asked(
    cli: Cli, indexed: tuple[Path, Path]
) -> None:
    home, _ = indexed
    counted = cli("check", "--home", home)
    assert counted.code == 0 and "`check --full` compares every point" in counted.out
    assert cli("check", "--home", home, "--full").out.endswith("point by point\n")
    indexer = Indexer(load_settings(home))
    try:
        lost = indexer.store.count("docs/policy.docx")
        indexer.store.delete_document("docs/policy.docx")
        # As many points of an old version of the guide as policy.docx lost, kept aside.
        stale = _guide_points(indexer)[:lost]
    finally:
        indexer.close()
    short = cli("check", "--home", home)  # the count disagrees: every point is read
    assert short.code == 1 and short.out.startswith(f"docs/policy.docx: {lost} chunks but 0")
    for number, point in enumerate(stale):
        point.point_id = f"00000000-0000-0000-0000-{number:012x}"
        point.payload["version"] = "an-old-version"
    indexer = Indexer(load_settings(home))
    try:
        indexer.store.upsert(stale)
    finally:
        indexer.close()
    # The count agrees now: only reading every point tells.
    assert cli("check", "--home", home).code == 0
    full = cli("check", "--home", home, "--full")
    assert full.code == 1
    assert "docs/guide.md: points of version an-old-version" in full.out
    assert f"docs/policy.docx: {lost} chunks but 0 points" in full.out


def test_a_run_repairs_only_its_own_documents_not_another_live_runs_uncommitted_points(
    cli: Cli, home: Path, source: Path
) -> None:
    from rag_pipeline.indexing.commit import repair_pending, write_points

    (source / "guide.md").write_text(GUIDE, encoding="utf-8")
    (source / "note.md").write_text("# Note\n\nA short note.", encoding="utf-8")
    cli("index", "--home", home, "--source", source)
    indexer = Indexer(load_settings(home))
    try:
        collection = indexer.collection.name
        # Another run, alive, writing guide.md's next version: marked, upserted, not committed.
        indexer.catalog.mark_for_repair(collection, ["docs/guide.md"])
        uncommitted = _guide_points(indexer)[0]
        uncommitted.point_id = "00000000-0000-0000-0000-00000000cafe"
        uncommitted.payload["version"] = "its-next-version"
        indexer.store.upsert([uncommitted])
        indexer.plan(["docs/note.md"])
        write_points(indexer, ["docs/note.md"])  # this run, over its own document
        assert indexer.catalog.repairs(collection) == ["docs/guide.md"]
        chunks = live_records(home)["docs/guide.md"].chunks
        assert indexer.store.count("docs/guide.md") == chunks + 1
        # Once no run writes (the next plan), the mark left by a run that died is repaired.
        repair_pending(indexer.settings, indexer.catalog, opened={collection: indexer.store})
        assert indexer.catalog.repairs(collection) == []
        assert indexer.store.count("docs/guide.md") == chunks
    finally:
        indexer.close()


def _guide_points(indexer: Indexer) -> list[Any]:
    from rag_pipeline.store import VectorModels, points_from_cache
    from rag_pipeline.store.schema import DocumentFacts

    record = live_records(indexer.settings.home)["docs/guide.md"]
    facts = DocumentFacts(
        "docs/guide.md", str(record.file_path), "markdown", "Guide", record.version, "", 0.0
    )
    rows = live_chunks(indexer.settings.home, "docs/guide.md")
    return points_from_cache(rows, facts, indexer.cache, VectorModels.of(indexer.settings))


def test_a_failed_run_says_so_and_the_next_run_picks_its_documents_up(
    cli: Cli, home: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Indexer, doc_ids: object) -> dict:
        raise RuntimeError("parser bug")

    monkeypatch.setattr(Indexer, "parse", broken)
    result = cli("index", "--home", home, "--source", corpus)
    assert result.code == 1
    assert "the run failed" in result.out and "added" not in result.out
    assert "the rest of the 5 documents is retried" in result.out
    monkeypatch.undo()
    assert "added 5" in cli("index", "--home", home).out  # the next run picks them all up


def test_a_small_change_is_indexed_without_a_dagster_run_and_reported_to_dagster_later(
    cli: Cli, indexed: tuple[Path, Path]
) -> None:
    home, corpus = indexed
    (corpus / "guide.md").write_text(GUIDE + "\nOtters hold hands while they sleep.\n", "utf-8")
    (corpus / "rivers.txt").unlink()
    assert "changed 1, unchanged 3, deleted 1" in cli("index", "--home", home).out
    assert _query(cli, home, "otters hold hands while they sleep")[0]["doc_id"] == "docs/guide.md"
    settings = load_settings(home)
    with get_instance(settings) as instance:
        assert instance.get_runs() == []
    first, second = (run for _, run in unreported_runs(settings))
    assert len(first.documents) == 5 and second.deleted == ["docs/rivers.txt"]
    assert second.checks["every_chunk_has_point"].passed

    with dagster_view(home) as instance:
        assert "docs/rivers.txt" not in instance.get_dynamic_partitions(DOCUMENTS)
        assert "docs/guide.md" in instance.get_dynamic_partitions(DOCUMENTS)
        check = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [AssetCheckKey(AssetKey("qdrant_points"), "every_chunk_has_point")]
        )
    assert list(unreported_runs(settings)) == []
    [evaluation] = check.values()
    assert evaluation.event.dagster_event.event_specific_data.passed  # type: ignore[union-attr]
    newest, oldest = _metadata(home, "qdrant_points", "docs/guide.md")
    assert (newest["direct_run"], oldest["direct_run"]) == (second.run_id, first.run_id)
    assert newest["points"] >= 1 and newest["batch_documents"] == 2


def test_a_change_larger_than_direct_documents_is_a_dagster_run(
    cli: Cli, home: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_PIPELINE_INDEXING__DIRECT_DOCUMENTS", "4")
    cli("index", "--home", home, "--source", corpus)
    (corpus / "guide.md").write_text(GUIDE + "\nOtters hold hands while they sleep.\n", "utf-8")
    assert "changed 1" in cli("index", "--home", home).out
    settings = load_settings(home)
    with get_instance(settings) as instance:
        assert len(instance.get_runs()) == 1  # the first index: 5 documents
    [(_, run)] = unreported_runs(settings)
    assert run.documents == ["docs/guide.md"]


def test_with_document_buckets_runs_are_told_the_changes_and_reports_cover_buckets(
    cli: Cli, home: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_PIPELINE_DAGSTER__DOCUMENT_BUCKETS", "2")
    monkeypatch.setenv("RAG_PIPELINE_INDEXING__DIRECT_DOCUMENTS", "0")
    cli("index", "--home", home, "--source", corpus)
    buckets = {partition_key(DEFAULT_WORKSPACE, doc_id, 2) for doc_id in _status(cli, home)}
    assert buckets == {"bucket-00000", "bucket-00001"}  # 5 documents: both buckets are used
    guide = partition_key(DEFAULT_WORKSPACE, "docs/guide.md", 2)
    (corpus / "guide.md").write_text(GUIDE + "\nOtters hold hands while they sleep.\n", "utf-8")
    assert "changed 1, unchanged 4" in cli("index", "--home", home).out  # a Dagster run
    monkeypatch.delenv("RAG_PIPELINE_INDEXING__DIRECT_DOCUMENTS")
    (corpus / "rivers.txt").unlink()
    assert "deleted 1" in cli("index", "--home", home).out  # a run without Dagster

    assert _query(cli, home, "otters hold hands while they sleep")[0]["doc_id"] == "docs/guide.md"
    assert set(_status(cli, home)) == {
        "docs/report.pdf",
        "docs/guide.md",
        "docs/prices.csv",
        "docs/policy.docx",
    }
    assert inconsistencies(home) == []
    with dagster_view(home) as instance:
        assert set(instance.get_dynamic_partitions(DOCUMENTS)) == buckets
        runs = instance.get_runs()
    assert len(runs) == 2
    members = sum(partition_key(DEFAULT_WORKSPACE, d, 2) == guide for d in _status(cli, home))
    changed, first = _metadata(home, "file_manifest", guide)
    assert first["documents_index"] == first["documents"]
    assert changed["documents_index"] == 1
    assert changed["documents"] == changed["documents_index"] + changed["documents_unchanged"]
    assert changed["documents"] >= members
    # The run was told the change alone, and how many others its bucket holds.
    assert members > 1
    told = runs[0].run_config["resources"]["indexing"]["config"]
    assert told["bucket_documents"] == ["docs/guide.md"]
    assert told["bucket_unchanged"] == {guide: changed["documents_unchanged"]}


def test_index_runs_a_large_change_as_runs_of_run_documents_each_naming_its_documents(
    cli: Cli, home: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each run commits what it did (a stopped first index of hours keeps all but one run's
    # work); a bucket run is told its documents, as a scan of every folder per run would cost
    # the whole share each time.
    monkeypatch.setenv("RAG_PIPELINE_DAGSTER__DOCUMENT_BUCKETS", "4")
    monkeypatch.setenv("RAG_PIPELINE_INDEXING__DIRECT_DOCUMENTS", "0")
    monkeypatch.setenv("RAG_PIPELINE_INDEXING__RUN_DOCUMENTS", "2")
    assert "added 5" in cli("index", "--home", home, "--source", corpus).out
    documents = set(_status(cli, home))
    assert len(documents) == 5 and inconsistencies(home) == []
    with dagster_view(home) as instance:
        runs = instance.get_runs()
    assert len(runs) > 1 and all(run.status == DagsterRunStatus.SUCCESS for run in runs)
    named = [run.run_config["resources"]["indexing"]["config"]["bucket_documents"] for run in runs]
    assert sorted(doc_id for run_documents in named for doc_id in run_documents) == sorted(
        documents
    )


def test_an_exact_identifier_found_in_one_chunk_comes_first(
    cli: Cli, home: Path, source: Path
) -> None:
    # The dense model prefers other codes and ranks the log that holds the identifier last;
    # the keyword ranking holds that one chunk alone.
    for number in range(40):
        (source / f"ticket-{number}.md").write_text(
            f"# Ticket {number}\n\nFault code QX-{1000 + number}-R at station {number}.\n",
            encoding="utf-8",
        )
    (source / "harbour.md").write_text(
        "# Harbour log\n\nThe cranes moved containers all morning while the tide rose. Gulls "
        "circled the quay and the pilot boat brought in two freighters loaded with timber. In "
        "the afternoon the harbour master inspected the mooring lines, noted PX-7731-Q in the "
        "inventory and handed over to the evening shift.\n",
        encoding="utf-8",
    )
    cli("index", "--home", home, "--source", source)
    assert _query(cli, home, "PX-7731-Q")[0]["doc_id"] == "docs/harbour.md"


def test_folders_given_to_index_are_added_and_only_an_explicit_remove_drops_one(
    cli: Cli, home: Path, tmp_path: Path
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
        (folder / f"{folder.name}.md").write_text(f"# {folder.name}\n\nText.", encoding="utf-8")
    cli("index", "--home", home, "--source", first)
    result = cli("index", "--home", home, "--source", second)
    assert "added 1, changed 0, unchanged 1, deleted 0" in result.out
    listed = cli("sources", "--home", home).out.split()
    assert listed == [str(first), str(second)]
    first.rename(tmp_path / "unmounted")  # a missing folder keeps its documents
    assert "deleted 0" in cli("index", "--home", home).out
    assert "(missing: its documents are kept)" in cli("sources", "--home", home).out
    (tmp_path / "unmounted").rename(first)
    removed = cli("sources", "remove", first, "--home", home)
    assert removed.code == 0 and "leave the index" in removed.out
    assert "deleted 1" in cli("index", "--home", home).out
    assert set(_status(cli, home)) == {"second/second.md"}
    assert cli("sources", "remove", first, "--home", home).code == 2  # not watched any more
    assert cli("sources", "add", tmp_path / "nowhere", "--home", home).code == 2


def test_status_of_a_large_home_lists_only_the_documents_needing_a_look(
    cli: Cli, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for number in range(60):
        (notes / f"note-{number:02d}.md").write_text(f"# Note {number}\n\nPelican {number}.\n")
    (notes / "broken.pdf").write_bytes(b"%PDF-1.7 not a PDF")
    home = tmp_path / "home"
    assert "failed 1" in cli("index", "--home", home, "--source", notes).out
    assert cli("archive", "notes/note-07.md", "--home", home).code == 0

    shown = cli("status", "--home", home).out.splitlines()
    assert [line.split()[0] for line in shown[:2]] == ["notes/broken.pdf", "notes/note-07.md"]
    assert "[archived by " in shown[1]
    assert shown[2:] == [
        "60 indexed, 1 failed",
        "(only the 2 needing a look are listed: `status --all` lists all 61)",
    ]
    every = cli("status", "--home", home, "--all").out.splitlines()
    assert len(every) == 61 + 1 and every[-1] == "60 indexed, 1 failed"
    assert len(cli("status", "--home", home, "--json").json()) == 61
