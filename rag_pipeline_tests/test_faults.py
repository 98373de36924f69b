"""Indexing runs killed for real (SIGKILL at named points), with readers running throughout.

Each test copies an indexed home, edits, adds and deletes files, and runs ``rag-pipeline index``
in a process that kills itself at one point (``rag_pipeline.faults``). Meanwhile CLI queries
run in a loop, the chat page's replica refreshes, and a second ``index`` waits for the lock.
After the kill: no answer ever held two versions of a document; once another run has gone
through, every document has exactly its live version's chunks and points, deleted files are
gone, and status agrees with search.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rag_pipeline import ids
from rag_pipeline.catalog import Catalog
from rag_pipeline.config import load_settings
from rag_pipeline.faults import FAULT_ENV
from rag_pipeline.locking import INDEX, HomeLocks
from rag_pipeline.store import EmbeddedReplica
from rag_pipeline_tests.conftest import Cli, IndexedPlaces
from rag_pipeline_tests.index_state import inconsistencies, live_records
from serving.retrieval import Retriever

# Every point a run passes when it indexes edited and new files and deletes one.
FAULT_POINTS = [
    "after-parse",
    "mid-embedding",
    "after-catalog-delete",
    "after-upsert",
    "before-commit",
    "inside-catalog-commit",
    "after-commit",
    "after-delete",
]
_CLI = [sys.executable, "-m", "rag_pipeline.cli"]
# Each test kills runs and waits for readers: tens of seconds.
pytestmark = pytest.mark.slow


def _note(number: int, edition: int = 0) -> str:
    return (
        f"# Note {number}\n\nThe marker word is zeta{number}x{edition}. "
        f"Note {number} describes river number {number} and its bridges.\n"
    )


def _cli(
    *args: str | Path, fault: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != FAULT_ENV}
    environment |= fault or {}
    return subprocess.run(
        [*_CLI, *map(str, args)], capture_output=True, text=True, env=environment, timeout=600
    )


def _index_notes(root: Path) -> None:
    notes = root / "notes"
    notes.mkdir()
    for number in range(6):
        (notes / f"note-{number}.md").write_text(_note(number), encoding="utf-8")
    result = _cli("index", "--home", root / "home", "--source", notes)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def workspace(indexed_places: IndexedPlaces) -> Path:
    """A fresh copy of the indexed home (``home``) and of its folder (``notes``)."""
    return indexed_places.fresh("notes", _index_notes)


class _Readers:
    """CLI queries in a loop, and the chat page's replica answering and refreshing."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.answers: list[list[dict]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._cli_queries, daemon=True),
            threading.Thread(target=self._page, daemon=True),
        ]

    def __enter__(self) -> _Readers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)

    def _cli_queries(self) -> None:
        while not self._stop.is_set():
            result = _cli("query", "river bridges marker word", "--home", self.home, "--json")
            if result.returncode == 0:
                self.answers.append(json.loads(result.stdout))
            elif "open in another process" not in result.stderr:
                self.errors.append(result.stderr[-500:])

    def _page(self) -> None:
        settings = load_settings(self.home)
        with Catalog(settings) as catalog:
            replica = EmbeddedReplica(settings, catalog)
            try:
                retriever = Retriever(settings, replica)
                while not self._stop.wait(0.2):
                    replica.refresh()
                    retrieval = retriever.retrieve("river bridges marker word", top_k=20)
                    self.answers.append([passage.as_hit() for passage in retrieval.passages])
            except Exception as error:  # reported by the test, not lost in a thread
                self.errors.append(repr(error))
            finally:
                replica.close()


