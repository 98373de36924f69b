"""The page's handlers called as Gradio calls them, without a browser or a server: a signed-in
request in, the components' new values out, over a real index."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pytest
from gradio.utils import get_upload_folder
from PIL import Image

from rag_pipeline.catalog import Catalog
from rag_pipeline.cli import main
from rag_pipeline.config import load_settings
from rag_pipeline.workspaces import find_workspace
from rag_pipeline_tests.index_state import live_chunks
from rag_pipeline_tests.processes import within
from rag_pipeline_tests.serving.conftest import serving, write_corpus
from serving.access import add_user
from serving.assistant import ANSWER_TAKEN_OFFLINE
from serving.history import History
from serving.page import gr
from serving.page.chat import Chat, reopened
from serving.page.governance import ACTIONS, Governance
from serving.page.layout import build_page
from serving.page.render import card_html, sources_html, time_ago
from serving.page.uploads import Uploads
from serving.page.workspaces import SEARCHED_FROM, HomeParts, WorkspaceCards
from serving.workspaces import Documents, ServedWorkspaces

NO_FILTERS = ([], [], [], "", "")  # documents, file types, languages, after, before


@dataclass
class Page:
    """The page's handlers over one served home, and a request signed in by each of its users."""

    workspaces: ServedWorkspaces
    reader: gr.Request  # may use the default workspace, may not govern it
    manager: gr.Request  # may use, govern and manage every workspace

    def __post_init__(self) -> None:
        self.chat = Chat(self.workspaces)
        self.governance = Governance(self.workspaces)
        self.cards = WorkspaceCards(self.workspaces, Uploads(self.workspaces))


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    """The shared corpus indexed in a home of its own (adding users changes its settings),
    with a reader and a manager who sign in by token."""
    root = tmp_path_factory.mktemp("handlers")
    home = root / "home"
    assert main(["index", "--home", str(home), "--source", str(write_corpus(root / "docs"))]) == 0
    reader = add_user(home, "reader", None, ["default"])
    manager = add_user(home, "manager", None, ["*"], govern=["*"])
    workspaces = ServedWorkspaces(load_settings(home))
    try:
        yield Page(workspaces, _signed_in(reader), _signed_in(manager))
    finally:
        workspaces.close()


def _signed_in(token: str) -> gr.Request:
    return gr.Request(headers={"Authorization": f"Bearer {token}"})


def _refusal(error: pytest.ExceptionInfo[gr.Error]) -> str:
    return str(error.value.message)


def test_an_answer_links_its_markers_to_the_evidence_listed_by_file(page: Page) -> None:
    *streamed, last = page.chat.ask(
        "When do owls hunt?", "default", None, [], *NO_FILTERS, page.reader
    )
    history, question, conversation, conversations, evidence, pictures, previewed = last
    assert [message["role"] for message in history] == ["user", "assistant"]
    assert history[0]["content"] == "When do owls hunt?" and question == ""
    answer = history[1]["content"]
    assert "Owls hunt at night" in answer
    cited = re.findall(r"\[\[1\]\]\((#cite:[^)]+)\)", answer)
    assert cited and f"<a href='{cited[0]}' class='citation'>[1]</a>" in evidence
    assert evidence.startswith("<div class='evidence'><p><b>Evidence</b></p>")
    assert (
        "<div class='file'>guide.md "
        "<a href='/api/file/guide.md?doc_id=docs%2Fguide.md&amp;workspace=default' "
        "target='_blank'>↗</a></div>"
    ) in evidence
    assert (conversations.value, conversations.choices) == (
        conversation,
        [("When do owls hunt?", conversation)],
    )
    assert pictures.visible is False  # none among the passages
    assert previewed == unquote(cited[0].removeprefix("#cite:"))  # the preview follows it
    assert streamed and all(state[2] == conversation for state in streamed)
    # The markers are linked once the answer is whole, not at each streamed piece.
    assert all("#cite:" not in state[0][-1]["content"] for state in streamed)


