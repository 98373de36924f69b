"""What `index` starts before its Dagster run, and hands over to it (indexing/incremental.py)."""

import gc
from pathlib import Path
from typing import Any

import pytest

from rag_pipeline.indexing import incremental, run
from rag_pipeline.parsing import pool
from rag_pipeline_tests.conftest import Cli


def test_the_run_takes_the_store_the_checks_opened_and_the_models_loaded_ahead(
    cli: Cli, home: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = source / "note.md"
    note.write_text("# Note\n\nHerons stand still in shallow water.")
    assert cli("index", "--home", home, "--source", source).code == 0

    opened: list[str] = []
    taken: list[Any] = []
    open_store, take_models = run.open_vector_store, run._take_models_ahead

    def counted_open(settings: Any, collection: str, **options: Any) -> Any:
        opened.append(collection)
        return open_store(settings, collection, **options)

    def counted_take(settings: Any) -> Any:
        taken.append(take_models(settings))
        return taken[-1]

    monkeypatch.setattr(run, "open_vector_store", counted_open)
    monkeypatch.setattr(run, "_take_models_ahead", counted_take)
    note.write_text("# Note\n\nHerons stand still in shallow water. Kingfishers dive.")
    result = cli("index", "--home", home)
    assert result.code == 0 and "changed 1" in result.out
    assert opened == []  # the run wrote with the store its checks had open
    assert len(taken) == 1 and taken[0] is not None
    assert run._lent_stores == {} and run._ahead == []
    assert pool._prestarted.thread is None and pool._prestarted.workers == []
    assert gc.isenabled() and gc.get_freeze_count() == 0
    hits = cli("query", "kingfishers", "--home", home, "--json").json()
    assert "Kingfishers dive" in hits[0]["text"]


def test_a_run_of_deletions_only_starts_no_parser_and_loads_no_model(
    cli: Cli, home: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (source / "a.md").write_text("# A\n\nAlpha text.")
    (source / "b.md").write_text("# B\n\nBeta text.")
    assert cli("index", "--home", home, "--source", source).code == 0
    started: list[int] = []
    monkeypatch.setattr(
        incremental, "prestart_workers", lambda count, preload=(): started.append(count)
    )
    monkeypatch.setattr(incremental, "load_models_ahead", lambda settings: started.append(-1))
    (source / "b.md").unlink()
    result = cli("index", "--home", home)
    assert result.code == 0 and "deleted 1" in result.out
    assert started == []
    assert run._lent_stores == {}
