"""Removing an upload: a contributor removes what they uploaded, a governor any upload, a reader
or another workspace's user nothing; the file is deleted and the index run the removal starts
takes its document out of search. Through the served workspaces and in Chromium."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rag_pipeline.availability import set_availability
from rag_pipeline.catalog import Catalog
from rag_pipeline.config import UserSettings, load_settings
from rag_pipeline.ids import DEFAULT_WORKSPACE
from rag_pipeline_tests.conftest import open_workspace
from rag_pipeline_tests.index_state import live_chunks, point_count
from rag_pipeline_tests.processes import within
from serving.access import User, add_user
from serving.server import BackgroundServer
from serving.workspaces import NotAllowed, ServedWorkspaces

if TYPE_CHECKING:
    from playwright.sync_api import Browser

PELICANS = "# Pelicans\n\nPelicans scoop fish into their throat pouch.\n"
HERONS = "# Herons\n\nHerons wait motionless in shallow water.\n"
CONTRIBUTING = UserSettings(workspaces=[DEFAULT_WORKSPACE], contribute=[DEFAULT_WORKSPACE])


def _sent(folder: Path, name: str, text: str) -> list[tuple[str, Path]]:
    """One file sent as ``name`` with ``text`` (its temporary copy in ``folder``)."""
    folder.mkdir(exist_ok=True)
    copy = folder / uuid.uuid4().hex
    copy.write_text(text, encoding="utf-8")
    return [(name, copy)]


def test_a_contributor_removes_their_own_upload_a_governor_any_and_it_leaves_search(
    tmp_path: Path,
) -> None:
    home, sent = tmp_path / "home", tmp_path / "sent"
    settings = load_settings(home)
    bob, carol = User("bob", CONTRIBUTING), User("carol", CONTRIBUTING)
    governor = User("gov", UserSettings(workspaces=[DEFAULT_WORKSPACE], govern=[DEFAULT_WORKSPACE]))
    reader = User("rita", UserSettings(workspaces=[DEFAULT_WORKSPACE]))
    outsider = User("otto", UserSettings(workspaces=["client-b"], contribute=["client-b"]))
    workspaces = ServedWorkspaces(settings)
    try:
        [pelicans] = workspaces.upload(bob, DEFAULT_WORKSPACE, _sent(sent, "pelicans.md", PELICANS))
        [herons] = workspaces.upload(carol, DEFAULT_WORKSPACE, _sent(sent, "herons.md", HERONS))
        assert pelicans.path and herons.path
        within(300, "the uploads indexed", lambda: not workspaces.indexing(DEFAULT_WORKSPACE))
        assert live_chunks(home, "uploads/pelicans.md") and live_chunks(home, "uploads/herons.md")

        assert workspaces.removable_uploads(bob, DEFAULT_WORKSPACE) == ["pelicans.md"]
        assert workspaces.removable_uploads(reader, DEFAULT_WORKSPACE) == []
        assert workspaces.removable_uploads(governor, DEFAULT_WORKSPACE) == [
            "herons.md",
            "pelicans.md",
        ]
        with pytest.raises(NotAllowed, match="rita may not remove their uploads from Default"):
            workspaces.remove_upload(reader, DEFAULT_WORKSPACE, "pelicans.md")
        with pytest.raises(NotAllowed, match="no workspace 'default' for otto"):
            workspaces.remove_upload(outsider, DEFAULT_WORKSPACE, "pelicans.md")
        with pytest.raises(NotAllowed) as refused:
            workspaces.remove_upload(carol, DEFAULT_WORKSPACE, "pelicans.md")
        assert str(refused.value) == (
            "pelicans.md was uploaded by someone else: only they or a governor may remove it"
        )
        assert pelicans.path.is_file()

        assert workspaces.remove_upload(bob, DEFAULT_WORKSPACE, "pelicans.md") == (
            "uploads/pelicans.md"
        )
        assert not pelicans.path.exists()
        with pytest.raises(NotAllowed, match=r"no upload named 'pelicans\.md' here"):
            workspaces.remove_upload(bob, DEFAULT_WORKSPACE, "pelicans.md")
        # A long name is repeated cut, as a workspace's is: one rule for what a refusal repeats.
        with pytest.raises(NotAllowed) as long_upload:
            workspaces.remove_upload(bob, DEFAULT_WORKSPACE, "p" * 500)
        with pytest.raises(NotAllowed) as long_workspace:
            workspaces.remove_upload(bob, "w" * 500, "pelicans.md")
        assert f"'{'p' * 63}…'" in str(long_upload.value)
        assert f"'{'w' * 63}…'" in str(long_workspace.value)
        assert workspaces.remove_upload(governor, DEFAULT_WORKSPACE, "herons.md") == (
            "uploads/herons.md"
        )
        assert not herons.path.exists()
        within(300, "the removals indexed", lambda: not workspaces.indexing(DEFAULT_WORKSPACE))
    finally:
        workspaces.close()
    for document in ("uploads/pelicans.md", "uploads/herons.md"):
        assert live_chunks(home, document) == []
        assert point_count(home, document) == 0


def test_a_new_upload_of_a_removed_archived_uploads_name_is_not_archived(tmp_path: Path) -> None:
    home, sent = tmp_path / "home", tmp_path / "sent"
    settings = load_settings(home)
    bob = User("bob", CONTRIBUTING)
    governor = User("gov", UserSettings(workspaces=[DEFAULT_WORKSPACE], govern=[DEFAULT_WORKSPACE]))
    workspaces = ServedWorkspaces(settings)
    try:
        workspaces.upload(bob, DEFAULT_WORKSPACE, _sent(sent, "pelicans.md", PELICANS))
        within(300, "the upload indexed", lambda: not workspaces.indexing(DEFAULT_WORKSPACE))
        set_availability(settings, "uploads/pelicans.md", "archived", "gov")
        workspaces.remove_upload(governor, DEFAULT_WORKSPACE, "pelicans.md")
        within(300, "the removal indexed", lambda: not workspaces.indexing(DEFAULT_WORKSPACE))
        # A new upload of the name is a new document, in search: not archived by the old row.
        workspaces.upload(bob, DEFAULT_WORKSPACE, _sent(sent, "pelicans.md", HERONS))
        within(300, "the new upload indexed", lambda: not workspaces.indexing(DEFAULT_WORKSPACE))
        with Catalog(settings) as catalog:
            assert [r.doc_id for r in catalog.availability()] == []
        assert workspaces.removable_uploads(bob, DEFAULT_WORKSPACE) == ["pelicans.md"]
    finally:
        workspaces.close()


def test_a_file_changed_since_its_upload_is_no_longer_its_uploaders_to_remove(
    tmp_path: Path,
) -> None:
    workspaces = ServedWorkspaces(load_settings(tmp_path / "home"))
    bob = User("bob", CONTRIBUTING)
    try:
        [note] = workspaces.upload(bob, DEFAULT_WORKSPACE, _sent(tmp_path / "s", "n.md", PELICANS))
        assert note.path is not None
        note.path.write_text(HERONS, encoding="utf-8")  # by other means than an upload
        assert workspaces.removable_uploads(bob, DEFAULT_WORKSPACE) == []
        with pytest.raises(NotAllowed, match=r"n\.md was uploaded by someone else"):
            workspaces.remove_upload(bob, DEFAULT_WORKSPACE, "n.md")
        assert note.path.is_file()
    finally:
        workspaces.close()


def test_in_a_browser_a_contributor_removes_their_upload_once_confirmed_and_a_reader_sees_no_remove(
    tmp_path: Path, browser: Browser
) -> None:
    from playwright.sync_api import expect

    home = tmp_path / "home"
    tokens = {
        "bob": add_user(home, "bob", None, [DEFAULT_WORKSPACE], contribute=[DEFAULT_WORKSPACE]),
        "rita": add_user(home, "rita", None, [DEFAULT_WORKSPACE]),
    }
    uploads = home / "uploads"
    tag = uuid.uuid4().hex[:8]  # a name no other upload shares: Gradio's folder is everyone's
    note = tmp_path / f"pelicans-{tag}.md"
    note.write_text(PELICANS, "utf-8")
    with BackgroundServer(load_settings(home)) as server:
        page = browser.new_context(
            extra_http_headers={"Authorization": f"Bearer {tokens['bob']}"}
        ).new_page()
        page.goto(server.url + "/")
        open_workspace(page)
        page.get_by_text("Sources", exact=True).click()
        page.locator("#upload input[type=file]").set_input_files(str(note))
        row = page.locator(f"#sources [data-doc='uploads/{note.name}']")
        expect(row).to_contain_text("indexed", timeout=300_000)

        row.locator("button.remove").click()
        confirming = page.locator("#removal")
        expect(confirming).to_contain_text(f"Remove the upload {note.name} from Default?")
        assert (uploads / note.name).is_file()  # nothing removed before it is confirmed
        page.locator("#remove-for-good").click()
        expect(page.locator(".toast-body").filter(has_text=note.name)).to_contain_text(
            "removed; taking it out of search", timeout=30_000
        )
        assert not (uploads / note.name).exists()
        expect(row).to_have_count(0, timeout=300_000)
        within(300, "the removal indexed", lambda: not live_chunks(home, f"uploads/{note.name}"))

        # Another upload, bob's, that a reader sees listed but may not remove.
        note.write_text(PELICANS + "\nAgain.\n", "utf-8")
        page.locator("#upload input[type=file]").set_input_files(str(note))
        expect(row.locator("button.remove")).to_have_count(1, timeout=30_000)
        reading = browser.new_context(
            extra_http_headers={"Authorization": f"Bearer {tokens['rita']}"}
        ).new_page()
        reading.goto(server.url + "/")
        open_workspace(reading)
        reading.get_by_text("Sources", exact=True).click()
        listed = reading.locator(f"#sources [data-doc='uploads/{note.name}']")
        expect(listed).to_have_count(1, timeout=30_000)
        expect(listed.locator("button.remove")).to_have_count(0)
