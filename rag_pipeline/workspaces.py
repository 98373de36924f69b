"""Workspaces: separate bodies of documents in one installation.

Each has a display name (any language) and an ASCII id derived from it (``ids.workspace_id``),
its own watched folders and upload folder, catalog, Qdrant collection, stage files and
conversations. The default workspace is the installation's home itself, as it was before
workspaces existed; any other lives in ``<home>/workspaces/<id>/`` (``config.workspace_home``),
named by the ``workspace.json`` there.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rag_pipeline.catalog import Catalog
from rag_pipeline.catalog.database import drop_schema
from rag_pipeline.config import Settings, load_settings, workspace_home, write_stored_settings
from rag_pipeline.files import write_atomically
from rag_pipeline.ids import DEFAULT_WORKSPACE, is_workspace_id, workspace_id
from rag_pipeline.locking import index_lock, lock_place
from rag_pipeline.locking.files import FileLock
from rag_pipeline.store import drop_collection

_DESCRIPTION = "workspace.json"
_DEFAULT_NAME = "Default"
_NAME_CHARS = 80
_DESCRIBING_SECONDS = 30.0  # the longest a change of a description waits for another's


class WorkspaceError(ValueError):
    """No such workspace, or a name that cannot be used; the message says which."""


@dataclass(frozen=True, slots=True)
class Workspace:
    id: str
    name: str
    created: float | None
    opened_by: Mapping[str, float]  # when each user opened it last: what one sees of it
    settings: Settings

    def last_opened(self, user: str) -> float | None:
        """When ``user`` opened it last (None: never); others' openings are theirs."""
        return self.opened_by.get(user)

    @property
    def home(self) -> Path:
        return self.settings.home


def list_workspaces(settings: Settings) -> list[Workspace]:
    """The installation's workspaces: the default one first, then by name. ``settings``' own
    workspace keeps these settings (with whatever the caller set in code)."""
    root = settings.root
    others = []
    folder = root / "workspaces"
    for home in sorted(folder.iterdir()) if folder.is_dir() else []:
        if is_workspace_id(home.name) and (home / _DESCRIPTION).is_file():
            others.append(_open(root, home.name, settings))
    default = _open(root, DEFAULT_WORKSPACE, settings)
    return [default, *sorted(others, key=lambda w: w.name.casefold())]


def open_workspace(settings: Settings, id_: str) -> Workspace:
    """The workspace with this id, read alone (cheaper than listing them all)."""
    if not workspace_exists(settings.root, id_):
        raise WorkspaceError(f"no workspace {id_!r} (see `rag-pipeline workspace list`)")
    return _open(settings.root, id_, settings)


def workspace_exists(root: Path, id_: str) -> bool:
    return id_ == DEFAULT_WORKSPACE or (
        is_workspace_id(id_) and (workspace_home(root, id_) / _DESCRIPTION).is_file()
    )


def find_workspace(settings: Settings, name_or_id: str) -> Workspace:
    """The workspace with this id or display name (letter case aside)."""
    wanted = name_or_id.strip()
    if workspace_exists(settings.root, wanted):
        return open_workspace(settings, wanted)
    for workspace in list_workspaces(settings):
        if wanted in (workspace.id, workspace.name) or (
            wanted.casefold() == workspace.name.casefold()
        ):
            return workspace
    raise WorkspaceError(f"no workspace {name_or_id!r} (see `rag-pipeline workspace list`)")


def create_workspace(settings: Settings, name: str) -> Workspace:
    name = _valid_name(name)
    if any(w.name.casefold() == name.casefold() for w in list_workspaces(settings)):
        raise WorkspaceError(f"a workspace named {name!r} exists already")
    new_id = workspace_id(name)
    home = workspace_home(settings.root, new_id)
    if home.exists():
        raise WorkspaceError(f"a workspace with the id {new_id!r} exists already")
    # Made aside and moved in whole: a creation cut short leaves no half workspace behind.
    draft = _aside(home, "creating")
    draft.mkdir(parents=True)
    # Its own (empty) list of folders: the installation's belong to the default workspace.
    write_stored_settings(draft, {"sources": []})
    (draft / load_settings(settings.root, new_id).upload_folder.name).mkdir()
    _describe(draft, {"name": name, "created": time.time(), "opened_by": {}})
    draft.rename(home)
    return _open(settings.root, new_id)


