"""An indexed home the serving tests share (indexed once per test run by the real pipeline, a
copy of it per module)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rag_pipeline.catalog import Catalog
from rag_pipeline.cli import main
from rag_pipeline.config import Settings, load_settings
from rag_pipeline_tests.conftest import IndexedPlaces
from rag_pipeline_tests.documents import two_column_pdf
from serving.assistant import Assistant

GUIDE = """# Field guide

## Herons

Herons stand still in shallow water. They strike fish with their long bills.

## Owls

Owls hunt at night. Their soft feathers make their flight almost silent.
"""
CHINESE = (
    "长江是中国最长的河流，全长约六千三百公里。三峡大坝位于湖北省宜昌市，是世界上最大的水电站。"
)


def write_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    two_column_pdf(folder / "report.pdf")
    (folder / "guide.md").write_text(GUIDE, encoding="utf-8")
    (folder / "rivers.txt").write_text(CHINESE, encoding="utf-8")
    return folder


def _index_corpus(root: Path) -> None:
    source = write_corpus(root / "docs")
    assert main(["index", "--home", str(root / "home"), "--source", str(source)]) == 0


@pytest.fixture(scope="module")
def indexed(indexed_places: IndexedPlaces) -> Settings:
    """Settings of a home holding the indexed corpus (read-only for the tests that use it)."""
    return load_settings(indexed_places.fresh("served", _index_corpus) / "home")


def serving(settings: Settings) -> Iterator[Assistant]:
    """An assistant serving ``settings``' home, for a module's tests (a fixture yields from it)."""
    served = Assistant(settings)
    yield served
    served.close()


@pytest.fixture(scope="module")
def catalog(indexed: Settings) -> Iterator[Catalog]:
    with Catalog(indexed) as opened:
        yield opened


@pytest.fixture
def index_process() -> Iterator[Callable[[Path], subprocess.Popen[str]]]:
    """``rag-pipeline index`` of a home started in a process of its own (a fresh interpreter:
    seconds), to read the index while it runs; its output in ``stdout``. Killed if the test
    leaves it running."""
    started: list[subprocess.Popen[str]] = []

    def start(home: Path) -> subprocess.Popen[str]:
        command = [sys.executable, "-m", "rag_pipeline.cli", "index", "--home", str(home)]
        started.append(
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        )
        return started[-1]

    yield start
    for process in started:
        process.kill()
        process.communicate()
