"""The page's layout: the home of the workspaces' cards and the open workspace's view, in
Blocks, each part laid out and wired to its handlers by its own module."""

from __future__ import annotations

import gradio as gr

from serving.page.chat import Chat
from serving.page.governance import Governance
from serving.page.home_layout import draw_cards, lay_out_home, wire_home
from serving.page.uploads import Uploads
from serving.page.uploads_layout import wire_sources
from serving.page.workspace_layout import lay_out_workspace, wire_workspace
from serving.page.workspaces import WorkspaceCards
from serving.workspaces import ServedWorkspaces

PAGE_CSS = """
.evidence .file { margin: 0.4em 0 0.2em; font-weight: 600; }
.evidence .cite { margin: 0.1em 0 0.3em 0.8em; font-size: 0.92em; }
.evidence .where, .preview .where { color: var(--body-text-color-subdued); }
.evidence .cite.refused { font-size: 1em; }
.evidence span.refusal { color: var(--error-text-color); font-weight: 600; }
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
.preview-image img { max-width: 100%; border: 1px solid var(--border-color-primary);
                     cursor: zoom-in; }
/* The previewed page zoomed in place: over the whole window, at its drawn size. */
.preview-image.zoomed { position: fixed; inset: 0; z-index: 1000; overflow: auto; margin: 0;
                        padding: 1em; max-width: none; background: rgba(0, 0, 0, 0.8); }
.preview-image.zoomed img { display: block; margin: 0 auto; max-width: none; cursor: zoom-out; }
.preview .pages { margin: 0.2em 0; }
.preview .passage { max-height: 9em; overflow-y: auto; }
/* Above a drawn page, the passage alone: the page shows what surrounds it. */
.preview .passage .context { display: none; }
.preview .page-step { display: inline-block; min-width: 1.6em; text-align: center;
                      font-size: 1.2em; text-decoration: none; }
.preview span.page-step { color: var(--body-text-color-subdued); opacity: 0.4; }
.pictures { display: flex; flex-wrap: wrap; gap: 0.5em; }
.pictures a { display: flex; flex-direction: column; width: 9em; font-size: 0.85em; }
.pictures img { max-height: 8em; object-fit: contain; }
"""
# Gradio's cache (its uploads, what its components were handed) is emptied of files older
# than an hour, every hour: an upload the page never used (a script's POST) goes too.
CACHE_CLEANUP_SECONDS = (3600, 3600)  # how often, and from what age


def build_page(workspaces: ServedWorkspaces) -> gr.Blocks:
    asking, governance = Chat(workspaces), Governance(workspaces)
    uploading = Uploads(workspaces)
    cards = WorkspaceCards(workspaces, uploading)

    with gr.Blocks(title="rag-pipeline", delete_cache=CACHE_CLEANUP_SECONDS) as page:
        conversation = gr.State(None)  # the open conversation's id
        resumed = gr.State(None)  # the conversation the page's address names, to reopen
        signed_in = gr.HTML("", elem_id="signed-in")
        # The page opens on the workspaces' cards; a card's Open shows its workspace instead.
        home = lay_out_home()
        opened = lay_out_workspace(workspaces.settings)
        draw_cards(home, cards, opened.workspace, opened.view)
        wire_workspace(opened, asking, governance, cards, conversation, resumed)
        wire_sources(
            opened.sources, uploading, opened.workspace, opened.status, opened.answers.chat
        )
        wire_home(
            page, home, cards, opened.workspace, opened.view, opened.to_home, signed_in, resumed
        )
    return page
