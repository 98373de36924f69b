"""Files uploaded into the open workspace, each one's fate (refused and why, received, parsed,
then searchable or failed), and the workspace's sources and count while they are indexed; an
upload removed, once the user confirms it."""

from __future__ import annotations

import html
from contextlib import suppress
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.utils import get_upload_folder

from rag_pipeline.stages import StageFiles
from serving.access import Action
from serving.assistant import Assistant
from serving.page.handlers import Handlers, refusal
from serving.page.render import (
    adding_documents,
    counted,
    indexed_status,
    sources_html,
    uploads_html,
)
from serving.uploads import Upload
from serving.workspaces import Documents, NotAllowed


class Uploads(Handlers):
    def upload(
        self,
        files: list[dict[str, Any]] | None,
        workspace_id: str | None,
        replace: bool | None,
        request: gr.Request,
    ) -> tuple[Any, ...]:
        """Take the files sent (Gradio's file data, unprocessed: its path, checked by Gradio to
        lie in its upload folder, and the name as sent), those named as uploads already there
        replacing them if ``replace`` (and the user may): the upload box emptied, the choice to
        replace unticked (the next upload asks anew), the batch's files and what became of
        each, the sources, the progress timer and the count. An upload with no file taken is an
        error saying why each was refused."""
        shared = Path(get_upload_folder()).resolve()
        sent = [
            (file.get("orig_name") or Path(file["path"]).name, Path(file["path"]))
            for file in files or []
        ]
        if not sent:
            return None, gr.skip(), gr.skip(), *self.progress(workspace_id, [], request)
        # Gradio's check, once more: what is taken away are its uploads, nothing else.
        if not all(path.resolve().is_relative_to(shared) for _, path in sent):
            raise gr.Error("Only files uploaded through the page are taken.")
        try:
            taken = self.workspaces.upload(
                self.signed_in(request), workspace_id or "", sent, replace=bool(replace)
            )
        except NotAllowed as error:
            raise refusal(error) from error
        finally:
            _forget([path for _, path in sent], shared)
        received = [upload for upload in taken if upload.path]
        refused = "; ".join(f"{u.name}: {u.refused}" for u in taken if u.refused)
        if not received:  # an error, so that a client's call raises too (gradio_client: AppError)
            raise gr.Error(f"Nothing uploaded. {refused}", print_exception=False)
        gr.Info(f"{counted(len(received), 'file')} received; indexing now")
        if refused:
            gr.Warning(f"Refused: {refused}")
        batch = [_described(upload) for upload in taken]
        return None, False, batch, *self.progress(workspace_id, batch, request)

    def show_sources(self, workspace_id: str | None, request: gr.Request) -> tuple[str, Any]:
        """The sources' states, and the progress timer on while the workspace indexes."""
        assistant, running = self._refreshed(workspace_id, request)
        documents = self._documents(assistant, request)
        sources = self._sources(assistant, documents, request, running=running)
        return sources, gr.Timer(active=running)

    def confirm_removal(
        self, workspace_id: str | None, event: gr.SelectData, request: gr.Request
    ) -> tuple[Any, ...]:
        """A "remove" clicked in the sources (``event.value``: the upload's name): what removing
        it takes away, said before it happens, with the choice to remove it or keep it."""
        user = self.signed_in(request)
        try:
            workspace = self.workspaces.workspace(user, workspace_id or "", Action.REMOVE_OWN)
        except NotAllowed as error:
            raise refusal(error) from error
        name = str(event.value)
        if name not in self.workspaces.removable_uploads(user, workspace.id):
            raise gr.Error(f"{name} is not an upload of yours to remove", print_exception=False)
        said = (
            f"<p>Remove the upload <b>{html.escape(name)}</b> from {html.escape(workspace.name)}?"
            " Its file is deleted and its document leaves search once the index run ends.</p>"
        )
        return {"workspace": workspace.id, "name": name}, said, gr.Column(visible=True)

    def remove_upload(
        self, doomed: dict[str, str] | None, workspace_id: str | None, request: gr.Request
    ) -> tuple[Any, ...]:
        """Remove the upload the user confirmed removing (``doomed``: its workspace and name;
        the session's, never the browser's) from the open workspace, the confirmation closed,
        and the sources shown while the run takes it out."""
        user = self.signed_in(request)
        try:
            workspace = self.workspaces.workspace(user, workspace_id or "", Action.REMOVE_OWN)
            if not doomed or doomed["workspace"] != workspace.id:  # another workspace's since
                raise gr.Error("no removal confirmed in this workspace", print_exception=False)
            self.workspaces.remove_upload(user, workspace.id, doomed["name"])
        except NotAllowed as error:
            raise refusal(error) from error
        gr.Info(f"{doomed['name']} removed; taking it out of search")
        return None, gr.Column(visible=False), *self.show_sources(workspace.id, request)

    def keep_upload(self) -> tuple[Any, ...]:
        """A removal not gone on with: the confirmation closed."""
        return None, gr.Column(visible=False)

    def progress(
        self, workspace_id: str | None, batch: list[dict[str, Any]], request: gr.Request
    ) -> tuple[Any, ...]:
        """The sources and the timer, what became of each file of the last upload, the count of
        documents indexed, and the chat's hint on adding some (gone once there are)."""
        assistant, running = self._refreshed(workspace_id, request)
        documents = self._documents(assistant, request)  # read once for the three views
        stages = StageFiles(assistant.settings.stage_root)
        parsed = {sent["doc_id"] for sent in batch if sent["doc_id"] and _parsed(stages, sent)}
        return (
            self._sources(assistant, documents, request, running=running),
            gr.Timer(active=running),
            uploads_html(batch, documents.records, parsed, running=running),
            indexed_status(documents.records.values()),
            self.how_to_add(assistant, len(documents.records), request),
        )

    def how_to_add(self, assistant: Assistant, documents: int, request: gr.Request) -> gr.Chatbot:
        """The chat's hint, while it is empty, on how to add documents to a workspace with none
        (of ``documents``) and nothing to index; none once it has some."""
        workspace = assistant.settings.workspace
        may_contribute = self.signed_in(request).may(Action.UPLOAD, workspace)
        hint = adding_documents(assistant.settings, documents, may_contribute=may_contribute)
        return gr.Chatbot(placeholder=hint or "")

    def _sources(
        self, assistant: Assistant, documents: Documents, request: gr.Request, *, running: bool
    ) -> str:
        """The sources listed, a "remove" beside each upload the user may remove, and the
        governing buttons for one who may govern; another's own uploads taken offline marked."""
        workspace_id = assistant.settings.workspace
        user = self.signed_in(request)
        governs = user.may(Action.GOVERN, workspace_id)
        return sources_html(
            assistant.settings,
            documents,
            workspace_id,
            running=running,
            removable=self.workspaces.removable_uploads(user, workspace_id),
            governs=governs,
            own_offline={} if governs else self.workspaces.own_uploads_offline(user, workspace_id),
        )

    def _documents(self, assistant: Assistant, request: gr.Request) -> Documents:
        """The workspace's documents as the signed-in user sees them."""
        governs = self.signed_in(request).may(Action.SEE_OFFLINE, assistant.settings.workspace)
        return Documents.of(assistant.catalog, governs=governs)

    def _refreshed(self, workspace_id: str | None, request: gr.Request) -> tuple[Assistant, bool]:
        """The workspace's assistant on its newest index, and whether an indexing run the page
        started for it is under way."""
        assistant, _ = self.serving(request, workspace_id)
        running = self.workspaces.indexing(assistant.settings.workspace)
        assistant.refresh()  # what the lists call indexed is searchable
        return assistant, running


def _described(upload: Upload) -> dict[str, Any]:
    """What the page keeps of an upload (in its state): the name, the document it became and
    the version it is indexed at."""
    file = upload.file
    return {
        "name": upload.name,
        "doc_id": file.doc_id if file else None,
        "version": file.version if file else None,
        "refused": upload.refused,
    }


def _parsed(stages: StageFiles, sent: dict[str, Any]) -> bool:
    """Whether the parse stage has written the uploaded file's document, at the version uploaded
    (not an earlier upload's of the same name), without an error: one stage file's footer read."""
    meta = stages.parsed_meta(sent["doc_id"])
    return meta is not None and meta.version == sent["version"] and meta.error is None


def _forget(sent: list[Path], shared: Path) -> None:
    """Gradio's folders of the files sent (one per file's content, in ``shared``), emptied by
    the upload."""
    for path in sent:
        folder = path.parent.resolve()
        if folder.parent == shared:
            with suppress(OSError):  # not empty: the same content sent again meanwhile
                folder.rmdir()
