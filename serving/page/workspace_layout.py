"""The open workspace's view: its conversations, filters, sources and search by image beside
the chat, the evidence its answers cite, the cited passage's preview and the last queries'
traces; each wired to ``Chat`` (and the preview's governing row to ``Governance``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from rag_pipeline.config import Settings
from serving.page.chat import Chat, new_conversation
from serving.page.governance import Governance
from serving.page.governance_layout import GoverningRow, lay_out_governing, wire_governing
from serving.page.render import CITE_PREFIX
from serving.page.uploads_layout import SourcesPanel, lay_out_sources
from serving.page.workspaces import (
    CONVERSATION_PARAMETER,
    QUIET,
    WORKSPACE_PARAMETER,
    WorkspaceCards,
)

LANGUAGES = ["en", "zh", "ja", "ko", "fr", "de", "es", "it", "pt", "nl", "ru", "ar"]
# Gradio's Share button posts a picture to Hugging Face Spaces, and fails anywhere else.
PICTURE_BUTTONS = ["download", "fullscreen"]

# One listener for every citation link on the page (in answers, in the evidence list, a picture
# found, the preview's steps to a passage's other pages): it sends the cited chunk id to Python
# instead of following the link. A plain click on the previewed page zooms it in place, and
# another click or Escape zooms it out (a click with a modifier key opens it alone in a tab).
_CITATION_CLICKS = f"""
document.addEventListener('click', (event) => {{
  const link = event.target.closest('a[href^="{CITE_PREFIX}"]');
  if (!link) return;
  event.preventDefault();
  event.stopPropagation();
  const chunk = decodeURIComponent(link.getAttribute('href').slice({len(CITE_PREFIX)}));
  trigger('select', {{index: 0, value: chunk}});
}}, true);
document.addEventListener('click', (event) => {{
  const shown = event.target.closest('.preview-image');
  if (!shown || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  shown.classList.toggle('zoomed');
}}, true);
document.addEventListener('keydown', (event) => {{
  if (event.key === 'Escape') {{
    document.querySelectorAll('.preview-image.zoomed').forEach((z) => z.classList.remove('zoomed'));
  }}
}});
"""

# The open workspace and conversation written into the page's address (replacing it: Back
# leaves the page as before), none while the cards are shown.
_ADDRESS_KEPT = f"""
(workspace, conversation) => {{
  const query = new URLSearchParams();
  if (workspace) {{
    query.set('{WORKSPACE_PARAMETER}', workspace);
    if (conversation) query.set('{CONVERSATION_PARAMETER}', conversation);
  }}
  const search = query.toString() ? '?' + query : '';
  history.replaceState(history.state, '', location.pathname + search + location.hash);
}}
"""


@dataclass(frozen=True)
class Filters:
    documents: gr.Dropdown
    file_types: gr.CheckboxGroup
    languages: gr.CheckboxGroup
    after: gr.Textbox
    before: gr.Textbox

    @property
    def inputs(self) -> list[Any]:
        """Each filter, in the order the searching handlers take them."""
        return [self.documents, self.file_types, self.languages, self.after, self.before]


@dataclass(frozen=True)
class Answers:
    chat: gr.Chatbot
    question: gr.Textbox
    evidence: gr.HTML  # the cited passages, listed by file
    pictures: gr.HTML  # the pictures among the passages, each a link to its preview


@dataclass(frozen=True)
class Preview:
    page: gr.HTML  # the cited page or picture, its passage highlighted (from /api/preview)
    text: gr.HTML  # or the passage in its text
    chunk: gr.State  # the chunk id of the passage shown
    governing: GoverningRow

    @property
    def outputs(self) -> list[Any]:
        """What showing a passage sets: the page or the text, the chunk, the governing row."""
        return [self.page, self.text, self.chunk, *self.governing.outputs]


@dataclass(frozen=True)
class OpenedWorkspace:
    view: gr.Column
    to_home: gr.Button
    workspace: gr.Dropdown  # the open workspace's id
    status: gr.Markdown
    conversations: gr.Dropdown
    new: gr.Button
    delete: gr.Button
    filters: Filters
    sources: SourcesPanel
    query_picture: gr.Image
    find_similar: gr.Button
    answers: Answers
    preview: Preview
    refresh_traces: gr.Button
    traces: gr.JSON


def lay_out_workspace(settings: Settings) -> OpenedWorkspace:
    """The open workspace's view, hidden while the cards are shown."""
    with gr.Column(visible=False, elem_id="opened") as view:
        with gr.Row():
            to_home = gr.Button("← Workspaces", size="sm", elem_id="to-workspaces", scale=0)
            workspace = gr.Dropdown(
                label="Workspace",
                choices=[],
                # "" (the user's first workspace) by default, so gradio_client's /ask and the
                # other endpoints need no workspace named.
                value="",
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
                filters = _lay_out_filters()
                sources = lay_out_sources()
                if settings.rerank.model:  # without one, the fused order needs no notice
                    gr.Markdown(
                        f"Passages reranked by {settings.rerank.model}.", elem_id="rerank-notice"
                    )
                query_picture, find_similar = _lay_out_picture_search(settings)
            with gr.Column(scale=3):
                answers = _lay_out_answers(settings)
            # As wide as the chat: a page's body text is readable there without a click.
            with gr.Column(scale=3, min_width=420):
                preview = _lay_out_preview()
        with gr.Accordion("Traces", open=False):
            refresh_traces = gr.Button("Show the last queries", size="sm")
            traces = gr.JSON(label="Traces, newest first")
    return OpenedWorkspace(
        view=view,
        to_home=to_home,
        workspace=workspace,
        status=status,
        conversations=conversations,
        new=new,
        delete=delete,
        filters=filters,
        sources=sources,
        query_picture=query_picture,
        find_similar=find_similar,
        answers=answers,
        preview=preview,
        refresh_traces=refresh_traces,
        traces=traces,
    )


def _lay_out_filters() -> Filters:
    with gr.Accordion("Filters", open=False):
        return Filters(
            documents=gr.Dropdown(label="Documents", multiselect=True, choices=[]),
            file_types=gr.CheckboxGroup(label="File types", choices=[]),
            languages=gr.CheckboxGroup(label="Languages", choices=LANGUAGES),
            # "" by default, as every filter has one: gradio_client's /ask needs the question alone.
            after=gr.Textbox("", label="Modified after (YYYY-MM-DD)"),
            before=gr.Textbox("", label="Modified before (YYYY-MM-DD)"),
        )


def _lay_out_picture_search(settings: Settings) -> tuple[gr.Image, gr.Button]:
    """The picture to search by and its button, offered when CLIP is configured."""
    with gr.Accordion(
        "Search by image", open=False, visible=settings.images.clip_model is not None
    ):
        query_picture = gr.Image(
            label="Image",
            type="pil",
            sources=["upload", "clipboard"],
            buttons=PICTURE_BUTTONS,
            elem_id="query-picture",
        )
        find_similar = gr.Button("Find similar pictures", size="sm", elem_id="find-similar")
    return query_picture, find_similar


def _lay_out_answers(settings: Settings) -> Answers:
    chat = gr.Chatbot(label="Answers", height=460, buttons=["copy"], elem_id="chat")
    question = gr.Textbox(
        label="Question",
        placeholder="Ask in any language…",
        max_length=settings.serving.max_query_chars,
        elem_id="question",
    )
    evidence = gr.HTML("", js_on_load=_CITATION_CLICKS, elem_id="evidence", elem_classes="evidence")
    # Drawn by the picture route, never from Gradio's cache: see serving.api.
    pictures = gr.HTML("", visible=False, elem_id="pictures")
    return Answers(chat, question, evidence, pictures)


def _lay_out_preview() -> Preview:
    # The passage's caption and page steps above its page, where a click on a citation leaves
    # them in sight (under a page drawn the chat's width, they were below the window).
    text = gr.HTML("", elem_id="preview-text", elem_classes="preview")
    # Drawn by the preview route, never from Gradio's cache: see serving.api.
    page = gr.HTML("", visible=False, elem_id="preview-image", elem_classes="preview-image")
    return Preview(page, text, chunk=gr.State(None), governing=lay_out_governing())


def wire_workspace(
    opened: OpenedWorkspace,
    asking: Chat,
    governance: Governance,
    cards: WorkspaceCards,
    conversation: gr.State,
    resumed: gr.State,
) -> None:
    """Opening a workspace (the conversation ``resumed`` reopened), asking, searching by
    picture, the open ``conversation`` and the others, citations, governing and traces."""
    previewing = _previewing(opened, asking)
    previewing(
        _pictures_hidden(
            opened,
            opened.workspace.change(
                cards.choose_workspace,
                [opened.workspace, resumed],
                [*_opening_outputs(opened, conversation), resumed],
                api_name="open_workspace",
            ),
        )
    )
    _wire_searching(opened, asking, conversation, previewing)
    _wire_conversations(opened, asking, conversation, previewing)
    opened.answers.evidence.select(
        asking.show_citation, opened.workspace, opened.preview.outputs, api_visibility="private"
    )

    def governed(event: Any) -> None:
        """After a governing action, the passage shown again and the sources listed anew (a
        document taken offline or put back is marked there for the governor)."""
        previewing(event)
        event.then(
            cards.uploads.show_sources,
            opened.workspace,
            [opened.sources.sources, opened.sources.indexing_progress],
            api_name="governed_sources",
            api_visibility="private",
        )

    wire_governing(
        opened.preview.governing, governance, opened.preview.chunk, opened.workspace, governed
    )
    governed(
        opened.sources.sources.click(
            governance.govern_document,
            opened.workspace,
            None,
            api_name="govern_document",
            api_visibility="private",  # a click in the list names the document
        )
    )
    opened.refresh_traces.click(
        asking.show_traces, opened.workspace, opened.traces, api_name="traces"
    )


def _pictures_hidden(opened: OpenedWorkspace, event: Any) -> Any:
    """``event``, then the pictures an earlier answer found hidden (they are not kept with a
    conversation, and may be of another workspace)."""
    event.then(
        hide_pictures,
        None,
        opened.answers.pictures,
        api_visibility="private",
        show_progress="hidden",
    )
    return event


def hide_pictures() -> Any:
    return gr.HTML("", visible=False)


def _previewing(opened: OpenedWorkspace, asking: Chat) -> Callable[[Any], None]:
    """What follows an event that chose a passage to preview."""

    def previewing(event: Any) -> None:
        """After ``event``, the passage it chose to preview shown (none: the preview
        emptied), not the one an earlier answer cited; and the page's address naming the
        workspace and conversation open then."""
        event.then(
            asking.show_passage,
            [opened.preview.chunk, opened.workspace],
            opened.preview.outputs,
            api_visibility="private",
            show_progress=QUIET,
        ).then(None, [opened.workspace, opened.conversations], None, js=_ADDRESS_KEPT)

    return previewing


def _opening_outputs(opened: OpenedWorkspace, conversation: gr.State) -> list[Any]:
    """What opening a workspace sets: its chat, evidence and passage to preview, its
    conversations, filters and sources, the upload box (for those who may upload), and its
    status."""
    return [
        opened.answers.chat,
        conversation,
        opened.answers.evidence,
        opened.preview.chunk,
        opened.conversations,
        opened.filters.documents,
        opened.filters.file_types,
        opened.sources.sources,
        opened.sources.contributing,
        opened.status,
    ]


def _wire_searching(
    opened: OpenedWorkspace,
    asking: Chat,
    conversation: gr.State,
    previewing: Callable[[Any], None],
) -> None:
    """A question asked (checked first, in a step without outputs), and a picture searched
    by (a picture found opens its preview as a citation does)."""
    answers, workspace, filters = opened.answers, opened.workspace, opened.filters.inputs
    asked = answers.question.submit(
        asking.check_question,
        [answers.question, workspace, opened.filters.after, opened.filters.before],
        None,
        api_visibility="private",
        show_progress=QUIET,
    ).success(
        asking.ask,
        [answers.question, workspace, conversation, answers.chat, *filters],
        [
            answers.chat,
            answers.question,
            conversation,
            opened.conversations,
            answers.evidence,
            answers.pictures,
            opened.preview.chunk,
        ],
        api_name="ask",
    )
    previewing(asked)
    previewing(
        opened.find_similar.click(
            asking.search_by_picture,
            [opened.query_picture, workspace, *filters],
            [answers.evidence, answers.pictures, opened.preview.chunk],
            api_name="similar_pictures",
            show_progress=QUIET,
        )
    )


def _wire_conversations(
    opened: OpenedWorkspace,
    asking: Chat,
    conversation: gr.State,
    previewing: Callable[[Any], None],
) -> None:
    """A conversation reopened, a new one begun, the open one deleted."""
    chat, evidence, shown_chunk = opened.answers.chat, opened.answers.evidence, opened.preview.chunk
    previewing(
        _pictures_hidden(
            opened,
            opened.conversations.input(
                asking.open_conversation,
                [opened.conversations, opened.workspace],
                [chat, conversation, evidence, shown_chunk],
                api_name="open",
            ),
        )
    )
    previewing(
        opened.new.click(
            new_conversation,
            None,
            [
                chat,
                conversation,
                evidence,
                shown_chunk,
                opened.conversations,
                opened.answers.pictures,
            ],
            api_visibility="private",
        )
    )
    previewing(
        _pictures_hidden(
            opened,
            opened.delete.click(
                asking.delete_conversation,
                [conversation, opened.workspace],
                [chat, conversation, evidence, shown_chunk, opened.conversations],
                api_name="delete",
            ),
        )
    )
