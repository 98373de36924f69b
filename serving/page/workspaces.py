"""The workspace home the page opens on: a card per workspace the user may use (name, sources,
documents, last opened), sorted, found by a search box when there are many, each opening its
workspace. Users who may manage workspaces create them there, and rename or delete each by its
card, a deletion first naming what goes; the default workspace is never deleted. Opening one
shows its conversations, filters and sources."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import gradio as gr

from rag_pipeline.ids import DEFAULT_WORKSPACE
from rag_pipeline.workspaces import Workspace, WorkspaceError
from serving.access import Action, User
from serving.page.chat import conversation_choices, reopened
from serving.page.handlers import Handlers, refusal
from serving.page.render import (
    card_html,
    deletion_html,
    indexed_status,
    signed_in_html,
)
from serving.page.uploads import Uploads
from serving.workspaces import Documents, NotAllowed, ServedWorkspaces

SEARCHED_FROM = 9  # cards: from this many on, a search box finds them by name
# The page's address names the open workspace and conversation (``?workspace=…&conversation=…``):
# a reload, or the address copied, opens them again.
WORKSPACE_PARAMETER, CONVERSATION_PARAMETER = "workspace", "conversation"
# The show_progress of the events that change the cards or the views: a refusal is said in its
# toast; Gradio's own "Error" would cover each output, the whole home among them, until closed.
QUIET = "hidden"


@dataclass(frozen=True)
class HomeParts:
    """The components beside the cards that the cards' buttons set."""

    workspace: gr.Dropdown  # the open workspace's id
    home: gr.Column  # the cards' view
    opened: gr.Column  # the open workspace's view
    listed: gr.State  # the changes to the workspaces, counted: each draws the cards anew
    doomed: gr.State  # the workspace whose deletion awaits its confirmation
    confirming: gr.Column
    doomed_facts: gr.HTML  # what the deletion takes away
    renamed: gr.State  # the workspace whose new name is being written
    renaming: gr.Column  # the one box for the new name, shown by a card's Rename
    new_name: gr.Textbox


