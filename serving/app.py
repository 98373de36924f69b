"""The chat page: Gradio Blocks, thin over :class:`serving.assistant.Assistant`.

Answers stream into the chat with their citation markers as links; under the chat the cited
passages are listed by file; a click on a citation (in the answer or in the list) shows its page
with the passage highlighted, or the passage in its text, beside a link to the original file.
Pictures among the passages show as a gallery; with CLIP configured, an uploaded image finds the
pictures like it and the pages that hold them. Conversations are kept and can be reopened or
deleted; the last query traces are one tab away.

Everything happens in the workspace chosen at the top, among those the signed-in user may use
(``serving.workspaces``); files uploaded there go to its upload folder and are indexed at once.
The workspaces tab lists them as cards, each opening its workspace; users granted every workspace
create workspaces there, and rename or delete each by its card.
"""

from __future__ import annotations

import html
import io
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rag_pipeline.availability import AvailabilityError
from rag_pipeline.catalog import Availability, Catalog
from rag_pipeline.store.schema import QueryFilter
from rag_pipeline.workspaces import Workspace, WorkspaceError
from serving.access import User
from serving.answer import Answer
from serving.assistant import Assistant, Source, file_url
from serving.preview import PreviewError, preview
from serving.retrieval import Candidate, QueryError
from serving.workspaces import NotAllowed, ServedWorkspaces

# Gradio reads these when it builds the page; without them it looks for updates and counts use.
for _name, _value in (("GRADIO_ANALYTICS_ENABLED", "False"), ("HF_HUB_DISABLE_TELEMETRY", "1")):
    os.environ.setdefault(_name, _value)

import gradio as gr  # noqa: E402  (after the variables above)

_CITE_PREFIX = "#cite:"
_MARKER = re.compile(r"\[(\d+)\]")
LANGUAGES = ["en", "zh", "ja", "ko", "fr", "de", "es", "it", "pt", "nl", "ru", "ar"]

# One listener for every citation link on the page (in answers and in the evidence list): it
# sends the cited chunk id to Python instead of following the link.
_CITATION_CLICKS = f"""
document.addEventListener('click', (event) => {{
  const link = event.target.closest('a[href^="{_CITE_PREFIX}"]');
  if (!link) return;
  event.preventDefault();
  event.stopPropagation();
  const chunk = decodeURIComponent(link.getAttribute('href').slice({len(_CITE_PREFIX)}));
  trigger('select', {{index: 0, value: chunk}});
}}, true);
"""

PAGE_CSS = """
.evidence .file { margin: 0.4em 0 0.2em; font-weight: 600; }
.evidence .cite { margin: 0.1em 0 0.3em 0.8em; font-size: 0.92em; }
.evidence .where, .preview .where { color: var(--body-text-color-subdued); }
.preview .context { color: var(--body-text-color-subdued); }
.preview mark { background: #ffe08a; }
.cards { display: flex; flex-wrap: wrap; gap: 0.8em; }
.card { border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 0.6em 0.9em;
        min-width: 14em; }
.card .name { font-weight: 600; }
.card .facts { color: var(--body-text-color-subdued); font-size: 0.9em; }
"""


