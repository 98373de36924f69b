"""The watched folders' walk, in this process or shared out between worker processes."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from rag_pipeline import walk
from rag_pipeline.files import extension_of
from rag_pipeline.walk import SourceListing, list_folders

KINDS = {".md": ("markdown", "v1"), ".txt": ("text", "v1")}
TOP_FOLDERS = 20  # more subtrees than two workers' share-out asks for


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Folders two deep holding notes, other files, hidden ones and a name that is not UTF-8."""
    root = tmp_path / "docs"
    for top in range(TOP_FOLDERS):
        for below in ("", "inner/"):
            folder = root / f"part-{top:02d}" / below
            folder.mkdir(parents=True, exist_ok=True)
            for note in range(3):
                (folder / f"note-{note}.md").write_text(f"# Note {top} {note}\n", "utf-8")
            (folder / "data.bin").write_bytes(b"\0")
            (folder / ".hidden.md").write_text("# Hidden\n", "utf-8")
    (root / "top.txt").write_text("At the top.\n", "utf-8")
    with open(os.fsencode(root / "part-03") + b"/caf\xe9.md", "w") as handle:
        handle.write("# Latin-1\n")
    return root


def _listed(root: Path, **options: object) -> SourceListing:
    return list_folders({"docs": root}, KINDS, follow_symlinks=False, **options)  # type: ignore[arg-type]


def test_a_walk_shared_out_between_processes_lists_what_one_process_lists(
    tree: Path, caplog: pytest.LogCaptureFixture
) -> None:
    alone = _listed(tree)
    with caplog.at_level(logging.WARNING, logger=walk.__name__):
        shared = _listed(tree, workers=2)
    assert "folder-listing process" not in caplog.text  # listed by the workers themselves
    assert alone.count == TOP_FOLDERS * 2 * 3 + 1 == len(alone.entries)
    assert shared.folders == alone.folders and len(alone.folders) == TOP_FOLDERS * 2 + 1
    assert sorted(shared.entries) == sorted(alone.entries) and shared.count == alone.count
    assert (
        shared.unreadable_names
        == alone.unreadable_names
        == [os.fsencode(tree / "part-03") + b"/caf\xe9.md"]
    )


@pytest.mark.parametrize("workers", [1, 2])
def test_with_a_record_only_the_folders_that_differ_from_it_keep_their_entries(
    tree: Path, workers: int
) -> None:
    recorded = _listed(tree).folders
    (tree / "part-07" / "inner" / "note-1.md").write_text("# Longer than it was\n", "utf-8")
    (tree / "part-11" / "new.md").write_text("# New\n", "utf-8")
    listed = _listed(tree, recorded=recorded, workers=workers)
    assert not listed.complete and listed.count == TOP_FOLDERS * 2 * 3 + 2
    assert sorted(entry[2] for entry in listed.entries) == [
        *(f"part-07/inner/note-{note}.md" for note in range(3)),
        "part-11/new.md",
        *(f"part-11/note-{note}.md" for note in range(3)),
    ]
    changed = {folder for folder, digest in listed.folders.items() if recorded[folder] != digest}
    assert changed == {"docs/part-07/inner/", "docs/part-11/"}


@pytest.mark.parametrize(
    "python",
    ["/bin/false", "/no/such/python", "/bin/echo"],
    ids=["exits at once", "cannot start", "answers something else"],
)
def test_a_worker_that_fails_has_its_share_listed_here(
    tree: Path, python: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    alone = _listed(tree)
    monkeypatch.setattr(sys, "executable", python)
    with caplog.at_level(logging.WARNING, logger=walk.__name__):
        shared = _listed(tree, workers=2)
    assert shared.folders == alone.folders and sorted(shared.entries) == sorted(alone.entries)
    assert caplog.text.count("folder-listing process") == 2


@pytest.mark.parametrize(
    "path",
    ["a.md", "A.PDF", "a.b.txt", ".md", "..md", "a..md", "file.", "noext", "dir.d/readme"],
)
def test_a_files_extension_follows_splitexts_rules(path: str) -> None:
    assert extension_of(path) == os.path.splitext(path)[1].lower()
    assert extension_of(Path(path)) == extension_of(path)
