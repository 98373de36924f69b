from pathlib import Path

from rag_pipeline.config import load_settings
from rag_pipeline.indexing.direct import unreported_runs, unreported_runs_folder
from rag_pipeline_tests.conftest import Cli, dagster_view


def test_an_unreadable_run_record_is_set_aside_and_the_others_are_reported(
    cli: Cli, home: Path, source: Path
) -> None:
    (source / "a.md").write_text("# A\n\nOtters float on their backs.", encoding="utf-8")
    cli("index", "--home", home, "--source", source)
    settings = load_settings(home)
    folder = unreported_runs_folder(settings)
    (folder / "0-broken.json").write_text('{"run_id": "x"', encoding="utf-8")
    with dagster_view(home) as instance:
        assert instance.get_dynamic_partitions("documents") == ["docs/a.md"]
    assert list(unreported_runs(settings)) == []
    assert [path.name for path in folder.iterdir()] == ["0-broken.unreadable"]
