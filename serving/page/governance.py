"""Governing a workspace from the preview: the cited passage's document, or the passage alone,
taken out of search (archived or rejected), or put back; only what fits where they stand is
offered. And from the sources: a document archived, or put back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import gradio as gr

from rag_pipeline.availability import AvailabilityError
from rag_pipeline.catalog import Availability
from serving.governance import Standing
from serving.page.handlers import Handlers, refusal
from serving.workspaces import NotAllowed


@dataclass(frozen=True, slots=True)
class Action:
    """A governing button: the state it sets, on the whole document or on the passage."""

    label: str
    elem_id: str
    state: Availability
    whole: bool
    variant: Literal["secondary", "stop"] = "secondary"


ACTIONS = (
    Action("Archive document", "archive", "archived", True),
    Action("Reject document", "reject", "rejected", True, "stop"),
    Action("Reject passage", "reject-passage", "rejected", False, "stop"),
    Action("Put back", "put-back", "active", True),  # whichever of the two is out of search
)

# What the sources offer a governor beside each document: put it back, or archive it.
SET_FROM_SOURCES: dict[str, Availability] = {"active": "active", "archived": "archived"}


def offered(standing: Standing | None) -> list[Any]:
    """The governing row and each action's button: shown when it would change something
    (none without a passage, or for those who may not govern)."""
    fitting = [standing is not None and standing.refusal(a.state, a.whole) is None for a in ACTIONS]
    return [gr.Row(visible=any(fitting)), *(gr.Button(visible=shown) for shown in fitting)]


class Governance(Handlers):
    def govern(
        self, action: Action, chunk_id: str | None, workspace_id: str | None, request: gr.Request
    ) -> None:
        """Set the state; an action that would change nothing (the page was behind) is said in
        a warning instead."""
        if not chunk_id:
            raise gr.Error("Open a cited passage first.")
        user = self.signed_in(request)
        try:
            standing = self.workspaces.standing(user, workspace_id or "", chunk_id)
            unchanged = standing.refusal(action.state, action.whole)
            if unchanged:
                gr.Warning(unchanged)
                return
            if action.state == "active":  # whichever of the two is out of search
                scopes = [whole for whole in (True, False) if standing.offline(whole)]
            else:
                scopes = [action.whole]
            for whole in scopes:
                self.workspaces.set_availability(
                    user, workspace_id or "", chunk_id, action.state, whole=whole
                )
        except NotAllowed as error:
            raise refusal(error) from error
        except AvailabilityError as error:
            raise gr.Error(str(error)) from error
        what = "the document" if scopes[0] else "the passage"
        gr.Info(
            f"{what.capitalize()} is back in search."
            if action.state == "active"
            else f"{what.capitalize()} is {action.state}: out of search now."
        )

    def govern_document(
        self, workspace_id: str | None, event: gr.EventData, request: gr.Request
    ) -> None:
        """An "archive" or "put back" clicked in the sources (``event``: the document's id and
        the state to set); one that would change nothing (the list was behind) is said in a
        warning instead."""
        doc_id, state = str(event.doc), str(event.state)
        if state not in SET_FROM_SOURCES:
            raise gr.Error(f"no such action in the sources: {state!r}", print_exception=False)
        user = self.signed_in(request)
        try:
            standing = self.workspaces.document_standing(user, workspace_id or "", doc_id)
            if unchanged := standing.refusal(SET_FROM_SOURCES[state], whole=True):
                gr.Warning(unchanged)
                return
            self.workspaces.set_document_availability(
                user, workspace_id or "", doc_id, SET_FROM_SOURCES[state]
            )
        except NotAllowed as error:
            raise refusal(error) from error
        except AvailabilityError as error:
            raise gr.Error(str(error)) from error
        gr.Info(
            f"{doc_id} is back in search."
            if state == "active"
            else f"{doc_id} is {state}: out of search now."
        )

    def button(self, action: Action) -> Any:
        """``govern`` for one button, with the request Gradio passes to handlers that ask for
        it."""

        def handler(chunk_id: str | None, workspace_id: str | None, request: gr.Request) -> None:
            self.govern(action, chunk_id, workspace_id, request)

        return handler
