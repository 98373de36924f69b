"""What every command needs: the settings its arguments name, and the error a user can fix."""

from __future__ import annotations

import argparse

from rag_pipeline.config import Settings, load_settings


class UserError(Exception):
    """A problem the user can fix; printed without a traceback."""


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings of the workspace the command names (``--workspace``), else the default's."""
    from rag_pipeline.workspaces import WorkspaceError, find_workspace

    try:
        settings = load_settings(args.home)
    except ValueError as error:  # pydantic's ValidationError is one
        raise UserError(f"invalid configuration: {error}") from error
    if not getattr(args, "workspace", None):
        return settings
    try:
        return find_workspace(settings, args.workspace).settings
    except WorkspaceError as error:
        raise UserError(str(error)) from error
    except ValueError as error:
        raise UserError(f"invalid configuration: {error}") from error
