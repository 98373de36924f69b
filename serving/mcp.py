"""The MCP endpoint for agents: ``search`` and ``ask`` over streamable HTTP at :data:`MCP_PATH`.

The door is the server's own (``serving.access``): the same sign-in as every route, a bearer
token, HTTP Basic or the trusted proxy's header, and with nobody configured loopback alone.
Past it, each call looks its tool's action up in the permission table
(``permissions.MCP_TOOLS``) in the workspace it names, refused as the search API refuses (one
line in the log). Stateless: each call is a request of its own, signed in on its own, so no
session of one caller can be carried on by another.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from serving.access import MCP_TOOLS, Action, Unlisted, User
from serving.api import preview_url
from serving.assistant import Assistant, cited_sources
from serving.retrieval import Candidate, QueryError
from serving.workspaces import NotAllowed, ServedWorkspaces

MCP_PATH = "/mcp"

_Tool = TypeVar("_Tool", bound=Callable[..., Any])


class FoundPassage(BaseModel):
    """A passage as search found it."""

    file: str = Field(description="its file's path inside its watched folder")
    title: str
    section: str = Field(description="the headings it lies under, outermost first")
    page: int | None = Field(description="the page it starts on (none: a file without pages)")
    pages: list[int] = Field(description="every page it runs over")
    box: list[float] | None = Field(description="where it starts on its page: x0, y0, x1, y1")
    text: str
    score: float
    link: str = Field(description="its page, the passage marked")


class Citation(BaseModel):
    """A passage an answer cites as [number]."""

    number: int
    file: str = Field(description="its file's path inside its watched folder")
    page: int | None = Field(description="the page of what the answer quotes from it")
    pages: list[int] = Field(description="the pages of what the answer quotes from it")
    section: str
    text: str = Field(description="the passage, shortened")
    link: str = Field(description="the cited page, the passage marked")


class Answered(BaseModel):
    answer: str = Field(description="the answer, citing passages as [n]")
    citations: list[Citation]
    supported: bool = Field(description="false when no passage found could back an answer")


WorkspaceId = Annotated[
    str | None, Field(description="the workspace's id (default: the caller's first)")
]


def mcp_server(workspaces: ServedWorkspaces) -> MCPServer:
    """The tools of :data:`serving.access.MCP_TOOLS` over the served workspaces; one the table
    does not list is not made."""
    with _root_logger_left_alone():
        server = MCPServer(
            "rag-pipeline",
            instructions="Search the indexed documents, or ask a question answered from them "
            "with citations (file and page).",
        )

    def tool(function: _Tool) -> _Tool:
        if function.__name__ not in MCP_TOOLS:
            raise Unlisted(f"the MCP tool {function.__name__!r} is not in MCP_TOOLS")
        return server.tool()(function)

    def asked(ctx: Context, workspace: str | None, name: str) -> tuple[Assistant, User, str]:
        """The assistant of the workspace a call names, the caller and the links' base, if the
        caller may do the tool's action there."""
        request = ctx.request_context.request
        if not isinstance(request, Request):
            raise ToolError("this endpoint is served over HTTP alone")
        try:
            user = workspaces.signed_in(request.headers)  # the door lets none else through
            assistant = workspaces.assistant(user, workspace, MCP_TOOLS[name])
        except NotAllowed as error:
            raise ToolError(str(error)) from error
        return assistant, user, str(request.base_url).rstrip("/")

    @tool
    def search(
        query: Annotated[str, Field(description="what to search for")],
        ctx: Context,
        workspace: WorkspaceId = None,
        k: Annotated[
            int | None, Field(ge=1, description="passages to return (at most serving.max_k)")
        ] = None,
    ) -> list[FoundPassage]:
        """The passages of the workspace's documents that best match the query, best first."""
        assistant, user, base = asked(ctx, workspace, "search")
        try:
            found = assistant.found(query, k, owner=user.name)
        except QueryError as error:
            raise ToolError(str(error)) from error
        return [_found(assistant, passage, base) for passage in found.passages]

    @tool
    def ask(
        question: Annotated[str, Field(description="the question, in any language")],
        ctx: Context,
        workspace: WorkspaceId = None,
    ) -> Answered:
        """The answer to the question from the workspace's documents, with the passages it
        cites (file and page); kept among the caller's conversations, as the page keeps it."""
        assistant, user, base = asked(ctx, workspace, "ask")
        governs = user.may(Action.SEE_OFFLINE, assistant.settings.workspace)
        try:  # streamed on the page; an agent gets the last, whole answer
            *_, (_, final) = assistant.ask(question, owner=user.name, governs=governs)
        except QueryError as error:
            raise ToolError(str(error)) from error
        shown_in = assistant.settings.workspace
        citations = [
            Citation(
                number=source["number"],
                file=_file(assistant, final.passages[source["number"] - 1]),
                page=source["page"],
                pages=source["pages"],
                section=source["section"],
                text=source["snippet"],
                link=base + preview_url(source["chunk_id"], shown_in, source["page"]),
            )
            for source in cited_sources(final)
        ]
        return Answered(answer=final.text, citations=citations, supported=final.supported)

    return server


@contextlib.contextmanager
def _root_logger_left_alone() -> Iterator[None]:
    """``MCPServer()`` calls ``logging.basicConfig``: a handler on the root logger at INFO,
    which would print every library's INFO lines, and ours twice. It does nothing while the
    root logger has a handler."""
    placeholder = logging.NullHandler()
    logging.getLogger().addHandler(placeholder)
    try:
        yield
    finally:
        logging.getLogger().removeHandler(placeholder)


def _found(assistant: Assistant, passage: Candidate, base: str) -> FoundPassage:
    payload = passage.payload
    page, last = payload.get("page"), payload.get("page_end")
    return FoundPassage(
        file=_file(assistant, passage),
        title=payload.get("title") or "",
        section=payload.get("section", ""),
        page=page,
        pages=list(range(page, (last or page) + 1)) if page else [],
        box=payload.get("bbox"),
        text=passage.text,
        score=passage.score,
        link=base + preview_url(payload.get("chunk_id", ""), assistant.settings.workspace),
    )


def _file(assistant: Assistant, passage: Candidate) -> str:
    return assistant.shown_path(passage.payload.get("file_path", ""))


class McpEndpoint:
    """The endpoint as an ASGI app, and what runs it for as long as the server does."""

    def __init__(self, workspaces: ServedWorkspaces) -> None:
        server = mcp_server(workspaces)
        # The SDK's own Host and Origin checks are off: the server's door checks every request's
        # origin already, and a Host list would refuse the names a deployment is reached by.
        server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self._sessions = server.session_manager
        self._serve = StreamableHTTPASGIApp(self._sessions)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Calls are POSTs. Stateless, the endpoint streams nothing on its own: a GET (which
        the SDK would hold open, answering nothing) is answered 405, as the protocol allows."""
        if scope["method"] == "POST":
            await self._serve(scope, receive, send)
            return
        refused = JSONResponse(
            {"detail": "MCP calls are POSTs here: this endpoint opens no stream of its own"},
            status_code=405,
            headers={"Allow": "POST"},
        )
        await refused(scope, receive, send)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self._sessions.run():
            yield
