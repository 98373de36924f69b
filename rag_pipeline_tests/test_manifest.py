import gc
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rag_pipeline.catalog import Catalog
from rag_pipeline.cli import main
from rag_pipeline.config import Settings, load_settings
from rag_pipeline.manifest import (
    diff_manifest,
    find_changes_at,
    list_sources,
    scan_sources,
    source_labels,
)
from rag_pipeline_tests.index_state import record_of


@pytest.fixture
def settings(home: Path, source: Path) -> Settings:
    return load_settings(home, sources=[source])


def test_documents_are_named_by_folder_and_relative_path(settings: Settings, source: Path) -> None:
    (source / "sub").mkdir()
    (source / "sub" / "a.md").write_text("# A")
    (source / ".hidden.md").write_text("# hidden")
    (source / "picture.xyz").write_text("not a document")
    files, missing = scan_sources(settings, {})
    assert [f.doc_id for f in files] == ["docs/sub/a.md"]
    assert files[0].file_type == "markdown" and len(files[0].sha256) == 64
    assert missing == []


def test_unchanged_size_and_mtime_skip_hashing(settings: Settings, source: Path) -> None:
    path = source / "a.txt"
    path.write_text("one")
    files, _ = scan_sources(settings, {})
    known = {files[0].doc_id: record_of(files[0])}
    # Same size and time, other content: the recorded hash is trusted, not recomputed.
    stat = path.stat()
    path.write_text("two")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    again, _ = scan_sources(settings, known)
    assert again[0].sha256 == files[0].sha256


def test_diff_classifies_new_changed_unchanged_and_deleted(
    settings: Settings, source: Path
) -> None:
    for name in ("keep.txt", "edit.txt", "gone.txt"):
        (source / name).write_text(name)
    files, _ = scan_sources(settings, {})
    known = {file.doc_id: record_of(file) for file in files}
    (source / "edit.txt").write_text("edited text")
    (source / "gone.txt").unlink()
    (source / "new.txt").write_text("new")
    files, missing = scan_sources(settings, known)
    diff = diff_manifest(files, missing, known, {})
    assert diff.new == ["docs/new.txt"]
    assert diff.changed == ["docs/edit.txt"]
    assert diff.unchanged == ["docs/keep.txt"]
    assert diff.deleted == ["docs/gone.txt"]


def test_documents_of_a_missing_folder_are_kept_not_deleted(
    settings: Settings, source: Path
) -> None:
    (source / "a.txt").write_text("a")
    files, _ = scan_sources(settings, {})
    known = {file.doc_id: record_of(file) for file in files}
    source.rename(source.with_name("unmounted"))
    files, missing = scan_sources(settings, known)
    diff = diff_manifest(files, missing, known, {})
    assert missing == [source] and diff.deleted == []


def test_chunk_size_changes_every_version_but_a_query_setting_does_not(
    home: Path, source: Path
) -> None:
    (source / "a.md").write_text("# A")
    (source / "b.pdf").write_bytes(b"%PDF-1.7")
    base = {f.doc_id: f.version for f in scan_sources(load_settings(home, sources=[source]), {})[0]}
    resized = load_settings(home, sources=[source], chunking={"max_tokens": 128})
    other = {f.doc_id: f.version for f in scan_sources(resized, {})[0]}
    assert all(base[doc] != other[doc] for doc in base)
    moved = load_settings(home, sources=[source], store={"collection": "elsewhere"})
    assert {f.doc_id: f.version for f in scan_sources(moved, {})[0]} == base


def test_folders_with_the_same_name_get_distinct_labels(tmp_path: Path) -> None:
    labels = source_labels([tmp_path / "a" / "docs", tmp_path / "b" / "docs"])
    assert len(labels) == 2 and all(label.startswith("docs-") for label in labels)


def test_a_collection_being_built_for_new_models_takes_every_document_as_changed(
    settings: Settings, source: Path
) -> None:
    (source / "a.txt").write_text("a")
    files, missing = scan_sources(settings, {})
    live = {file.doc_id: record_of(file) for file in files}
    diff = diff_manifest(files, missing, {}, live)
    assert diff.changed == ["docs/a.txt"] and diff.new == []
    (source / "a.txt").unlink()
    gone = diff_manifest([], [], {}, live)
    assert gone.deleted == ["docs/a.txt"]  # gone from the live collection too


