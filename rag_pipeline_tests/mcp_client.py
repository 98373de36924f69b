"""A real MCP client (the ``mcp`` package's, over streamable HTTP) for the tests of the server's
MCP endpoint, sending the headers a caller signs in with."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

_Got = TypeVar("_Got")


def with_mcp_client(
    url: str, headers: dict[str, str], work: Callable[[Client], Awaitable[_Got]]
) -> _Got:
    """``work(client)`` with an MCP client connected to the server at ``url`` (its endpoint at
    ``/mcp``), sending ``headers`` with each request."""

    async def connected() -> _Got:
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
            transport = streamable_http_client(f"{url}/mcp", http_client=http)
            async with Client(transport) as client:
                return await work(client)

    return anyio.run(connected)


def call_tool(
    url: str, headers: dict[str, str], tool: str, arguments: dict[str, Any]
) -> CallToolResult:
    return with_mcp_client(url, headers, lambda client: client.call_tool(tool, arguments))


def leaves(error: BaseException) -> list[BaseException]:
    """The errors an exception group holds, at any depth (the client's task groups wrap the
    error of a refused connection)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]