def _versions_per_document(answer: list[dict]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for hit in answer:
        doc_id, version, _ = ids.parse_chunk_id(hit["chunk_id"])
        found.setdefault(doc_id, set()).add(version)
    return found


def _edit(notes: Path) -> dict[str, str]:
    """Two notes edited, one added, one deleted; returns doc id → text of what is on disk."""
    (notes / "note-1.md").write_text(_note(1, edition=1), encoding="utf-8")
    (notes / "note-2.md").write_text(_note(2, edition=1), encoding="utf-8")
    (notes / "note-9.md").write_text(_note(9), encoding="utf-8")
    (notes / "note-4.md").unlink()
    return {f"notes/{path.name}": path.read_text() for path in sorted(notes.glob("*.md"))}


@pytest.mark.parametrize(
    ("point", "direct_documents"),
    # A change this small is indexed without a Dagster run; once through one, killed with it.
    [*((point, "10") for point in FAULT_POINTS), ("after-upsert", "0")],
)
def test_a_run_killed_at_any_point_leaves_a_whole_index_and_the_next_run_converges(
    workspace: Path,
    point: str,
    direct_documents: str,
    monkeypatch: pytest.MonkeyPatch,
    kill_at: Callable[..., dict[str, str]],
    cli: Cli,
) -> None:
    monkeypatch.setenv("RAG_PIPELINE_INDEXING__DIRECT_DOCUMENTS", direct_documents)
    home, notes = workspace / "home", workspace / "notes"
    on_disk = _edit(notes)
    with _Readers(home) as readers:
        killed = subprocess.Popen(
            [*_CLI, "index", "--home", str(home)], env={**os.environ, **kill_at(point)}
        )
        second = None
        try:
            while not HomeLocks(home).is_locked(INDEX) and killed.poll() is None:
                time.sleep(0.05)  # the second attempt comes once the first one holds the lock
            second = subprocess.Popen(
                [*_CLI, "index", "--home", str(home)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={key: value for key, value in os.environ.items() if key != FAULT_ENV},
            )
            assert killed.wait(timeout=600) == -9, f"the run never reached {point}"
            _, err = second.communicate(timeout=600)
            assert second.returncode == 0, err
        finally:
            for process in (killed, second):
                if process is not None and process.poll() is None:
                    process.kill()
    assert readers.errors == []
    assert len(readers.answers) > 0
    for answer in readers.answers:
        doubled = {doc: v for doc, v in _versions_per_document(answer).items() if len(v) > 1}
        assert not doubled, f"an answer held two versions: {doubled}"

    # Checked in this process (its encoders loaded once per test run): the kills are done.
    assert cli("index", "--home", home).code == 0
    assert inconsistencies(home, on_disk) == []
    records = live_records(home)
    assert {doc_id for doc_id, r in records.items() if r.state == "indexed"} == set(on_disk)
    for doc_id, text in on_disk.items():  # status agrees with search
        marker = text.split("marker word is ")[1].split(".")[0]
        hits = cli("query", marker, "--home", home, "--json", "--top-k", "1").json()
        assert hits[0]["doc_id"] == doc_id and marker in hits[0]["text"]


def test_a_collection_for_new_models_is_built_beside_the_live_one_which_answers_meanwhile(
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    kill_at: Callable[..., dict[str, str]],
    cli: Cli,
) -> None:
    home = workspace / "home"
    before = {doc_id: r.indexed_version for doc_id, r in live_records(home).items()}
    # Another BM25 length is another sparse model: a new collection (and new versions).
    monkeypatch.setenv("RAG_PIPELINE_EMBEDDING__BM25_AVG_LEN", "60")
    assert _cli("index", "--home", home, fault=kill_at("after-commit:3")).returncode == -9
    status = cli("status", "--home", home).out
    assert "being built (3 of 6 documents so far)" in status
    assert {doc_id: r.indexed_version for doc_id, r in live_records(home).items()} == before
    monkeypatch.delenv("RAG_PIPELINE_EMBEDDING__BM25_AVG_LEN")
    hits = cli("query", "zeta3x0", "--home", home, "--json").json()
    assert hits[0]["doc_id"] == "notes/note-3.md"  # the old collection, with its own models

    monkeypatch.setenv("RAG_PIPELINE_EMBEDDING__BM25_AVG_LEN", "60")
    result = cli("index", "--home", home)
    assert "changed 3, unchanged 3" in result.out, result.out
    after = live_records(home)
    assert set(after) == set(before) and all(after[d].indexed_version != before[d] for d in before)
    assert "being built" not in cli("status", "--home", home).out
    # The new shard, its lock and its verification record: one collection's; the old one gone.
    collections = {path.name.strip(".").split(".")[0] for path in (home / "qdrant").iterdir()}
    assert len(collections) == 1
    assert inconsistencies(home) == []


@pytest.fixture(autouse=True)
def _no_fault_leaks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(FAULT_ENV, raising=False)
    yield
