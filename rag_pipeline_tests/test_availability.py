"""Documents and chunks taken out of search (archive, reject) and put back (activate): at once
in the CLI query, the search API and the page's search, kept across re-indexing."""

from __future__ import annotations

import getpass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from dagster import AssetKey, AssetRecordsFilter

from rag_pipeline.catalog import Catalog
from rag_pipeline.cli import main
from rag_pipeline.config import UserSettings, load_settings
from rag_pipeline.defs.instance import get_instance
from rag_pipeline.defs.observations import observe_availability
from rag_pipeline.ids import partition_key
from rag_pipeline_tests.conftest import (
    Cli,
    IndexedPlaces,
    ask_on_the_page,
    dagster_view,
    open_workspace,
)
from serving.access import User, add_user
from serving.assistant import Assistant
from serving.server import BackgroundServer
from serving.workspaces import NotAllowed, ServedWorkspaces

if TYPE_CHECKING:
    from playwright.sync_api import Browser

OTTERS = "# Otters\n\nSea otters hold hands while they sleep so they do not drift apart.\n"
# Two sections too long to share a chunk (256 tokens), so each is a chunk of its own.
_DAMS = "Beavers build dams of branches and mud across streams. " + " ".join(
    f"Dam number {n} raised the pond by {n} centimetres in spring." for n in range(1, 16)
)
_LODGES = "A beaver lodge has an underwater entrance that keeps predators out. " + " ".join(
    f"Lodge number {n} sheltered {n} kits through the winter." for n in range(1, 16)
)
BEAVERS = f"# Beavers\n\n{_DAMS}\n\n## Lodges\n\n{_LODGES}\n"


def _index_animals(root: Path) -> None:
    source = root / "docs"
    source.mkdir()
    (source / "otters.md").write_text(OTTERS, "utf-8")
    (source / "beavers.md").write_text(BEAVERS, "utf-8")
    assert main(["index", "--home", str(root / "home"), "--source", str(source)]) == 0


