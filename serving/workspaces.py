"""The workspaces one server answers for, and what each user may do with them.

An :class:`~serving.assistant.Assistant` per workspace, opened at its first use; uploads into a
workspace's upload folder, each file taken or refused on its own, through the workspace's own
temporary folder, and indexed by the same pipeline in a child process
(:class:`~serving.indexing.BackgroundIndexing`).
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import unicodedata
import uuid
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline import ids
from rag_pipeline.availability import AvailabilityError, AvailabilityObserver, set_availability
from rag_pipeline.catalog import Availability, AvailabilityRecord, Catalog, DocumentRecord
from rag_pipeline.config import Settings
from rag_pipeline.ids import DEFAULT_WORKSPACE
from rag_pipeline.locking import LockTimeout
from rag_pipeline.manifest import SourceFile, describe_file, source_labels
from rag_pipeline.parsing import EMPTY_FILE, format_of
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
from serving.access import Authenticator, User
from serving.assistant import Assistant
from serving.history import History
from serving.indexing import BackgroundIndexing

logger = logging.getLogger(__name__)


# A file being moved into an upload folder is named ``.<name><PARTIAL_SUFFIX>`` until whole.
PARTIAL_SUFFIX = ".part"


class NotAllowed(PermissionError):
    """The user may not do this, or the workspace is not theirs (the two look alike)."""


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
        offline = {
            r.doc_id: r.state for r in catalog.availability() if not r.text_hash and r.offline
        }
        records = catalog.live_documents()
        if not governs:
            records = {doc_id: r for doc_id, r in records.items() if doc_id not in offline}
        return cls(records, offline)

    @property
    def indexed(self) -> int:
        return sum(1 for record in self.records.values() if record.indexed_version)


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a cited passage stands: its document's availability, and whether the passage itself
    is out of search."""

    document: Availability
    passage_offline: bool

    def offline(self, whole: bool) -> bool:
        """Whether the document (``whole``), or the passage itself, is out of search."""
        return self.document != "active" if whole else self.passage_offline

    @property
    def in_search(self) -> bool:
        """Neither the document nor the passage is out of search."""
        return not self.offline(whole=True) and not self.offline(whole=False)

    def refusal(self, state: Availability, whole: bool) -> str | None:
        """Why setting the document (``whole``) or the passage to ``state`` would change
        nothing, or None when it would. Putting back brings back whichever is out of search."""
        if state == "active":
            return "It is in search already." if self.in_search else None
        if whole:
            return f"The document is {state} already." if self.document == state else None
        if self.document != "active":
            return f"The whole document is {self.document}: put it back first."
        return "The passage is out of search already." if self.passage_offline else None


@dataclass(frozen=True, slots=True)
class Upload:
    """One file of an upload: taken (written to ``path``) or refused (and why)."""

    name: str  # the file's name as sent
    path: Path | None  # where it was written; None when refused
    refused: str | None = None
    file: SourceFile | None = None  # the manifest's row of the file written: document, version


