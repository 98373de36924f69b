"""Uploads into a workspace: each file taken or refused on its own, the good ones of a mixed batch
indexed, and no copy left behind, in Gradio's shared upload folder or the workspace's temporary
one; through the served workspaces, the page's API and in Chromium."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from gradio.utils import get_upload_folder

from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings, UserSettings, load_settings
from rag_pipeline.ids import DEFAULT_WORKSPACE
from rag_pipeline.workspaces import create_workspace
from rag_pipeline_tests.conftest import open_workspace
from rag_pipeline_tests.processes import processes_of, within
from serving.access import LOCAL_USER, User
from serving.server import BackgroundServer
from serving.uploads import PARTIAL_SUFFIX
from serving.workspaces import NotAllowed, ServedWorkspaces

PELICANS = "# Pelicans\n\nPelicans scoop fish into their throat pouch.\n"

if TYPE_CHECKING:
    from playwright.sync_api import Browser


def test_a_mixed_upload_takes_its_good_files_and_says_why_it_refuses_each_other(
    tmp_path: Path,
) -> None:
    home, sent = tmp_path / "home", tmp_path / "sent"
    settings = load_settings(home, serving={"max_upload_mb": 0.001, "max_upload_files": 5})
    created = create_workspace(settings, "Uploads")
    alice = User("alice", UserSettings(workspaces=["*"], contribute=[created.id]))
    contents = {
        "note.md": PELICANS,
        "big.md": "x" * 2000,
        "run.exe": "MZ",
        "empty.md": "",
        "empty.pdf": "",
        "late.md": "# Late",
    }

    def sending() -> list[tuple[str, Path]]:
        sent.mkdir(exist_ok=True)
        for name, text in contents.items():
            (sent / name).write_text(text, encoding="utf-8")
        return [(name, sent / name) for name in contents]

    workspaces = ServedWorkspaces(settings)
    try:
        with pytest.raises(NotAllowed, match="alice may not upload into"):
            workspaces.upload(alice, DEFAULT_WORKSPACE, sending())  # she only reads it
        assert list(sent.iterdir()) == []  # refused whole, and gone all the same
        uploads = workspaces.upload(alice, created.id, sending())
        assert [(upload.name, upload.path, upload.refused) for upload in uploads] == [
            ("note.md", created.settings.upload_folder / "note.md", None),
            ("big.md", None, "larger than 0.001 MB"),
            ("run.exe", None, "not a kind of document this index reads"),
            ("empty.md", None, "the file is empty (0 bytes)"),
            ("empty.pdf", None, "the file is empty (0 bytes)"),
            ("late.md", None, "more than 5 files in one upload"),
        ]
        assert list(sent.iterdir()) == []
        assert [path.name for path in created.settings.upload_folder.iterdir()] == ["note.md"]
        assert list((created.home / "serving" / "incoming").iterdir()) == []
        deadline = time.monotonic() + 300
        while workspaces.indexing(created.id) and time.monotonic() < deadline:
            time.sleep(0.5)
        with Catalog(created.settings) as catalog:
            live = catalog.live_collection()
            assert live is not None
            record = catalog.documents(live.name)["uploads/note.md"]
        # The version the upload named (what tells its stage files from an earlier upload's)
        # is the one the run indexed.
        assert uploads[0].file is not None and uploads[0].file.doc_id == record.doc_id
        assert (record.state, record.version) == ("indexed", uploads[0].file.version)
    finally:
        workspaces.close()


@pytest.mark.slow  # an index run in a process of its own, to archive the document it makes
def test_an_upload_replaces_a_document_of_its_name_only_when_asked_by_its_uploader_or_a_governor(
    tmp_path: Path,
) -> None:
    home, sent = tmp_path / "home", tmp_path / "sent"
    settings = load_settings(home)
    grants = UserSettings(workspaces=[DEFAULT_WORKSPACE], contribute=[DEFAULT_WORKSPACE])
    bob, carol = User("bob", grants), User("carol", grants)
    governor = User("gov", UserSettings(workspaces=["*"], govern=[DEFAULT_WORKSPACE]))
    note = settings.upload_folder / "note.md"

    def upload(user: User, text: str, *, replace: bool) -> str | None:
        """note.md sent with ``text`` by ``user``: why it was refused, or None if taken."""
        sent.mkdir(exist_ok=True)
        (sent / "note.md").write_text(text, encoding="utf-8")
        [taken] = workspaces.upload(
            user, DEFAULT_WORKSPACE, [("note.md", sent / "note.md")], replace=replace
        )
        assert list(sent.iterdir()) == []  # taken or not, the copy is gone
        return taken.refused

    workspaces = ServedWorkspaces(settings)
    try:
        assert upload(bob, "# Bob's\n", replace=False) is None
        assert upload(carol, "# Carol's\n", replace=True) == (
            "a document of this name was uploaded by someone else: "
            "only they or a governor may replace it"
        )
        assert upload(bob, "# Bob's second\n", replace=False) == (
            "a document of this name is here already: choose to replace documents of the "
            "same name to upload a new version of it"
        )
        assert note.read_text(encoding="utf-8") == "# Bob's\n"
        assert upload(bob, "# Bob's second\n", replace=True) is None
        assert upload(governor, "# The governor's\n", replace=True) is None
        assert note.read_text(encoding="utf-8") == "# The governor's\n"
        # The governor's version is theirs now: bob no longer replaces it.
        assert upload(bob, "# Bob's third\n", replace=True) is not None

        within(300, "the upload indexed", lambda: not workspaces.indexing(DEFAULT_WORKSPACE))
        workspaces.set_availability(
            governor, DEFAULT_WORKSPACE, _first_chunk(settings), "archived", whole=True
        )
        assert upload(User("gov", grants), "# Archived, replaced\n", replace=True) == (
            "a document of this name is archived: only a governor may replace it"
        )
        assert upload(governor, "# Archived, replaced\n", replace=True) is None
    finally:
        workspaces.close()


def _first_chunk(settings: Settings) -> str:
    """The id of the first chunk of the live collection's only document."""
    with Catalog(settings) as catalog:
        live = catalog.live_collection()
        assert live is not None
        [batch, *_] = catalog.chunk_batches(live.name, "uploads/note.md")
        return batch[0]["chunk_id"]