class WorkspaceCards(Handlers):
    def __init__(self, workspaces: ServedWorkspaces, uploads: Uploads) -> None:
        super().__init__(workspaces)
        self.uploads = uploads  # an opened workspace shows its sources

    def on_load(self, request: gr.Request) -> tuple[Any, ...]:
        """The workspaces to open and the search box, who is signed in, and the New of those
        who may create workspaces; the workspace the page's address names, if the user may use
        it, open (a reload stays in it), with the conversation the address names to reopen."""
        user = self.signed_in(request)
        signs_out = self.workspaces.authenticator.offers_sign_in and bool(
            user.grants and user.grants.password_hash
        )
        address = dict(getattr(request, "query_params", None) or {})
        named = address.get(WORKSPACE_PARAMETER)
        opened = named in {w.id for w in self.workspaces.visible(user)}
        return (
            *self._listing(user, named),
            signed_in_html(user, signs_out=signs_out),
            gr.Row(visible=user.may(Action.MANAGE_WORKSPACES)),
            *_views(opened=opened),
            address.get(CONVERSATION_PARAMETER) if opened else None,
        )

    def choose_workspace(
        self, workspace_id: str | None, resumed: str | None, request: gr.Request
    ) -> tuple[Any, ...]:
        """Open a workspace: the conversation ``resumed`` (the user's own, else a fresh chat)
        and its evidence and first citation to preview; the conversations, filters and
        sources; the upload box for those who may upload; nothing left to resume."""
        user = self.signed_in(request)
        with _refusals():
            assistant = self.workspaces.opened(user, workspace_id) if workspace_id else None
        if assistant is None:
            empty, hidden = gr.Dropdown(choices=[]), gr.Column(visible=False)
            return (
                [],
                None,
                "",
                None,
                empty,
                empty,
                gr.CheckboxGroup(choices=[]),
                "",
                hidden,
                "",
                None,
            )
        governs = user.may(Action.SEE_OFFLINE, assistant.settings.workspace)
        records = Documents.of(assistant.catalog, governs=governs).records.values()
        indexed = sorted(r.doc_id for r in records if r.indexed_version)
        types = sorted({r.file_type for r in records if r.indexed_version})
        chat, conversation, evidence, previewed = reopened(
            assistant, user.name, resumed, workspace_id, governs=governs
        )
        how_to_add = self.uploads.how_to_add(assistant, len(records), request)
        return (
            gr.Chatbot(chat, placeholder=how_to_add.placeholder),  # shown while it is empty
            conversation,
            evidence,
            previewed,
            conversation_choices(assistant, user.name, conversation),
            gr.Dropdown(choices=indexed, value=[], multiselect=True),
            gr.CheckboxGroup(choices=types, value=[]),
            self.uploads.show_sources(workspace_id, request)[0],
            gr.Column(visible=user.may(Action.UPLOAD, assistant.settings.workspace)),
            indexed_status(records),
            None,
        )

    def create(self, name: str, changes: int, request: gr.Request) -> tuple[Any, ...]:
        """Create a workspace and open it: the dropdown on it, the search box, the changes
        counted one more (the cards are drawn anew), the name box emptied, its view shown."""
        user = self.signed_in(request)
        with _refusals():
            created = self.workspaces.create(user, name)
        return *self._listing(user, created.id), changes + 1, "", *_views(opened=True)

    def rename(
        self,
        target: str | None,
        name: str,
        current: str | None,
        changes: int,
        request: gr.Request,
    ) -> tuple[Any, ...]:
        """Rename the workspace whose card's Rename was chosen: the workspace dropdown, the
        changes counted, nothing being renamed, the name box hidden."""
        user = self.signed_in(request)
        with _refusals():
            self.workspaces.require(user, Action.MANAGE_WORKSPACES)
            if target:
                self.workspaces.rename(user, target, name)
        return self._listing(user, current)[0], changes + 1, *keep()

    def deleting(self, target: str) -> Any:
        """The Delete of ``target``'s card: the workspace awaiting confirmation, the
        confirmation shown, and what goes."""

        def confirm_deletion(request: gr.Request) -> tuple[Any, ...]:
            user = self.signed_in(request)
            with _refusals():
                doomed = self.workspaces.deletable(user, target)
                contents = self.workspaces.contents(user, target)
            return target, gr.Column(visible=True), deletion_html(doomed.name, contents)

        return confirm_deletion

    def delete(
        self, doomed: str | None, current: str | None, changes: int, request: gr.Request
    ) -> tuple[Any, ...]:
        """Delete the workspace confirmed: the dropdown (none open if it was), the search
        box, the changes counted, nothing awaiting confirmation."""
        user = self.signed_in(request)
        with _refusals():
            self.workspaces.require(user, Action.MANAGE_WORKSPACES)
            if doomed:
                self.workspaces.delete(user, doomed)
        return *self._listing(user, current), changes + 1, None, gr.Column(visible=False)

    def _listing(self, user: User, current: str | None) -> tuple[Any, Any]:
        """The workspace dropdown (on ``current`` while it exists, else on none), and the
        search box, shown when there are many cards."""
        visible = self.workspaces.visible(user)
        if current not in {w.id for w in visible}:
            current = None
        return (
            gr.Dropdown(choices=[(w.name, w.id) for w in visible], value=current),
            gr.Textbox(visible=len(visible) >= SEARCHED_FROM),
        )

    def draw(self, sort_by: str, wanted: str, request: gr.Request, parts: HomeParts) -> None:
        """A card per workspace the user may use (those ``wanted`` names, when given), to open
        it; for users who may manage workspaces, to rename it, or delete it (not the default
        one)."""
        user = self.signed_in(request)
        manager = user.may(Action.MANAGE_WORKSPACES)
        shown = _found(_sorted(self.workspaces.visible(user), sort_by, user.name), wanted)
        with gr.Row(elem_id="workspace-cards", elem_classes="cards"):
            if not shown:
                gr.Markdown("No workspace by that name." if wanted else "No workspace yet.")
            for card in shown:
                # Keyed: a click landing while the cards are drawn anew still counts.
                with gr.Column(elem_classes="card", min_width=240, key=("card", card.id)):
                    facts = card_html(
                        card, user.name, governs=user.may(Action.SEE_OFFLINE, card.id)
                    )
                    gr.HTML(facts, key=("facts", card.id))
                    gr.Button("Open", size="sm", variant="primary", key=("open", card.id)).click(
                        _opening(card.id),
                        None,
                        [parts.workspace, parts.home, parts.opened],
                        api_visibility="private",
                        key=("open", card.id),
                    )
                    if manager:
                        self._manage(card, parts)

    def _manage(self, card: Workspace, parts: HomeParts) -> None:
        """A card's Rename and Delete. Events made as the cards are drawn are not the page's
        at its start, so not in the permission table's check: each handler checks its user
        itself (:meth:`deleting`), or only shows what the user sees already (Rename's box,
        whose renaming is the checked ``rename_workspace``)."""
        with gr.Row():
            gr.Button("Rename", size="sm", key=("rename", card.id)).click(
                _renaming(card),
                None,
                [parts.renamed, parts.renaming, parts.new_name],
                api_visibility="private",
                show_progress=QUIET,
                key=("rename", card.id),
            )
            if card.id != DEFAULT_WORKSPACE:
                gr.Button("Delete", size="sm", variant="stop", key=("delete", card.id)).click(
                    self.deleting(card.id),
                    None,
                    [parts.doomed, parts.confirming, parts.doomed_facts],
                    api_visibility="private",
                    show_progress=QUIET,
                    key=("delete", card.id),
                )


def keep() -> tuple[None, Any]:
    """The deletion or renaming not gone on with: nothing awaits it, its box hidden."""
    return None, gr.Column(visible=False)


def _renaming(card: Workspace) -> Any:
    """A card's Rename: its workspace awaiting a new name, the name box shown with its name."""
    label = f"New name of {card.name}"
    return lambda: (card.id, gr.Column(visible=True), gr.Textbox(card.name, label=label))


def back_home(changes: int) -> tuple[Any, ...]:
    """The cards shown again, drawn anew (their counts as they are now), no workspace open."""
    return *_views(opened=False), changes + 1, None


def _views(*, opened: bool) -> tuple[Any, Any]:
    """The home's and the open workspace's views, one of them shown."""
    return gr.Column(visible=not opened), gr.Column(visible=opened)


def _opening(workspace_id: str) -> Any:
    """A card's Open: its workspace chosen, and shown."""
    return lambda: (workspace_id, *_views(opened=True))


@contextmanager
def _refusals() -> Iterator[None]:
    """What the workspaces refuse, said on the page as they say it."""
    try:
        yield
    except NotAllowed as error:
        raise refusal(error) from error
    except WorkspaceError as error:
        raise gr.Error(str(error)) from error


def _sorted(visible: list[Workspace], sort_by: str, user: str) -> list[Workspace]:
    """The workspaces by name (as listed: the default one first), or the last ``user`` opened
    first."""
    if sort_by == "last opened":
        return sorted(visible, key=lambda w: -(w.last_opened(user) or 0.0))
    return visible


def _found(visible: list[Workspace], wanted: str) -> list[Workspace]:
    """Those whose name or id holds ``wanted`` (letter case aside); all when it is empty."""
    wanted = (wanted or "").strip().casefold()
    return [w for w in visible if wanted in w.name.casefold() or wanted in w.id]