@pytest.fixture(params=["embedded", "server"])
def indexed(
    indexed_places: IndexedPlaces,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """A fresh copy of a home with two documents indexed, in the embedded store or through the
    server path (qdrant-client's local mode, its folder beside the home)."""
    name = f"animals-{request.param}"
    if request.param == "server":
        store = indexed_places.place(name) / "qdrant-server"
        monkeypatch.setenv("RAG_PIPELINE_STORE__CLIENT_PATH", str(store))
    return indexed_places.fresh(name, _index_animals) / "home"


@pytest.fixture
def indexed_source(indexed: Path) -> Path:
    """The folder ``indexed`` watches."""
    return indexed.parent / "docs"


def _found(cli: Cli, home: Path, text: str) -> list[tuple[str, str]]:
    hits = cli("query", text, "--home", home, "--json").json()
    return [(hit["doc_id"], hit["text"]) for hit in hits]


def _documents(cli: Cli, home: Path, text: str) -> set[str]:
    return {doc_id for doc_id, _ in _found(cli, home, text)}


LODGE = "beaver lodge underwater entrance"  # finds the chunk of BEAVERS on lodges


def _lodge_found(cli: Cli, home: Path) -> bool:
    return any("underwater entrance" in text for _, text in _found(cli, home, LODGE))


def _lodge_chunk(cli: Cli, home: Path) -> int:
    hits = cli("query", LODGE, "--home", home, "--json").json()
    return next(hit["chunk_index"] for hit in hits if "underwater entrance" in hit["text"])


def test_an_archived_document_leaves_search_at_once_and_comes_back_when_activated(
    cli: Cli, indexed: Path, indexed_source: Path
) -> None:
    home = indexed
    assert "docs/otters.md" in _documents(cli, home, "otters sleep holding hands")
    archived = cli("archive", "docs/otters.md", "--home", home)
    assert archived.code == 0 and "archived (out of search)" in archived.out
    assert "docs/otters.md" not in _documents(cli, home, "otters sleep holding hands")
    status = {row["doc_id"]: row for row in cli("status", "--home", home, "--json").json()}
    assert status["docs/otters.md"]["availability"].startswith("archived by ")
    assert status["docs/beavers.md"]["availability"] is None
    with Catalog(load_settings(home)) as catalog:
        [record] = catalog.availability()
    when = datetime.fromtimestamp(record.changed_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    shown = cli("status", "--home", home).out
    assert f"[archived by {record.changed_by} on {when}]" in shown

    # Kept across a run that changes nothing and across a change of the file.
    assert "unchanged 2" in cli("index", "--home", home).out
    assert "docs/otters.md" not in _documents(cli, home, "otters sleep holding hands")
    (indexed_source / "otters.md").write_text(OTTERS + "\nThey keep a favourite stone.\n", "utf-8")
    assert "changed 1" in cli("index", "--home", home).out
    assert "docs/otters.md" not in _documents(cli, home, "otters favourite stone")
    # And across the file leaving its folder and coming back (a sync rewriting it, say).
    moved = (indexed_source / "otters.md").rename(indexed_source.parent / "otters.md")
    assert "deleted 1" in cli("index", "--home", home).out
    moved.rename(indexed_source / "otters.md")
    assert "added 1" in cli("index", "--home", home).out
    assert "docs/otters.md" not in _documents(cli, home, "otters favourite stone")

    assert cli("activate", "docs/otters.md", "--home", home).code == 0
    assert "docs/otters.md" in _documents(cli, home, "otters favourite stone")
    assert cli("archive", "docs/nothing.md", "--home", home).code == 2


def test_a_rejected_chunk_leaves_search_until_its_text_changes(
    cli: Cli, indexed: Path, indexed_source: Path
) -> None:
    home = indexed
    lodge = _lodge_chunk(cli, home)
    assert cli("reject", "docs/beavers.md", "--chunk", lodge, "--home", home).code == 0
    texts = [text for _, text in _found(cli, home, LODGE)]
    assert not [text for text in texts if "underwater entrance" in text]
    assert [text for text in texts if "dams of branches" in text]  # the rest of it stays
    status = {row["doc_id"]: row for row in cli("status", "--home", home, "--json").json()}
    assert status["docs/beavers.md"]["availability"] == "1 chunk offline"

    # Another paragraph changes: the rejected chunk's text is the same, it stays out.
    (indexed_source / "beavers.md").write_text(BEAVERS.replace("mud", "mud and stones"), "utf-8")
    assert "changed 1" in cli("index", "--home", home).out
    assert not _lodge_found(cli, home)
    # Its own text changes: another chunk, searchable.
    (indexed_source / "beavers.md").write_text(BEAVERS.replace("predators", "wolves"), "utf-8")
    assert "changed 1" in cli("index", "--home", home).out
    texts = [text for _, text in _found(cli, home, LODGE)]
    assert [text for text in texts if "keeps wolves out" in text]


def test_a_rejected_chunk_stays_out_of_the_query_and_the_search_api_until_activated(
    cli: Cli, indexed: Path
) -> None:
    home, settings = indexed, load_settings(indexed)
    lodge = _lodge_chunk(cli, home)
    with BackgroundServer(settings) as server:
        assert _lodge_in_api(server.url)
        assert cli("reject", "docs/beavers.md", "--chunk", lodge, "--home", home).code == 0
        assert not _lodge_in_api(server.url)
    # The query and a run open the store, which the server holds in qdrant-client's local
    # mode: they run while it is stopped.
    assert not _lodge_found(cli, home)
    assert "unchanged 2" in cli("index", "--home", home).out
    assert not _lodge_found(cli, home)
    with BackgroundServer(settings) as server:
        assert not _lodge_in_api(server.url)
        assert cli("activate", "docs/beavers.md", "--chunk", lodge, "--home", home).code == 0
        assert _lodge_in_api(server.url)
    assert _lodge_found(cli, home)


def _lodge_in_api(url: str) -> bool:
    found = httpx.get(f"{url}/api/search", params={"q": LODGE}, timeout=60)
    assert found.status_code == 200
    chunks = [chunk for document in found.json() for chunk in document["chunks"]]
    return any("underwater entrance" in chunk["content"] for chunk in chunks)


def test_the_page_and_the_search_api_leave_offline_documents_out_at_once(
    cli: Cli, indexed: Path
) -> None:
    settings = load_settings(indexed)
    with BackgroundServer(settings) as server:

        def api(query: str) -> list[str]:
            found = httpx.get(f"{server.url}/api/search", params={"q": query}, timeout=60)
            assert found.status_code == 200
            return [document["id"] for document in found.json()]

        assert "docs/otters.md" in api("otters sleep holding hands")
        assert cli("reject", "docs/otters.md", "--home", indexed).code == 0
        assert "docs/otters.md" not in api("otters sleep holding hands")
        assert cli("activate", "docs/otters.md", "--home", indexed).code == 0
        assert "docs/otters.md" in api("otters sleep holding hands")
    assistant = Assistant(settings)
    try:
        assert cli("archive", "docs/otters.md", "--home", indexed).code == 0
        passages = assistant.search("otters sleep holding hands", owner="local").passages
        assert all(p.payload["doc_id"] != "docs/otters.md" for p in passages)
    finally:
        assistant.close()


def test_each_change_from_the_cli_or_the_page_is_kept_with_who_and_when_and_shown_in_dagster(
    cli: Cli, indexed: Path
) -> None:
    hits = cli("query", "otters sleep holding hands", "--home", indexed, "--json").json()
    chunk = next(hit["chunk_id"] for hit in hits if hit["doc_id"] == "docs/otters.md")
    assert cli("archive", "docs/otters.md", "--home", indexed).code == 0
    settings = load_settings(indexed)
    # What the page's "Put back" calls, observed as `rag-pipeline serve` has it.
    workspaces = ServedWorkspaces(settings, observe_availability)
    editor = User("editor", UserSettings(workspaces=["default"], govern=["default"]))
    try:
        workspaces.set_availability(editor, "default", chunk, "active", whole=True)
    finally:
        workspaces.close()
    with Catalog(settings) as catalog:
        [record] = catalog.availability()
    assert (record.doc_id, record.state, record.text_hash) == ("docs/otters.md", "active", "")
    assert record.changed_by == "editor" and record.changed_at > 0
    with get_instance(settings) as instance:
        events = instance.fetch_observations(AssetKey("qdrant_points"), limit=10).records
    shown = [
        {k: v.value for k, v in e.asset_observation.metadata.items()}
        for e in events
        if e.partition_key == partition_key(settings.workspace, "docs/otters.md")
    ]
    assert [(entry["availability"], entry["changed_by"]) for entry in shown] == [
        ("active", "editor"),
        ("archived", getpass.getuser()),
    ]


def test_a_run_records_a_documents_availability_in_its_materialization(
    cli: Cli, indexed: Path, indexed_source: Path
) -> None:
    assert cli("reject", "docs/otters.md", "--home", indexed).code == 0
    (indexed_source / "otters.md").write_text(
        OTTERS + "\nThey groom their fur for hours.\n", "utf-8"
    )
    assert "changed 1" in cli("index", "--home", indexed).out
    settings = load_settings(indexed)
    with dagster_view(indexed) as instance:
        [latest] = instance.fetch_materializations(
            AssetRecordsFilter(
                asset_key=AssetKey("qdrant_points"),
                asset_partitions=[partition_key(settings.workspace, "docs/otters.md")],
            ),
            limit=1,
        ).records
    assert latest.asset_materialization.metadata["availability"].value.startswith("rejected by")


def test_in_a_browser_a_governor_archives_a_cited_document_and_puts_it_back(
    cli: Cli, home: Path, source: Path, browser: Browser
) -> None:
    from playwright.sync_api import expect

    (source / "otters.md").write_text(OTTERS, "utf-8")
    assert cli("index", "--home", home, "--source", source).code == 0
    settings = load_settings(home)
    with BackgroundServer(settings) as server:
        page = browser.new_page()
        page.goto(server.url + "/")
        open_workspace(page)
        page.get_by_text("Sources", exact=True).click()
        listed = page.locator("#sources [data-doc='docs/otters.md']")
        expect(listed).to_contain_text("indexed")
        ask_on_the_page(page, "Why do otters hold hands?")
        page.locator("#evidence a.citation").first.click(timeout=60_000)
        # Only what fits where the document stands is offered: nothing to put back yet.
        expect(page.locator("#reject-passage")).to_be_visible(timeout=30_000)
        expect(page.locator("#put-back")).to_be_hidden()
        page.locator("#archive").click(timeout=30_000)
        page.locator(".toast-body").filter(has_text="archived").wait_for(timeout=30_000)
        expect(page.locator("#archive")).to_be_hidden(timeout=30_000)
        expect(page.locator("#reject-passage")).to_be_hidden()
        expect(page.locator("#preview-text")).to_contain_text("The document is archived")
        # Sources, open meanwhile, marks it at once (no reload).
        expect(listed).to_contain_text("archived: out of search")
        found = httpx.get(f"{server.url}/api/search", params={"q": "otters hold hands"}, timeout=60)
        assert "docs/otters.md" not in [document["id"] for document in found.json()]
        status = {row["doc_id"]: row for row in cli("status", "--home", home, "--json").json()}
        assert status["docs/otters.md"]["availability"].startswith("archived by local on ")

        page.locator("#put-back").click()
        page.locator(".toast-body").filter(has_text="back in search").wait_for(timeout=30_000)
        expect(page.locator("#put-back")).to_be_hidden(timeout=30_000)
        expect(page.locator("#archive")).to_be_visible()
        expect(listed).not_to_contain_text("archived")
        found = httpx.get(f"{server.url}/api/search", params={"q": "otters hold hands"}, timeout=60)
        assert "docs/otters.md" in [document["id"] for document in found.json()]


def test_only_users_granted_governance_may_take_documents_out_of_search(
    cli: Cli, indexed: Path
) -> None:
    chunk = cli("query", "otters", "--home", indexed, "--json").json()[0]["chunk_id"]
    workspaces = ServedWorkspaces(load_settings(indexed))
    reader = User("reader", UserSettings(workspaces=["*"]))
    editor = User("editor", UserSettings(workspaces=["default"], govern=["default"]))
    try:
        with pytest.raises(NotAllowed, match="may not take documents out of search"):
            workspaces.set_availability(reader, "default", chunk, "archived", whole=True)
        record = workspaces.set_availability(editor, "default", chunk, "rejected", whole=False)
        assert (record.state, record.changed_by, bool(record.text_hash)) == (
            "rejected",
            "editor",
            True,
        )
    finally:
        workspaces.close()


def test_an_offline_document_is_neither_served_nor_previewed_to_a_reader_but_is_to_a_governor(
    cli: Cli, home: Path, source: Path
) -> None:
    (source / "otters.md").write_text(OTTERS, "utf-8")
    assert cli("index", "--home", home, "--source", source).code == 0
    chunk = cli("query", "otters", "--home", home, "--json").json()[0]["chunk_id"]
    add_user(home, "reader", "reader-password", ["default"])
    add_user(home, "editor", "editor-password", ["default"], ["default"])
    with BackgroundServer(load_settings(home)) as server:

        def status(path: str, params: dict[str, str], user: str) -> int:
            auth = (user, f"{user}-password")
            return httpx.get(server.url + path, params=params, auth=auth, timeout=60).status_code

        routes = [
            ("/api/file", {"doc_id": "docs/otters.md"}),
            ("/api/preview", {"chunk_id": chunk}),
        ]
        assert [status(path, params, "reader") for path, params in routes] == [200, 200]
        assert cli("archive", "docs/otters.md", "--home", home).code == 0
        assert [status(path, params, "reader") for path, params in routes] == [404, 404]
        assert [status(path, params, "editor") for path, params in routes] == [200, 200]
        assert cli("activate", "docs/otters.md", "--home", home).code == 0
        assert cli("reject", "docs/otters.md", "--home", home, "--chunk", "0").code == 0
        assert status("/api/preview", {"chunk_id": chunk}, "reader") == 404  # the passage
        assert status("/api/preview", {"chunk_id": chunk}, "editor") == 200
        # A passage offline is not shown as the context of its neighbour either.
        (source / "beavers.md").write_text(BEAVERS, "utf-8")
        assert cli("index", "--home", home).code == 0
        lodge = next(
            hit["chunk_id"]
            for hit in cli("query", LODGE, "--home", home, "--json").json()
            if "underwater entrance" in hit["text"]
        )

        def preview(user: str) -> str:
            auth = (user, f"{user}-password")
            shown = httpx.get(
                server.url + "/api/preview", params={"chunk_id": lodge}, auth=auth, timeout=60
            )
            assert shown.status_code == 200
            return shown.text

        assert "Dam number 15" in preview("reader")  # the chunk before, as context
        assert cli("reject", "docs/beavers.md", "--home", home, "--chunk", "0").code == 0
        assert "Dam number 15" not in preview("reader")
        assert "Dam number 15" in preview("editor")