def _sent(folder: Path, name: str, text: str) -> list[tuple[str, Path]]:
    """One file sent as ``name`` with ``text`` (its temporary copy in ``folder``)."""
    folder.mkdir(exist_ok=True)
    copy = folder / uuid.uuid4().hex
    copy.write_text(text, encoding="utf-8")
    return [(name, copy)]


class _Uploading:
    """One file at a time uploaded into the default workspace: why it was refused, or None;
    with ``indexed``, once the index run it started has ended."""

    def __init__(self, workspaces: ServedWorkspaces, folder: Path, *, indexed: bool) -> None:
        self.workspaces, self.folder, self.indexed = workspaces, folder, indexed

    def __call__(self, user: User, name: str, text: str, *, replace: bool = False) -> str | None:
        sent = _sent(self.folder, name, text)
        [taken] = self.workspaces.upload(user, DEFAULT_WORKSPACE, sent, replace=replace)
        if self.indexed:
            within(
                300, "the upload indexed", lambda: not self.workspaces.indexing(DEFAULT_WORKSPACE)
            )
        return taken.refused


CONTRIBUTING = UserSettings(workspaces=[DEFAULT_WORKSPACE], contribute=[DEFAULT_WORKSPACE])
GOVERNING = UserSettings(workspaces=[DEFAULT_WORKSPACE], govern=[DEFAULT_WORKSPACE])


def test_a_name_differing_only_in_letter_case_or_unicode_form_is_the_same_documents_name(
    tmp_path: Path,
) -> None:
    settings = load_settings(tmp_path / "home")
    bob, carol = User("bob", CONTRIBUTING), User("carol", CONTRIBUTING)
    governor = User("gov", GOVERNING)
    workspaces = ServedWorkspaces(settings)
    upload = _Uploading(workspaces, tmp_path / "sent", indexed=False)

    composed, decomposed = "Caf\u00e9.md", "Cafe\u0301.md"
    try:
        assert upload(bob, composed, "# Bob's\n") is None
        assert upload(bob, "Kestrel-handbook.md", "# Bob's handbook\n") is None
        for look_alike in (decomposed, "CAF\u00c9.MD", "kestrel-handbook.MD"):
            assert upload(carol, look_alike, "# Carol's\n", replace=True) == (
                "a document of this name was uploaded by someone else: "
                "only they or a governor may replace it"
            )
        assert upload(bob, decomposed, "# Bob's second\n") == (
            "a document of this name is here already: choose to replace documents of the "
            "same name to upload a new version of it"
        )
        # Replaced under the name it has: no look-alike beside it.
        assert upload(governor, "cafe\u0301.MD", "# The governor's\n", replace=True) is None
        folder = settings.upload_folder
        assert sorted(path.name for path in folder.iterdir()) == [composed, "Kestrel-handbook.md"]
        assert (folder / composed).read_text(encoding="utf-8") == "# The governor's\n"
        # A new name is stored composed, whatever form it was sent in.
        assert upload(carol, "Na\u0308he.md", "# Carol's\n") is None
        assert (folder / "N\u00e4he.md").is_file()
    finally:
        workspaces.close()


