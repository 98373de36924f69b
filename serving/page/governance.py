"""Governing a workspace from the preview: the cited passage's document, or the passage alone,
taken out of search (archived or rejected), or put back."""

from __future__ import annotations

from typing import Any

import gradio as gr

from rag_pipeline.availability import AvailabilityError
from rag_pipeline.catalog import Availability
from serving.page.handlers import Handlers
from serving.workspaces import NotAllowed


class Governance(Handlers):
    def govern(
        self,
        state: Availability,
        whole: bool,
        chunk_id: str | None,
        workspace_id: str | None,
        request: gr.Request,
    ) -> None:
        if not chunk_id:
            raise gr.Error("Open a cited passage first.")
        user = self.signed_in(request)
        scopes = [True, False] if state == "active" else [whole]  # put back: both
        try:
            for scope in scopes:
                self.workspaces.set_availability(
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

    def button(self, state: Availability, whole: bool) -> Any:
        """``govern`` for one button, with the request Gradio passes to handlers that ask for
        it."""

        def handler(chunk_id: str | None, workspace_id: str | None, request: gr.Request) -> None:
            self.govern(state, whole, chunk_id, workspace_id, request)

        return handler
