"""The open workspace's Sources: the upload box, what became of the last upload's files, the
sources listed (each upload the user may remove with a "remove", confirmed before it happens),
and the timer that shows them again while uploads are indexed."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from serving.page.uploads import Uploads


@dataclass(frozen=True)
class SourcesPanel:
    contributing: gr.Column  # the upload box and its choice, shown to those who may upload
    uploads: gr.File
    replace: gr.Checkbox  # files named as uploads already there replace them; unticked after
    uploaded: gr.HTML  # what became of each file of the last upload
    last_upload: gr.State  # each file of the last upload, and its fate
    sources: gr.HTML  # a "remove" beside each upload the user may remove; a governor's buttons
    removal: gr.Column  # a removal's confirmation: what it takes away, to remove or keep
    removal_said: gr.HTML
    remove_for_good: gr.Button
    keep_upload: gr.Button
    doomed: gr.State  # the upload to remove once confirmed: its workspace and name
    refresh_sources: gr.Button
    indexing_progress: gr.Timer  # active while uploads are indexed


# A "remove" clicked in the sources asks Python to confirm removing the upload it names; a
# governor's "archive" or "put back" sends the document and the state to set.
_SOURCES_CLICKS = """
element.addEventListener('click', (event) => {
  const remove = event.target.closest('button.remove');
  if (remove) trigger('select', {index: 0, value: remove.dataset.remove});
  const govern = event.target.closest('button.govern');
  if (govern) trigger('click', {doc: govern.dataset.govern, state: govern.dataset.state});
});
"""


def lay_out_sources() -> SourcesPanel:
    with gr.Accordion("Sources", open=False):
        with gr.Column(visible=False) as contributing:
            uploads = gr.File(
                label="Upload files into this workspace",
                file_count="multiple",
                elem_id="upload",
            )
            replace = gr.Checkbox(
                False,
                label="Replace documents of the same name (those you uploaded; a governor: any)",
                elem_id="upload-replace",
            )
        uploaded = gr.HTML("", elem_id="upload-outcomes")
        last_upload = gr.State([])
        sources = gr.HTML("", elem_id="sources", js_on_load=_SOURCES_CLICKS)
        with gr.Column(visible=False, elem_id="removal") as removal:
            removal_said = gr.HTML("")
            with gr.Row():
                remove_for_good = gr.Button(
                    "Remove", size="sm", variant="stop", elem_id="remove-for-good"
                )
                keep_upload = gr.Button("Keep", size="sm", elem_id="keep-upload")
        doomed = gr.State(None)
        refresh_sources = gr.Button("Refresh", size="sm", elem_id="refresh-sources")
        # Shows the uploads' and sources' states again every 2 s while uploads are indexed.
        indexing_progress = gr.Timer(2.0, active=False)
    return SourcesPanel(
        contributing,
        uploads,
        replace,
        uploaded,
        last_upload,
        sources,
        removal,
        removal_said,
        remove_for_good,
        keep_upload,
        doomed,
        refresh_sources,
        indexing_progress,
    )


def wire_sources(
    panel: SourcesPanel,
    uploading: Uploads,
    workspace: gr.Dropdown,
    status: gr.Markdown,
    chat: gr.Chatbot,
) -> None:
    """An upload taken, one removed once confirmed, the sources refreshed, and the progress
    shown while they are indexed (the sources, the timer, the uploads' fates, the workspace's
    ``status`` and the ``chat``'s hint on adding documents)."""
    sources_outputs = [panel.sources, panel.indexing_progress]
    progress_outputs = [*sources_outputs, panel.uploaded, status, chat]
    panel.uploads.upload(
        uploading.upload,
        [panel.uploads, workspace, panel.replace],
        [panel.uploads, panel.replace, panel.last_upload, *progress_outputs],
        api_name="upload",
        show_progress_on=panel.uploads,  # not over the chat, whose hint it only updates
        # The file data as sent: Gradio's processing would leave an empty file behind in its
        # folder per file; its check that each lies in its upload folder comes first.
        preprocess=False,
    ).failure(  # refused whole: the box emptied, the choice unticked too
        None, None, [panel.uploads, panel.replace], js="() => [null, false]"
    )
    panel.sources.select(
        uploading.confirm_removal,
        workspace,
        [panel.doomed, panel.removal_said, panel.removal],
        api_name="confirm_removal",
        api_visibility="private",  # a click in the list names the upload; a call could not
    )
    panel.remove_for_good.click(
        uploading.remove_upload,
        [panel.doomed, workspace],
        [panel.doomed, panel.removal, *sources_outputs],
        api_name="remove_upload",
    )
    panel.keep_upload.click(
        uploading.keep_upload,
        None,
        [panel.doomed, panel.removal],
        api_name="keep_upload",
        api_visibility="private",
    )
    panel.refresh_sources.click(
        uploading.show_sources, workspace, sources_outputs, api_name="sources"
    )
    panel.indexing_progress.tick(
        uploading.progress,
        [workspace, panel.last_upload],
        progress_outputs,
        api_visibility="private",
        show_progress="hidden",  # a tick every 2 s: no timer flashing over the sources
    )
