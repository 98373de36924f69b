"""The permission table tried whole on the real server: every HTTP route and every event of the
page (public and private, through Gradio's own queue as the browser calls them), by every role,
each allowed exactly what ``serving.access.permissions`` says; a route or event it does not list
stops the server from starting."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import UserSettings, load_settings
from rag_pipeline_tests.index_state import live_chunks
from rag_pipeline_tests.mcp_client import call_tool, with_mcp_client
from serving.access import (
    HTTP_ROUTES,
    LEAST_ROLE,
    MCP_TOOLS,
    OPEN_ROUTES,
    Action,
    Role,
    add_user,
    event_action,
)
from serving.server import BackgroundServer, route_paths

WORKSPACE = "default"  # the workspace every role is tried in
# Each persona: (role in WORKSPACE, whether an admin of the installation). The outsider uses
# another workspace alone.
PERSONAS: dict[str, tuple[Role | None, bool]] = {
    "anonymous": (None, False),
    "reader": (Role.READER, False),
    "contributor": (Role.CONTRIBUTOR, False),
    "governor": (Role.GOVERNOR, False),
    "outsider": (None, False),
    "admin": (Role.GOVERNOR, True),  # --workspace '*' --govern '*', as the README adds one
    "admin-reader": (Role.READER, True),  # --workspace '*' alone: manages, reads every one
}
GRANTS = {
    "reader": {"workspaces": [WORKSPACE]},
    "contributor": {"workspaces": [WORKSPACE], "contribute": [WORKSPACE]},
    "governor": {"workspaces": [WORKSPACE], "govern": [WORKSPACE]},
    "outsider": {"workspaces": ["client-b"]},
    "admin": {"workspaces": ["*"], "govern": ["*"]},
    "admin-reader": {"workspaces": ["*"]},
    "stranger": {"workspaces": ["client-b"]},  # refused in the log test alone
}
# What a refusal says (serving.workspaces, the door): anything else got past the check.
_REFUSED = re.compile(r"may not |no workspace '|may use no workspace|sign in")


def allowed(persona: str, action: Action) -> bool:
    """What the table allows the persona: the expectation every probe is held to."""
    role, admin = PERSONAS[persona]
    least = LEAST_ROLE[action]
    if persona == "anonymous":
        return False
    if least is Role.SIGNED_IN:
        return True
    if least is Role.ADMIN:
        return admin
    return role is not None and role >= least


@dataclass
class Served:
    url: str
    paths: list[str]
    chunks: dict[str, str]  # workspace -> a chunk id of its document
    documents: dict[str, str]  # workspace -> that document's id
    auth: dict[str, dict[str, Any]] = field(default_factory=dict)  # persona -> httpx options
    stranger: dict[str, Any] = field(default_factory=dict)  # another workspace's user's


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("permissions")
    home, docs = root / "home", root / "docs"
    docs.mkdir()
    (docs / "zebra.md").write_text("# Zebra\n\nThe zebrafish protocol.\n", encoding="utf-8")
    assert main(["index", "--home", str(home), "--source", str(docs)]) == 0
    assert main(["workspace", "create", "Client B", "--home", str(home)]) == 0
    client_b = home / "workspaces" / "client-b"
    (client_b / "uploads").mkdir(parents=True, exist_ok=True)
    (client_b / "uploads" / "quokka.md").write_text("# Quokka\n\nQuokkas.\n", encoding="utf-8")
    assert main(["index", "--home", str(home), "--workspace", "client-b"]) == 0
    tokens = {
        name: add_user(
            home,
            name,
            None,
            grants["workspaces"],
            govern=grants.get("govern"),
            contribute=grants.get("contribute"),
        )
        for name, grants in GRANTS.items()
    }
    documents = {WORKSPACE: "docs/zebra.md", "client-b": "uploads/quokka.md"}
    chunks = {
        WORKSPACE: live_chunks(home, documents[WORKSPACE])[0]["chunk_id"],
        "client-b": live_chunks(client_b, documents["client-b"])[0]["chunk_id"],
    }
    with BackgroundServer(load_settings(home)) as server:
        served = Served(server.url, route_paths(server.app), chunks, documents)
        bearers = {
            name: {"headers": {"Authorization": f"Bearer {token}"}}
            for name, token in tokens.items()
        }
        served.auth = {name: bearers.get(name, {}) for name in PERSONAS}
        served.stranger = bearers["stranger"]
        yield served


# -- HTTP routes ---------------------------------------------------------------------------------


def _http_probes(served: Served) -> dict[str, tuple[str, dict[str, str]]]:
    """A request per route: (path, query), in WORKSPACE."""
    chunk, document = served.chunks[WORKSPACE], served.documents[WORKSPACE]
    scoped = {"workspace": WORKSPACE}
    return {
        "/api/search": ("/api/search", {"q": "zebrafish"} | scoped),
        "/api/preview": ("/api/preview", {"chunk_id": chunk} | scoped),
        "/api/picture": ("/api/picture", {"chunk_id": chunk} | scoped),  # not one: a 404 past it
        "/api/file": ("/api/file", {"doc_id": document} | scoped),
        "/api/file/{name}": ("/api/file/zebra.md", {"doc_id": document} | scoped),
        "/api/docs": ("/api/docs", {}),
        "/api/openapi.json": ("/api/openapi.json", {}),
        "/docs/oauth2-redirect": ("/docs/oauth2-redirect", {}),
        "/redoc": ("/redoc", {}),
        "/mcp": ("/mcp", {}),  # the door alone: each tool is tried below
        "/": ("/", {}),
    }


def _http_refused(response: httpx.Response) -> bool:
    if response.status_code in (401, 403):
        return True
    return response.status_code == 404 and bool(_REFUSED.search(response.text))


def test_every_route_is_in_the_table_and_allows_each_role_what_the_table_says(
    served: Served,
) -> None:
    probes = _http_probes(served)
    assert not [p for p in set(served.paths) - OPEN_ROUTES if p not in probes], "unprobed"
    wrong = []
    with httpx.Client(base_url=served.url, timeout=60) as http:
        for route in sorted(set(served.paths) - OPEN_ROUTES):
            path, query = probes[route]
            for persona, auth in served.auth.items():
                response = http.get(path, params=query, **auth)
                got = not _http_refused(response)
                if got != allowed(persona, HTTP_ROUTES[route]):
                    wrong.append(f"{persona} {route}: {response.status_code} {response.text[:80]}")
    assert not wrong, "\n".join(wrong)


# -- the page's events ---------------------------------------------------------------------------


class PageSession:
    """One browser tab's session of the page, calling its events as the page's script does
    (Gradio's queue, by the event's index), public and private alike."""

    def __init__(self, url: str, auth: dict[str, Any]) -> None:
        self.http = httpx.Client(base_url=url, timeout=120, **auth)
        self.session = uuid.uuid4().hex

    def call(self, fn_index: int, data: list[Any], event_data: Any = None) -> tuple[bool, str]:
        """(whether the event ran to its end, the error it raised)."""
        body = {
            "data": data,
            "event_data": event_data,
            "fn_index": fn_index,
            "session_hash": self.session,
            "trigger_id": None,
        }
        joined = self.http.post("/gradio_api/queue/join", json=body)
        if joined.status_code != 200:
            return False, joined.text
        event_id = joined.json()["event_id"]
        with self.http.stream("GET", f"/gradio_api/queue/data?session_hash={self.session}") as s:
            for line in s.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("event_id") == event_id and message["msg"] == "process_completed":
                    return message["success"], str(message["output"].get("error") or "")
        return False, "the stream ended"

    def upload_empty_file(self) -> dict[str, Any]:
        """An empty Markdown file sent to Gradio's upload route (an upload event refuses it
        past its permission: nothing is indexed)."""
        [path] = self.http.post("/gradio_api/upload", files={"files": ("empty.md", b"")}).json()
        return {"path": path, "orig_name": "empty.md", "meta": {"_type": "gradio.FileData"}}


# Each event's inputs (and the event data of a select), in WORKSPACE; ``setup`` names an event
# run first in the same session, with the persona's own workspace, to fill the state it reads
# (the passage shown), as the page does.
Inputs = Callable[[Served, PageSession], list[Any]]
_NO_FILTERS: list[Any] = [[], [], [], "", ""]
EVENT_INPUTS: dict[str, Inputs] = {
    "on_load": lambda s, p: [],
    "apply": lambda s, p: ["name", "", 0],
    "open_workspace": lambda s, p: [WORKSPACE, None],
    "check_question": lambda s, p: ["zebrafish?", WORKSPACE, "", ""],
    "ask": lambda s, p: ["zebrafish?", WORKSPACE, None, [], *_NO_FILTERS],
    "similar_pictures": lambda s, p: [None, WORKSPACE, *_NO_FILTERS],
    "open": lambda s, p: [None, WORKSPACE],
    "delete": lambda s, p: [None, WORKSPACE],
    "new_conversation": lambda s, p: [],
    "hide_pictures": lambda s, p: [],
    "show_citation": lambda s, p: [WORKSPACE],
    "show_passage": lambda s, p: [None, WORKSPACE],
    "govern": lambda s, p: [None, WORKSPACE],
    "govern_document": lambda s, p: [WORKSPACE],  # of no document: put back, nothing changes
    "traces": lambda s, p: [WORKSPACE],
    "upload": lambda s, p: [[p.upload_empty_file()], WORKSPACE, False],
    "confirm_removal": lambda s, p: [WORKSPACE],  # of no upload: refused past the permission
    "remove_upload": lambda s, p: [None, WORKSPACE],  # none confirmed: refused past it
    "sources": lambda s, p: [WORKSPACE],
    "governed_sources": lambda s, p: [WORKSPACE],
    "progress": lambda s, p: [WORKSPACE, None],
    "create_workspace": lambda s, p: ["", 0],  # no name: refused past the permission
    "rename_workspace": lambda s, p: [None, "", WORKSPACE, 0],
    "delete_workspace": lambda s, p: [None, WORKSPACE, 0],
    "keep_workspace": lambda s, p: [],
    "keep_name": lambda s, p: [],
    "keep_upload": lambda s, p: [],
    "back_home": lambda s, p: [0],
}
SHOWS_A_PASSAGE_FIRST = {"show_passage", "govern"}  # read the passage the session shows


def _page_events(served: Served) -> list[tuple[int, str]]:
    """(index, API name) of each event of the page that runs Python, from its config."""
    config = httpx.get(f"{served.url}/config", timeout=60, **served.auth["admin"]).json()
    events = [(d["id"], d["api_name"]) for d in config["dependencies"] if d.get("backend_fn")]
    # Governing last: a governor's archive is put back by its "Put back", the last of them.
    return sorted(events, key=lambda event: event_action(event[1]) is Action.GOVERN)


def test_every_event_of_the_page_is_in_the_table_and_allows_each_role_what_it_says(
    served: Served,
) -> None:
    events = _page_events(served)
    assert {name for _, name in events} >= {"ask", "upload", "govern", "delete_workspace"}
    # Each way of keeping something is its own event, under its own name in the table.
    assert {name for _, name in events if name.startswith("keep")} == {
        "keep_workspace",
        "keep_name",
        "keep_upload",
    }
    by_name = dict((name, index) for index, name in events)
    citation = by_name["show_citation"]
    wrong = []
    for persona, auth in served.auth.items():
        page = PageSession(served.url, auth)
        own = "client-b" if persona == "outsider" else WORKSPACE
        for index, name in events:
            base = re.sub(r"_\d+$", "", name)
            if base in SHOWS_A_PASSAGE_FIRST:
                page.call(citation, [own], {"index": 0, "value": served.chunks[own]})
            data = EVENT_INPUTS[base](served, page)
            event_data = {
                "show_citation": {"index": 0, "value": served.chunks[WORKSPACE]},
                "confirm_removal": {"index": 0, "value": "none.md"},
                "govern_document": {"doc": "uploads/none.md", "state": "active"},
            }.get(base)
            ran, error = page.call(index, data, event_data)
            got = ran or not _REFUSED.search(error)
            action = event_action(name)
            assert action is not None
            if got != allowed(persona, action):
                wrong.append(f"{persona} {name} ({action.name}): ran={ran} {error[:100]}")
    assert not wrong, "\n".join(wrong)


# -- the MCP endpoint's tools -------------------------------------------------------------------


def test_every_tool_of_the_mcp_endpoint_is_in_the_table_and_allows_each_role_what_it_says(
    served: Served,
) -> None:
    admin = served.auth["admin"]["headers"]
    listed = with_mcp_client(served.url, admin, lambda client: client.list_tools())
    inputs = {tool.name: tool.input_schema["properties"] for tool in listed.tools}
    assert inputs and not [name for name in inputs if name not in MCP_TOOLS], "unlisted"
    asked = {"query": "zebrafish", "question": "zebrafish?", "workspace": WORKSPACE}
    wrong = []
    for persona, auth in served.auth.items():
        for name, properties in sorted(inputs.items()):
            arguments = {key: value for key, value in asked.items() if key in properties}
            try:
                result = call_tool(served.url, auth.get("headers", {}), name, arguments)
            except ExceptionGroup:  # refused at the door
                got = False
            else:
                got = not result.is_error or not _REFUSED.search(str(result.content))
            if got != allowed(persona, MCP_TOOLS[name]):
                wrong.append(f"{persona} {name}: {got}")
    assert not wrong, "\n".join(wrong)


def test_a_route_or_event_the_table_does_not_list_stops_the_server_from_starting() -> None:
    from fastapi import APIRouter

    from serving.access import Unlisted, check_listed
    from serving.api import _Guarded

    with pytest.raises(Unlisted, match="/api/new"):
        APIRouter(route_class=_Guarded).get("/api/new")(lambda: None)
    with pytest.raises(Unlisted, match="'export_everything'"):
        check_listed(["/api/search"], ["ask", "show_passage_3", "export_everything"])


def test_gradio_clients_ask_needs_the_question_alone(served: Served) -> None:
    from gradio_client import Client

    client = Client(served.url + "/", verbose=False, **served.auth["reader"])
    try:
        chat, *_ = client.predict("What is the zebrafish protocol?", api_name="/ask")
    finally:
        client.close()
    assert chat[-1]["role"] == "assistant" and "zebrafish" in str(chat[-1]["content"]).lower()


def test_a_refused_call_is_one_log_line_and_a_flood_of_them_is_counted(
    served: Served, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    client = Client(served.url + "/", verbose=False, **served.stranger)
    try:
        with caplog.at_level("WARNING", logger="rag_pipeline.serving.access"):
            for _ in range(8):
                with pytest.raises(AppError, match="no workspace 'default' for stranger"):
                    client.predict("zebrafish?", WORKSPACE, api_name="/ask")
    finally:
        client.close()
    lines = [r.getMessage() for r in caplog.records if "refused stranger" in r.getMessage()]
    assert lines[0] == "refused stranger: ask: no workspace 'default' for stranger"
    assert len(lines) == 5 and lines[-1].endswith(
        "(further refusals this minute counted, not logged)"
    )
    assert "Traceback" not in capfd.readouterr().err


def test_refusals_beyond_the_minutes_few_are_said_as_a_count_when_the_minute_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from serving.access.refusals import RefusalLog

    now = [0.0]
    log = RefusalLog(most=2, window=60.0, clock=lambda: now[0])
    with caplog.at_level("WARNING", logger="rag_pipeline.serving.access"):
        for _ in range(7):
            log.refused("mallory", "ask", "no workspace 'default' for mallory")
        log.refused("trent", "upload", "trent may not upload into Default")  # another caller
        now[0] = 61.0
        log.refused("mallory", "ask", "no workspace 'default' for mallory")
    said = [r.getMessage() for r in caplog.records]
    assert [line.split(":")[0] for line in said] == [
        "refused mallory",
        "refused mallory",
        "refused trent",
        "refused mallory 5 more times in 60 s (not logged)",
        "refused mallory",
    ]


def test_a_refusal_repeats_at_most_64_characters_of_the_workspace_a_request_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from serving.access import User
    from serving.workspaces import NotAllowed, ServedWorkspaces

    workspaces = ServedWorkspaces(load_settings(tmp_path / "home"))
    mallory = User("mallory", UserSettings(workspaces=["client-b"]))
    try:
        with (
            caplog.at_level("WARNING", logger="rag_pipeline.serving.access"),
            pytest.raises(NotAllowed) as refused,
        ):
            workspaces.workspace(mallory, "x" * 100_000)
    finally:
        workspaces.close()
    named = f"'{'x' * 63}…'"
    assert str(refused.value) == f"no workspace {named} for mallory"
    assert [r.getMessage() for r in caplog.records] == [
        f"refused mallory: ask: no workspace {named} for mallory"
    ]
