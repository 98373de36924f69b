from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import EmbeddingSettings, load_settings
from rag_pipeline.defs.instance import POSTGRES_DAGSTER_ENVIRONMENT
from rag_pipeline.embedding.models import OFFLINE_DENSE_MODELS, load_dense_model, load_sparse_model
from rag_pipeline.faults import FAULT_ENV, FAULT_ONCE_ENV
from rag_pipeline.files import copy_keeping_holes
from rag_pipeline_tests.documents import long_pdf

if TYPE_CHECKING:
    from dagster import DagsterInstance
    from playwright.sync_api import Browser, Locator, Page

# What a test uses marks it (`pytest -m "not slow"` is the everyday run, plain `pytest` runs
# all). Tests that start dagster-daemons request ``dagster_daemons``; those killing a process at a
# fault point, ``kill_at``.
FIXTURE_MARKERS = {
    "postgres_url": ("postgres",),
    "browser": ("browser", "slow"),
    "dagster_daemons": ("daemon", "slow"),
    "kill_at": ("faults",),
    "endless_pdf": ("slow",),  # waits out a parser's time limit
    "long_scan": ("slow",),  # OCR of sixty pages
    "picture_models": ("slow",),  # indexes pictures through CLIP and BLIP (torch)
    "index_process": ("slow",),  # an index run in an interpreter of its own, read meanwhile
}
# The param of a fixture over backends (the catalog's, Dagster's, the locks') that runs the test
# on PostgreSQL; it requests ``postgres_url`` or reads ``POSTGRES_URL`` only then.
POSTGRES_PARAM = "postgres"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        markers = {marker for name in names for marker in FIXTURE_MARKERS.get(name, ())}
        callspec = getattr(item, "callspec", None)
        if (callspec and POSTGRES_PARAM in callspec.params.values()) or (
            needs_postgres.mark in item.iter_markers()
        ):
            markers.add("postgres")
        for marker in sorted(markers):
            item.add_marker(marker)


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


def _loaded_once(load: Callable[[EmbeddingSettings, Path], Any]) -> Callable[..., Any]:
    """``load``, returning the model it loaded before for the same settings: every embedding
    setting, and the home where the model is downloaded into it (the offline models and BM25
    need no download)."""
    models: dict[tuple[str, Path | None], Any] = {}
    lock = threading.Lock()  # the indexer loads its models in a thread of its own

    def load_once(settings: EmbeddingSettings, home: Path) -> Any:
        downloaded = settings.dense_model not in OFFLINE_DENSE_MODELS or settings.splade_model
        key = (settings.model_dump_json(), home if downloaded else None)
        with lock:
            if key not in models:
                models[key] = load(settings, home)
            return models[key]

    return load_once


@pytest.fixture(scope="session", autouse=True)
def text_encoders_loaded_once() -> Iterator[None]:
    """Each text encoder's model loaded once per test process rather than by every indexer and
    query, as a long-running server keeps it (a model keeps nothing of the texts it embeds; an
    encoder's copies for parallel batches share it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            "rag_pipeline.embedding.dense.load_dense_model", _loaded_once(load_dense_model)
        )
        patch.setattr(
            "rag_pipeline.embedding.sparse.load_sparse_model", _loaded_once(load_sparse_model)
        )
        yield


def _go_offline(monkeypatch: pytest.MonkeyPatch) -> None:
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


@pytest.fixture(autouse=True)
def offline_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    _go_offline(monkeypatch)
    yield


# What parser workers import for Office files and HTML: seconds each (unstructured), which every
# worker forked during the run would pay again. No PyMuPDF: it starts threads, and the server
# forks (see start_parser_server).
PARSER_IMPORTS = ["unstructured.partition.docx", "unstructured.partition.html"]


@pytest.fixture(scope="session", autouse=True)
def parsers_imported_once() -> None:
    """The parser workers' server started once for the run with those parsers imported, in the
    environment the tests run in: workers fork from it with them loaded."""
    from multiprocessing import forkserver

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["numpy", "markdown_it", *PARSER_IMPORTS])  # its own, and these
    with pytest.MonkeyPatch.context() as environment:
        _go_offline(environment)
        environment.setenv("UNSTRUCTURED_DISABLE_NOTICE", "1")  # as rag_pipeline.parsing.office
        forkserver.ensure_running()  # the server copies the environment as it starts


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


class IndexedPlaces:
    """Installations indexed once per test run, each handed out as a fresh copy in the very
    folder it was indexed in: every path it recorded (settings, catalog, the store's payloads,
    Dagster's instance) still holds, so the copy is the home a test would have indexed itself.
    (The next test given the same installation replaces what a failed test left there.)"""

    def __init__(self, root: Path) -> None:
        self.root = root

    def place(self, name: str) -> Path:
        return self.root / name

    def fresh(self, name: str, build: Callable[[Path], object]) -> Path:
        """``place(name)`` as ``build(place)`` left it, built the first time only."""
        place, pristine = self.place(name), self.root / f"{name}.pristine"
        shutil.rmtree(place, ignore_errors=True)
        if pristine.exists():
            # times kept: no file looks changed; holes kept: the store's preallocated files
            # would fill the disk otherwise
            shutil.copytree(pristine, place, symlinks=True, copy_function=copy_keeping_holes)
        else:
            place.mkdir(parents=True)
            build(place)
            shutil.copytree(place, pristine, symlinks=True, copy_function=copy_keeping_holes)
        return place


@pytest.fixture(scope="session")
def indexed_places(tmp_path_factory: pytest.TempPathFactory) -> IndexedPlaces:
    return IndexedPlaces(tmp_path_factory.mktemp("indexed"))


@pytest.fixture(scope="session")
def endless_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4,000 pages: parsing them takes about 12 s here, past a time limit that a small file
    meets even on a busy machine."""
    return long_pdf(tmp_path_factory.mktemp("endless") / "endless.pdf", pages=4000)


@pytest.fixture
def kill_at() -> Callable[..., dict[str, str]]:
    """The environment variables that make a process kill itself at a point of
    ``rag_pipeline.faults`` (with ``once``, a file: only the first process there, while it
    exists)."""

    def variables(point: str, *, once: Path | None = None) -> dict[str, str]:
        return {FAULT_ENV: point} | ({FAULT_ONCE_ENV: str(once)} if once else {})

    return variables


CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def browser() -> Iterator[Browser]:
    """Debian's headless Chromium, driven by Playwright, without its background traffic."""
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium (.ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            yield launched
        finally:
            launched.close()


def signed_in(browser: Browser, url: str, name: str, password: str) -> Page:
    """A page of its own browser context, signed in with the sign-in form the page sends it to
    (close it with ``page.context.close()``)."""
    page = browser.new_context().new_page()
    page.goto(url + "/")
    page.locator("#name").fill(name)
    page.locator("#password").fill(password)
    page.locator("#sign-in").click()
    page.wait_for_url(url + "/")
    return page


def workspace_card(page: Page, name: str) -> Locator:
    """The card of the workspace with this name, on the page's home."""
    return page.locator("#workspace-cards .card").filter(
        has=page.locator(f".name:text-is('{name}')")
    )


def open_workspace(page: Page, name: str = "Default") -> None:
    """Open a workspace by its card on the page's home, and wait for its chat."""
    workspace_card(page, name).get_by_role("button", name="Open").click(timeout=30_000)
    page.locator("#question textarea").wait_for(timeout=30_000)


def ask_on_the_page(page: Page, question: str) -> None:
    """Ask the chat page as a user does: the question typed, then Enter."""
    box = page.locator("#question textarea")
    box.fill(question)
    box.press("Enter")
