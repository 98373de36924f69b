"""The workspaces one server answers for, and what each user may do with them.

An :class:`~serving.assistant.Assistant` per workspace, opened at its first use; creating,
renaming and deleting workspaces; governing what search finds (:mod:`serving.governance`) for
those who may; uploads into a workspace, and removing them (:class:`~serving.uploads.Uploads`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline.availability import AvailabilityObserver
from rag_pipeline.catalog import Availability, AvailabilityRecord, Catalog, DocumentRecord
from rag_pipeline.config import Settings
from rag_pipeline.ids import DEFAULT_WORKSPACE
from rag_pipeline.locking import LockTimeout
from rag_pipeline.workspaces import (
    Workspace,
    WorkspaceError,
    create_workspace,
    delete_workspace,
    list_workspaces,
    mark_opened,
    open_workspace,
    rename_workspace,
    workspace_exists,
)
from serving.access import LEAST_ROLE, Action, Authenticator, Role, User
from serving.access.refusals import RefusalLog, as_refused
from serving.assistant import Assistant
from serving.governance import (
    Standing,
    cited_standing,
    document_standing,
    set_cited_availability,
    set_document_availability,
)
from serving.history import History
from serving.uploads import (
    RemovalRefused,
    Sender,
    Upload,
    Uploads,
    discard,
    documents_offline,
    uploaded_files,
)


class NotAllowed(PermissionError):
    """The user may not do this, or the workspace is not theirs (the two look alike)."""


class NotSignedIn(NotAllowed):
    """A request that proves no user (the door lets none through to the page, API or MCP)."""


@dataclass(frozen=True, slots=True)
class Contents:
    """What deleting a workspace takes away."""

    documents: int  # indexed
    uploads: int  # files uploaded into it
    conversations: int  # every user's


@dataclass(frozen=True, slots=True)
class Documents:
    """A workspace's live documents as one user sees them: those taken offline (archived,
    rejected) only by those who may govern it, who see them marked, to put them back."""

    records: dict[str, DocumentRecord]  # those shown
    offline: dict[str, Availability]  # the state of each document taken offline, shown or not

    @classmethod
    def of(cls, catalog: Catalog, *, governs: bool) -> Documents:
        offline = documents_offline(catalog)
        records = catalog.live_documents()
        if not governs:
            records = {doc_id: r for doc_id, r in records.items() if doc_id not in offline}
        return cls(records, offline)

    @property
    def indexed(self) -> int:
        return sum(1 for record in self.records.values() if record.indexed_version)


class ServedWorkspaces:
    def __init__(self, settings: Settings, observe: AvailabilityObserver | None = None) -> None:
        self.settings = settings  # the installation's (its default workspace's) settings
        self._observe = observe  # told of each availability change (Dagster's UI shows it)
        self.authenticator = Authenticator(settings.root)
        self._assistants: dict[str, Assistant] = {}
        self._lock = threading.Lock()
        self._uploads = Uploads(settings)
        self._refusals = RefusalLog()

    # -- which workspaces --------------------------------------------------------------------

    def visible(self, user: User) -> list[Workspace]:
        return [w for w in list_workspaces(self.settings) if user.may(Action.ASK, w.id)]

    def _chosen(self, user: User, workspace_id: str | None, action: Action = Action.ASK) -> str:
        """The id of the workspace a request names (default: the user's first), if the user
        may do ``action`` in it. Every request asks: no listing of all workspaces unless it
        names none. A workspace the user may not use is refused as one that is not."""
        if LEAST_ROLE[action] is Role.ADMIN:  # of the installation: before any workspace
            self.require(user, action)
        if workspace_id is None:
            if user.may_use(DEFAULT_WORKSPACE):
                chosen = DEFAULT_WORKSPACE
            elif visible := self.visible(user):
                chosen = visible[0].id
            else:
                raise self._refused(user, action, f"{user.name} may use no workspace yet")
        elif user.may_use(workspace_id) and workspace_exists(self.settings.root, workspace_id):
            chosen = workspace_id
        else:
            named = as_refused(workspace_id)
            raise self._refused(user, action, f"no workspace {named!r} for {user.name}")
        if not user.may(action, chosen):
            name = open_workspace(self.settings, chosen).name
            raise self._refused(
                user, action, f"{user.name} may not {action.format(workspace=name)}"
            )
        return chosen

    def require(self, user: User, action: Action) -> None:
        """Refuse an action of the installation (no workspace's) that the user may not do."""
        if not user.may(action):
            raise self._refused(user, action, f"{user.name} may not {action}")

    def _refused(self, user: User, action: Action, why: str) -> NotAllowed:
        """The refusal of ``action`` to the user, logged (one line; a flood of them counted)."""
        self._refusals.refused(user.name, action.name.lower(), why)
        return NotAllowed(why)

    def signed_in(self, headers: Mapping[str, str]) -> User:
        """The user a request to the page, the API or MCP comes from, by its headers (their
        names in any letter case)."""
        user = self.authenticator.user({key.lower(): value for key, value in headers.items()})
        if user is None:
            raise NotSignedIn("sign in first")
        return user

    def workspace(
        self, user: User, workspace_id: str | None, action: Action = Action.ASK
    ) -> Workspace:
        """The workspace a request names, if the user may do ``action`` in it."""
        try:
            return open_workspace(self.settings, self._chosen(user, workspace_id, action))
        except WorkspaceError as error:  # deleted meanwhile
            raise NotAllowed(str(error)) from error

    def assistant(
        self, user: User, workspace_id: str | None, action: Action = Action.ASK
    ) -> Assistant:
        """The assistant of the workspace a request names, if the user may do ``action`` in
        it."""
        chosen = self._chosen(user, workspace_id, action)
        with self._lock:
            opened = self._assistants.get(chosen)
        return opened or self._assistant(self.workspace(user, chosen))

    def _assistant(self, workspace: Workspace) -> Assistant:
        with self._lock:
            if workspace.id not in self._assistants:
                self._assistants[workspace.id] = Assistant(workspace.settings)
            return self._assistants[workspace.id]

    def open_all(self) -> None:
        """Open every workspace's assistant now (the server's start, not a first question,
        meets a bad model)."""
        for workspace in list_workspaces(self.settings):
            self._assistant(workspace)

    def opened(self, user: User, workspace_id: str) -> Assistant:
        """The workspace's assistant, its opening remembered (the cards sort by it)."""
        workspace = self.workspace(user, workspace_id)
        mark_opened(workspace, user.name)
        return self._assistant(workspace)

    # -- managing them -----------------------------------------------------------------------

    def create(self, user: User, name: str) -> Workspace:
        self.require(user, Action.MANAGE_WORKSPACES)
        return create_workspace(self.settings, name)

    def rename(self, user: User, workspace_id: str, name: str) -> Workspace:
        return rename_workspace(self.workspace(user, workspace_id, Action.MANAGE_WORKSPACES), name)

    def contents(self, user: User, workspace_id: str) -> Contents:
        workspace = self.workspace(user, workspace_id, Action.MANAGE_WORKSPACES)
        with self._lock:
            assistant = self._assistants.get(workspace.id)
        history = assistant.history if assistant else History(workspace.home)
        try:
            conversations = history.conversation_count()
        finally:
            if assistant is None:
                history.close()
        return Contents(
            documents=indexed_documents(workspace.settings),
            uploads=len(uploaded_files(workspace)),
            conversations=conversations,
        )

    def deletable(self, user: User, workspace_id: str) -> Workspace:
        """The workspace, if the user may delete it: never the default one."""
        workspace = self.workspace(user, workspace_id, Action.MANAGE_WORKSPACES)
        if workspace.id == DEFAULT_WORKSPACE:
            raise NotAllowed("the default workspace cannot be deleted")
        return workspace

    def delete(self, user: User, workspace_id: str) -> None:
        workspace = self.deletable(user, workspace_id)
        with self._lock:
            assistant = self._assistants.pop(workspace.id, None)
        if assistant is not None:
            assistant.close()
        try:
            delete_workspace(workspace)
        except LockTimeout as error:
            raise WorkspaceError(
                f"{workspace.name} is being indexed: delete it once the run ends"
            ) from error

    # -- what search may find --------------------------------------------------------------

    def set_availability(
        self, user: User, workspace_id: str, chunk_id: str, state: Availability, *, whole: bool
    ) -> AvailabilityRecord:
        """Take the document of a cited chunk (``whole``) or the chunk itself out of search, or
        put it back, for a user who may govern the workspace."""
        workspace = self._governed(user, workspace_id)
        return set_cited_availability(
            workspace, chunk_id, state, user.name, whole=whole, observe=self._observe
        )

    def standing(self, user: User, workspace_id: str, chunk_id: str) -> Standing:
        """Where a cited chunk and its document stand, for a user who may govern the
        workspace."""
        return cited_standing(self._governed(user, workspace_id), chunk_id)

    def set_document_availability(
        self, user: User, workspace_id: str, doc_id: str, state: Availability
    ) -> AvailabilityRecord:
        """Take a document out of search, or put it back, for a user who may govern the
        workspace."""
        workspace = self._governed(user, workspace_id)
        return set_document_availability(workspace, doc_id, state, user.name, observe=self._observe)

    def document_standing(self, user: User, workspace_id: str, doc_id: str) -> Standing:
        """Where a document stands, for a user who may govern the workspace."""
        return document_standing(self._governed(user, workspace_id), doc_id)

    def _governed(self, user: User, workspace_id: str) -> Workspace:
        """The workspace, if the user may govern it."""
        return self.workspace(user, workspace_id, Action.GOVERN)

    # -- uploads -----------------------------------------------------------------------------

    def upload(
        self,
        user: User,
        workspace_id: str,
        sent: list[tuple[str, Path]],
        *,
        replace: bool = False,
    ) -> list[Upload]:
        """Each file sent (its name as sent, and its temporary copy) taken into the workspace's
        upload folder and indexed, or refused with the reason, for a user who may contribute to
        the workspace; a file named as an upload already there replaces it only if the user
        asked to (``replace``) and may. The copies are gone afterwards either way, even when
        the workspace itself is refused."""
        try:
            workspace = self.workspace(user, workspace_id, Action.UPLOAD)
        except BaseException:
            discard(sent)
            raise
        sender = Sender(
            user.name,
            replaces_own=user.may(Action.REPLACE_OWN, workspace.id),
            replaces_any=user.may(Action.REPLACE_ANY, workspace.id),
            replace=replace,
        )
        return self._uploads.receive(workspace, sent, sender)

    def remove_upload(self, user: User, workspace_id: str, name: str) -> str:
        """Delete the upload named ``name`` and start the index run that takes its document out
        of search, for one who uploaded it (as it is now, in search) and may remove their own,
        or one who may remove any; the document's id."""
        workspace = self.workspace(user, workspace_id, Action.REMOVE_OWN)
        removes_any = user.may(Action.REMOVE_ANY, workspace.id)
        try:
            return self._uploads.remove(workspace, name, user.name, removes_any=removes_any)
        except RemovalRefused as error:
            raise self._refused(user, Action.REMOVE_OWN, str(error)) from error

    def removable_uploads(self, user: User, workspace_id: str) -> list[str]:
        """The names of the workspace's uploads the user may remove (none: they may not)."""
        workspace = self.workspace(user, workspace_id)
        if not user.may(Action.REMOVE_OWN, workspace.id):
            return []
        removes_any = user.may(Action.REMOVE_ANY, workspace.id)
        return self._uploads.removable(workspace, user.name, removes_any=removes_any)

    def own_uploads_offline(self, user: User, workspace_id: str) -> dict[str, Availability]:
        """The documents of the user's own uploads taken out of search, and their state."""
        return self._uploads.own_offline(self.workspace(user, workspace_id), user.name)

    def indexing(self, workspace_id: str) -> bool:
        """Whether an indexing run the page started for the workspace is under way."""
        return self._uploads.indexing(workspace_id)

    def close(self) -> None:
        self._uploads.stop()
        with self._lock:
            assistants, self._assistants = list(self._assistants.values()), {}
        for assistant in assistants:
            assistant.close()


def indexed_documents(settings: Settings, *, governs: bool = True) -> int:
    """The documents of the workspace's live collection that are indexed (those taken offline
    counted only for those who may govern it)."""
    with Catalog(settings) as catalog:
        return Documents.of(catalog, governs=governs).indexed