def test_a_file_changed_since_its_upload_has_no_uploader_to_replace_it(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "home")
    bob = User("bob", CONTRIBUTING)
    workspaces = ServedWorkspaces(settings)
    try:
        [taken] = workspaces.upload(bob, DEFAULT_WORKSPACE, _sent(tmp_path, "note.md", "# Bob's\n"))
        assert taken.path is not None
        taken.path.write_text("# Put here by other means\n", encoding="utf-8")
        sent = _sent(tmp_path / "sent", "note.md", "# Bob's second\n")
        [again] = workspaces.upload(bob, DEFAULT_WORKSPACE, sent, replace=True)
        assert again.refused == (
            "a document of this name was uploaded by someone else: "
            "only they or a governor may replace it"
        )
    finally:
        workspaces.close()


def test_who_may_replace_their_own_uploads_is_the_permission_tables_to_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from serving.access import LEAST_ROLE, Action, Role

    settings = load_settings(tmp_path / "home")
    bob = User("bob", CONTRIBUTING)
    workspaces = ServedWorkspaces(settings)
    try:
        workspaces.upload(bob, DEFAULT_WORKSPACE, _sent(tmp_path, "note.md", "# Bob's\n"))
        monkeypatch.setitem(LEAST_ROLE, Action.REPLACE_OWN, Role.GOVERNOR)
        sent = _sent(tmp_path / "sent", "note.md", "# Bob's second\n")
        [again] = workspaces.upload(bob, DEFAULT_WORKSPACE, sent, replace=True)
        assert again.refused == (
            "a document of this name is here already: only a governor may replace it"
        )
    finally:
        workspaces.close()


@pytest.mark.slow  # index runs in processes of their own, to take what they make offline
def test_a_rejected_passage_blocks_no_replacement_and_a_document_taken_offline_no_new_name(
    tmp_path: Path,
) -> None:
    settings = load_settings(tmp_path / "home")
    bob, carol = User("bob", CONTRIBUTING), User("carol", CONTRIBUTING)
    governor = User("gov", GOVERNING)
    workspaces = ServedWorkspaces(settings)
    upload = _Uploading(workspaces, tmp_path / "sent", indexed=True)

    try:
        assert upload(bob, "note.md", PELICANS) is None
        workspaces.set_availability(
            governor, DEFAULT_WORKSPACE, _first_chunk(settings), "rejected", whole=False
        )
        assert upload(bob, "note.md", PELICANS + "\nAnd herons.\n", replace=True) is None
        workspaces.set_availability(
            governor, DEFAULT_WORKSPACE, _first_chunk(settings), "rejected", whole=True
        )
        for user in (bob, carol):
            assert upload(user, "note (1).md", PELICANS + "\nAnd herons.\n") == (
                "the same document is rejected here: only a governor may upload it"
            )
        assert upload(governor, "note (1).md", PELICANS + "\nAnd herons.\n") is None
    finally:
        workspaces.close()


@pytest.mark.slow  # an index run in a process of its own
def test_closing_the_served_workspaces_stops_the_index_run_an_upload_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("RAG_PIPELINE_HOME", str(home))  # each index run carries it
    note = tmp_path / "note.md"
    note.write_text(PELICANS, encoding="utf-8")
    workspaces = ServedWorkspaces(load_settings(home))
    try:
        [upload] = workspaces.upload(LOCAL_USER, None, [("note.md", note)])
        assert upload.path is not None
        within(60, "an index run started", lambda: bool(processes_of(home)))
    finally:
        workspaces.close()
    assert processes_of(home) == []


@pytest.mark.slow  # two index runs in processes of their own
def test_a_server_starting_indexes_the_uploads_a_stop_left_unindexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("RAG_PIPELINE_HOME", str(home))  # each index run carries it
    settings = load_settings(home)
    note = tmp_path / "note.md"
    note.write_text(PELICANS, encoding="utf-8")

    def states() -> dict[str, str]:
        with Catalog(settings) as catalog:
            return {doc_id: r.state for doc_id, r in catalog.live_documents().items()}

    workspaces = ServedWorkspaces(settings)
    try:
        workspaces.upload(LOCAL_USER, None, [("note.md", note)])
        within(300, "the upload indexed", lambda: states() == {"uploads/note.md": "indexed"})
    finally:
        workspaces.close()
    # Received, then the server stopped before its index run: as the upload leaves it.
    (settings.upload_folder / "herons.md").write_text("# Herons\n\nHerons wade.\n", "utf-8")
    workspaces = ServedWorkspaces(settings)
    try:
        within(
            300, "the left upload indexed", lambda: states().get("uploads/herons.md") == "indexed"
        )
    finally:
        workspaces.close()
    # Nothing left unindexed: a start runs nothing.
    workspaces = ServedWorkspaces(settings)
    try:
        assert not workspaces.indexing(DEFAULT_WORKSPACE)
    finally:
        workspaces.close()