def test_an_answer_with_nothing_to_quote_shows_the_closest_passages_cited(page: Page) -> None:
    *_, last = page.chat.ask(
        "What is the capital of Mongolia?", "default", None, [], *NO_FILTERS, page.reader
    )
    history, _, _, _, evidence, *_ = last
    answer = history[1]["content"]
    assert answer.startswith("Nothing here answers this directly. The closest passages: [[1]](")
    links = re.findall(r"\[\[(\d)\]\]\((#cite:[^)]+)\)", answer)
    assert [number for number, _ in links] == ["1", "2", "3"]
    assert all(f"<a href='{link}' class='citation'>[{n}]</a>" in evidence for n, link in links)


def test_a_date_filter_not_written_as_a_date_is_refused_with_the_format(page: Page) -> None:
    with pytest.raises(gr.Error) as refused:
        list(page.chat.ask("owls", "default", None, [], [], [], [], "31/03/2025", "", page.reader))
    assert _refusal(refused) == "Modified after: write the date as YYYY-MM-DD, e.g. 2025-03-31"


def test_a_question_refused_is_said_in_a_toast_before_the_answer_streams(page: Page) -> None:
    # Gradio covers each output of a failed event with "Error" until closed: the asking event
    # covered the answer, the question box and Conversations, so the refusals come first, in a
    # step without outputs.
    limit = page.workspaces.settings.serving.max_query_chars
    refusals = {
        f"the query is {limit + 1} characters long: at most {limit} are accepted": (
            "o" * (limit + 1),
            "",
        ),
        "Modified after: write the date as YYYY-MM-DD, e.g. 2025-03-31": ("owls", "31/03/2025"),
    }
    for message, (text, since) in refusals.items():
        with pytest.raises(gr.Error) as refused:
            page.chat.check_question(text, "default", since, "", page.reader)
        assert _refusal(refused) == message
    assert page.chat.check_question("o" * limit, "default", "", "", page.reader) is None
    built = build_page(page.workspaces)
    events = {event.fn.__qualname__: event for event in built.fns.values() if event.fn}
    checking, asking = events["Chat.check_question"], events["Chat.ask"]
    assert (checking.outputs, checking.show_progress) == ([], "hidden")
    assert (asking.trigger_after, asking.trigger_only_on_success) == (checking._id, True)
    (question,) = [b for b in built.blocks.values() if getattr(b, "elem_id", "") == "question"]
    assert question.max_length == limit


def test_a_cited_passage_offers_the_governing_buttons_to_a_governor_only(page: Page) -> None:
    chunk = live_chunks(page.workspaces.settings.home, "docs/guide.md")[0]["chunk_id"]
    for request, governs in ((page.reader, False), (page.manager, True)):
        image, caption, shown, governing, *_ = page.chat.show_chunk(request, "default", chunk)
        assert image.visible is False  # a text file: its passage, no page picture
        assert caption.startswith("<p><b>docs/guide.md</b> · <a href='/api/file/guide.md?doc_id=")
        assert "id='original-file'>open the original</a>" in caption
        assert shown == chunk and governing.visible is governs
    image, caption, shown, governing, *buttons = page.chat.show_chunk(page.manager, "default", None)
    assert (image.visible, caption, shown, governing.visible) == (False, "", None, False)
    assert not any(button.visible for button in buttons)


def test_only_the_governing_actions_that_fit_are_offered_and_a_stale_one_only_warns(
    page: Page,
) -> None:
    chunk = live_chunks(page.workspaces.settings.home, "docs/report.pdf")[0]["chunk_id"]
    archive, _, reject_passage, put_back = (page.governance.button(a) for a in ACTIONS)

    def offered() -> tuple[list[str], str]:
        """The governing buttons shown to the manager, and what the preview says first."""
        _, caption, _, _, *buttons = page.chat.show_chunk(page.manager, "default", chunk)
        shown = [action.elem_id for action, b in zip(ACTIONS, buttons, strict=True) if b.visible]
        return shown, caption.split("</p>")[0]

    assert offered()[0] == ["archive", "reject", "reject-passage"]
    try:
        archive(chunk, "default", page.manager)
        assert offered() == (
            ["reject", "put-back"],
            "<p class='standing'><b>The document is archived: out of search.</b>",
        )
        for stale, warning in (
            (archive, "The document is archived already."),
            (reject_passage, "The whole document is archived: put it back first."),
        ):
            with pytest.warns(UserWarning, match=f"^{re.escape(warning)}$"):
                stale(chunk, "default", page.manager)
        put_back(chunk, "default", page.manager)
        reject_passage(chunk, "default", page.manager)
        assert offered() == (
            ["archive", "reject", "put-back"],
            "<p class='standing'><b>This passage is out of search.</b>",
        )
        put_back(chunk, "default", page.manager)
        assert offered()[0] == ["archive", "reject", "reject-passage"]
        with pytest.warns(UserWarning, match="^It is in search already.$"):
            put_back(chunk, "default", page.manager)
    finally:
        page.workspaces.set_availability(
            page.cards.signed_in(page.manager), "default", chunk, "active", whole=True
        )