def test_a_failed_document_is_retried_once_its_backoff_has_passed(
    settings: Settings, source: Path
) -> None:
    (source / "a.txt").write_text("a")
    files, missing = scan_sources(settings, {})
    failed = replace(record_of(files[0], state="failed"), retry_at=time.time() + 60)
    assert diff_manifest(files, missing, {"docs/a.txt": failed}, {}).unchanged == ["docs/a.txt"]
    assert diff_manifest(files, missing, {"docs/a.txt": failed}, {}, retry_failed=True).changed == [
        "docs/a.txt"
    ]
    due = replace(failed, retry_at=time.time() - 1)
    assert diff_manifest(files, missing, {"docs/a.txt": due}, {}).changed == ["docs/a.txt"]


def test_links_out_of_a_watched_folder_are_not_followed_unless_allowed(
    home: Path, source: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret")
    (outside / "folder").mkdir()
    (source / "inside.md").write_text("# Inside")
    (source / "secret.md").symlink_to(outside / "secret.md")
    (source / "alias.md").symlink_to(source / "inside.md")
    (source / "linked-folder").symlink_to(outside / "folder", target_is_directory=True)
    files, _ = scan_sources(load_settings(home, sources=[source]), {})
    assert sorted(f.doc_id for f in files) == ["docs/alias.md", "docs/inside.md"]
    allowed = load_settings(home, sources=[source], indexing={"follow_symlinks": True})
    files, _ = scan_sources(allowed, {})
    assert "docs/secret.md" in {f.doc_id for f in files}


def test_a_walk_leaves_the_garbage_collector_as_it_found_it(
    settings: Settings, source: Path
) -> None:
    (source / "a.md").write_text("# A\n", "utf-8")
    assert gc.isenabled()
    assert len(list_sources(settings).entries) == 1
    assert gc.isenabled()
    gc.disable()  # a host that runs without it
    try:
        list_sources(settings)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_file_whose_name_is_not_utf8_is_skipped_with_a_warning_and_the_rest_listed(
    settings: Settings, source: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (source / "plain.md").write_text("# Plain")
    with open(os.fsencode(source) + b"/caf\xe9.md", "w") as latin1_named:
        latin1_named.write("# Cafe")
    files, _ = scan_sources(settings, {})
    assert [f.doc_id for f in files] == ["docs/plain.md"]
    assert "caf\\xe9.md" in caplog.text and "is not UTF-8" in caplog.text


def test_a_pass_over_named_paths_compares_those_alone_and_a_folder_gone_takes_its_documents(
    home: Path, source: Path, tmp_path: Path
) -> None:
    for name in ("keep.md", "edit.md", "birds/heron.md", "birds/owl.md"):
        (source / name).parent.mkdir(exist_ok=True)
        (source / name).write_text(f"# {name}\n\nA note on {name}.\n", "utf-8")
    assert main(["index", "--home", str(home), "--source", str(source)]) == 0
    settings = load_settings(home)
    (source / "edit.md").write_text("# Edited\n\nOther words now.\n", "utf-8")
    (source / "new.md").write_text("# New\n\nA new note.\n", "utf-8")
    (source / "birds").rename(tmp_path / "birds")  # moved away: one event, for the folder
    named = [source / "edit.md", source / "new.md", source / "birds", source / ".new.md.swp"]
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        assert live is not None
        diff = find_changes_at(settings, catalog, live.name, named)
        assert diff is not None and diff.partial
        assert diff.new == ["docs/new.md"] and diff.changed == ["docs/edit.md"]
        assert diff.deleted == ["docs/birds/heron.md", "docs/birds/owl.md"]
        assert set(diff.files) == {"docs/edit.md", "docs/new.md"}  # keep.md not looked at
        (source / "fish").mkdir()
        # A folder that is there: only a whole pass lists what it holds.
        assert find_changes_at(settings, catalog, live.name, [source / "fish"]) is None
