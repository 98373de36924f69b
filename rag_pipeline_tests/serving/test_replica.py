"""The page's copy of the embedded index: it answers while a run writes, and catches up after."""

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from rag_pipeline.catalog import Catalog
from rag_pipeline.cli import main
from rag_pipeline.config import load_settings
from rag_pipeline.store import EmbeddedReplica, open_vector_store
from rag_pipeline_tests.index_state import live_name
from rag_pipeline_tests.serving.conftest import write_corpus
from serving.retrieval import Retriever


def _found(retriever: Retriever, query: str) -> set[str]:
    return {passage.payload["doc_id"] for passage in retriever.retrieve(query).passages}


def test_the_replica_answers_during_an_indexing_run_and_catches_up_after_it(
    tmp_path: Path, index_process: Callable[[Path], subprocess.Popen[str]]
) -> None:
    source = write_corpus(tmp_path / "docs")
    home = tmp_path / "home"
    assert main(["index", "--home", str(home), "--source", str(source)]) == 0
    settings = load_settings(home)
    catalog = Catalog(settings)
    replica = EmbeddedReplica(settings, catalog)
    try:
        assert replica.refresh().copied == 3
        retriever = Retriever(settings, replica)
        assert "docs/guide.md" in _found(retriever, "when do owls hunt")

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