def test_a_refused_governing_action_says_why(page: Page) -> None:
    chunk = live_chunks(page.workspaces.settings.home, "docs/guide.md")[0]["chunk_id"]
    refusals = {
        "Open a cited passage first.": (None, page.manager),
        "reader may not take documents out of search here": (chunk, page.reader),
        "docs/guide.md changed since this answer: search again": (
            "docs/guide.md@0000#0",
            page.manager,
        ),
    }
    for message, (chunk_id, request) in refusals.items():
        with pytest.raises(gr.Error) as refused:
            page.governance.button(ACTIONS[0])(chunk_id, "default", request)
        assert _refusal(refused) == message


def test_the_pages_address_reopens_its_workspace_on_the_users_own_conversation(
    page: Page,
) -> None:
    *_, asked = page.chat.ask(
        "Where do herons stand?", "default", None, [], *NO_FILTERS, page.reader
    )
    conversation = asked[2]
    address = {"workspace": "default", "conversation": conversation}
    *_, home, opened, resumed = page.cards.on_load(_at(page.reader, **address))
    assert (home.visible, opened.visible, resumed) == (False, True, conversation)
    elsewhere = _at(page.reader, workspace="nowhere", conversation=conversation)
    *_, home, opened, resumed = page.cards.on_load(elsewhere)
    assert (home.visible, opened.visible, resumed) == (True, False, None)

    chat, shown, evidence, previewed, listed, *_, resumed = page.cards.choose_workspace(
        "default", conversation, page.reader
    )
    assert [m["role"] for m in chat.value] == ["user", "assistant"]
    assert chat.value[0]["content"] == [{"text": "Where do herons stand?", "type": "text"}]
    assert (shown, listed.value, resumed) == (conversation, conversation, None)
    assert "guide.md" in evidence and previewed == asked[-1]
    # Another user's conversation is not theirs to reopen: a fresh chat.
    chat, shown, evidence, previewed, *_ = page.cards.choose_workspace(
        "default", conversation, page.manager
    )
    assert (chat.value, shown, evidence, previewed) == ([], None, "", None)


def _at(request: gr.Request, **address: str) -> gr.Request:
    """The request, from a page whose address holds ``address``."""
    return gr.Request(headers=request.kwargs["headers"], query_params=address)


def test_a_card_says_how_long_ago_its_workspace_was_opened_in_words(page: Page) -> None:
    hour = 3_600
    said = {
        0: "just now",
        59: "just now",
        60: "1 minute ago",
        5 * 60 + 30: "5 minutes ago",
        hour: "1 hour ago",
        26 * hour: "1 day ago",
        13 * 24 * hour: "1 week ago",
        400 * 24 * hour: "1 year ago",
    }
    assert {elapsed: time_ago(1e9, 1e9 + elapsed) for elapsed in said} == said
    page.cards.create("Opened", 0, page.manager)
    try:
        opened = find_workspace(page.workspaces.settings, "opened")
        assert card_html(opened, "manager", governs=False).endswith(
            "no documents yet · not opened yet</div>"
        )
        page.cards.choose_workspace("opened", None, page.manager)
        opened = find_workspace(page.workspaces.settings, "opened")
        assert card_html(opened, "manager", governs=False).endswith(
            "no documents yet · opened just now</div>"
        )
    finally:  # the other tests' cards as they were
        page.cards.delete("opened", None, 0, page.manager)


