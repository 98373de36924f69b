"""The watched folders listed: each document file's name, size and time, and a digest of each
folder's listing, the same while none of its files is added, removed or touched.

One ``stat`` a file is most of what a pass over many files costs, and the interpreter runs one
thread at a time: over many files the folders are shared out between worker processes
(``python -m rag_pipeline.walk``), each listing its share. Those processes hand back each
folder's digest and the entries of only the folders that differ from a record (``recorded``),
not every file's. This module imports nothing heavy, so that a worker starts at once.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import os
import pickle
import subprocess
import sys
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path

from rag_pipeline import ids
from rag_pipeline.files import extension_of

logger = logging.getLogger(__name__)

# A walk's entry: (folder's label, folder, path inside it, size, mtime_ns, file type, pipeline
# version).
SourceEntry = tuple[str, Path, str, int, int, str, str]
# What the walk knows of file formats: a file's extension → its file type and pipeline version.
FileKinds = Mapping[str, tuple[str, str]]
# A folder still to be listed: its watched folder's label and path, where it is inside that
# (``"a/b/"``, ``""`` at the top), and its own path.
_Task = tuple[str, Path, str, str]

_NAME = operator.attrgetter("name")
_SKIPPED = (".", "~$")  # hidden files and folders, Office's lock files
# Subtrees a walk shares out per worker: enough that one large subtree does not hold up the rest.
_SUBTREES_PER_WORKER = 8


@dataclass(slots=True)
class SourceListing:
    """What a walk of the watched folders found, before any file is compared or read."""

    # Every document's entry; with a record given, only those in the folders that differ from
    # it (``complete`` False).
    entries: list[SourceEntry]
    missing: list[Path]  # watched folders that are not there
    # Each folder holding documents (the prefix of their ids) → a digest of its entries.
    folders: dict[str, str]
    count: int = 0  # documents listed, in ``entries`` or not
    complete: bool = True
    # Names skipped as not UTF-8 (``os.fsencode``d paths): the catalog, Dagster and the store
    # name documents in UTF-8.
    unreadable_names: list[bytes] = field(default_factory=list)


def list_folders(
    roots: Mapping[str, Path],
    kinds: FileKinds,
    *,
    follow_symlinks: bool,
    recorded: Mapping[str, str] | None = None,
    workers: int = 1,
) -> SourceListing:
    """The documents under ``roots`` (label → watched folder, each there), listed by this
    process or shared out between ``workers`` processes; with ``recorded`` (folder → digest),
    only the entries of the folders whose digest differs from it are kept."""
    tasks = deque((label, root, "", str(root)) for label, root in roots.items())
    listing = SourceListing([], [], {}, complete=recorded is None)
    if workers > 1:
        # The top levels here, until there are subtrees enough to share out.
        while tasks and len(tasks) < workers * _SUBTREES_PER_WORKER:
            _list_into(listing, [tasks.popleft()], kinds, follow_symlinks, recorded, tasks)
        shares = [share for worker in range(workers) if (share := list(tasks)[worker::workers])]
        for share, listed in zip(
            shares, _in_workers(shares, kinds, follow_symlinks, recorded), strict=True
        ):
            if listed is None:
                _list_into(listing, share, kinds, follow_symlinks, recorded)
            else:
                _merge(listing, listed)
    else:
        _list_into(listing, tasks, kinds, follow_symlinks, recorded)
    return listing


def _list_into(
    listing: SourceListing,
    tasks: Iterable[_Task],
    kinds: FileKinds,
    follow_symlinks: bool,
    recorded: Mapping[str, str] | None,
    subfolders: deque[_Task] | None = None,
) -> None:
    """List the folders of ``tasks`` into ``listing``, and their subfolders: into
    ``subfolders`` when given, else depth first here."""
    stack = list(tasks)
    stack.reverse()
    while stack:
        label, root, inside, current = stack.pop()
        files, folders = list_folder(root, inside, current, follow_symlinks, listing)
        tasks_below = [(label, root, below, path) for below, path in folders]
        if subfolders is None:
            stack.extend(reversed(tasks_below))
        else:
            subfolders.extend(tasks_below)
        entries = entries_of(label, root, files, kinds)
        if entries:
            folder = ids.document_id(label, inside)
            digest = listing.folders[folder] = folder_digest(root, entries)
            listing.count += len(entries)
            if recorded is None or recorded.get(folder) != digest:
                listing.entries.extend(entries)


def _merge(listing: SourceListing, listed: SourceListing) -> None:
    listing.entries.extend(listed.entries)
    listing.folders.update(listed.folders)
    listing.count += listed.count
    listing.unreadable_names.extend(listed.unreadable_names)


def _in_workers(
    shares: list[list[_Task]],
    kinds: FileKinds,
    follow_symlinks: bool,
    recorded: Mapping[str, str] | None,
) -> list[SourceListing | None]:
    """Each share listed by a worker process of its own, side by side; None for a share whose
    worker failed (it is listed here instead)."""
    processes = [_start_worker(share, kinds, follow_symlinks, recorded) for share in shares]
    results: list[SourceListing | None] = []
    for process in processes:
        if process is None:
            results.append(None)
            continue
        assert process.stdout is not None
        with process.stdout:
            output = process.stdout.read()
        try:
            if process.wait() != 0:
                raise ValueError(f"exit {process.returncode}")
            entries, folders, count, unreadable_names = pickle.loads(output)
        except Exception as error:  # anything but its listing: the share is listed here
            logger.warning("a folder-listing process failed (%s); listing its share here", error)
            results.append(None)
            continue
        results.append(
            SourceListing(entries, [], folders, count, unreadable_names=unreadable_names)
        )
    return results


def _start_worker(
    share: list[_Task],
    kinds: FileKinds,
    follow_symlinks: bool,
    recorded: Mapping[str, str] | None,
) -> subprocess.Popen[bytes] | None:
    """A worker process listing ``share``, its work handed to it; None if it cannot start."""
    package_parent = str(Path(__file__).resolve().parents[1])
    python_path = [package_parent, os.environ.get("PYTHONPATH", "")]
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, python_path))},
        )
    except OSError as error:
        logger.warning("cannot start a folder-listing process (%s); listing its share here", error)
        return None
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError), process.stdin:  # one that failed at once
        pickle.dump((share, dict(kinds), follow_symlinks, recorded), process.stdin)
    return process


def list_folder(
    root: Path,
    inside: str,
    current: str,
    follow_symlinks: bool,
    listing: SourceListing | None = None,
) -> tuple[list[tuple[str, os.stat_result]], list[tuple[str, str]]]:
    """What a walk finds directly in ``current`` (``inside`` of the watched folder ``root``):
    its files by name (their paths inside ``root``, ``/``-separated, and their ``stat``) and its
    subfolders (each inside ``root`` and its path). Skips hidden entries and files gone
    meanwhile, never follows links to folders, and follows links to files only inside
    ``root`` (anywhere with ``follow_symlinks``). A name that is not UTF-8 is skipped (and
    noted in ``listing``). Strings rather than ``Path``s: this runs once a file on every pass."""
    try:
        entries = sorted(os.scandir(current), key=_NAME)
    except OSError:
        return [], []
    files: list[tuple[str, os.stat_result]] = []
    folders: list[tuple[str, str]] = []
    for entry in entries:
        name = entry.name
        if name.startswith(_SKIPPED):
            continue
        if not name.isascii() and not is_utf8(name):
            if listing is not None:
                listing.unreadable_names.append(os.fsencode(entry.path))
            continue
        if entry.is_dir(follow_symlinks=False):
            folders.append((f"{inside}{name}/", entry.path))
        elif entry.is_file() and (
            not entry.is_symlink() or allowed(Path(entry.path), root, follow_symlinks)
        ):
            try:
                stat = entry.stat()
            except OSError:  # gone meanwhile
                continue
            files.append((f"{inside}{name}", stat))
    return files, folders


def entries_of(
    label: str, root: Path, files: Iterable[tuple[str, os.stat_result]], kinds: FileKinds
) -> list[SourceEntry]:
    """The walk's entries of ``files`` (paths inside ``root``), documents only."""
    entries = []
    for relative, stat in files:
        kind = kinds.get(extension_of(relative))
        if kind is not None:
            file_type, version = kind
            entries.append(
                (label, root, relative, stat.st_size, stat.st_mtime_ns, file_type, version)
            )
    return entries


