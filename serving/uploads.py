"""Uploads into a workspace's upload folder: each file taken or refused on its own, through the
workspace's own temporary folder, and indexed by the same pipeline in a child process
(:class:`~serving.indexing.BackgroundIndexing`); at a server's start, what its last stop left of
uploads cleared (cut short) or indexed (left unindexed).

An upload never silently replaces a document: a file named as one already uploaded (letter case
and Unicode form aside) is taken only when its sender asked to replace, and may
(:func:`replacement_refusal`); who uploaded each file, as they sent it, is kept in
``<home>/serving/uploads.sqlite``. A document taken out of search does not come back under
another name: only a governor may upload the same content again.

A contributor removes what they uploaded (as they sent it, and in search), a governor any upload
(:meth:`Uploads.remove`): the file is deleted and the index run takes its document out.
"""

from __future__ import annotations

import hashlib
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
from rag_pipeline.catalog import Availability, Catalog
from rag_pipeline.config import Settings
from rag_pipeline.manifest import SourceFile, describe_file, source_labels
from rag_pipeline.parsing import EMPTY_FILE, format_of
from rag_pipeline.workspaces import Workspace, list_workspaces
from serving.access.refusals import as_refused
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
    """Who sends an upload, and what they may (``Action.REPLACE_OWN``, ``REPLACE_ANY``) and
    chose to do with a file of the same name."""

    name: str
    replaces_own: bool  # may replace what they uploaded, while it is in search
    # may replace any upload, an archived or rejected one too, and upload again the content
    # of a document taken out of search
    replaces_any: bool
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
        content = file_sha256(staged)
        if not sender.replaces_any and (state := _offline_with_content(workspace, content)):
            return Upload(
                name, None, f"the same document is {state} here: only a governor may upload it"
            )
        folder = workspace.settings.upload_folder
        folder.mkdir(parents=True, exist_ok=True)
        ledger = UploadLedger(workspace)
        with self._placing:
            existing = _same_name(workspace, stored)
            if existing and (refusal := replacement_refusal(workspace, existing, sender)):
                return Upload(name, None, refusal)
            target = existing or folder / stored  # a replaced file keeps its spelling
            # Moved under a hidden name, then renamed: a run never reads half a file.
            partial = folder / f".{target.name}{PARTIAL_SUFFIX}"
            shutil.move(staged, partial)
            partial.replace(target)
            ledger.record(target.name, sender.name, content)
            if existing is None:  # a new document: not what a removed upload of its name was
                with Catalog(workspace.settings) as catalog:
                    catalog.forget_availability_if_deleted(
                        _upload_document(workspace.settings, target)
                    )
        return Upload(name, target, file=_manifest_row(workspace.settings, target))

    def remove(self, workspace: Workspace, name: str, remover: str, *, removes_any: bool) -> str:
        """Delete the upload named ``name`` from the workspace's upload folder and start the
        index run that takes its document out of search: one who may remove any (a governor)
        any, another only what they uploaded (as it is now), in search. Returns the document's
        id; raises :class:`RemovalRefused`, saying why, otherwise."""
        with self._placing:  # never while an upload of its name is being placed
            uploaded = _uploaded_named(workspace, name)
            if uploaded is None:
                raise RemovalRefused(f"no upload named {as_refused(name)!r} here")
            if not removes_any and (not_theirs := _not_ones_own(workspace, uploaded, remover)):
                raise RemovalRefused(f"{uploaded.name} {not_theirs} remove it")
            document = _upload_document(workspace.settings, uploaded)
            uploaded.unlink()
            UploadLedger(workspace).forget(uploaded.name)
        self._indexing.request(workspace.id)
        return document

    def removable(self, workspace: Workspace, remover: str, *, removes_any: bool) -> list[str]:
        """The names of the uploads the user may remove (see :meth:`remove`). Asked on every
        look at the sources: the catalog read once, and only the user's own files hashed."""
        uploaded = uploaded_files(workspace)
        if removes_any:
            return sorted(path.name for path in uploaded)
        with Catalog(workspace.settings) as catalog:
            offline = documents_offline(catalog)
        ledger = UploadLedger(workspace)
        return sorted(
            path.name
            for path in uploaded
            if _upload_document(workspace.settings, path) not in offline
            and ledger.sent_by(path, remover)
        )

    def own_offline(self, workspace: Workspace, user: str) -> dict[str, Availability]:
        """The documents of the user's own uploads (as they are now) that a governor took out
        of search, and their state: shown to their uploader, who may do nothing about them."""
        with Catalog(workspace.settings) as catalog:
            offline = documents_offline(catalog)
        if not offline:
            return {}
        ledger = UploadLedger(workspace)
        documents = {_upload_document(workspace.settings, p): p for p in uploaded_files(workspace)}
        return {
            doc_id: state
            for doc_id, state in offline.items()
            if doc_id in documents and ledger.sent_by(documents[doc_id], user)
        }

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
    or None when they may: one who may replace any (a governor) may replace any, one who may
    replace their own only what they uploaded (as it is now) and is in search; and only when
    they asked to."""
    if not sender.replaces_any:
        if not sender.replaces_own:
            return "a document of this name is here already: only a governor may replace it"
        if not_theirs := _not_ones_own(workspace, existing, sender.name):
            return f"a document of this name {not_theirs} replace it"
    if not sender.replace:
        return (
            "a document of this name is here already: choose to replace documents of the "
            "same name to upload a new version of it"
        )
    return None


def _not_ones_own(workspace: Workspace, uploaded: Path, user: str) -> str | None:
    """How the upload stands when it is not the user's own to replace or remove, and who may
    (a sentence to end with what they may do); None: it is theirs, in search. A document taken
    out of search is only a governor's: its uploader would bring it back, or take it away and
    then upload it again."""
    with Catalog(workspace.settings) as catalog:
        offline = documents_offline(catalog).get(_upload_document(workspace.settings, uploaded))
    if offline:
        return f"is {offline}: only a governor may"
    if not UploadLedger(workspace).sent_by(uploaded, user):
        return "was uploaded by someone else: only they or a governor may"
    return None


def documents_offline(catalog: Catalog) -> dict[str, Availability]:
    """The state of each document taken out of search whole (archived, rejected); a passage
    taken out leaves its document in search."""
    return {r.doc_id: r.state for r in catalog.availability() if not r.text_hash and r.offline}


def _offline_with_content(workspace: Workspace, sha256: str) -> Availability | None:
    """The state of a document of the workspace taken out of search whose content is this."""
    with Catalog(workspace.settings) as catalog:
        offline = documents_offline(catalog)
        records = catalog.live_documents() if offline else {}
    return next(
        (
            state
            for doc_id, state in offline.items()
            if doc_id in records and records[doc_id].sha256 == sha256
        ),
        None,
    )


class RemovalRefused(Exception):
    """An upload not removed: there is none of its name, or the user may not remove it."""


def _uploaded_named(workspace: Workspace, name: str) -> Path | None:
    """The upload of the workspace named exactly ``name``."""
    return next((path for path in uploaded_files(workspace) if path.name == name), None)


def _same_name(workspace: Workspace, stored: str) -> Path | None:
    """The upload of the workspace named ``stored`` but for letter case and Unicode form
    (``Café.md`` composed or not, ``kestrel.DOCX``): to the eye, the same name. The exactly
    named one first, should there be more."""
    key = _name_key(stored)
    alike = [path for path in uploaded_files(workspace) if _name_key(path.name) == key]
    return min(alike, key=lambda path: path.name != stored, default=None)


def _name_key(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


def file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


class UploadLedger:
    """Who uploaded each file of a workspace's upload folder, with the SHA-256 of what they
    sent; a file put there or changed by other means has no uploader."""

    def __init__(self, workspace: Workspace) -> None:
        self.path = workspace.settings.home / "serving" / "uploads.sqlite"

    def record(self, name: str, uploader: str, sha256: str) -> None:
        with self._connected() as db:
            db.execute(
                "INSERT INTO uploads (name, uploader, sha256, at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET uploader = excluded.uploader, "
                "sha256 = excluded.sha256, at = excluded.at",
                (name, uploader, sha256, time.time()),
            )

    def forget(self, name: str) -> None:
        """The file removed: nobody uploaded what comes next under its name."""
        with self._connected() as db:
            db.execute("DELETE FROM uploads WHERE name = ?", (name,))

    def sent_by(self, uploaded: Path, user: str) -> bool:
        """Whether ``user`` uploaded the file as it is now (hashed only when they sent one of
        its name)."""
        with self._connected() as db:
            row = db.execute(
                "SELECT sha256 FROM uploads WHERE name = ? AND uploader = ?", (uploaded.name, user)
            ).fetchone()
        return row is not None and row[0] == file_sha256(uploaded)

    @contextmanager
    def _connected(self) -> Iterator[sqlite3.Connection]:
        """A connection, its changes committed and it closed at the end."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=30)) as db, db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS uploads (name TEXT PRIMARY KEY, "
                "uploader TEXT NOT NULL, sha256 TEXT, at REAL NOT NULL)"
            )
            columns = {row[1] for row in db.execute("PRAGMA table_info(uploads)")}
            if "sha256" not in columns:  # a ledger of before: its files have no uploader now
                db.execute("ALTER TABLE uploads ADD COLUMN sha256 TEXT")
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
    """A name to store an upload under: its last path part, in Unicode's composed form (NFC),
    without control characters, never hidden, never empty."""
    base = unicodedata.normalize("NFC", Path(name.replace("\\", "/")).name)
    cleaned = "".join(c for c in base if unicodedata.category(c)[0] != "C").strip().lstrip(".")
    return cleaned[:200] or "upload"
