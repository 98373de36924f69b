"""What the page's handlers start from: the served workspaces, and who a request signs in."""

from __future__ import annotations

import gradio as gr

from serving.access import Action, User
from serving.assistant import Assistant
from serving.workspaces import NotAllowed, ServedWorkspaces


class Handlers:
    """The handlers of one part of the page (each a method Gradio calls with its inputs and
    the request, returning its outputs), over the workspaces the server answers for."""

    def __init__(self, workspaces: ServedWorkspaces) -> None:
        self.workspaces = workspaces

    def signed_in(self, request: gr.Request) -> User:
        try:
            return self.workspaces.signed_in(request.headers)
        except NotAllowed as error:  # the middleware lets nobody else through
            raise refusal(error) from error

    def serving(
        self, request: gr.Request, workspace_id: str | None, action: Action = Action.ASK
    ) -> tuple[Assistant, str]:
        """The chosen workspace's assistant and the user's name, if the user may do
        ``action`` in it."""
        user = self.signed_in(request)
        try:
            return self.workspaces.assistant(user, workspace_id or None, action), user.name
        except NotAllowed as error:
            raise refusal(error) from error


def refusal(error: Exception) -> gr.Error:
    """A refusal said on the page; the workspaces logged it in one line, so Gradio prints no
    traceback of it."""
    return gr.Error(str(error), print_exception=False)