def _cards(page: Page, request: gr.Request, wanted: str = "") -> gr.Blocks:
    """The cards the request's user sees (those ``wanted`` names), drawn."""
    with gr.Blocks() as blocks:
        parts = HomeParts(
            gr.Dropdown(),
            gr.Column(),
            gr.Column(),
            gr.State(0),
            gr.State(),
            gr.Column(),
            gr.HTML(),
            gr.State(),
            gr.Column(),
            gr.Textbox(),
        )
        page.cards.draw("name", wanted, request, parts)
    return blocks


def _drawn(page: Page, request: gr.Request, wanted: str = "") -> list[str]:
    """The labels of the buttons on the cards the request's user sees, in order."""
    blocks = _cards(page, request, wanted)
    return [block.value for block in blocks.blocks.values() if isinstance(block, gr.Button)]


def test_a_reader_gets_open_on_each_card_and_a_manager_new_rename_and_delete_too(
    page: Page,
) -> None:
    reader_creates = page.cards.on_load(page.reader)[3]
    manager_creates = page.cards.on_load(page.manager)[3]
    assert (reader_creates.visible, manager_creates.visible) == (False, True)
    with pytest.raises(gr.Error) as refused:
        page.cards.create("Client B", 0, page.reader)
    assert _refusal(refused) == "reader may not create, rename or delete workspaces"
    chosen, search, changes, name, home, opened = page.cards.create("Client B", 0, page.manager)
    assert (chosen.value, chosen.choices) == (
        "client-b",
        [("Default", "default"), ("Client B", "client-b")],
    )
    assert (search.visible, changes, name, home.visible, opened.visible) == (
        False,
        1,
        "",
        False,
        True,
    )
    assert _drawn(page, page.reader) == ["Open"]  # granted the default workspace only
    # The default workspace is renamed, never deleted.
    assert _drawn(page, page.manager) == ["Open", "Rename", "Open", "Rename", "Delete"]


def test_the_cards_events_escape_the_tables_check_and_only_delete_checks_as_none_else_acts(
    page: Page,
) -> None:
    # Made as the cards are drawn, after the server's start checked the page's events: Open
    # and Rename only set what the page shows (opening, renaming are the table's events);
    # Delete's confirmation, which reads a workspace's contents, checks its user itself.
    drawn = _cards(page, page.manager).fns.values()
    assert {event.fn.__qualname__ for event in drawn if event.fn is not None} == {
        "_opening.<locals>.<lambda>",
        "_renaming.<locals>.<lambda>",
        "WorkspaceCards.deleting.<locals>.confirm_deletion",
    }
    home = page.workspaces.settings.root
    governor = _signed_in(add_user(home, "governor", None, ["default"], govern=["default"]))
    for request in (page.reader, governor):  # no admin, governing or not
        with pytest.raises(gr.Error) as refused:
            page.cards.deleting("default")(request)
        assert "may not create, rename or delete workspaces" in _refusal(refused)


def test_deleting_a_workspace_first_names_what_goes_with_it(page: Page) -> None:
    page.cards.create("Doomed", 0, page.manager)
    doomed = find_workspace(page.workspaces.settings, "doomed")
    for name in ("a.md", "b.md"):
        (doomed.settings.upload_folder / name).write_text("# A note\n", encoding="utf-8")
    history = History(doomed.home)
    history.new_conversation("What is doomed?", "someone")
    history.close()
    assert card_html(doomed, "manager", governs=False).endswith(  # uploads held: a source
        "<div class='facts'>1 source · 0 documents · not opened yet</div>"
    )

    confirm_deletion = page.cards.deleting("doomed")
    target, confirming, facts = confirm_deletion(page.manager)
    assert (target, confirming.visible) == ("doomed", True)
    assert facts == (
        "<p>Delete <b>Doomed</b> for good? Going with it: 0 indexed documents, 2 uploaded "
        "files, 1 conversation. Folders it watches elsewhere stay as they are.</p>"
    )
    for target, request, refusal in (
        ("doomed", page.reader, "reader may not create, rename or delete workspaces"),
        ("default", page.manager, "the default workspace cannot be deleted"),
    ):
        with pytest.raises(gr.Error) as refused:
            page.cards.deleting(target)(request)
        assert _refusal(refused) == refusal
    manager = page.cards.signed_in(page.manager)
    assert page.workspaces.contents(manager, "default").documents == 3

    deleted = page.cards.delete("doomed", "doomed", 4, page.manager)
    chosen, _, changes, awaiting, confirming = deleted
    assert (chosen.value, changes, awaiting, confirming.visible) == (None, 5, None, False)
    assert not doomed.home.exists()


