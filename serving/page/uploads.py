"""Files uploaded into the open workspace, and its sources' states while they are indexed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from serving.page.handlers import Handlers
from serving.page.render import sources_html
from serving.workspaces import NotAllowed


class Uploads(Handlers):
    def upload(
        self, files: list[str] | None, workspace_id: str | None, request: gr.Request
    ) -> tuple[Any, str, Any]:
        if files:
            try:
                written = self.workspaces.upload(
                    self.signed_in(request), workspace_id or "", [Path(f) for f in files]
                )
            except (ValueError, NotAllowed) as error:
                raise gr.Error(str(error)) from error
            gr.Info(f"{len(written)} file(s) uploaded; indexing them now")
        return None, *self.show_sources(workspace_id, request)

    def show_sources(self, workspace_id: str | None, request: gr.Request) -> tuple[str, Any]:
        """The sources' states, and the progress timer on while the workspace indexes."""
        assistant, _ = self.serving(request, workspace_id)
        running = self.workspaces.indexing(assistant.settings.workspace)
        assistant.refresh()  # what the list calls indexed is searchable
        return (
            sources_html(assistant, workspace_id, running=running),
            gr.Timer(active=running),
        )
