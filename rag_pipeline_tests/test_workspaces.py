import json
import uuid
from pathlib import Path

import pytest

from rag_pipeline import ids
from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings, load_settings
from rag_pipeline.store import open_vector_store
from rag_pipeline.workspaces import (
    WorkspaceError,
    create_workspace,
    delete_workspace,
    find_workspace,
    list_workspaces,
    rename_workspace,
)
from rag_pipeline_tests.conftest import Cli


def test_workspace_ids_are_ascii_and_tell_apart_names_ascii_cannot_spell() -> None:
    assert ids.workspace_id("Client A") == "client-a"
    chinese = ids.workspace_id("研究")
    assert ids.is_workspace_id(chinese) and chinese != ids.workspace_id("研发")
    assert ids.workspace_id("Café") != ids.workspace_id("Cafe")
    assert ids.workspace_id("default") != ids.DEFAULT_WORKSPACE


def test_a_partition_key_names_the_workspace_outside_the_default_one() -> None:
    assert ids.partition_key(ids.DEFAULT_WORKSPACE, "docs/a.md") == "docs/a.md"
    key = ids.partition_key("acme", "docs/a.md")
    assert key == "/acme/docs/a.md"
    assert ids.partition_document(key) == ("acme", "docs/a.md")
    assert ids.partition_document("docs/a.md") == (ids.DEFAULT_WORKSPACE, "docs/a.md")


def test_workspaces_are_listed_found_renamed_and_refuse_duplicates(home: Path) -> None:
    settings = load_settings(home)
    created = create_workspace(settings, "研究 2024")
    assert [w.name for w in list_workspaces(settings)] == ["Default", "研究 2024"]
    assert find_workspace(settings, created.id).name == "研究 2024"
    with pytest.raises(WorkspaceError, match="exists already"):
        create_workspace(settings, "研究  2024")
    renamed = rename_workspace(created, "Research")
    assert (renamed.id, find_workspace(settings, "research").id) == (created.id, created.id)
    with pytest.raises(WorkspaceError, match="cannot be deleted"):
        delete_workspace(find_workspace(settings, "default"))


def test_a_workspace_inherits_the_installation_settings_but_not_its_folders(
    home: Path, source: Path
) -> None:
    settings = load_settings(home).remember_sources([source])
    stored = {"sources": [str(source)], "chunking": {"max_tokens": 100}}
    (home / "settings.json").write_text(json.dumps(stored))
    acme = create_workspace(settings, "Acme").settings
    assert acme.chunking.max_tokens == 100
    assert acme.watched_folders == [acme.upload_folder]
    assert acme.home == home / "workspaces" / "acme" and acme.root == home.resolve()
    assert acme.collection_prefix != settings.collection_prefix


def _write(folder: Path, name: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f"# {name}\n\n{text}\n", encoding="utf-8")


def _indexed(settings: Settings) -> tuple[object, ...]:
    """A workspace's catalog rows (collections, documents, chunks) and its points' count."""
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        assert live is not None
        rows = (
            catalog.collections(),
            catalog.documents(live.name),
            [*catalog.chunk_rows(live.name)],
        )
    store = open_vector_store(settings, live.name)
    try:
        return (*rows, store.count())
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["embedded", "server"])
def test_each_workspace_finds_only_its_own_documents_and_delete_removes_only_its_own(
    cli: Cli,
    home: Path,
    source: Path,
    tmp_path: Path,
    backend: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if backend == "server":  # qdrant-client's local mode: the server path, one shared store
        monkeypatch.setenv("RAG_PIPELINE_STORE__CLIENT_PATH", str(tmp_path / "qdrant-server"))
        monkeypatch.setenv("RAG_PIPELINE_INDEXING__STAGE_URL", str(tmp_path / "shared-stages"))
    _write(source, "zebra.md", "The zebrafish protocol of the default team.")
    assert cli("index", "--home", home, "--source", source).code == 0
    assert cli("workspace", "create", "Client B", "--home", home).code == 0
    client_b = find_workspace(load_settings(home), "Client B")
    _write(client_b.settings.upload_folder, "quokka.md", "The quokka inventory of client B.")
    assert cli("index", "--home", home, "--workspace", "Client B").code == 0

    def found(query: str, *workspace: str) -> list[str]:
        hits = cli("query", query, "--home", home, *workspace, "--json").json()
        return [hit["doc_id"] for hit in hits]

    assert found("quokka inventory", "--workspace", "client-b") == ["uploads/quokka.md"]
    assert "uploads/quokka.md" not in found("quokka inventory")
    assert not (client_b.home / "models").exists()  # the installation's models are shared
    assert "docs/zebra.md" not in found("zebrafish protocol", "--workspace", "client-b")
    with Catalog(client_b.settings) as catalog:
        collection = catalog.live_collection()
    assert collection is not None and collection.name.startswith("rag_pipeline_client_b")

    default = load_settings(home)
    before = _indexed(default)
    assert before[-1] > 0  # points to lose, were the delete not its own
    assert cli("workspace", "delete", "Client B", "--home", home).code == 2  # asks for --yes
    assert cli("workspace", "delete", "Client B", "--home", home, "--yes").code == 0
    assert _indexed(default) == before
    assert not client_b.home.exists()
    assert not client_b.settings.stage_root.exists()  # its stage files too, wherever they are
    assert (default.stage_root / "stages").exists()
    if backend == "server":
        store = open_vector_store(client_b.settings, collection.name)
        try:
            assert store.dense_size() is None  # the collection is gone
        finally:
            store.close()
    assert found("zebrafish protocol") == ["docs/zebra.md"]
    assert (source / "zebra.md").exists()
    assert cli("status", "--home", home, "--workspace", "Client B").code == 2


def test_workspace_catalogs_live_in_their_own_postgresql_schema(
    home: Path, postgres_url: str
) -> None:
    settings = load_settings(home, catalog={"url": postgres_url})
    workspace = create_workspace(settings, f"PG {uuid.uuid4().hex[:8]}")
    _write(workspace.settings.upload_folder, "a.md", "Text.")
    with Catalog(workspace.settings) as catalog:
        catalog.target_collection("only-mine", {}, {})
    with Catalog(settings) as catalog:
        assert [c.name for c in catalog.collections()] == []
    delete_workspace(workspace)
    with Catalog(load_settings(home, catalog={"url": postgres_url})) as catalog:
        assert catalog.collections() == []


def test_creations_and_deletions_cut_short_leave_no_half_workspace(home: Path) -> None:
    settings = load_settings(home)
    kept = create_workspace(settings, "Kept")
    for leftover in (".creating-cut-1a2b3c4d", ".deleted-gone-1a2b3c4d"):
        (home / "workspaces" / leftover).mkdir()
        (home / "workspaces" / leftover / "workspace.json").write_text('{"name": "half"}')
    assert [w.id for w in list_workspaces(settings)] == ["default", kept.id]
    delete_workspace(kept)
    assert sorted(p.name for p in (home / "workspaces").iterdir()) == [".creating-cut-1a2b3c4d"]
