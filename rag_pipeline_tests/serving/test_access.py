"""Workspaces and sign-in on the real server: over HTTP, through gradio_client and in Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import (
    AccessSettings,
    load_settings,
    stored_settings,
    write_stored_settings,
)
from rag_pipeline.workspaces import find_workspace
from rag_pipeline_tests.conftest import open_workspace, signed_in, workspace_card
from serving.access import AccessError, Action, User, add_user, check_binding
from serving.server import BackgroundServer
from serving.workspaces import NotSignedIn, ServedWorkspaces

if TYPE_CHECKING:
    from gradio_client import Client
    from playwright.sync_api import Browser

PROXY_HEADER = "X-Forwarded-User"
NO_FILTERS = ([], [], [], "", "")  # documents, file types, languages, after, before
ROLE_ACTIONS = (Action.ASK, Action.UPLOAD, Action.GOVERN)  # a reader's, a contributor's, …


@pytest.fixture(scope="module")
def teams_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Two workspaces and users granted one (alice: Client B, where she may upload; bob and
    carol: the default one, which they read) or all (admin), signing in by password, token, or
    the trusted proxy's header: (home, user -> token)."""
    root = tmp_path_factory.mktemp("access")
    home, docs = root / "home", root / "docs"
    docs.mkdir()
    (docs / "zebra.md").write_text("# Zebra\n\nThe zebrafish protocol.\n", encoding="utf-8")
    assert main(["index", "--home", str(home), "--source", str(docs)]) == 0
    assert main(["workspace", "create", "Client B", "--home", str(home)]) == 0
    client_b = find_workspace(load_settings(home), "Client B")
    (client_b.settings.upload_folder / "quokka.md").write_text(
        "# Quokka\n\nThe quokka inventory.\n", encoding="utf-8"
    )
    assert main(["index", "--home", str(home), "--workspace", "client-b"]) == 0
    grants = {"alice": ["client-b"], "bob": ["default"], "carol": ["default"], "admin": ["*"]}
    tokens = {
        name: add_user(
            home,
            name,
            f"{name}-password",
            grants[name],
            contribute=["client-b"] * (name == "alice"),
        )
        for name in grants
    }
    stored = stored_settings(home)
    stored["access"]["proxy_user_header"] = PROXY_HEADER
    write_stored_settings(home, stored)
    return home, tokens


@pytest.fixture(scope="module")
def two_teams(teams_home: tuple[Path, dict[str, str]]) -> Iterator[tuple[str, dict[str, str]]]:
    """``teams_home`` served: (url, user -> token)."""
    home, tokens = teams_home
    with BackgroundServer(load_settings(home)) as server:
        yield server.url, tokens


def _search(url: str, q: str, workspace: str | None = None, **auth: object) -> httpx.Response:
    params = {"q": q} | ({"workspace": workspace} if workspace else {})
    return httpx.get(f"{url}/api/search", params=params, timeout=60, **auth)  # type: ignore[arg-type]


def test_the_page_the_api_and_mcp_find_a_requests_user_in_one_place(
    teams_home: tuple[Path, dict[str, str]],
) -> None:
    home, tokens = teams_home
    workspaces = ServedWorkspaces(load_settings(home))
    try:
        for header in ("Authorization", "authorization"):  # Starlette's, Gradio's spelling
            found = workspaces.signed_in({header: f"Bearer {tokens['alice']}"})
            assert found.name == "alice"
        with pytest.raises(NotSignedIn, match="sign in first"):
            workspaces.signed_in({"Authorization": "Bearer not-a-token"})
    finally:
        workspaces.close()


def test_a_request_without_credentials_is_refused_on_every_route(
    two_teams: tuple[str, dict[str, str]],
) -> None:
    url, _ = two_teams
    for path in ("/", "/api/search?q=quokka", "/api/file?doc_id=docs/zebra.md", "/config"):
        response = httpx.get(url + path, timeout=30)
        assert response.status_code == 401, path
        assert response.headers["www-authenticate"].startswith("Basic")
    wrong = httpx.get(url + "/", auth=("alice", "not-her-password"), timeout=30)
    assert wrong.status_code == 401
    assert httpx.get(url + "/", auth=("alice", "alice-password"), timeout=30).status_code == 200