def build_page(workspaces: ServedWorkspaces) -> gr.Blocks:
    notice = (
        f"Passages reranked by {workspaces.settings.rerank.model}."
        if workspaces.settings.rerank.model
        else "No reranker configured: passages stay in the fused order of dense and keyword search."
    )

    def signed_in(request: gr.Request) -> User:
        user = workspaces.authenticator.user({k.lower(): v for k, v in request.headers.items()})
        if user is None:  # the middleware lets nobody else through
            raise gr.Error("sign in first")
        return user

    def serving(request: gr.Request, workspace_id: str | None) -> tuple[Assistant, str]:
        """The chosen workspace's assistant and the user's name, if the user may use it."""
        user = signed_in(request)
        try:
            return workspaces.assistant(user, workspace_id or None), user.name
        except NotAllowed as error:
            raise gr.Error(str(error)) from error

    with gr.Blocks(title="rag-pipeline") as page:
        conversation = gr.State(None)  # the open conversation's id
        with gr.Row():
            workspace = gr.Dropdown(
                label="Workspace",
                choices=[],
                allow_custom_value=True,  # its choices are set per user; access is checked
                elem_id="workspace",
                scale=1,
            )
            status = gr.Markdown("", elem_id="workspace-status")
        with gr.Row():
            with gr.Column(scale=1, min_width=220):
                conversations = gr.Dropdown(
                    label="Conversations", choices=[], elem_id="conversations"
                )
                with gr.Row():
                    new = gr.Button("New", size="sm", elem_id="new-conversation")
                    delete = gr.Button("Delete", size="sm", variant="stop", elem_id="delete")
                with gr.Accordion("Filters", open=False):
                    documents = gr.Dropdown(label="Documents", multiselect=True, choices=[])
                    file_types = gr.CheckboxGroup(label="File types", choices=[])
                    languages = gr.CheckboxGroup(label="Languages", choices=LANGUAGES)
                    after = gr.Textbox(label="Modified after (YYYY-MM-DD)")
                    before = gr.Textbox(label="Modified before (YYYY-MM-DD)")
                with gr.Accordion("Sources", open=False):
                    uploads = gr.File(
                        label="Upload files into this workspace",
                        file_count="multiple",
                        elem_id="upload",
                    )
                    sources = gr.HTML("", elem_id="sources")
                    refresh_sources = gr.Button("Refresh", size="sm", elem_id="refresh-sources")
                    # Shows the sources' states again every 2 s while uploads are indexed.
                    indexing_progress = gr.Timer(2.0, active=False)
                gr.Markdown(notice, elem_id="rerank-notice")
                with gr.Accordion(
                    "Search by image",
                    open=False,
                    visible=workspaces.settings.images.clip_model is not None,
                ):
                    query_picture = gr.Image(
                        label="Image",
                        type="pil",
                        sources=["upload", "clipboard"],
                        elem_id="query-picture",
                    )
                    find_similar = gr.Button(
                        "Find similar pictures", size="sm", elem_id="find-similar"
                    )
            with gr.Column(scale=3):
                chat = gr.Chatbot(label="Answers", height=460, buttons=["copy"], elem_id="chat")
                question = gr.Textbox(
                    label="Question", placeholder="Ask in any language…", elem_id="question"
                )
                evidence = gr.HTML(
                    "", js_on_load=_CITATION_CLICKS, elem_id="evidence", elem_classes="evidence"
                )
                gallery = gr.Gallery(
                    label="Pictures", columns=4, height=240, visible=False, elem_id="pictures"
                )
                shown_pictures = gr.State([])  # chunk id of each picture in the gallery
            with gr.Column(scale=2):
                shown_page = gr.Image(
                    label="Cited page",
                    type="pil",
                    format="png",
                    visible=False,
                    elem_id="preview-image",
                )
                shown_text = gr.HTML("", elem_id="preview-text", elem_classes="preview")
                shown_chunk = gr.State(None)  # the chunk id of the passage shown
                # For users who may govern the workspace: take it out of search, or put it back.
                with gr.Row(visible=False) as governing:
                    archive_document = gr.Button("Archive document", size="sm", elem_id="archive")
                    reject_document = gr.Button(
                        "Reject document", size="sm", variant="stop", elem_id="reject"
                    )
                    reject_passage = gr.Button(
                        "Reject passage", size="sm", variant="stop", elem_id="reject-passage"
                    )
                    put_back = gr.Button("Put back", size="sm", elem_id="put-back")
        with gr.Tab("Traces"):
            refresh_traces = gr.Button("Show the last queries", size="sm")
            traces = gr.JSON(label="Traces, newest first")
        with gr.Tab("Workspaces"):
            order = gr.Radio(
                ["name", "last opened"], value="name", label="Sort by", elem_id="card-order"
            )
            listed = gr.State(0)  # counts the changes to the workspaces: each draws the cards anew
            with gr.Row():
                new_name = gr.Textbox(label="Name", elem_id="workspace-name", scale=3)
                create = gr.Button("New", size="sm", elem_id="create-workspace")

            @gr.render(inputs=[order, listed])
            def show_cards(sort_by: str, _changes: int, request: gr.Request) -> None:
                """A card per workspace the user may use, to open it; for users who may manage
                workspaces, to rename or delete it too."""
                user = signed_in(request)
                manager = workspaces.may_manage(user)
                with gr.Row(elem_id="workspace-cards", elem_classes="cards"):
                    for card in _sorted(workspaces.visible(user), sort_by):
                        # Keyed: a click landing while the cards are drawn anew still counts.
                        with gr.Column(elem_classes="card", min_width=240, key=("card", card.id)):
                            gr.HTML(_card_html(card), key=("facts", card.id))
                            gr.Button("Open", size="sm", key=("open", card.id)).click(
                                _returning(card.id),
                                None,
                                workspace,
                                api_visibility="private",
                                key=("open", card.id),
                            )
                            if not manager:
                                continue
                            name = gr.Textbox(
                                card.name,
                                label="New name",
                                interactive=True,
                                key=("name", card.id, card.name),
                            )
                            with gr.Row():
                                for label, action in (("Rename", "rename"), ("Delete", "delete")):
                                    gr.Button(
                                        label,
                                        size="sm",
                                        variant="stop" if action == "delete" else "secondary",
                                        key=(action, card.id),
                                    ).click(
                                        _bound(manage, action, card.id),
                                        [name, workspace, listed],
                                        [workspace, listed, name],
                                        api_visibility="private",
                                        key=(action, card.id),
                                    )

        filters = [documents, file_types, languages, after, before]

        def ask(
            text: str,
            workspace_id: str | None,
            conversation_id: str | None,
            history: list[dict[str, Any]],
            doc_ids: list[str] | None,
            types: list[str] | None,
            langs: list[str] | None,
            since: str | None,
            until: str | None,
            request: gr.Request,
        ) -> Iterator[tuple[Any, ...]]:
            assistant, owner = serving(request, workspace_id)
            text = (text or "").strip()
            if not text:
                yield history, "", conversation_id, gr.skip(), gr.skip(), gr.skip(), gr.skip()
                return
            try:
                query_filter = _query_filter(doc_ids, types, langs, since, until)
            except ValueError as error:
                raise gr.Error(str(error)) from error
            history = [*_plain(history), {"role": "user", "content": text}]
            final, opened = Answer(), conversation_id
            try:
                for opened, final in assistant.ask(
                    text, conversation_id, query_filter, owner=owner
                ):
                    shown = [*history, {"role": "assistant", "content": _linked(final)}]
                    yield shown, "", opened, gr.skip(), gr.skip(), gr.skip(), gr.skip()
            except QueryError as error:
                raise gr.Error(str(error)) from error
            sources = [Source.of(n, final.passages[n - 1]).as_dict() for n in final.cited]
            yield (
                [*history, {"role": "assistant", "content": _linked(final)}],
                "",
                opened,
                _conversation_choices(assistant, owner, opened),
                _evidence_html(sources, workspace_id),
                *_gallery(assistant, [*final.passages, *final.pictures]),
            )

        def search_by_picture(
            picture: Any,
            workspace_id: str | None,
            doc_ids: list[str] | None,
            types: list[str] | None,
            langs: list[str] | None,
            since: str | None,
            until: str | None,
            request: gr.Request,
        ) -> tuple[Any, ...]:
            assistant, _ = serving(request, workspace_id)
            if picture is None:
                raise gr.Error("Choose an image to search with first.")
            try:
                chosen = _query_filter(doc_ids, types, langs, since, until)
                found = assistant.search_pictures(picture, chosen)
            except (QueryError, ValueError) as error:
                raise gr.Error(str(error)) from error
            sources = [Source.of(n, candidate).as_dict() for n, candidate in enumerate(found, 1)]
            return _evidence_html(sources, workspace_id), *_gallery(assistant, found)

        def open_conversation(
            conversation_id: str | None, workspace_id: str | None, request: gr.Request
        ) -> tuple[Any, ...]:
            assistant, owner = serving(request, workspace_id)
            if not conversation_id:
                return [], None, ""
            messages = assistant.history.messages(conversation_id, owner)
            history = [
                {"role": m.role, "content": _link_markers(m.content, m.sources)} for m in messages
            ]
            last = next((m.sources for m in reversed(messages) if m.role == "assistant"), [])
            return history, conversation_id, _evidence_html(last, workspace_id)

        def delete_conversation(
            conversation_id: str | None, workspace_id: str | None, request: gr.Request
        ) -> tuple[Any, ...]:
            assistant, owner = serving(request, workspace_id)
            if conversation_id:
                assistant.history.delete_conversation(conversation_id, owner)
            return [], None, "", _conversation_choices(assistant, owner, None)

        def show_citation(
            workspace_id: str | None, event: gr.SelectData, request: gr.Request
        ) -> tuple[Any, ...]:
            return show_chunk(request, workspace_id, str(event.value))

        def show_picture(
            chunk_ids: list[str],
            workspace_id: str | None,
            event: gr.SelectData,
            request: gr.Request,
        ) -> tuple[Any, ...]:
            return show_chunk(request, workspace_id, chunk_ids[event.index])

        def show_chunk(
            request: gr.Request, workspace_id: str | None, chunk_id: str
        ) -> tuple[Any, ...]:
            """The passage's preview, its chunk id, and the governing buttons for those who
            may use them."""
            assistant, _ = serving(request, workspace_id)
            may_govern = signed_in(request).may_govern(assistant.settings.workspace)
            image, caption = previewed(assistant, workspace_id, chunk_id, may_govern)
            return image, caption, chunk_id, gr.Row(visible=may_govern)

        def govern(
            state: Availability,
            whole: bool,
            chunk_id: str | None,
            workspace_id: str | None,
            request: gr.Request,
        ) -> None:
            if not chunk_id:
                raise gr.Error("Open a cited passage first.")
            user = signed_in(request)
            scopes = [True, False] if state == "active" else [whole]  # put back: both
            try:
                for scope in scopes:
                    workspaces.set_availability(
                        user, workspace_id or "", chunk_id, state, whole=scope
                    )
            except (NotAllowed, AvailabilityError) as error:
                raise gr.Error(str(error)) from error
            what = "the document" if whole or state == "active" else "the passage"
            gr.Info(
                f"{what.capitalize()} is back in search."
                if state == "active"
                else f"{what.capitalize()} is {state}: out of search now."
            )

        def previewed(
            assistant: Assistant, workspace_id: str | None, chunk_id: str, may_govern: bool
        ) -> tuple[Any, str]:
            try:
                shown = preview(
                    assistant.settings, assistant.catalog, chunk_id, offline_shown=may_govern
                )
            except PreviewError as error:
                return gr.Image(value=None, visible=False), f"<p>{html.escape(str(error))}</p>"
            link = file_url(shown.doc_id, workspace_id)
            where = f", page {shown.page}" if shown.page else ""
            caption = (
                f"<p><b>{html.escape(shown.doc_id)}</b>{where} · "
                f"<a href='{link}' target='_blank' id='original-file'>open the original</a></p>"
            )
            image = gr.Image(value=_image(shown.png), visible=True) if shown.png else None
            return image or gr.Image(value=None, visible=False), caption + shown.html

        def choose_workspace(workspace_id: str | None, request: gr.Request) -> tuple[Any, ...]:
            """Open a workspace: its conversations, filters and sources; a fresh chat."""
            user = signed_in(request)
            try:
                assistant = workspaces.opened(user, workspace_id) if workspace_id else None
            except NotAllowed as error:
                raise gr.Error(str(error)) from error
            if assistant is None:
                return [], None, "", gr.Dropdown(choices=[]), gr.Dropdown(choices=[]), [], "", ""
            live = assistant.catalog.live_collection()
            records = assistant.catalog.documents(live.name).values() if live else []
            indexed = sorted(r.doc_id for r in records if r.indexed_version)
            types = sorted({r.file_type for r in records if r.indexed_version})
            return (
                [],
                None,
                "",
                _conversation_choices(assistant, user.name, None),
                gr.Dropdown(choices=indexed, value=[]),
                gr.CheckboxGroup(choices=types, value=[]),
                show_sources(workspace_id, request)[0],
                f"{len(indexed)} documents indexed",
            )

        def on_load(request: gr.Request) -> Any:
            user = signed_in(request)
            visible = workspaces.visible(user)
            first = visible[0].id if visible else None
            return gr.Dropdown(choices=[(w.name, w.id) for w in visible], value=first)

        def upload(
            files: list[str] | None, workspace_id: str | None, request: gr.Request
        ) -> tuple[Any, str, Any]:
            if files:
                try:
                    written = workspaces.upload(
                        signed_in(request), workspace_id or "", [Path(f) for f in files]
                    )
                except (ValueError, NotAllowed) as error:
                    raise gr.Error(str(error)) from error
                gr.Info(f"{len(written)} file(s) uploaded; indexing them now")
            return None, *show_sources(workspace_id, request)

        def show_sources(workspace_id: str | None, request: gr.Request) -> tuple[str, Any]:
            """The sources' states, and the progress timer on while the workspace indexes."""
            assistant, _ = serving(request, workspace_id)
            running = workspaces.indexing(assistant.settings.workspace)
            assistant.refresh()  # what the list calls indexed is searchable
            return (
                _sources_html(assistant, workspace_id, running=running),
                gr.Timer(active=running),
            )

        def show_traces(workspace_id: str | None, request: gr.Request) -> Any:
            assistant, owner = serving(request, workspace_id)
            return assistant.history.traces(owner, 20)

        def manage(
            action: str,
            target: str,
            name: str,
            current: str | None,
            changes: int,
            request: gr.Request,
        ) -> tuple[Any, int, str]:
            """Create a workspace (and open it), or rename or delete ``target``; then the
            workspace dropdown (on the open one while it exists, else the first), the changes
            counted one more (the cards are drawn anew), and an empty name box."""
            user = signed_in(request)
            try:
                if action == "create":
                    current = workspaces.create(user, name).id
                elif action == "rename":
                    workspaces.rename(user, target, name)
                else:
                    workspaces.delete(user, target)
            except (WorkspaceError, NotAllowed) as error:
                raise gr.Error(str(error)) from error
            visible = workspaces.visible(user)
            if current not in {w.id for w in visible}:
                current = visible[0].id if visible else None
            choices = [(w.name, w.id) for w in visible]
            return gr.Dropdown(choices=choices, value=current), changes + 1, ""

        opened_outputs = [
            chat,
            conversation,
            evidence,
            conversations,
            documents,
            file_types,
            sources,
            status,
        ]
        workspace.change(choose_workspace, workspace, opened_outputs, api_name="open_workspace")
        question.submit(
            ask,
            [question, workspace, conversation, chat, *filters],
            [chat, question, conversation, conversations, evidence, gallery, shown_pictures],
            api_name="ask",
        )
        find_similar.click(
            search_by_picture,
            [query_picture, workspace, *filters],
            [evidence, gallery, shown_pictures],
            api_name="similar_pictures",
        )
        shown_outputs = [shown_page, shown_text, shown_chunk, governing]
        gallery.select(
            show_picture, [shown_pictures, workspace], shown_outputs, api_visibility="private"
        )
        conversations.input(
            open_conversation,
            [conversations, workspace],
            [chat, conversation, evidence],
            api_name="open",
        )
        new.click(
            lambda: ([], None, "", gr.Dropdown(value=None), gr.Gallery(value=None, visible=False)),
            None,
            [chat, conversation, evidence, conversations, gallery],
            api_visibility="private",
        )
        delete.click(
            delete_conversation,
            [conversation, workspace],
            [chat, conversation, evidence, conversations],
            api_name="delete",
        )
        evidence.select(show_citation, workspace, shown_outputs, api_visibility="private")
        for button, state, whole in (
            (archive_document, "archived", True),
            (reject_document, "rejected", True),
            (reject_passage, "rejected", False),
            (put_back, "active", True),
        ):
            button.click(
                _governing(govern, state, whole),
                [shown_chunk, workspace],
                None,
                api_visibility="private",
            )
        refresh_traces.click(show_traces, workspace, traces, api_name="traces")
        uploads.upload(
            upload, [uploads, workspace], [uploads, sources, indexing_progress], api_name="upload"
        )
        refresh_sources.click(
            show_sources, workspace, [sources, indexing_progress], api_name="sources"
        )
        indexing_progress.tick(
            show_sources, workspace, [sources, indexing_progress], api_visibility="private"
        )
        create.click(
            _bound(manage, "create"),
            [new_name, workspace, listed],
            [workspace, listed, new_name],
            api_visibility="private",
        )
        page.load(on_load, None, workspace, api_visibility="private")
    return page


