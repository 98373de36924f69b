"""Where an installation and its workspaces live."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from rag_pipeline.ids import DEFAULT_WORKSPACE

if TYPE_CHECKING:
    from upath import UPath

HOME_ENV = "RAG_PIPELINE_HOME"
DEFAULT_HOME = Path("data")
PathT = TypeVar("PathT", bound="Path | UPath")


def resolve_home(home: str | Path | None = None) -> Path:
    """The home folder: the argument, else ``$RAG_PIPELINE_HOME``, else ``./data``."""
    chosen = home if home is not None else os.environ.get(HOME_ENV) or DEFAULT_HOME
    return Path(chosen).expanduser().resolve()


def workspace_home(root: PathT, workspace: str) -> PathT:
    """The folder of a workspace of the installation at ``root``."""
    return root if workspace == DEFAULT_WORKSPACE else root / "workspaces" / workspace


def installation_home(home: Path) -> Path:
    """The installation's home, from a workspace's folder (see :func:`workspace_home`)."""
    return home.parent.parent