class ServedWorkspaces:
    def __init__(self, settings: Settings, observe: AvailabilityObserver | None = None) -> None:
        self.settings = settings  # the installation's (its default workspace's) settings
        self._observe = observe  # told of each availability change (Dagster's UI shows it)
        self.authenticator = Authenticator(settings.root)
        self._assistants: dict[str, Assistant] = {}
        self._lock = threading.Lock()
        self._indexing = BackgroundIndexing(settings.root)
        self._clear_cut_short_uploads(time.time())
        self._index_uploads_left_unindexed()

    # -- which workspaces --------------------------------------------------------------------

    def visible(self, user: User) -> list[Workspace]:
        return [w for w in list_workspaces(self.settings) if user.may_use(w.id)]

    def _chosen(self, user: User, workspace_id: str | None) -> str:
        """The id of the workspace a request names (default: the user's first), if the user
        may use it. Every request asks: no listing of all workspaces unless it names none."""
        if workspace_id is None:
            if user.may_use(DEFAULT_WORKSPACE):
                return DEFAULT_WORKSPACE
            visible = self.visible(user)
            if not visible:
                raise NotAllowed(f"{user.name} may use no workspace yet")
            return visible[0].id
        if not user.may_use(workspace_id) or not workspace_exists(self.settings.root, workspace_id):
            raise NotAllowed(f"no workspace {workspace_id!r} for {user.name}")
        return workspace_id

    def workspace(self, user: User, workspace_id: str | None) -> Workspace:
        try:
            return open_workspace(self.settings, self._chosen(user, workspace_id))
        except WorkspaceError as error:  # deleted meanwhile
            raise NotAllowed(str(error)) from error

    def assistant(self, user: User, workspace_id: str | None) -> Assistant:
        chosen = self._chosen(user, workspace_id)
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
        mark_opened(workspace)
        return self._assistant(workspace)

    # -- managing them -----------------------------------------------------------------------

    @staticmethod
    def may_manage(user: User) -> bool:
        """Creating, renaming and deleting workspaces is for users granted all of them."""
        return user.may_use("*")

    def create(self, user: User, name: str) -> Workspace:
        self._require_manager(user)
        return create_workspace(self.settings, name)

    def rename(self, user: User, workspace_id: str, name: str) -> Workspace:
        self._require_manager(user)
        return rename_workspace(self.workspace(user, workspace_id), name)

    def contents(self, user: User, workspace_id: str) -> Contents:
        workspace = self.workspace(user, workspace_id)
        folder = workspace.settings.upload_folder
        uploads = folder.iterdir() if folder.is_dir() else []
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
            uploads=sum(1 for path in uploads if path.is_file() and not path.name.startswith(".")),
            conversations=conversations,
        )

    def deletable(self, user: User, workspace_id: str) -> Workspace:
        """The workspace, if the user may delete it: never the default one."""
        self._require_manager(user)
        workspace = self.workspace(user, workspace_id)
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

    def _require_manager(self, user: User) -> None:
        if not self.may_manage(user):
            raise NotAllowed(f"{user.name} may not create, rename or delete workspaces")

    # -- what search may find --------------------------------------------------------------

    def set_availability(
        self, user: User, workspace_id: str, chunk_id: str, state: Availability, *, whole: bool
    ) -> AvailabilityRecord:
        """Take the document of a cited chunk (``whole``) or the chunk itself out of search, or
        put it back, for a user who may govern the workspace."""
        workspace, doc_id, index = self._governed(user, workspace_id, chunk_id)
        chunk = None if whole else index
        return set_availability(
            workspace.settings, doc_id, state, user.name, chunk, observe=self._observe
        )

    def standing(self, user: User, workspace_id: str, chunk_id: str) -> Standing:
        """Where a cited chunk and its document stand, for a user who may govern the
        workspace."""
        workspace, doc_id, _ = self._governed(user, workspace_id, chunk_id)
        with Catalog(workspace.settings) as catalog:
            live = catalog.live_collection()
            offline_chunks = catalog.offline(live.name)[1] if live else []
            document: Availability = next(
                (r.state for r in catalog.availability() if r.doc_id == doc_id and not r.text_hash),
                "active",
            )
        return Standing(document, chunk_id in offline_chunks)

    def _governed(self, user: User, workspace_id: str, chunk_id: str) -> tuple[Workspace, str, int]:
        """The workspace, if the user may govern it, and the document and index of the chunk,
        if it is of the document's live version."""
        workspace = self.workspace(user, workspace_id)
        if not user.may_govern(workspace.id):
            raise NotAllowed(f"{user.name} may not take documents out of search here")
        try:
            doc_id, version, index = ids.parse_chunk_id(chunk_id)
        except ValueError as error:
            raise AvailabilityError(str(error)) from error
        with Catalog(workspace.settings) as catalog:
            live = catalog.live_collection()
            record = catalog.document(live.name, doc_id) if live else None
        if record is None or record.indexed_version != version:
            raise AvailabilityError(f"{doc_id} changed since this answer: search again")
        return workspace, doc_id, index

    # -- uploads -----------------------------------------------------------------------------

    def upload(self, user: User, workspace_id: str, sent: list[tuple[str, Path]]) -> list[Upload]:
        """Each file sent (its name as sent, and its temporary copy) taken into the workspace's
        upload folder and indexed, or refused with the reason; the copies are gone afterwards
        either way (they are the request's, in a folder every upload shares)."""
        try:
            workspace = self.workspace(user, workspace_id)
            incoming = _incoming_folder(workspace) / uuid.uuid4().hex
            try:
                uploads = [
                    self._taken(workspace, incoming, name, path, number)
                    for number, (name, path) in enumerate(sent)
                ]
            finally:
                shutil.rmtree(incoming, ignore_errors=True)
        finally:
            for _, path in sent:
                path.unlink(missing_ok=True)
        if any(upload.path for upload in uploads):
            self._indexing.request(workspace.id)
        return uploads

    def _taken(
        self, workspace: Workspace, incoming: Path, name: str, sent: Path, number: int
    ) -> Upload:
        """One file sent, refused, or moved into the workspace's temporary folder (out of the
        shared one at once) and from there, whole, into its upload folder."""
        limits = self.settings.serving
        stored = safe_file_name(name)
        try:
            size = sent.stat().st_size
        except FileNotFoundError:
            return Upload(name, None, "it did not arrive whole: upload it again")
        if number >= limits.max_upload_files:
            return Upload(name, None, f"more than {limits.max_upload_files} files in one upload")
        if size > limits.max_upload_mb * 1024 * 1024:
            return Upload(name, None, f"larger than {limits.max_upload_mb:g} MB")
        if format_of(Path(stored)) is None:
            return Upload(name, None, "not a kind of document this index reads")
        if size == 0:  # said at once, rather than once its run fails to parse it
            return Upload(name, None, EMPTY_FILE)
        incoming.mkdir(parents=True, exist_ok=True)
        staged = incoming / stored
        shutil.move(sent, staged)
        folder = workspace.settings.upload_folder
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / stored
        # Moved under a hidden name, then renamed: a run never reads half a file.
        partial = folder / f".{stored}{PARTIAL_SUFFIX}"
        shutil.move(staged, partial)
        partial.replace(target)
        return Upload(name, target, file=_manifest_row(workspace.settings, target))

    def _clear_cut_short_uploads(self, started: float) -> None:
        """Remove what uploads cut short by a server's end (a kill) left: each request's files
        in the temporary folder (some maybe half copied), a file half moved into the upload
        folder. Removed, not indexed: no answer told the sender they were received. Only what
        is older than ``started``: never an upload under way."""
        for workspace in list_workspaces(self.settings):
            incoming = _incoming_folder(workspace)
            requests = incoming.iterdir() if incoming.is_dir() else []
            for request in requests:
                if request.stat().st_mtime < started:
                    shutil.rmtree(request, ignore_errors=True)
            for partial in workspace.settings.upload_folder.glob(f".*{PARTIAL_SUFFIX}"):
                if partial.stat().st_mtime < started:
                    partial.unlink(missing_ok=True)

    def _index_uploads_left_unindexed(self) -> None:
        """Start an index run for each workspace holding an upload that no run has processed
        (indexed or failed) as it is now: its sender was told it was received, then the server
        stopped before its run ended."""
        for workspace in list_workspaces(self.settings):
            folder = workspace.settings.upload_folder
            uploaded = [
                path
                for path in (folder.iterdir() if folder.is_dir() else [])
                if path.is_file() and not path.name.startswith(".")
            ]
            if not uploaded:
                continue
            with Catalog(workspace.settings) as catalog:
                records = catalog.live_documents()
            for path in uploaded:
                record = records.get(_upload_document(workspace.settings, path))
                stat = path.stat()
                if record is None or (record.size, record.mtime_ns) != (
                    stat.st_size,
                    stat.st_mtime_ns,
                ):
                    logger.info("uploads of %s left unindexed: indexing them", workspace.id)
                    self._indexing.request(workspace.id)
                    break

    def indexing(self, workspace_id: str) -> bool:
        """Whether an indexing run the page started for the workspace is under way."""
        return self._indexing.running(workspace_id)

    def close(self) -> None:
        self._indexing.stop()
        with self._lock:
            assistants, self._assistants = list(self._assistants.values()), {}
        for assistant in assistants:
            assistant.close()