def _bound(manage: Any, action: str, target: str = "") -> Any:
    """``manage`` for one action on one workspace (none to create one), with the request Gradio
    passes to handlers that ask for it."""

    def handler(name: str, current: str | None, changes: int, request: gr.Request) -> Any:
        return manage(action, target, name, current, changes, request)

    return handler


def _returning(value: str) -> Any:
    """A handler setting its output to ``value`` (a card's Open: its workspace's id)."""
    return lambda: value


def _governing(govern: Any, state: Availability, whole: bool) -> Any:
    """``govern`` for one button, with the request Gradio passes to handlers that ask for it."""

    def handler(chunk_id: str | None, workspace_id: str | None, request: gr.Request) -> None:
        govern(state, whole, chunk_id, workspace_id, request)

    return handler


def _sources_html(assistant: Assistant, workspace_id: str | None, *, running: bool) -> str:
    """The workspace's folders and each document's state (indexing, indexed, or failed and
    why), with a download of each original."""
    settings = assistant.settings
    live = assistant.catalog.live_collection()
    records = assistant.catalog.documents(live.name) if live else {}
    parts = ["<div class='evidence'>"]
    for folder in settings.watched_folders:
        name = "uploads" if folder == settings.upload_folder else folder.name
        parts.append(f"<div class='file'>{html.escape(name)}</div>")
    if running:
        parts.append("<p><i>indexing…</i></p>")
    states = {
        doc_id: f"indexed, {record.chunks} chunks"
        if record.state == "indexed"
        else f"failed: {record.error or 'unknown reason'}"
        for doc_id, record in records.items()
    }
    uploaded = settings.upload_folder.iterdir() if settings.upload_folder.is_dir() else []
    for path in uploaded:  # not in the catalog yet
        states.setdefault(f"uploads/{path.name}", "indexing" if running else "not indexed yet")
    for doc_id, state in sorted(states.items()):
        download = (
            f" <a href='{file_url(doc_id, workspace_id)}' download class='download'>download</a>"
            if doc_id in records
            else ""
        )
        parts.append(
            f"<div class='cite' data-doc='{html.escape(doc_id)}'>{html.escape(doc_id)} "
            f"<span class='where'>{html.escape(state)}</span>{download}</div>"
        )
    parts.append("</div>")
    return "\n".join(parts)