def test_a_token_for_one_workspace_never_finds_a_document_of_another(
    two_teams: tuple[str, dict[str, str]],
) -> None:
    url, tokens = two_teams
    alice = {"headers": {"Authorization": f"Bearer {tokens['alice']}"}}
    found = _search(url, "quokka inventory", **alice).json()
    assert [document["id"] for document in found] == ["uploads/quokka.md"]
    assert all("zebra" not in d["id"] for d in _search(url, "zebrafish protocol", **alice).json())
    assert _search(url, "zebrafish", "default", **alice).status_code == 404
    original = httpx.get(f"{url}/api/file", params={"doc_id": "docs/zebra.md"}, **alice)
    assert original.status_code == 404

    bob = {"auth": ("bob", "bob-password")}
    assert [d["id"] for d in _search(url, "zebrafish protocol", **bob).json()] == ["docs/zebra.md"]
    assert _search(url, "quokka", "client-b", **bob).status_code == 404
    bad_token = {"headers": {"Authorization": "Bearer not-a-token"}}
    assert _search(url, "quokka", **bad_token).status_code == 401


def test_the_search_apis_links_open_the_file_in_a_workspace_beyond_the_default(
    two_teams: tuple[str, dict[str, str]],
) -> None:
    url, tokens = two_teams
    admin = {"headers": {"Authorization": f"Bearer {tokens['admin']}"}}
    [found] = _search(url, "quokka inventory", "client-b", **admin).json()
    assert found["url"] == "/api/file?doc_id=uploads/quokka.md&workspace=client-b"
    opened = httpx.get(url + found["url"], timeout=30, **admin)  # type: ignore[arg-type]
    assert opened.status_code == 200 and b"quokka inventory" in opened.content


def test_the_trusted_proxys_header_signs_its_user_in_and_names_no_one_else(
    two_teams: tuple[str, dict[str, str]],
) -> None:
    url, _ = two_teams
    as_alice = {"headers": {PROXY_HEADER: "alice"}}
    assert httpx.get(url + "/", timeout=30, **as_alice).status_code == 200  # type: ignore[arg-type]
    found = _search(url, "quokka inventory", **as_alice).json()
    assert [document["id"] for document in found] == ["uploads/quokka.md"]
    assert _search(url, "zebrafish", "default", **as_alice).status_code == 404  # not hers
    for headers in ({}, {PROXY_HEADER: "mallory"}):
        assert httpx.get(url + "/", headers=headers, timeout=30).status_code == 401
    # A header naming nobody is refused, whatever else the request carries.
    mallory = httpx.get(
        url + "/", headers={PROXY_HEADER: "mallory"}, auth=("bob", "bob-password"), timeout=30
    )
    assert mallory.status_code == 401


def test_gradios_file_route_serves_what_it_stored_but_no_file_of_a_workspace(
    two_teams: tuple[str, dict[str, str]], teams_home: tuple[Path, dict[str, str]]
) -> None:
    url, _ = two_teams
    home, _ = teams_home
    admin = ("admin", "admin-password")  # may use every workspace, yet not through this route
    uploaded = httpx.post(
        f"{url}/gradio_api/upload", files={"files": ("note.md", b"# A note\n")}, auth=admin
    ).json()[0]
    assert httpx.get(f"{url}/gradio_api/file={uploaded}", auth=admin).content == b"# A note\n"
    client_b = find_workspace(load_settings(home), "client-b").settings
    for stored in (client_b.upload_folder / "quokka.md", home / "catalog" / "catalog.sqlite"):
        assert stored.is_file()
        assert httpx.get(f"{url}/gradio_api/file={stored}", auth=admin).status_code == 403