def rename_workspace(workspace: Workspace, name: str) -> Workspace:
    """A new display name; the id, and so the collection and folders, stay."""
    name = _valid_name(name)
    others = list_workspaces(workspace.settings)
    if any(w.name.casefold() == name.casefold() and w.id != workspace.id for w in others):
        raise WorkspaceError(f"a workspace named {name!r} exists already")
    _change_description(workspace.home, lambda described: described | {"name": name})
    return _open(workspace.settings.root, workspace.id)


def mark_opened(workspace: Workspace, user: str) -> None:
    """Remember that ``user`` opened the workspace now."""

    def opened(described: dict[str, object]) -> dict[str, object]:
        described.pop("last_opened", None)  # anyone's last opening, kept before: not the user's
        return described | {"opened_by": _opened_by(described) | {user: time.time()}}

    _change_description(workspace.home, opened)


def delete_workspace(workspace: Workspace, *, wait_seconds: float = 60.0) -> None:
    """Drop the workspace's collections, catalog, stage files, uploads and conversations, and
    nothing else: its watched folders outside it stay untouched."""
    if workspace.id == DEFAULT_WORKSPACE:
        raise WorkspaceError("the default workspace cannot be deleted")
    settings = workspace.settings
    with index_lock(lock_place(settings), timeout_seconds=wait_seconds):
        with Catalog(settings) as catalog:
            collections = [collection.name for collection in catalog.collections()]
        for collection in collections:
            drop_collection(settings, collection)
        if settings.catalog.url and settings.catalog_schema:
            drop_schema(settings.catalog.url, settings.catalog_schema)
        # Moved aside first: a deletion cut short leaves no half workspace in the list.
        doomed = _aside(settings.home, "deleted")
        settings.home.rename(doomed)
        if settings.indexing.stage_url:  # its stage files and pictures, outside its home
            stages = settings.stage_root
            if stages.exists():
                stages.fs.rm(stages.path, recursive=True)
    shutil.rmtree(doomed)
    for leftover in settings.home.parent.glob(".deleted-*"):  # deletions cut short
        shutil.rmtree(leftover, ignore_errors=True)


def _aside(home: Path, why: str) -> Path:
    """A hidden folder beside a workspace's (never listed: not a workspace id)."""
    return home.with_name(f".{why}-{home.name}-{uuid.uuid4().hex[:8]}")


def _valid_name(name: str) -> str:
    name = " ".join(name.split())
    if not name:
        raise WorkspaceError("a workspace needs a name")
    if len(name) > _NAME_CHARS:
        raise WorkspaceError(f"a workspace name has at most {_NAME_CHARS} characters")
    return name


def _open(root: Path, id_: str, given: Settings | None = None) -> Workspace:
    settings = given if given is not None and given.workspace == id_ else load_settings(root, id_)
    described = _description(settings.home)
    return Workspace(
        id=id_,
        name=described.get("name") or (_DEFAULT_NAME if id_ == DEFAULT_WORKSPACE else id_),
        created=described.get("created"),
        opened_by=_opened_by(described),
        settings=settings,
    )


def _opened_by(described: dict[str, object]) -> dict[str, float]:
    opened_by = described.get("opened_by")
    return dict(opened_by) if isinstance(opened_by, dict) else {}


def _description(home: Path) -> dict[str, object]:
    path = home / _DESCRIPTION
    return json.loads(path.read_text()) if path.is_file() else {}


def _change_description(
    home: Path, change: Callable[[dict[str, object]], dict[str, object]]
) -> None:
    """Read, change and write the description, under a lock of its own: two changes at once
    (users opening the workspace, a renaming), in one server or two, are both kept."""
    lock = FileLock(home / f".{_DESCRIPTION}.lock")
    if not lock.acquire(_DESCRIBING_SECONDS):
        raise WorkspaceError(f"{home / _DESCRIPTION} is being changed: try again")
    try:
        _describe(home, change(_description(home)))
    finally:
        lock.release()


def _describe(home: Path, described: dict[str, object]) -> None:
    """Written whole under a name of its own first: a reader never sees half of it."""
    text = json.dumps(described, indent=2, ensure_ascii=False) + "\n"
    write_atomically(home / _DESCRIPTION, lambda path: Path(path).write_text(text))
