"""Who may do what: the one table of each action's least role, and of the action each HTTP route,
each event of the page and each tool of the MCP endpoint performs.

A user's role in a workspace is what their grants give (``rag-pipeline user add``): reader
(``--workspace W``), contributor (``--contribute W``), governor (``--govern W``). Being an admin
(``--workspace '*'``) is no role in a workspace but the right to manage the workspaces
themselves: in each workspace an admin is what their other flags make them (a reader of every
one without ``--govern '*'``). Every route, event and tool names its action here; the server
refuses to start with one this table does not list, and the permission test tries every one of
them with every role.
"""

from __future__ import annotations

import re
from enum import IntEnum, StrEnum


class Role(IntEnum):
    """What a user is in a workspace, each role allowed what the ones below it are; and
    ``ADMIN``, the least "role" of the installation's own actions (no workspace's)."""

    SIGNED_IN = 0  # anyone through the door, whatever workspace they may use
    READER = 1
    CONTRIBUTOR = 2
    GOVERNOR = 3
    # Not a rank in a workspace (no user's role in one): granted every workspace, to manage
    # the workspaces themselves.
    ADMIN = 4


class Action(StrEnum):
    """What a request does; each value completes "<user> may not …" (``{workspace}``: the
    workspace's name)."""

    USE_PAGE = "use the page"  # nothing of any workspace: the page's own steps
    ASK = "ask or search in {workspace}"  # and keep one's conversations, list the sources
    READ_FILE = "read the files of {workspace}"  # a file, a page's preview, a picture
    SEE_TRACES = "see the traces of {workspace}"  # one's own queries'
    UPLOAD = "upload into {workspace}"
    REPLACE_OWN = "replace their uploads in {workspace}"
    REPLACE_ANY = "replace others' uploads in {workspace}"  # and archived or rejected ones
    REMOVE_OWN = "remove their uploads from {workspace}"
    REMOVE_ANY = "remove others' uploads from {workspace}"  # and archived or rejected ones
    SEE_OFFLINE = "see what is offline in {workspace}"
    GOVERN = "take documents out of search here"  # archive, reject, put back
    MANAGE_WORKSPACES = "create, rename or delete workspaces"


LEAST_ROLE: dict[Action, Role] = {
    Action.USE_PAGE: Role.SIGNED_IN,
    Action.ASK: Role.READER,
    Action.READ_FILE: Role.READER,
    Action.SEE_TRACES: Role.READER,
    Action.UPLOAD: Role.CONTRIBUTOR,
    Action.REPLACE_OWN: Role.CONTRIBUTOR,
    Action.REPLACE_ANY: Role.GOVERNOR,
    Action.REMOVE_OWN: Role.CONTRIBUTOR,
    Action.REMOVE_ANY: Role.GOVERNOR,
    Action.SEE_OFFLINE: Role.GOVERNOR,
    Action.GOVERN: Role.GOVERNOR,
    Action.MANAGE_WORKSPACES: Role.ADMIN,
}

# No sign-in needed: the form itself, gradio_client's sign-in (``auth=``), and signing out.
OPEN_ROUTES = frozenset({"/sign-in", "/login", "/sign-out"})

# The HTTP routes of the app, by path (the page's mount "/" holds Gradio's own routes: anyone
# signed in reaches them; what its events do is in PAGE_EVENTS).
HTTP_ROUTES: dict[str, Action] = {
    "/api/search": Action.ASK,
    "/api/preview": Action.READ_FILE,
    "/api/picture": Action.READ_FILE,
    "/api/file": Action.READ_FILE,
    "/api/file/{name}": Action.READ_FILE,  # the same, named for the tab a PDF opens in
    "/api/docs": Action.USE_PAGE,
    "/api/docs/oauth2-redirect": Action.USE_PAGE,
    "/api/openapi.json": Action.USE_PAGE,
    "/docs/oauth2-redirect": Action.USE_PAGE,  # FastAPI's, for its API docs
    "/redoc": Action.USE_PAGE,
    "/mcp": Action.USE_PAGE,  # the door to the tools of MCP_TOOLS, each checked on its own
    "/": Action.USE_PAGE,
}

# The tools of the MCP endpoint (serving.mcp), by name, each done in the workspace a call names.
MCP_TOOLS: dict[str, Action] = {
    "search": Action.ASK,
    "ask": Action.ASK,
}

# The page's events with a handler in Python, by their API name (Gradio numbers a name used
# again: ``show_passage_2``), public ones (``gradio_client``'s ``/ask``) and private ones alike.
# Those a ``@gr.render`` makes (the workspace cards' Open, Rename, Delete) do not exist at the
# start, when the server checks this table: their handlers check the user themselves
# (serving.page.workspaces).
PAGE_EVENTS: dict[str, Action] = {
    "on_load": Action.USE_PAGE,  # the workspaces the user may use, listed
    "apply": Action.USE_PAGE,  # their cards drawn (Gradio's name for a render)
    "open_workspace": Action.ASK,
    "check_question": Action.ASK,
    "ask": Action.ASK,
    "similar_pictures": Action.ASK,
    "open": Action.ASK,  # one's own conversation
    "delete": Action.ASK,  # one's own conversation
    "new_conversation": Action.USE_PAGE,
    "hide_pictures": Action.USE_PAGE,
    "show_citation": Action.READ_FILE,
    "show_passage": Action.READ_FILE,
    "govern": Action.GOVERN,
    "govern_document": Action.GOVERN,  # from the sources: archive a document, or put it back
    "traces": Action.SEE_TRACES,
    "upload": Action.UPLOAD,
    "confirm_removal": Action.REMOVE_OWN,  # what a removal would take away, said first
    "remove_upload": Action.REMOVE_OWN,  # another's only by one who may REMOVE_ANY
    "sources": Action.ASK,
    "governed_sources": Action.ASK,  # the sources listed anew after a governing action
    "progress": Action.ASK,
    "create_workspace": Action.MANAGE_WORKSPACES,
    "rename_workspace": Action.MANAGE_WORKSPACES,
    "delete_workspace": Action.MANAGE_WORKSPACES,
    "keep_workspace": Action.USE_PAGE,  # a workspace's deletion not gone on with
    "keep_name": Action.USE_PAGE,  # a renaming not gone on with
    "keep_upload": Action.USE_PAGE,  # an upload's removal not gone on with
    "back_home": Action.USE_PAGE,
}

_NUMBERED = re.compile(r"_\d+$")


def event_action(api_name: str) -> Action | None:
    """The action of a page event by its API name as Gradio numbered it; None: not listed."""
    return PAGE_EVENTS.get(api_name, PAGE_EVENTS.get(_NUMBERED.sub("", api_name)))


class Unlisted(RuntimeError):
    """A route or an event of the page that the table does not list: it would go unchecked."""


def check_listed(paths: list[str], events: list[str]) -> None:
    """Raise :class:`Unlisted` for a route path or page event the table does not list."""
    unlisted = [p for p in paths if p not in HTTP_ROUTES and p not in OPEN_ROUTES]
    unlisted += [f"the page's event {name!r}" for name in events if event_action(name) is None]
    if unlisted:
        raise Unlisted(
            f"not in serving.access.permissions: {', '.join(unlisted)} (say who may use it)"
        )
