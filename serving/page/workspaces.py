"""The workspaces a user may use: the one opened (its conversations, filters and sources), and
the cards listing them, each opening its workspace; users who may manage workspaces create them
and rename or delete each by its card."""

from __future__ import annotations

from typing import Any

import gradio as gr

from rag_pipeline.workspaces import Workspace, WorkspaceError
from serving.page.chat import conversation_choices
from serving.page.handlers import Handlers
from serving.page.render import card_html, signed_in_html
from serving.page.uploads import Uploads
from serving.workspaces import NotAllowed, ServedWorkspaces


class WorkspaceCards(Handlers):
    def __init__(self, workspaces: ServedWorkspaces, uploads: Uploads) -> None:
        super().__init__(workspaces)
        self.uploads = uploads  # an opened workspace shows its sources

    def on_load(self, request: gr.Request) -> tuple[Any, str]:
        """The workspaces to choose from (the first chosen), and who is signed in."""
        user = self.signed_in(request)
        visible = self.workspaces.visible(user)
        first = visible[0].id if visible else None
        signs_out = self.workspaces.authenticator.offers_sign_in and bool(
            user.grants and user.grants.password_hash
        )
        return (
            gr.Dropdown(choices=[(w.name, w.id) for w in visible], value=first),
            signed_in_html(user, signs_out=signs_out),
        )

    def choose_workspace(self, workspace_id: str | None, request: gr.Request) -> tuple[Any, ...]:
        """Open a workspace: its conversations, filters and sources; a fresh chat."""
        user = self.signed_in(request)
        try:
            assistant = self.workspaces.opened(user, workspace_id) if workspace_id else None
        except NotAllowed as error:
            raise gr.Error(str(error)) from error
        if assistant is None:
            return [], None, "", gr.Dropdown(choices=[]), gr.Dropdown(choices=[]), [], "", ""
        live = assistant.catalog.live_collection()
        records = assistant.catalog.documents(live.name).values() if live else []
        indexed = sorted(r.doc_id for r in records if r.indexed_version)
        types = sorted({r.file_type for r in records if r.indexed_version})
        return (
            [],
            None,
            "",
            conversation_choices(assistant, user.name, None),
            gr.Dropdown(choices=indexed, value=[]),
            gr.CheckboxGroup(choices=types, value=[]),
            self.uploads.show_sources(workspace_id, request)[0],
            f"{len(indexed)} documents indexed",
        )

    def manage(
        self,
        action: str,
        target: str,
        name: str,
        current: str | None,
        changes: int,
        request: gr.Request,
    ) -> tuple[Any, int, str]:
        """Create a workspace (and open it), or rename or delete ``target``; then the
        workspace dropdown (on the open one while it exists, else the first), the changes
        counted one more (the cards are drawn anew), and an empty name box."""
        user = self.signed_in(request)
        try:
            if action == "create":
                current = self.workspaces.create(user, name).id
            elif action == "rename":
                self.workspaces.rename(user, target, name)
            else:
                self.workspaces.delete(user, target)
        except (WorkspaceError, NotAllowed) as error:
            raise gr.Error(str(error)) from error
        visible = self.workspaces.visible(user)
        if current not in {w.id for w in visible}:
            current = visible[0].id if visible else None
        choices = [(w.name, w.id) for w in visible]
        return gr.Dropdown(choices=choices, value=current), changes + 1, ""

    def bound(self, action: str, target: str = "") -> Any:
        """``manage`` for one action on one workspace (none to create one), with the request
        Gradio passes to handlers that ask for it."""

        def handler(name: str, current: str | None, changes: int, request: gr.Request) -> Any:
            return self.manage(action, target, name, current, changes, request)

        return handler

    def draw(
        self, sort_by: str, request: gr.Request, workspace: gr.Dropdown, listed: gr.State
    ) -> None:
        """A card per workspace the user may use, to open it (in ``workspace``); for users who
        may manage workspaces, to rename or delete it too (each change counted in ``listed``)."""
        user = self.signed_in(request)
        manager = self.workspaces.may_manage(user)
        with gr.Row(elem_id="workspace-cards", elem_classes="cards"):
            for card in _sorted(self.workspaces.visible(user), sort_by):
                # Keyed: a click landing while the cards are drawn anew still counts.
                with gr.Column(elem_classes="card", min_width=240, key=("card", card.id)):
                    gr.HTML(card_html(card), key=("facts", card.id))
                    gr.Button("Open", size="sm", key=("open", card.id)).click(
                        _returning(card.id),
                        None,
                        workspace,
                        api_visibility="private",
                        key=("open", card.id),
                    )
                    if not manager:
                        continue
                    name = gr.Textbox(
                        card.name,
                        label="New name",
                        interactive=True,
                        key=("name", card.id, card.name),
                    )
                    with gr.Row():
                        for label, action in (("Rename", "rename"), ("Delete", "delete")):
                            gr.Button(
                                label,
                                size="sm",
                                variant="stop" if action == "delete" else "secondary",
                                key=(action, card.id),
                            ).click(
                                self.bound(action, card.id),
                                [name, workspace, listed],
                                [workspace, listed, name],
                                api_visibility="private",
                                key=(action, card.id),
                            )


def _returning(value: str) -> Any:
    """A handler setting its output to ``value`` (a card's Open: its workspace's id)."""
    return lambda: value


def _sorted(visible: list[Workspace], sort_by: str) -> list[Workspace]:
    """The workspaces by name (as listed: the default one first), or last opened first."""
    if sort_by == "last opened":
        return sorted(visible, key=lambda w: -(w.last_opened or 0.0))
    return visible