def test_many_workspaces_bring_a_search_box_that_finds_their_cards_by_name(page: Page) -> None:
    for number in range(SEARCHED_FROM):
        page.cards.create(f"Team {number}", 0, page.manager)
    assert page.cards.on_load(page.manager)[1].visible is True
    assert page.cards.on_load(page.reader)[1].visible is False  # one card
    assert _drawn(page, page.manager, " team 3") == ["Open", "Rename", "Delete"]
    assert _drawn(page, page.manager, "TEAM") == ["Open", "Rename", "Delete"] * SEARCHED_FROM


@pytest.mark.slow  # an index run in a process of its own, killed once it has parsed
def test_an_upload_reads_parsed_once_parsed_and_never_from_an_earlier_uploads_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill_at: Callable[..., dict[str, str]]
) -> None:
    home = tmp_path / "home"
    uploader = _signed_in(add_user(home, "uploader", None, ["default"], contribute=["default"]))
    for name, value in kill_at("after-parse").items():  # the index runs the uploads start
        monkeypatch.setenv(name, value)
    workspaces = ServedWorkspaces(load_settings(home))
    uploads = Uploads(workspaces)

    def upload(text: str) -> tuple[list[dict[str, str]], str]:
        """note.md sent as Gradio hands it over (a copy in a folder of its own in Gradio's
        upload folder): the batch kept, and what the page says of the file."""
        copy = Path(get_upload_folder()) / uuid.uuid4().hex / "note.md"
        copy.parent.mkdir(parents=True)
        copy.write_text(text, encoding="utf-8")
        _, _, batch, *_, shown, _, _ = uploads.upload(
            [{"path": str(copy), "orig_name": "note.md"}], "default", True, uploader
        )
        return batch, shown

    def state(shown: str) -> str:
        [said] = re.findall(r"note\.md <span class='where'>([^<]*)</span>", shown)
        return said

    try:
        batch, shown = upload("# Herons\n\nHerons wait in the shallows.\n")
        assert state(shown) == "received, indexing…"
        within(120, "the run killed after parsing", lambda: not workspaces.indexing("default"))
        *_, shown, count, _ = uploads.progress("default", batch, uploader)
        assert (state(shown), count) == ("parsed, not indexed yet", "0 documents indexed")
        workspaces.close()  # no run starts now: nothing parses the next upload
        _, shown = upload("# Herons\n\nHerons wait, then strike.\n")
        assert state(shown) == "received, not indexed yet"  # note.md's parse is the earlier's
    finally:
        workspaces.close()


def test_a_refused_workspace_change_shows_its_toast_and_leaves_the_cards_visible(
    page: Page,
) -> None:
    # Gradio covers each output of a failed event with "Error" unless its progress is hidden:
    # New with no name covered the whole home (an output), until closed by hand.
    page.cards.create("Deletable", 0, page.manager)
    events = [*build_page(page.workspaces).fns.values(), *_cards(page, page.manager).fns.values()]
    changing = {
        "WorkspaceCards.create",
        "WorkspaceCards.rename",
        "WorkspaceCards.deleting.<locals>.confirm_deletion",  # a card's Delete, to confirm
        "WorkspaceCards.delete",
    }
    progress = {
        (event.fn.__qualname__, event.show_progress)
        for event in events
        if event.fn is not None and event.fn.__qualname__ in changing
    }
    assert progress == {(name, "hidden") for name in changing}


def test_a_refused_picture_search_warns_in_a_toast_and_leaves_what_was_shown(
    page: Page,
) -> None:
    # It raised gr.Error, whose "Error" covered the evidence and the pictures until closed.
    for picture, warning in (
        (None, "Choose an image to search with first."),
        (Image.new("RGB", (8, 8)), "search by image needs a CLIP model (images.clip_model)"),
    ):
        with pytest.warns(UserWarning, match=f"^{re.escape(warning)}$"):
            shown = page.chat.search_by_picture(picture, "default", *NO_FILTERS, page.reader)
        assert shown == (gr.skip(),) * 3  # the evidence, the pictures, the passage previewed
    events = build_page(page.workspaces).fns.values()
    [searching] = [e for e in events if e.fn and e.fn.__qualname__ == "Chat.search_by_picture"]
    assert searching.show_progress == "hidden"  # any other refusal: a toast alone too


