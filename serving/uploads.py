"""Uploads into a workspace's upload folder: each file taken or refused on its own, through the
workspace's own temporary folder, and indexed by the same pipeline in a child process
(:class:`~serving.indexing.BackgroundIndexing`); at a server's start, what its last stop left of
uploads cleared (cut short) or indexed (left unindexed).

An upload never silently replaces a document: a file named as one already uploaded is taken
only when its sender asked to replace, and may (:func:`replacement_refusal`); who uploaded each
file is kept in ``<home>/serving/uploads.sqlite``.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import threading
import time
import unicodedata
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline import ids
from rag_pipeline.catalog import Catalog
from rag_pipeline.config import Settings
from rag_pipeline.manifest import SourceFile, describe_file, source_labels
from rag_pipeline.parsing import EMPTY_FILE, format_of
from rag_pipeline.workspaces import Workspace, list_workspaces
from serving.indexing import BackgroundIndexing

logger = logging.getLogger(__name__)


# A file being moved into an upload folder is named ``.<name><PARTIAL_SUFFIX>`` until whole.
PARTIAL_SUFFIX = ".part"


@dataclass(frozen=True, slots=True)
class Upload:
    """One file of an upload: taken (written to ``path``) or refused (and why)."""

    name: str  # the file's name as sent
    path: Path | None  # where it was written; None when refused
    refused: str | None = None
    file: SourceFile | None = None  # the manifest's row of the file written: document, version


@dataclass(frozen=True, slots=True)
class Sender:
    """Who sends an upload, and what they may and chose to do with a file of the same name."""

    name: str
    governs: bool  # may replace any upload, an archived or rejected one too
    replace: bool = False  # asked to replace the documents their files are named as


class Uploads:
    """The uploads into every workspace of an installation, and the index runs they start."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings  # the installation's: its limits on uploads
        self._indexing = BackgroundIndexing(settings.root)
        # Whether a file's name is taken is decided and acted on under it: two uploads of one
        # name at once never both see it free.
        self._placing = threading.Lock()
        self._clear_cut_short(time.time())
        self._index_left_unindexed()

    def receive(
        self, workspace: Workspace, sent: list[tuple[str, Path]], sender: Sender
    ) -> list[Upload]:
        """Each file sent (its name as sent, and its temporary copy) taken into the workspace's
        upload folder and indexed, or refused with the reason; the copies are gone afterwards
        either way (they are the request's, in a folder every upload shares)."""
        try:
            incoming = _incoming_folder(workspace) / uuid.uuid4().hex
            try:
                uploads = [
                    self._taken(workspace, incoming, name, path, number, sender)
                    for number, (name, path) in enumerate(sent)
                ]
            finally:
                shutil.rmtree(incoming, ignore_errors=True)
        finally:
            discard(sent)
        if any(upload.path for upload in uploads):
            self._indexing.request(workspace.id)
        return uploads

    def _taken(
        self,
        workspace: Workspace,
        incoming: Path,
        name: str,
        sent: Path,
        number: int,
        sender: Sender,
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
        ledger = UploadLedger(workspace)
        with self._placing:
            if target.exists() and (refusal := replacement_refusal(workspace, target, sender)):
                return Upload(name, None, refusal)
            # Moved under a hidden name, then renamed: a run never reads half a file.
            partial = folder / f".{stored}{PARTIAL_SUFFIX}"
            shutil.move(staged, partial)
            partial.replace(target)
            ledger.record(stored, sender.name)
        return Upload(name, target, file=_manifest_row(workspace.settings, target))

    def _clear_cut_short(self, started: float) -> None:
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

    def _index_left_unindexed(self) -> None:
        """Start an index run for each workspace holding an upload that no run has processed
        (indexed or failed) as it is now: its sender was told it was received, then the server
        stopped before its run ended."""
        for workspace in list_workspaces(self.settings):
            uploaded = uploaded_files(workspace)
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

    def stop(self) -> None:
        """Stop the index runs under way (the server is stopping)."""
        self._indexing.stop()


def replacement_refusal(workspace: Workspace, existing: Path, sender: Sender) -> str | None:
    """Why the sender may not replace the uploaded file ``existing`` with one of the same name,
    or None when they may: a governor may replace any, a contributor only what they uploaded
    and is in search; and only when they asked to."""
    if not sender.governs:
        doc_id = _upload_document(workspace.settings, existing)
        with Catalog(workspace.settings) as catalog:
            offline = next(
                (r.state for r in catalog.availability() if r.doc_id == doc_id and r.offline),
                None,
            )
        if offline:
            return f"a document of this name is {offline}: only a governor may replace it"
        if UploadLedger(workspace).uploader(existing.name) != sender.name:
            return (
                "a document of this name was uploaded by someone else: "
                "only they or a governor may replace it"
            )
    if not sender.replace:
        return (
            "a document of this name is here already: choose to replace documents of the "
            "same name to upload a new version of it"
        )
    return None


class UploadLedger:
    """Who uploaded each file of a workspace's upload folder (its last version's sender); a
    file put there by other means has no uploader."""

    def __init__(self, workspace: Workspace) -> None:
        self.path = workspace.settings.home / "serving" / "uploads.sqlite"

    def record(self, name: str, uploader: str) -> None:
        with self._connected() as db:
            db.execute(
                "INSERT INTO uploads (name, uploader, at) VALUES (?, ?, ?) ON CONFLICT (name) "
                "DO UPDATE SET uploader = excluded.uploader, at = excluded.at",
                (name, uploader, time.time()),
            )

    def uploader(self, name: str) -> str | None:
        with self._connected() as db:
            row = db.execute("SELECT uploader FROM uploads WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None

    @contextmanager
    def _connected(self) -> Iterator[sqlite3.Connection]:
        """A connection, its changes committed and it closed at the end."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=30)) as db, db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS uploads "
                "(name TEXT PRIMARY KEY, uploader TEXT NOT NULL, at REAL NOT NULL)"
            )
            yield db


def discard(sent: list[tuple[str, Path]]) -> None:
    """Delete the temporary copies of the files sent, taken or not."""
    for _, path in sent:
        path.unlink(missing_ok=True)


def uploaded_files(workspace: Workspace) -> list[Path]:
    """The files uploaded into the workspace (not those still being moved in)."""
    folder = workspace.settings.upload_folder
    return [
        path
        for path in (folder.iterdir() if folder.is_dir() else [])
        if path.is_file() and not path.name.startswith(".")
    ]


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


def safe_file_name(name: str) -> str:
    """A name to store an upload under: its last path part, without control characters,
    never hidden, never empty."""
    base = Path(name.replace("\\", "/")).name
    cleaned = "".join(c for c in base if unicodedata.category(c)[0] != "C").strip().lstrip(".")
    return cleaned[:200] or "upload"
