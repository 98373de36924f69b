from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import load_settings
from rag_pipeline.defs.instance import POSTGRES_DAGSTER_ENVIRONMENT

if TYPE_CHECKING:
    from dagster import DagsterInstance


def _has_tesseract() -> bool:
    import shutil
    import subprocess

    if shutil.which("tesseract") is None:
        return False
    listed = subprocess.run(["tesseract", "--list-langs"], capture_output=True, text=True)
    return {"eng", "chi_sim"} <= set(listed.stdout.split())


# OCR tests need Debian's tesseract-ocr and tesseract-ocr-chi-sim, which .ci/run installs.
needs_tesseract = pytest.mark.skipif(
    not _has_tesseract(), reason="needs tesseract with eng and chi_sim (apt: tesseract-ocr-chi-sim)"
)


# Read before the fixture below clears RAG_PIPELINE_* variables; .ci/run sets it.
POSTGRES_URL = os.environ.get("RAG_PIPELINE_TEST_POSTGRES_URL")
needs_postgres = pytest.mark.skipif(
    not POSTGRES_URL, reason="set RAG_PIPELINE_TEST_POSTGRES_URL to a PostgreSQL database"
)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """The test PostgreSQL database, with a schema of the test's own as the default one."""
    import uuid
    from urllib.parse import quote

    import psycopg2

    if not POSTGRES_URL:
        pytest.skip("set RAG_PIPELINE_TEST_POSTGRES_URL to a PostgreSQL database")
    schema = f"test_{uuid.uuid4().hex[:12]}"
    connection = psycopg2.connect(POSTGRES_URL)
    connection.autocommit = True
    connection.cursor().execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in POSTGRES_URL else "?"
    yield f"{POSTGRES_URL}{separator}options={quote(f'-csearch_path={schema}')}"
    connection.cursor().execute(f"DROP SCHEMA {schema} CASCADE")
    connection.close()


@pytest.fixture(autouse=True)
def offline_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No hub, no telemetry, and no configuration leaking in from the developer's shell."""
    for name in list(os.environ):
        if name.startswith("RAG_PIPELINE_") or name in (
            "QDRANT_URL",
            "QDRANT_API_KEY",
            "OPENAI_BASE_URL",
            "OPENAI_API_KEY",
            "DAGSTER_HOME",
        ):
            monkeypatch.delenv(name)
    for name in POSTGRES_DAGSTER_ENVIRONMENT:  # set by a test's PostgreSQL instance: not the next's
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("DO_NOT_TRACK", "1")
    yield


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


class Cli(Protocol):
    def __call__(self, *args: str | Path | int) -> CliResult: ...


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """Run ``rag-pipeline`` in this process and capture what it prints."""

    def run(*args: str | Path | int) -> CliResult:
        capsys.readouterr()
        code = main([str(arg) for arg in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@contextmanager
def dagster_view(home: Path) -> Iterator[DagsterInstance]:
    """The home's Dagster instance as `rag-pipeline ui` shows it: what `index` did without a
    Dagster run reported first."""
    from rag_pipeline.defs.direct import report_every_workspace
    from rag_pipeline.defs.instance import get_instance

    settings = load_settings(home)
    report_every_workspace(settings)
    with get_instance(settings) as instance:
        yield instance


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    return folder