def _incoming_folder(workspace: Workspace) -> Path:
    """The workspace's temporary folder for uploads: a folder in it per request."""
    return workspace.settings.home / "serving" / "incoming"


def _manifest_row(settings: Settings, uploaded: Path) -> SourceFile | None:
    """The row an index run's manifest makes of an uploaded file: its document, and its version
    (the content hashed once, here), which tells this upload's stage files from an earlier
    upload's of the same name."""
    return describe_file(settings, _upload_document(settings, uploaded), None)


def _upload_document(settings: Settings, uploaded: Path) -> str:
    """The document id of a file in the workspace's upload folder."""
    labels = {folder: label for label, folder in source_labels(settings.watched_folders).items()}
    return ids.document_id(labels[uploaded.parent], uploaded.name)


def indexed_documents(settings: Settings, *, governs: bool = True) -> int:
    """The documents of the workspace's live collection that are indexed (those taken offline
    counted only for those who may govern it)."""
    with Catalog(settings) as catalog:
        return Documents.of(catalog, governs=governs).indexed


def safe_file_name(name: str) -> str:
    """A name to store an upload under: its last path part, without control characters,
    never hidden, never empty."""
    base = Path(name.replace("\\", "/")).name
    cleaned = "".join(c for c in base if unicodedata.category(c)[0] != "C").strip().lstrip(".")
    return cleaned[:200] or "upload"