def test_the_only_picture_gradio_holds_is_the_one_searched_by_and_it_offers_no_share_button(
    page: Page,
) -> None:
    # Gradio's cache serves any file in it to anyone signed in: the cited page and the pictures
    # found are drawn by the API's routes, which check the reader and the passage's state.
    pictures = [
        block
        for block in build_page(page.workspaces).blocks.values()
        if isinstance(block, gr.Image | gr.Gallery)
    ]
    assert [picture.elem_id for picture in pictures] == ["query-picture"]
    # Gradio's Share button works on Spaces only.
    assert "download" in pictures[0].buttons and "share" not in pictures[0].buttons


def test_the_sources_count_each_documents_chunks_in_the_singular_or_plural(page: Page) -> None:
    listed, _ = page.cards.uploads.show_sources("default", page.reader)
    home = page.workspaces.settings.home
    counts = {doc: len(live_chunks(home, doc)) for doc in ("docs/guide.md", "docs/report.pdf")}
    assert 1 in counts.values() and max(counts.values()) > 1
    for doc, count in counts.items():
        said = "indexed, 1 chunk<" if count == 1 else f"indexed, {count} chunks<"
        assert f"{doc} <span class='where'>{said}" in listed


def test_opening_a_workspace_or_a_conversation_or_deleting_one_hides_the_pictures_found(
    page: Page,
) -> None:
    # The pictures an answer found are not kept with its conversation, and may be another
    # workspace's: each of these events is followed by hiding them.
    built = build_page(page.workspaces)
    [pictures] = [b for b in built.blocks.values() if getattr(b, "elem_id", "") == "pictures"]
    events = list(built.fns.values())
    for api_name in ("open_workspace", "open", "delete"):
        [event] = [e for e in events if e.api_name == api_name]
        followers = [e for e in events if e.trigger_after == event._id]
        assert any(pictures._id in [o._id for o in e.outputs] for e in followers), api_name


def test_the_sources_list_each_folders_documents_under_its_name(tmp_path: Path) -> None:
    folders = {name: tmp_path / name for name in ("notes", "papers")}
    for name, folder in folders.items():
        folder.mkdir()
        (folder / f"{name}-1.md").write_text(f"# {name}\n\nAbout {name}.\n", encoding="utf-8")
    home = tmp_path / "home"
    sources = [arg for folder in folders.values() for arg in ("--source", str(folder))]
    assert main(["index", "--home", str(home), *sources]) == 0
    settings = load_settings(home)
    with Catalog(settings) as catalog:
        listed = sources_html(settings, Documents.of(catalog, governs=False), None, running=False)
    headings = [listed.index(f"<div class='file'>{name}</div>") for name in folders]
    rows = [listed.index(f"data-doc='{name}/{name}-1.md'") for name in folders]
    assert headings[0] < rows[0] < headings[1] < rows[1]


def test_a_kept_answer_citing_a_document_taken_offline_since_shows_a_reader_no_text(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    assert (
        main(["index", "--home", str(home), "--source", str(write_corpus(tmp_path / "docs"))]) == 0
    )
    for assistant in serving(load_settings(home)):
        question = "When do owls hunt?"
        conversation, final = list(assistant.ask(question, owner="reader"))[-1]
        assert {final.passages[n - 1].payload["doc_id"] for n in final.cited} == {"docs/guide.md"}
        assert main(["archive", "docs/guide.md", "--home", str(home)]) == 0
        for governs in (False, True):
            history, _, evidence, previewed = reopened(
                assistant, "reader", conversation, None, governs=governs
            )
            answer = history[-1]["content"]
            assert history[0]["content"] == question
            if governs:
                assert "Owls hunt at night" in answer and "Owls hunt" in evidence
            else:
                assert (answer, evidence, previewed) == (ANSWER_TAKEN_OFFLINE, "", None)
        # What a model is given as the conversation so far (Assistant.ask) is the same.
        kept = assistant.kept_messages(conversation, "reader", governs=False)
        assert [m.content for m in kept] == [question, ANSWER_TAKEN_OFFLINE]
