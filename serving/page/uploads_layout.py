"""The open workspace's Sources: the upload box, what became of the last upload's files, the
sources listed, and the timer that shows them again while uploads are indexed."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from serving.page.uploads import Uploads


@dataclass(frozen=True)
class SourcesPanel:
    contributing: gr.Column  # the upload box and its choice, shown to those who may upload
    uploads: gr.File
    replace: gr.Checkbox  # files named as uploads already there replace them
    uploaded: gr.HTML  # what became of each file of the last upload
    last_upload: gr.State  # each file of the last upload, and its fate
    sources: gr.HTML
    refresh_sources: gr.Button
    indexing_progress: gr.Timer  # active while uploads are indexed


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
        sources = gr.HTML("", elem_id="sources")
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
        refresh_sources,
        indexing_progress,
    )


def wire_sources(
    panel: SourcesPanel, uploading: Uploads, workspace: gr.Dropdown, status: gr.Markdown
) -> None:
    """An upload taken, the sources refreshed, and the progress shown while they are indexed
    (the sources, the timer, the uploads' fates and the workspace's ``status``)."""
    sources_outputs = [panel.sources, panel.indexing_progress]
    progress_outputs = [*sources_outputs, panel.uploaded, status]
    panel.uploads.upload(
        uploading.upload,
        [panel.uploads, workspace, panel.replace],
        [panel.uploads, panel.last_upload, *progress_outputs],
        api_name="upload",
        # The file data as sent: Gradio's processing would leave an empty file behind in its
        # folder per file; its check that each lies in its upload folder comes first.
        preprocess=False,
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