def test_serving_beyond_loopback_needs_someone_to_sign_in(tmp_path: Path) -> None:
    check_binding("127.0.0.1", AccessSettings())
    with pytest.raises(AccessError, match="without sign-in"):
        check_binding("0.0.0.0", AccessSettings())
    check_binding("0.0.0.0", AccessSettings(proxy_user_header="X-Forwarded-User"))
    assert main(["serve", "--home", str(tmp_path / "home"), "--host", "0.0.0.0"]) == 2


def _answer_text(chat: list[dict[str, object]]) -> str:
    content = chat[-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content)  # type: ignore[union-attr]


@contextmanager
def _gradio(url: str, token: str) -> Iterator[Client]:
    """A gradio_client session of the page, signed in by the token."""
    from gradio_client import Client

    client = Client(url + "/", headers={"Authorization": f"Bearer {token}"}, verbose=False)
    try:
        yield client
    finally:
        client.close()


def _ask(client: Client, question: str, workspace: str) -> tuple[str, str]:
    """Ask on the page; the answer's text and the id of the conversation it went into."""
    chat, _, conversations, *_ = client.predict(
        question, workspace, [], *NO_FILTERS, api_name="/ask"
    )
    return _answer_text(chat), conversations["value"]


def test_the_gradio_client_with_a_token_answers_only_within_its_workspaces(
    two_teams: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    url, tokens = two_teams
    note = tmp_path / "note.md"
    note.write_text("# Note\n\nA note for the default workspace.\n", encoding="utf-8")
    others = {  # every endpoint, asked about the default workspace alice may not use
        "/open_workspace": ("default",),
        "/ask": ("zebrafish protocol", "default", [], *NO_FILTERS),
        "/similar_pictures": (None, "default", *NO_FILTERS),
        "/open": (None, "default"),
        "/delete": ("default",),
        "/traces": ("default",),
        "/upload": ([handle_file(str(note))], "default"),
        "/sources": ("default",),
        "/remove_upload": ("default",),
    }
    with _gradio(url, tokens["alice"]) as alice:
        assert set(alice.view_api(print_info=False, return_format="dict")["named_endpoints"]) == (
            set(others)
        )
        answer, _ = _ask(alice, "What is in the quokka inventory?", "client-b")
        assert "quokka" in answer.lower()
        for api_name, arguments in others.items():
            with pytest.raises(AppError, match="no workspace 'default' for alice"):
                alice.predict(*arguments, api_name=api_name)


def test_a_reader_uploads_nothing_through_gradio_client_or_over_http(
    two_teams: tuple[str, dict[str, str]],
    teams_home: tuple[Path, dict[str, str]],
    tmp_path: Path,
) -> None:
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    url, tokens = two_teams
    home, _ = teams_home
    note = tmp_path / "zebra.md"  # named as no upload yet: nothing to replace
    note.write_text("# Zebra\n\nA reader's zebra.\n", encoding="utf-8")
    with _gradio(url, tokens["bob"]) as bob, pytest.raises(AppError, match="may not upload"):
        bob.predict([handle_file(str(note))], "default", True, api_name="/upload")
    authorized = {"Authorization": f"Bearer {tokens['bob']}"}
    with httpx.Client(base_url=url, headers=authorized, timeout=60) as http:
        files = {"files": ("zebra.md", note.read_bytes())}
        [path] = http.post("/gradio_api/upload", files=files).json()
        sent = {"path": path, "orig_name": "zebra.md", "meta": {"_type": "gradio.FileData"}}
        event = http.post("/gradio_api/call/upload", json={"data": [[sent], "default", True]})
        answer = http.get(f"/gradio_api/call/upload/{event.json()['event_id']}").text
    assert "event: error" in answer and "bob may not upload into Default" in answer, answer
    assert not (home / "uploads").exists()


def test_an_upload_refused_whole_raises_through_gradio_client_with_the_reason(
    two_teams: tuple[str, dict[str, str]],
    teams_home: tuple[Path, dict[str, str]],
    tmp_path: Path,
) -> None:
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    url, tokens = two_teams
    home, _ = teams_home
    quokka = tmp_path / "quokka.md"  # named as an upload alice did not send
    quokka.write_text("# Quokka\n\nAlice's quokkas.\n", encoding="utf-8")
    with _gradio(url, tokens["alice"]) as alice:
        refused = "quokka.md: a document of this name was uploaded by someone else"
        with pytest.raises(AppError, match=refused):
            alice.predict([handle_file(str(quokka))], "client-b", True, api_name="/upload")
    kept = find_workspace(load_settings(home), "Client B").settings.upload_folder / "quokka.md"
    assert kept.read_text(encoding="utf-8") == "# Quokka\n\nThe quokka inventory.\n"


def test_a_user_can_neither_open_nor_delete_anothers_conversation_nor_see_their_traces(
    two_teams: tuple[str, dict[str, str]],
) -> None:
    from gradio_client.exceptions import AppError

    url, tokens = two_teams
    with _gradio(url, tokens["bob"]) as bob, _gradio(url, tokens["carol"]) as carol:
        _, bobs = _ask(bob, "Which zebrafish protocol does bob follow?", "default")
        _, carols = _ask(carol, "What is the zebrafish protocol?", "default")
        # Her conversations to open are hers alone: his id is none of them.
        refused = rf"{bobs} is not in the list of choices: \['{carols}'\]"
        with pytest.raises(AppError, match=refused):
            carol.predict(bobs, "default", api_name="/open")
        *_, left = carol.predict("default", api_name="/delete")  # her open conversation
        assert left["choices"] == []
        chat, _ = bob.predict(bobs, "default", api_name="/open")
        assert [message["role"] for message in chat] == ["user", "assistant"]
        assert [trace["query"] for trace in carol.predict("default", api_name="/traces")] == [
            "What is the zebrafish protocol?"
        ]
        bob_asked = [trace["query"] for trace in bob.predict("default", api_name="/traces")]
        assert "Which zebrafish protocol does bob follow?" in bob_asked
        assert "What is the zebrafish protocol?" not in bob_asked


def test_in_a_browser_each_user_sees_and_searches_only_their_workspaces(
    two_teams: tuple[str, dict[str, str]], browser: Browser
) -> None:
    from playwright.sync_api import expect

    url, _ = two_teams
    for user, own, other in (("alice", "quokka", "zebrafish"), ("bob", "zebrafish", "quokka")):
        page = signed_in(browser, url, user, f"{user}-password")
        shown = {"alice": "Client B", "bob": "Default"}[user]
        # The page opens on their cards: theirs alone, to open, neither new nor deleted.
        expect(page.locator("#workspace-cards .card .name")).to_have_text([shown])
        cards = page.locator("#workspace-cards .card")
        assert cards.get_by_role("button", name="Open").count() == 1
        assert cards.get_by_role("button", name="Delete").count() == 0  # not '*' users
        expect(page.locator("#create-workspace")).to_be_hidden()
        open_workspace(page, shown)
        page.get_by_text("Sources", exact=True).click()
        expect(page.locator("#sources")).to_be_visible()
        if user == "alice":
            expect(page.locator("#upload")).to_be_visible()
        else:  # bob only reads
            expect(page.locator("#upload")).to_be_hidden()
        page.locator("#workspace input").click()
        options = page.locator("ul[role='listbox'] li")
        options.first.wait_for(timeout=30_000)
        assert [o.split("\n")[-1].strip() for o in options.all_inner_texts()] == [shown]
        page.keyboard.press("Escape")
        question = page.locator("#question textarea")
        question.fill(f"Which {own}?")
        question.press("Enter")
        evidence = page.locator("#evidence a.citation").first
        evidence.wait_for(timeout=60_000)
        assert other not in page.locator("#evidence").inner_text()
        page.context.close()


def test_in_a_browser_an_admin_creates_renames_sorts_and_deletes_a_workspace_by_its_card(
    two_teams: tuple[str, dict[str, str]],
    teams_home: tuple[Path, dict[str, str]],
    browser: Browser,
) -> None:
    from playwright.sync_api import expect

    url, _ = two_teams
    home, _ = teams_home
    page = signed_in(browser, url, "admin", "admin-password")
    names = page.locator("#workspace-cards .card .name")
    expect(names).to_have_text(["Default", "Client B"], timeout=30_000)
    default = workspace_card(page, "Default")
    expect(default.get_by_role("button", name="Rename")).to_have_count(1)
    expect(default.get_by_role("button", name="Delete")).to_have_count(0)  # never deleted

    page.locator("#workspace-name").get_by_role("textbox").fill("Client C")
    page.locator("#create-workspace").click()
    opened = page.locator("#workspace input")
    expect(opened).to_have_value("Client C", timeout=30_000)  # a new workspace opens
    expect(page.locator("#workspace-status")).to_have_text("0 documents indexed")
    page.locator("#to-workspaces").click()
    page.locator("#card-order").get_by_label("last opened").check()
    expect(names).to_have_text(["Client C", "Default", "Client B"], timeout=30_000)
    expect(workspace_card(page, "Client C")).to_contain_text("no documents yet · opened just now")

    # One name box, shown for the card renamed, rather than one on every card.
    renaming = page.locator("#new-name").get_by_role("textbox")
    expect(renaming).to_be_hidden()
    expect(page.locator("#workspace-cards").get_by_role("textbox")).to_have_count(0)
    workspace_card(page, "Client C").get_by_role("button", name="Rename").click()
    expect(renaming).to_have_value("Client C", timeout=30_000)
    renaming.fill("Acme")
    page.locator("#rename-workspace").click()
    expect(names).to_have_text(["Acme", "Default", "Client B"], timeout=30_000)
    expect(renaming).to_be_hidden()
    assert find_workspace(load_settings(home), "client-c").name == "Acme"
    open_workspace(page, "Default")
    page.locator("#to-workspaces").click()
    expect(names).to_have_text(["Default", "Acme", "Client B"], timeout=30_000)

    confirmation, for_good = page.locator("#doomed"), page.locator("#delete-for-good")
    workspace_card(page, "Acme").get_by_role("button", name="Delete").click()
    expect(confirmation).to_contain_text(
        "Delete Acme for good? Going with it: 0 indexed documents, 0 uploaded files, "
        "0 conversations.",
        timeout=30_000,
    )
    page.locator("#keep-workspace").click()
    expect(for_good).to_be_hidden(timeout=30_000)
    assert (home / "workspaces" / "client-c").is_dir()
    workspace_card(page, "Acme").get_by_role("button", name="Delete").click()
    for_good.click()
    expect(names).to_have_text(["Default", "Client B"], timeout=30_000)
    expect(for_good).to_be_hidden()
    assert not (home / "workspaces" / "client-c").exists()


def test_user_add_grants_each_role_by_its_flag_and_user_list_names_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = str(tmp_path / "home")
    assert main(["workspace", "create", "Client B", "--home", home]) == 0
    for name, roles in (("rita", []), ("carl", ["--contribute"]), ("ann", ["--govern"])):
        flags = [flag for role in roles for flag in (role, "client-b")]
        command = ["user", "add", name, "--workspace", "client-b", *flags, "--no-password"]
        assert main([*command, "--home", home]) == 0
    users = load_settings(Path(home)).access.users
    may = {
        name: tuple(User(name, grants).may(action, "client-b") for action in ROLE_ACTIONS)
        for name, grants in users.items()
    }
    assert may == {
        "rita": (True, False, False),
        "carl": (True, True, False),
        "ann": (True, True, True),  # a governor uploads too
    }
    capsys.readouterr()
    assert main(["user", "list", "--home", home]) == 0
    listed = capsys.readouterr().out
    assert "carl                  client-b  (contributes to client-b)" in listed
    assert "ann                   client-b  (governs client-b)" in listed