def folder_digest(root: Path, entries: Iterable[SourceEntry]) -> str:
    """The digest of a folder's entries (those of one folder, by name) in the watched folder
    ``root``."""
    lines = "".join(
        f"{relative}\0{size}\0{mtime_ns}\0{version}\n"
        for _, _, relative, size, mtime_ns, _, version in entries
    )
    return sha256(f"{root}\n{lines}".encode()).hexdigest()


def allowed(path: Path, root: Path, follow_symlinks: bool) -> bool:
    """Whether ``path`` may be read: inside ``root`` once links are resolved, unless links out
    of the folder are to be followed."""
    return follow_symlinks or path.resolve().is_relative_to(root.resolve())


def skipped(relative: str) -> bool:
    """Whether a walk skips the path ``relative`` (inside a watched folder): it is, or is in, a
    hidden entry or an Office lock file."""
    return any(part.startswith(_SKIPPED) for part in relative.split("/"))


def is_utf8(name: str) -> bool:
    """Whether a name from the file system was valid UTF-8 (else it holds surrogate escapes)."""
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


def _work() -> None:
    """A worker process: its share of folders from stdin, their listing to stdout."""
    share, kinds, follow_symlinks, recorded = pickle.load(sys.stdin.buffer)
    listing = SourceListing([], [], {})
    _list_into(listing, share, kinds, follow_symlinks, recorded)
    # Plain values: this module is ``__main__`` here, its classes unknown by that name outside.
    listed = (listing.entries, listing.folders, listing.count, listing.unreadable_names)
    pickle.dump(listed, sys.stdout.buffer)


if __name__ == "__main__":
    import gc

    gc.disable()  # many small objects and no cycle: collections would only go over them
    _work()
