"""The MCP endpoint through a real MCP client (the ``mcp`` package's, over streamable HTTP)
against the real server: its tools listed, ``search`` and ``ask`` answered with file and page,
refused to a reader of another workspace and to a caller without credentials."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pymupdf
import pytest
from mcp import Client, MCPError
from mcp.types import CallToolResult

from rag_pipeline.cli import main
from rag_pipeline.config import load_settings
from rag_pipeline_tests.mcp_client import call_tool, leaves, with_mcp_client
from serving.access import add_user
from serving.server import BackgroundServer

QUESTION = "When was the Corvid Point lighthouse first lit?"

_Got = TypeVar("_Got")


@dataclass
class Served:
    url: str
    headers: dict[str, dict[str, str]]  # persona -> what it sends


def _two_page_pdf(path: Path) -> None:
    """The bakery on page 1, the lighthouse on page 2."""
    document = pymupdf.open()
    for text in (
        "The Kestrel bakery opens at 5:40 every morning.",
        "The Corvid Point lighthouse was first lit in 1874.",
    ):
        document.new_page(width=595, height=842).insert_text((72, 100), text, fontsize=11)
    document.save(path)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("mcp")
    home, docs = root / "home", root / "docs"
    docs.mkdir()
    _two_page_pdf(docs / "coast.pdf")
    assert main(["index", "--home", str(home), "--source", str(docs)]) == 0
    assert main(["workspace", "create", "Client B", "--home", str(home)]) == 0
    reader = add_user(home, "reader", "reader-password", ["default"])
    stranger = add_user(home, "stranger", None, ["client-b"])
    basic = base64.b64encode(b"reader:reader-password").decode()
    with BackgroundServer(load_settings(home)) as server:
        yield Served(
            server.url,
            {
                "reader": {"Authorization": f"Bearer {reader}"},
                "reader by password": {"Authorization": f"Basic {basic}"},
                "stranger": {"Authorization": f"Bearer {stranger}"},
                "anonymous": {},
            },
        )


def _with_client(served: Served, persona: str, work: Callable[[Client], Awaitable[_Got]]) -> _Got:
    return with_mcp_client(served.url, served.headers[persona], work)


def _call(served: Served, persona: str, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    return call_tool(served.url, served.headers[persona], tool, arguments)


def test_an_agent_finds_the_two_tools_described(served: Served) -> None:
    listed = _with_client(served, "reader", lambda client: client.list_tools())
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == {"search", "ask"}
    assert set(tools["search"].input_schema["properties"]) == {"query", "workspace", "k"}
    assert tools["search"].input_schema["required"] == ["query"]
    assert set(tools["ask"].input_schema["properties"]) == {"question", "workspace"}


def test_search_gives_each_passage_with_its_file_pages_box_text_score_and_link(
    served: Served,
) -> None:
    result = _call(served, "reader", "search", {"query": "lighthouse first lit", "k": 3})
    assert not result.is_error
    passages = result.structured_content["result"]
    assert 1 <= len(passages) <= 3
    best = passages[0]
    assert best["file"] == "coast.pdf" and "Corvid Point lighthouse" in best["text"]
    assert 2 in best["pages"] and best["page"] == best["pages"][0]
    assert len(best["box"]) == 4 and best["score"] > 0
    preview = httpx.get(best["link"], headers=served.headers["reader"], timeout=60)
    assert preview.status_code == 200 and preview.headers["content-type"] == "image/png"


def test_ask_answers_with_the_citation_at_the_file_and_page_that_say_it(served: Served) -> None:
    result = _call(served, "reader", "ask", {"question": QUESTION})
    assert not result.is_error
    answered = result.structured_content
    assert "1874" in answered["answer"] and "[1]" in answered["answer"]
    assert answered["supported"] is True
    [cited] = [c for c in answered["citations"] if c["number"] == 1]
    assert cited["file"] == "coast.pdf" and cited["page"] == 2 and "page=2" in cited["link"]


def test_the_tools_take_a_password_as_the_search_api_does(served: Served) -> None:
    result = _call(served, "reader by password", "search", {"query": "bakery"})
    assert not result.is_error and result.structured_content["result"]


@pytest.mark.parametrize("tool", ["search", "ask"])
def test_a_reader_of_another_workspace_is_refused_in_one_log_line(
    served: Served, tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    arguments = {"query" if tool == "search" else "question": QUESTION, "workspace": "default"}
    with caplog.at_level("WARNING", logger="rag_pipeline.serving.access"):
        result = _call(served, "stranger", tool, arguments)
    assert result.is_error
    assert "no workspace 'default' for stranger" in result.content[0].text
    assert "1874" not in str(result.content)
    refusals = [r.getMessage() for r in caplog.records if "refused stranger" in r.getMessage()]
    assert refusals == ["refused stranger: ask: no workspace 'default' for stranger"]


def test_a_call_without_credentials_is_refused_at_the_door(served: Served) -> None:
    with pytest.raises(ExceptionGroup) as refused:  # the SDK's task groups wrap its error
        _call(served, "anonymous", "search", {"query": "lighthouse"})
    assert any(isinstance(error, MCPError) for error in leaves(refused.value))
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}
    by_whom = {
        persona: httpx.post(
            f"{served.url}/mcp", json=listing, headers=accept | served.headers[persona], timeout=60
        )
        for persona in ("anonymous", "reader")
    }
    assert by_whom["anonymous"].status_code == 401
    assert "www-authenticate" in by_whom["anonymous"].headers
    assert by_whom["reader"].status_code == 200 and '"search"' in by_whom["reader"].text


def test_a_get_is_answered_405_rather_than_held_open(served: Served) -> None:
    got = httpx.get(f"{served.url}/mcp", headers=served.headers["reader"], timeout=60)
    assert got.status_code == 405 and got.headers["allow"] == "POST"