def test_a_server_starting_removes_what_uploads_cut_short_by_a_kill_left_behind(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    settings = load_settings(home)
    incoming, uploads = home / "serving" / "incoming", settings.upload_folder
    # As a kill -9 leaves them: a request's files half copied out of Gradio's folder, and a
    # file half moved into the upload folder.
    (incoming / "cut-short").mkdir(parents=True)
    (incoming / "cut-short" / "pelicans.md").write_text(PELICANS[:10], encoding="utf-8")
    uploads.mkdir(parents=True)
    (uploads / f".herons.md{PARTIAL_SUFFIX}").write_text("# Her", encoding="utf-8")
    # One newer than the start (an upload under way) stays.
    (incoming / "under-way").mkdir()
    later = time.time() + 60
    os.utime(incoming / "under-way", (later, later))
    with BackgroundServer(settings):
        assert [path.name for path in incoming.iterdir()] == ["under-way"]
        assert list(uploads.iterdir()) == []


@pytest.fixture
def uploading(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A served home whose default workspace takes uploads of at most 20 KB: (url, home)."""
    home = tmp_path / "home"
    settings = load_settings(home, serving={"max_upload_mb": 0.02})
    with BackgroundServer(settings) as server:
        yield server.url, home


def test_the_upload_endpoint_takes_no_file_but_gradios_own_uploads(
    uploading: tuple[str, Path], tmp_path: Path
) -> None:
    url, home = uploading
    victim = tmp_path / "victim.md"
    victim.write_text("# Mine\n", encoding="utf-8")
    sent = {"path": str(victim), "orig_name": "victim.md", "meta": {"_type": "gradio.FileData"}}
    with httpx.Client(base_url=url, timeout=60) as http:
        event = http.post(
            "/gradio_api/call/upload", json={"data": [[sent], "default", False]}
        ).json()
        answer = http.get(f"/gradio_api/call/upload/{event['event_id']}").text
    assert "event: error" in answer
    assert victim.read_text(encoding="utf-8") == "# Mine\n"
    assert not (home / "uploads" / "victim.md").exists()


def test_in_a_browser_a_mixed_upload_indexes_its_good_file_and_leaves_no_copy_behind(
    uploading: tuple[str, Path], tmp_path: Path, browser: Browser
) -> None:
    from playwright.sync_api import expect

    url, home = uploading
    tag = uuid.uuid4().hex[:8]  # names no other upload shares: Gradio's folder is everyone's
    note, program = tmp_path / f"pelicans-{tag}.md", tmp_path / f"run-{tag}.exe"
    note.write_text(PELICANS, "utf-8")
    program.write_bytes(b"MZ")
    broken = tmp_path / f"broken-{tag}.pdf"
    broken.write_bytes(b"%PDF-1.4\ngarbage not a pdf")  # PyMuPDF's refusal names its path
    big, huge = tmp_path / f"big-{tag}.md", tmp_path / "huge.md"
    big.write_text("# Big\n\n" + "word " * 5_000, "utf-8")  # 25 KB: over the limit
    huge.write_text("# Huge\n\n" + "word " * 20_000, "utf-8")  # 100 KB: over the hard cap
    page = browser.new_page()
    page.goto(url + "/")
    open_workspace(page)
    page.get_by_text("Sources", exact=True).click()
    page.locator("#upload input[type=file]").set_input_files(str(huge))
    error = page.locator(".toast-body").filter(has_text="huge.md")
    error.wait_for(timeout=30_000)  # Gradio's own check, four times serving.max_upload_mb
    assert "exceed the maximum allowed size of 81.9 Kb" in error.inner_text()
    # Nothing taken: an error (a client's call raises), its reason in the page's error toast.
    page.locator("#upload input[type=file]").set_input_files(str(program))
    refused = page.locator(".toast-body").filter(has_text=program.name)
    expect(refused).to_contain_text(
        f"Nothing uploaded. {program.name}: not a kind of document this index reads",
        timeout=30_000,
    )

    sent = [str(note), str(program), str(big), str(broken)]
    page.locator("#upload input[type=file]").set_input_files(sent)
    outcomes = page.locator("#upload-outcomes")
    expect(outcomes.locator(f"[data-upload='run-{tag}.exe']")).to_have_text(
        f"run-{tag}.exe refused: not a kind of document this index reads", timeout=30_000
    )
    expect(outcomes.locator(f"[data-upload='{big.name}']")).to_have_text(
        f"{big.name} refused: larger than 0.02 MB"
    )
    # A refusal is as readable as the page's errors: not the small grey of a file's state.
    refusal = outcomes.locator(f"[data-upload='{big.name}'] span")
    error_color = page.evaluate(
        "() => { const probe = document.createElement('span');"
        " probe.style.color = 'var(--error-text-color)'; document.body.append(probe);"
        " const color = getComputedStyle(probe).color; probe.remove(); return color; }"
    )
    assert refusal.evaluate("e => getComputedStyle(e).color") == error_color
    size = "e => getComputedStyle(e).fontSize"
    assert refusal.evaluate(size) == outcomes.evaluate(size)
    received = outcomes.locator(f"[data-upload='{note.name}']")
    expect(received).to_have_text(f"{note.name} received, indexing…")
    expect(received).to_have_text(f"{note.name} searchable", timeout=300_000)
    failed = outcomes.locator(f"[data-upload='{broken.name}']")
    expect(failed).to_contain_text(f"{broken.name} failed: not a readable PDF (")
    # The reason, without the server's paths (the home's, the upload folder's).
    assert "/" not in failed.inner_text() and str(home) not in page.content()
    expect(page.locator("#workspace-status")).to_have_text("1 document indexed")
    state = page.locator(f"#sources [data-doc='uploads/{note.name}']")
    expect(state).to_contain_text("indexed")
    assert state.locator("a.download").get_attribute("href").startswith("/api/file?")
    assert sorted(path.name for path in (home / "uploads").iterdir()) == [broken.name, note.name]
    assert (home / "uploads" / note.name).read_text("utf-8") == PELICANS
    assert list(Path(get_upload_folder()).glob(f"*/*{tag}*")) == []  # Gradio's copies
    assert list((home / "serving" / "incoming").iterdir()) == []

    question = page.locator("#question textarea")
    question.fill("What do pelicans scoop?")
    question.press("Enter")
    page.locator("#evidence a.citation").first.wait_for(timeout=60_000)
    assert note.name in page.locator("#evidence").inner_text()


def test_an_upload_the_page_never_used_leaves_gradios_folder_once_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Looked at every second, gone at a second old (the page: every hour, at an hour old).
    monkeypatch.setattr("serving.page.layout.CACHE_CLEANUP_SECONDS", (1, 1))
    tag = uuid.uuid4().hex[:8]  # a name no other upload shares: Gradio's folder is everyone's
    with BackgroundServer(load_settings(tmp_path / "home")) as server:
        files = {"files": (f"stray-{tag}.txt", b"never indexed", "text/plain")}
        (kept,) = httpx.post(server.url + "/gradio_api/upload", files=files, timeout=30).json()
        assert Path(kept).is_file()
        within(30, "the stray upload removed", lambda: not Path(kept).exists())


def test_in_a_browser_each_upload_unticks_replace_taken_or_refused(
    uploading: tuple[str, Path], tmp_path: Path, browser: Browser
) -> None:
    from playwright.sync_api import expect

    url, _ = uploading
    tag = uuid.uuid4().hex[:8]  # names no other upload shares: Gradio's folder is everyone's
    note, program = tmp_path / f"pelicans-{tag}.md", tmp_path / f"run-{tag}.exe"
    note.write_text(PELICANS, "utf-8")
    program.write_bytes(b"MZ")
    page = browser.new_page()
    page.goto(url + "/")
    open_workspace(page)
    page.get_by_text("Sources", exact=True).click()
    replace = page.locator("#upload-replace input[type=checkbox]")
    replace.check()
    page.locator("#upload input[type=file]").set_input_files(str(note))
    outcomes = page.locator("#upload-outcomes")
    expect(outcomes.locator(f"[data-upload='{note.name}']")).to_be_visible(timeout=30_000)
    # Ticked for that upload only: a later one of the same name needs a fresh choice.
    expect(replace).not_to_be_checked()
    expect(outcomes.locator(f"[data-upload='{note.name}']")).to_contain_text(
        "searchable", timeout=300_000
    )

    # Refused whole (no file taken): unticked too.
    replace.check()
    page.locator("#upload input[type=file]").set_input_files(str(program))
    expect(page.locator(".toast-body").filter(has_text=program.name)).to_be_visible(timeout=30_000)
    expect(replace).not_to_be_checked()
