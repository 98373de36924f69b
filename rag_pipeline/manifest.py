"""Watched folders → one row per document file, and what changed since the catalog last saw it.

A file whose size and modification time are unchanged keeps the hash recorded for it, so an
unchanged tree costs one ``stat`` per file. A document's version is its content hash combined
with the version of the pipeline settings that shape its chunks and vectors (its format's parser,
the chunker, the models, redaction and its detectors when it is on), so changing one of them
re-indexes exactly what it affects.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import operator
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_pipeline import ids, walk
from rag_pipeline.catalog import (
    Catalog,
    CollectionRecord,
    DocumentRecord,
    DocumentState,
    KnownFile,
    PassState,
)
from rag_pipeline.chunking import CHUNKER_VERSION
from rag_pipeline.config import Settings
from rag_pipeline.embedding.image import clip_dim, clip_model_id
from rag_pipeline.files import extension_of, write_atomically
from rag_pipeline.parsing import EXTENSIONS, PARSER_VERSIONS, PICTURE_FORMATS, format_of
from rag_pipeline.redaction import detectors
from rag_pipeline.walk import SourceEntry, SourceListing

logger = logging.getLogger(__name__)

# Bump when the payload or the way points are built changes.
SCHEMA_VERSION = "points-1"

# What a file is compared with: a scan reads the narrow row, a run its document's whole one.
CatalogRow = KnownFile | DocumentRecord


@dataclass(frozen=True, slots=True)
class SourceFile:
    doc_id: str
    source: str
    relative_path: str
    file_type: str
    size: int
    mtime_ns: int
    sha256: str
    version: str
    error: str | None = None  # set when the file could not be read

    @property
    def path(self) -> Path:
        return Path(self.source) / self.relative_path

    def record(self, state: DocumentState, **rest: Any) -> DocumentRecord:
        """The catalog's record of this file's current version in ``state`` (``rest``: the
        record's other fields)."""
        return DocumentRecord(
            doc_id=self.doc_id,
            source=self.source,
            relative_path=self.relative_path,
            file_type=self.file_type,
            size=self.size,
            mtime_ns=self.mtime_ns,
            sha256=self.sha256,
            version=self.version,
            state=state,
            **rest,
        )


@dataclass(slots=True)
class ManifestDiff:
    files: dict[str, SourceFile]
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    missing_sources: list[Path] = field(default_factory=list)
    catalogued: list[str] = field(default_factory=list)  # documents the catalog knows
    # Documents known unchanged without being compared one by one (a quiet pass, the folders
    # a partial one left alone): counted, not named in ``unchanged``.
    also_unchanged: int = 0
    # The folders listed as at the last pass that found nothing to do, the catalog unchanged
    # since: nothing to do, every file unchanged, and ``files`` left empty.
    quiet: bool = False
    # Only some documents were compared, the rest known unchanged: the paths a watcher's events
    # named (``find_changes_at``), or the folders whose listing changed since the last quiet
    # pass. ``files`` and ``catalogued`` hold the compared documents, not every one.
    partial: bool = False
    # The walk this diff compared (None: no walk), kept for ``remember_listing`` after its run.
    listing: SourceListing | None = None
    # What a pass over named paths saw (``find_changes_at``), for ``remember_listing``.
    paths_seen: PathsSeen | None = None

    @property
    def to_process(self) -> list[str]:
        """Documents a run must handle: new, changed and deleted."""
        return [*self.new, *self.changed, *self.deleted]

    @property
    def documents(self) -> list[str]:
        """Every document that has or should have a partition: on disk or in the catalog."""
        return list(dict.fromkeys([*self.files, *self.catalogued]))


def source_labels(folders: list[Path]) -> dict[str, Path]:
    """A short readable label per watched folder: its name, made unique by a hash of its path."""
    names = [folder.name or "root" for folder in folders]
    labels: dict[str, Path] = {}
    for name, folder in zip(names, folders, strict=True):
        label = name
        if names.count(name) > 1:
            label = f"{name}-{hashlib.sha256(str(folder).encode()).hexdigest()[:6]}"
        labels[label] = folder
    return labels


def pipeline_version(settings: Settings, file_type: str) -> str:
    return _pipeline_versions(settings, [file_type])[file_type]


def _pipeline_versions(settings: Settings, file_types: Iterable[str]) -> dict[str, str]:
    """``pipeline_version`` of each of ``file_types``, what they share worked out once (the
    image vectors' size may mean loading a CLIP model)."""
    images = settings.images
    shared: dict[str, object] = {
        "chunking": [CHUNKER_VERSION, settings.chunking.model_dump()],
        "dense": settings.embedding.dense_model,
        "sparse": settings.embedding.sparse_model_id,
        "schema": SCHEMA_VERSION,
    }
    if settings.redaction.enabled:  # what it replaces is part of what the chunks say
        shared["redaction"] = [
            detectors.DETECTOR_VERSION,  # and so is what its detectors find
            settings.redaction.model_dump(exclude={"serve_originals"}),
        ]
    if images.clip_model:
        # The collection's layout: another image vector size rebuilds the collection.
        shared["image_dim"] = clip_dim(images)
    pictures = [
        clip_model_id(images),
        images.caption_model,
        images.ocr_languages,
        images.ocr_dpi,
        images.ocr_pictures,
        images.min_side,
    ]
    return {
        file_type: ids.fingerprint(
            {"parser": PARSER_VERSIONS[file_type], **shared}
            | ({"images": pictures} if file_type in PICTURE_FORMATS else {})
        )
        for file_type in file_types
    }


@dataclass(frozen=True, slots=True)
class PathsSeen:
    """What a pass over the paths a watcher's events named saw, before its run."""

    state: list[PassState]  # the catalog's (``Catalog.pass_state``)
    named: set[str]  # the documents at the paths, there or gone
    entries: list[SourceEntry]  # the files there, as compared
    known: dict[str, KnownFile]  # the target collection's rows of them (and of what is gone)
    gone: list[str]  # prefixes of the documents under paths that are gone


def _folder_of(entry: SourceEntry) -> str:
    """The folder of a walk's entry, as the prefix of the ids of the documents in it."""
    return ids.document_id(entry[0], _inside_of(entry[2]))


def _inside_of(relative: str) -> str:
    """The folder a path inside a watched folder is in, as the walk names it (``"a/b/"``,
    ``""`` at the top)."""
    inside = relative.rpartition("/")[0]
    return f"{inside}/" if inside else ""


def list_sources(
    settings: Settings, recorded: Mapping[str, str] | None = None, *, documents: int = 0
) -> SourceListing:
    """Every document under the watched folders (its name, size and time), and the watched
    folders that are missing. With ``recorded`` (the quiet record's digests), the entries of
    only the folders that differ from it, unless a watched folder is missing. Shared out between
    worker processes when the catalog holds ``documents`` enough (``walk``)."""
    roots = source_labels(settings.watched_folders)
    missing = [folder for folder in roots.values() if not folder.is_dir()]
    with _garbage_collector_paused():
        listing = walk.list_folders(
            {label: folder for label, folder in roots.items() if folder not in missing},
            file_kinds(settings),
            follow_symlinks=settings.indexing.follow_symlinks,
            recorded=None if missing else recorded,
            workers=_walk_workers(documents),
        )
    listing.missing = missing
    for name in listing.unreadable_names:
        logger.warning("skipped %s: its name is not UTF-8 (rename it to index it)", name)
    return listing


# From how many documents a walk is shared out between processes: below, starting them costs
# more than they save.
_DOCUMENTS_FOR_WORKERS = 20_000
_MAX_WALK_WORKERS = 4


def _walk_workers(documents: int) -> int:
    if documents < _DOCUMENTS_FOR_WORKERS:
        return 1
    return min(len(os.sched_getaffinity(0)), _MAX_WALK_WORKERS)


@contextmanager
def _garbage_collector_paused() -> Iterator[None]:
    """Python's garbage collector paused: a walk or a comparison makes an object or two a file
    and no reference cycle, and each collection the allocations set off would go through every
    one made so far."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def file_kinds(settings: Settings) -> dict[str, tuple[str, str]]:
    """What a walk needs to know of the formats: each indexed extension → its file type and
    that type's ``pipeline_version``."""
    versions = _pipeline_versions(settings, set(EXTENSIONS.values()))
    return {
        extension: (file_type, versions[file_type]) for extension, file_type in EXTENSIONS.items()
    }


def scan_sources(
    settings: Settings, known: Mapping[str, CatalogRow], listing: SourceListing | None = None
) -> tuple[list[SourceFile], list[Path]]:
    """Every document under the watched folders (``listing``, else walked now), and the watched
    folders that are missing."""
    listing = listing or list_sources(settings)
    files = [_describe(*entry, known) for entry in listing.entries]
    return files, listing.missing


def describe_file(settings: Settings, doc_id: str, known: CatalogRow | None) -> SourceFile | None:
    """The manifest row of one document, or None when its file is gone (or may not be read)."""
    label, _, relative = doc_id.partition("/")
    folder = source_labels(settings.watched_folders).get(label)
    if folder is None:
        return None
    path = folder / relative
    if not path.is_file() or not walk.allowed(path, folder, settings.indexing.follow_symlinks):
        return None
    file_type = format_of(path) or "text"
    version = pipeline_version(settings, file_type)
    known_here = {doc_id: known} if known else {}
    stat = path.stat()
    return _describe(
        label, folder, relative, stat.st_size, stat.st_mtime_ns, file_type, version, known_here
    )


def _describe(
    label: str,
    folder: Path,
    relative: str,
    size: int,
    mtime_ns: int,
    file_type: str,
    pipeline: str,
    known: Mapping[str, CatalogRow],
) -> SourceFile:
    doc_id = ids.document_id(label, relative)
    previous = known.get(doc_id)
    error = None
    if previous and previous.size == size and previous.mtime_ns == mtime_ns:
        sha256 = previous.sha256
    else:
        try:
            sha256 = _sha256(folder / relative)
        except OSError as exc:
            # Unreadable now: version it by size and time so it is retried when it changes.
            sha256, error = (
                f"unreadable:{size}:{mtime_ns}",
                f"cannot read the file ({exc.strerror})",
            )
    return SourceFile(
        doc_id=doc_id,
        source=str(folder),
        relative_path=relative,
        file_type=file_type,
        size=size,
        mtime_ns=mtime_ns,
        sha256=sha256,
        version=ids.document_version(sha256, pipeline),
        error=error,
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def needs_indexing(
    record: CatalogRow | None, version: str, *, retry_failed: bool, now: float
) -> bool:
    """Whether a document whose file is at ``version`` must be indexed into a collection where
    ``record`` is its row (None: the collection does not hold it yet)."""
    if record is None or record.version != version or record.reindex_reason:
        return True
    if record.state != "failed":
        return False
    return retry_failed or (record.retry_at is not None and record.retry_at <= now)


def diff_manifest(
    files: list[SourceFile],
    missing_sources: list[Path],
    target: Mapping[str, CatalogRow],
    live: Mapping[str, CatalogRow],
    *,
    retry_failed: bool = False,
) -> ManifestDiff:
    """Classify documents against the collection runs write to (``target``) and the one that
    answers (``live``; the same one unless another is being built).

    A document the target lacks is new, or changed if the live collection has it. Failed
    documents are changed again when their retry is due. Documents of a watched folder that is
    missing (unmounted, renamed) are left alone rather than deleted: a folder that comes back
    must not cost a full re-index, nor its absence the index.
    """
    now = time.time()
    known = {**live, **target}
    diff = ManifestDiff(
        files={file.doc_id: file for file in files},
        missing_sources=missing_sources,
        catalogued=list(known),
    )
    for file in files:
        record = target.get(file.doc_id)
        if not needs_indexing(record, file.version, retry_failed=retry_failed, now=now):
            diff.unchanged.append(file.doc_id)
        elif record is None and file.doc_id not in live:
            diff.new.append(file.doc_id)
        else:
            diff.changed.append(file.doc_id)
    missing = {str(folder) for folder in missing_sources}
    diff.deleted = [
        doc_id
        for doc_id, record in known.items()
        if doc_id not in diff.files and record.source not in missing
    ]
    return diff


def find_changes(
    settings: Settings,
    catalog: Catalog,
    target: str,
    *,
    retry_failed: bool = False,
    every_file: bool = False,
    partial: bool = False,
    listing: SourceListing | None = None,
) -> ManifestDiff:
    """Scan the watched folders (or take ``listing``, a walk just made) and classify every
    document against the ``target`` collection (and the live one, when another is being built).

    The last pass that found nothing to do (or a run that indexed all a pass found:
    ``remember_listing``) left a digest of each folder's listing and the catalog's state. While
    the catalog is as it was then (nothing committed, failed, deleted or flagged since, no retry
    due), a folder that lists as it did holds nothing to do: when none changed, the catalog is
    not read and no file described (most of an unchanged pass over many files); with
    ``partial``, only the folders that changed are compared (their rows read, their files
    described), and the diff says so (``ManifestDiff.partial``). ``every_file`` compares every
    file, as does any pass while a watched folder is missing.
    """
    live = catalog.live_collection()
    collections = _collections(target, live)
    state = [catalog.pass_state(name) for name in collections]
    quiet = QuietPass(settings.home / QUIET_PASS_FILE)
    recorded = None if retry_failed or every_file else quiet.held(state)
    if listing is None or not listing.complete:
        # Only a partial pass can do with the entries of the folders that changed.
        listing = list_sources(
            settings,
            recorded if partial else None,
            documents=max(entry.documents for entry in state),
        )
    changed = None
    if recorded is not None and not listing.missing:
        changed = _changed_folders(recorded, listing.folders)
    if changed is not None and not changed:
        return ManifestDiff(files={}, also_unchanged=listing.count, quiet=True)
    if changed is not None and partial:
        return _compare_folders(catalog, target, live, listing, changed)
    with _garbage_collector_paused():
        target_records = catalog.known_files(target)
        live_records = catalog.known_files(live.name) if live and live.name != target else {}
        files, missing = scan_sources(settings, live_records | target_records, listing)
        diff = diff_manifest(
            files, missing, target_records, live_records, retry_failed=retry_failed
        )
    diff.listing = listing
    unchanged_since = state == [catalog.pass_state(name) for name in collections]
    if not diff.to_process and not missing and unchanged_since:
        quiet.record(listing.folders, state)
    return diff


def _compare_folders(
    catalog: Catalog,
    target: str,
    live: CollectionRecord | None,
    listing: SourceListing,
    folders: set[str],
) -> ManifestDiff:
    """The diff of the documents in ``folders`` alone (prefixes of their ids), the rest of
    ``listing`` unchanged."""

    def inside(records: dict[str, KnownFile]) -> dict[str, KnownFile]:
        return {
            doc_id: record
            for doc_id, record in records.items()
            if doc_id.rpartition("/")[0] + "/" in folders
        }

    target_records, live_records = map(inside, _known_rows(catalog, target, live, under=folders))
    known = live_records | target_records
    # A listing made with the record holds these folders' entries alone; a complete one more.
    compared = [entry for entry in listing.entries if _folder_of(entry) in folders]
    files = [_describe(*entry, known) for entry in compared]
    diff = diff_manifest(files, [], target_records, live_records)
    diff.also_unchanged = listing.count - len(files)
    diff.partial, diff.listing = True, listing
    return diff


def _changed_folders(recorded: dict[str, str], folders: dict[str, str]) -> set[str]:
    """The folders whose listing differs from the record's: added, gone or touched."""
    return {
        folder
        for folder in recorded.keys() | folders.keys()
        if recorded.get(folder) != folders.get(folder)
    }


def remember_listing(settings: Settings, catalog: Catalog, target: str, diff: ManifestDiff) -> None:
    """After a run indexed everything ``diff`` found (its failures recorded as such), under the
    indexing lock: the folders as that pass listed them match the catalog now, as after a pass
    that found nothing to do, and the next pass need compare only the folders changed since.
    After a pass over named paths, the folders they are in are listed again and their record
    brought up to date (``_listing_after_paths``)."""
    quiet = QuietPass(settings.home / QUIET_PASS_FILE)
    if diff.listing is not None and not diff.listing.missing:
        folders = diff.listing.folders
    elif diff.paths_seen is not None:
        held = quiet.held(diff.paths_seen.state)
        if held is None:
            return
        folders = _listing_after_paths(settings, held, diff.paths_seen)
    else:
        return
    state = [catalog.pass_state(name) for name in _collections(target, catalog.live_collection())]
    quiet.record(folders, state)


def _listing_after_paths(
    settings: Settings, recorded: dict[str, str], seen: PathsSeen
) -> dict[str, str]:
    """The quiet record's folders after a run indexed what a pass over named paths found, the
    record having held at that pass's start: those the named paths are in listed again
    (``_digest_after_paths``), and what was under a path that is gone left out."""
    folders = {
        folder: digest
        for folder, digest in recorded.items()
        if not any(folder.startswith(prefix) for prefix in seen.gone)
    }
    kinds = file_kinds(settings)
    for label, inside in {_folder_parts(doc_id) for doc_id in seen.named}:
        folder = ids.document_id(label, inside)
        digest = _digest_after_paths(settings, label, inside, seen, recorded.get(folder), kinds)
        if digest is None:
            folders.pop(folder, None)
        else:
            folders[folder] = digest
    return folders


# What the record keeps of a folder a pass could not vouch for: no listing has this digest, so
# the next pass compares the folder, even one holding no document by then (which a folder left
# out of the record would seem to hold, as before).
_UNVERIFIED = ""


def _digest_after_paths(
    settings: Settings,
    label: str,
    inside: str,
    seen: PathsSeen,
    recorded: str | None,
    kinds: walk.FileKinds,
) -> str | None:
    """The digest of a folder a named path is in, listed now: kept only if the listing is the
    ``recorded`` one but for the named files, and those are as the pass compared them.
    ``_UNVERIFIED`` (the folder compared at the next pass) when anything else changed meanwhile;
    None when it holds no document."""
    root = source_labels(settings.watched_folders).get(label)
    if root is None:
        return _UNVERIFIED
    files, _ = walk.list_folder(root, inside, str(root / inside), settings.indexing.follow_symlinks)
    now = walk.entries_of(label, root, files, kinds)
    named = {doc_id for doc_id in seen.named if _folder_parts(doc_id) == (label, inside)}
    named_now = [entry for entry in now if ids.document_id(label, entry[2]) in named]
    compared = [entry for entry in seen.entries if ids.document_id(label, entry[2]) in named]
    if sorted(named_now, key=_RELATIVE) != sorted(compared, key=_RELATIVE):
        return _UNVERIFIED  # a named file changed again since it was compared
    # The listing as recorded: the others as now, the named files as the catalog had them.
    before = [entry for entry in now if ids.document_id(label, entry[2]) not in named]
    for doc_id in named:
        row, relative = seen.known.get(doc_id), doc_id.partition("/")[2]
        if row is not None and (kind := kinds.get(extension_of(relative))) is not None:
            before.append((label, root, relative, row.size, row.mtime_ns, *kind))
    before.sort(key=lambda entry: entry[2].rpartition("/")[2])  # by name, as listed
    if (walk.folder_digest(root, before) if before else None) != recorded:
        return _UNVERIFIED
    return walk.folder_digest(root, now) if now else None


_RELATIVE = operator.itemgetter(2)


def _folder_parts(doc_id: str) -> tuple[str, str]:
    """The label of a document's watched folder, and the folder it is in (``_inside_of``)."""
    label, _, relative = doc_id.partition("/")
    return label, _inside_of(relative)


def _collections(target: str, live: CollectionRecord | None) -> list[str]:
    """The collections a pass compares with: the target, and the live one while another is
    being built."""
    return sorted({target, live.name if live else target})


def find_changes_at(
    settings: Settings, catalog: Catalog, target: str, paths: Iterable[Path]
) -> ManifestDiff | None:
    """Compare only the files at ``paths`` (what a watcher's events named) with the catalog,
    against the ``target`` collection and the live one, as :func:`find_changes` would: no walk
    of the folders and no read of every row. A path that is gone takes the documents the
    catalog knows under it with it (a folder moved away). None when a path is an existing
    folder, or a watched folder is missing: only a whole pass tells what changed then."""
    folders = source_labels(settings.watched_folders)
    follow = settings.indexing.follow_symlinks
    kinds = file_kinds(settings)
    entries: list[SourceEntry] = []
    named: set[str] = set()
    gone: list[str] = []
    for path in dict.fromkeys(paths):
        place = _place_of(path, folders)
        if place is None:
            continue
        label, folder, relative = place
        try:
            if not folder.is_dir() or not relative or path.is_dir():
                return None
        except OSError:  # not to be looked at (permissions): the whole pass says what it can
            return None
        if walk.skipped(relative) or not walk.is_utf8(relative):
            continue
        doc_id = ids.document_id(label, relative)
        named.add(doc_id)
        try:
            stat = path.stat() if path.is_file() and walk.allowed(path, folder, follow) else None
        except OSError:  # gone meanwhile
            stat = None
        if stat is None:
            gone.append(f"{doc_id}/")
        else:
            entries.extend(walk.entries_of(label, folder, [(relative, stat)], kinds))
    live = catalog.live_collection()
    state = [catalog.pass_state(name) for name in _collections(target, live)]
    target_records, live_records = _known_rows(catalog, target, live, named, under=gone)
    known = live_records | target_records
    files = [_describe(*entry, known) for entry in entries]
    diff = diff_manifest(files, [], target_records, live_records)
    diff.partial = True
    diff.paths_seen = PathsSeen(state, named, entries, target_records, gone)
    return diff


def _known_rows(
    catalog: Catalog,
    target: str,
    live: CollectionRecord | None,
    doc_ids: Iterable[str] = (),
    *,
    under: Iterable[str] = (),
) -> tuple[dict[str, KnownFile], dict[str, KnownFile]]:
    """The target collection's rows of ``doc_ids`` and of the documents under the prefixes
    ``under``; and the live collection's, while another is being built."""
    doc_ids, under = list(doc_ids), list(under)
    target_rows = catalog.known_files(target, doc_ids, under=under)
    if live is None or live.name == target:
        return target_rows, {}
    return target_rows, catalog.known_files(live.name, doc_ids, under=under)


def _place_of(path: Path, folders: Mapping[str, Path]) -> tuple[str, Path, str] | None:
    """The watched folder ``path`` is in (its label and itself) and the path inside it."""
    for label, folder in folders.items():
        if path.is_relative_to(folder):
            relative = path.relative_to(folder).as_posix()
            return label, folder, "" if relative == "." else relative
    return None


QUIET_PASS_FILE = "quiet-pass.json"


class QuietPass:
    """The record of the last pass that found nothing to do (or whose run indexed all it
    found): each folder's listing digest and the catalog's state (``Catalog.pass_state``) then.
    Written atomically; a stale or unreadable record only costs a full comparison."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def held(self, state: list[PassState]) -> dict[str, str] | None:
        """The recorded digest of each folder, or None when the record does not hold for the
        catalog in ``state``: another state, a retry due, no record."""
        try:
            saved = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        now = time.time()
        retry_due = any(
            entry.next_retry_at is not None and entry.next_retry_at <= now for entry in state
        )
        recorded = saved.get("folders")
        if retry_due or not isinstance(recorded, dict):
            return None
        if saved.get("state") != [list(entry) for entry in state]:
            return None
        return recorded

    def record(self, folders: dict[str, str], state: list[PassState]) -> None:
        text = json.dumps({"folders": folders, "state": [list(entry) for entry in state]})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, lambda temporary: Path(temporary).write_text(text))
