"""The page's layout: its components, in Blocks, and each event wired to its handler."""

from __future__ import annotations

from typing import Any

import gradio as gr

from serving.page.chat import Chat, new_conversation
from serving.page.governance import Governance
from serving.page.governance_layout import lay_out_governing, wire_governing
from serving.page.home_layout import draw_cards, lay_out_home, wire_home
from serving.page.render import CITE_PREFIX
from serving.page.uploads import Uploads
from serving.page.uploads_layout import lay_out_sources, wire_sources
from serving.page.workspaces import (
    CONVERSATION_PARAMETER,
    QUIET,
    WORKSPACE_PARAMETER,
    WorkspaceCards,
)
from serving.workspaces import ServedWorkspaces

LANGUAGES = ["en", "zh", "ja", "ko", "fr", "de", "es", "it", "pt", "nl", "ru", "ar"]
# Gradio's Share button posts a picture to Hugging Face Spaces, and fails anywhere else.
PICTURE_BUTTONS = ["download", "fullscreen"]

# One listener for every citation link on the page (in answers and in the evidence list): it
# sends the cited chunk id to Python instead of following the link.
_CITATION_CLICKS = f"""
document.addEventListener('click', (event) => {{
  const link = event.target.closest('a[href^="{CITE_PREFIX}"]');
  if (!link) return;
  event.preventDefault();
  event.stopPropagation();
  const chunk = decodeURIComponent(link.getAttribute('href').slice({len(CITE_PREFIX)}));
  trigger('select', {{index: 0, value: chunk}});
}}, true);
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
.signed-in { text-align: right; }
/* Gradio's footer ends on a separator when it shows one link alone (Use via API). */
footer > .divider:last-child { display: none; }
.signed-in form { display: inline; margin-left: 0.6em; }
"""


def build_page(workspaces: ServedWorkspaces) -> gr.Blocks:
    notice = (
        f"Passages reranked by {workspaces.settings.rerank.model}."
        if workspaces.settings.rerank.model
        else "No reranker configured: passages stay in the fused order of dense and keyword search."
    )
    asking, governance = Chat(workspaces), Governance(workspaces)
    uploading = Uploads(workspaces)
    cards = WorkspaceCards(workspaces, uploading)

    with gr.Blocks(title="rag-pipeline") as page:
        conversation = gr.State(None)  # the open conversation's id
        resumed = gr.State(None)  # the conversation the page's address names, to reopen
        signed_in = gr.HTML("", elem_id="signed-in")
        # The page opens on the workspaces' cards; a card's Open shows its workspace instead.
        home = lay_out_home()
        with gr.Column(visible=False, elem_id="opened") as opened:
            with gr.Row():
                to_home = gr.Button("← Workspaces", size="sm", elem_id="to-workspaces", scale=0)
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
                    sources_panel = lay_out_sources()
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
                            buttons=PICTURE_BUTTONS,
                            elem_id="query-picture",
                        )
                        find_similar = gr.Button(
                            "Find similar pictures", size="sm", elem_id="find-similar"
                        )
                with gr.Column(scale=3):
                    chat = gr.Chatbot(label="Answers", height=460, buttons=["copy"], elem_id="chat")
                    question = gr.Textbox(
                        label="Question",
                        placeholder="Ask in any language…",
                        max_length=workspaces.settings.serving.max_query_chars,
                        elem_id="question",
                    )
                    evidence = gr.HTML(
                        "", js_on_load=_CITATION_CLICKS, elem_id="evidence", elem_classes="evidence"
                    )
                    gallery = gr.Gallery(
                        label="Pictures",
                        columns=4,
                        height=240,
                        visible=False,
                        buttons=[*PICTURE_BUTTONS, "download_all"],
                        elem_id="pictures",
                    )
                    shown_pictures = gr.State([])  # chunk id of each picture in the gallery
                with gr.Column(scale=2):
                    shown_page = gr.Image(
                        label="Cited page",
                        type="pil",
                        format="png",
                        visible=False,
                        buttons=PICTURE_BUTTONS,
                        elem_id="preview-image",
                    )
                    shown_text = gr.HTML("", elem_id="preview-text", elem_classes="preview")
                    shown_chunk = gr.State(None)  # the chunk id of the passage shown
                    governing = lay_out_governing()
            with gr.Accordion("Traces", open=False):
                refresh_traces = gr.Button("Show the last queries", size="sm")
                traces = gr.JSON(label="Traces, newest first")

        draw_cards(home, cards, workspace, opened)

        filters = [documents, file_types, languages, after, before]
        shown_outputs = [shown_page, shown_text, shown_chunk, *governing.outputs]

        def previewing(event: Any) -> None:
            """After ``event``, the passage it chose to preview shown (none: the preview
            emptied), not the one an earlier answer cited; and the page's address naming the
            workspace and conversation open then."""
            event.then(
                asking.show_passage,
                [shown_chunk, workspace],
                shown_outputs,
                api_visibility="private",
                show_progress=QUIET,
            ).then(None, [workspace, conversations], None, js=_ADDRESS_KEPT)

        opened_outputs = [
            chat,
            conversation,
            evidence,
            shown_chunk,
            conversations,
            documents,
            file_types,
            sources_panel.sources,
            status,
        ]
        previewing(
            workspace.change(
                cards.choose_workspace,
                [workspace, resumed],
                [*opened_outputs, resumed],
                api_name="open_workspace",
            )
        )
        asked = question.submit(
            asking.check_question,
            [question, workspace, after, before],
            None,
            api_visibility="private",
            show_progress=QUIET,
        ).success(
            asking.ask,
            [question, workspace, conversation, chat, *filters],
            [
                chat,
                question,
                conversation,
                conversations,
                evidence,
                gallery,
                shown_pictures,
                shown_chunk,
            ],
            api_name="ask",
        )
        previewing(asked)
        previewing(
            find_similar.click(
                asking.search_by_picture,
                [query_picture, workspace, *filters],
                [evidence, gallery, shown_pictures, shown_chunk],
                api_name="similar_pictures",
                show_progress=QUIET,
            )
        )
        gallery.select(
            asking.show_picture,
            [shown_pictures, workspace],
            shown_outputs,
            api_visibility="private",
        )
        previewing(
            conversations.input(
                asking.open_conversation,
                [conversations, workspace],
                [chat, conversation, evidence, shown_chunk],
                api_name="open",
            )
        )
        previewing(
            new.click(
                new_conversation,
                None,
                [chat, conversation, evidence, shown_chunk, conversations, gallery],
                api_visibility="private",
            )
        )
        previewing(
            delete.click(
                asking.delete_conversation,
                [conversation, workspace],
                [chat, conversation, evidence, shown_chunk, conversations],
                api_name="delete",
            )
        )
        evidence.select(asking.show_citation, workspace, shown_outputs, api_visibility="private")
        wire_governing(governing, governance, shown_chunk, workspace, previewing)
        refresh_traces.click(asking.show_traces, workspace, traces, api_name="traces")
        wire_sources(sources_panel, uploading, workspace, status)
        wire_home(page, home, cards, workspace, opened, to_home, signed_in, resumed)
    return page