def _sorted(visible: list[Workspace], sort_by: str) -> list[Workspace]:
    """The workspaces by name (as listed: the default one first), or last opened first."""
    if sort_by == "last opened":
        return sorted(visible, key=lambda w: -(w.last_opened or 0.0))
    return visible


def _card_html(listed: Workspace) -> str:
    """A workspace's card: name, sources, documents, last opened."""
    with Catalog(listed.settings) as catalog:
        live = catalog.live_collection()
        indexed = sum(
            1 for r in (catalog.documents(live.name).values() if live else []) if r.indexed_version
        )
    opened = (
        datetime.fromtimestamp(listed.last_opened, UTC).strftime("%Y-%m-%d %H:%M UTC")
        if listed.last_opened
        else "never"
    )
    facts = (
        f"{len(listed.settings.watched_folders)} sources · {indexed} documents · "
        f"last opened {opened}"
    )
    return (
        f"<div class='name' data-workspace='{html.escape(listed.id)}'>"
        f"{html.escape(listed.name)}</div><div class='facts'>{html.escape(facts)}</div>"
    )


def _plain(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gradio hands messages back as lists of content parts; keep role and text."""
    plain = []
    for message in history or []:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        plain.append({"role": message["role"], "content": content or ""})
    return plain


def _linked(answer: Answer) -> str:
    """The answer with each marker [n] as a link to its passage's preview."""
    sources = [
        {"number": n, "chunk_id": answer.passages[n - 1].payload.get("chunk_id", "")}
        for n in answer.cited
    ]
    return _link_markers(answer.text, sources)


def _link_markers(text: str, sources: list[dict[str, Any]]) -> str:
    chunks = {source["number"]: source["chunk_id"] for source in sources}

    def link(match: re.Match[str]) -> str:
        chunk = chunks.get(int(match.group(1)))
        return (
            f"[[{match.group(1)}]]({_CITE_PREFIX}{quote(chunk, safe='')})"
            if chunk
            else match.group(0)
        )

    return _MARKER.sub(link, text)


def _evidence_html(sources: list[dict[str, Any]], workspace_id: str | None) -> str:
    """The cited passages, grouped by file, each citation a link to its preview."""
    if not sources:
        return ""
    by_file: dict[str, list[dict[str, Any]]] = {}
    for source in sources:
        by_file.setdefault(source["doc_id"], []).append(source)
    parts = ["<div class='evidence'><p><b>Evidence</b></p>"]
    for doc_id, cited in by_file.items():
        original = file_url(doc_id, workspace_id)
        parts.append(
            f"<div class='file'>{html.escape(cited[0]['file_name'])} "
            f"<a href='{original}' target='_blank'>↗</a></div>"
        )
        for source in cited:
            where = ", ".join(
                part
                for part in (
                    f"p. {source['page']}" if source.get("page") else "",
                    html.escape(source.get("section") or ""),
                )
                if part
            )
            parts.append(
                f"<div class='cite'><a href='{_CITE_PREFIX}{quote(source['chunk_id'], safe='')}' "
                f"class='citation'>[{source['number']}]</a> "
                f"<span class='where'>{where}</span> {html.escape(source['snippet'])}</div>"
            )
    parts.append("</div>")
    return "\n".join(parts)


def _gallery(assistant: Assistant, found: list[Candidate]) -> tuple[Any, list[str]]:
    """The pictures among ``found`` as a gallery (hidden when none), and their chunk ids."""
    items, chunk_ids = [], []
    for candidate in found:
        if candidate.payload.get("chunk_id") in chunk_ids:
            continue
        picture = assistant.picture(candidate)
        if picture is not None:
            payload = candidate.payload
            page = f" · p. {payload['page']}" if payload.get("page") else ""
            items.append((picture, f"{Path(payload.get('file_path', '')).name}{page}"))
            chunk_ids.append(payload.get("chunk_id", ""))
    return gr.Gallery(value=items or None, visible=bool(items)), chunk_ids


def _conversation_choices(assistant: Assistant, owner: str, selected: str | None) -> Any:
    choices = [(c.title, c.id) for c in assistant.history.conversations(owner)]
    return gr.Dropdown(choices=choices, value=selected)


def _query_filter(
    documents: list[str] | None,
    file_types: list[str] | None,
    languages: list[str] | None,
    after: str | None,
    before: str | None,
) -> QueryFilter:
    return QueryFilter(
        doc_ids=tuple(documents or ()),
        file_types=tuple(file_types or ()),
        langs=tuple(languages or ()),
        modified_after=_date(after, "Modified after"),
        modified_before=_date(before, "Modified before", end_of_day=True),
    )


def _date(value: str | None, label: str, *, end_of_day: bool = False) -> float | None:
    if not value or not value.strip():
        return None
    try:
        day = datetime.strptime(value.strip(), "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError as error:
        raise ValueError(f"{label}: write the date as YYYY-MM-DD, e.g. 2025-03-31") from error
    return day.timestamp() + (86_399.999 if end_of_day else 0.0)


def _image(png: bytes) -> Any:
    from PIL import Image

    return Image.open(io.BytesIO(png))
