"""HTTP routes beside the chat page: the search API for agents, page previews, original files.

- ``GET /api/search?q=…&k=…``: documents grouped from the retrieved passages, in the shape
  deer-flow's local search expects (``Assistant.search_documents``);
- ``GET /api/preview?chunk_id=…[&page=…]``: the cited page (by default the passage's first) as
  PNG with the passage highlighted (PDF), or the passage in its text as HTML (other formats);
- ``GET /api/picture?chunk_id=…``: a picture chunk's picture as extracted (PNG);
- ``GET /api/file?doc_id=…`` (or ``/api/file/<its file name>?doc_id=…``, the name only for a
  browser to title its tab by): the original file, only for an indexed document inside a watched
  folder (``serving.preview.source_file``).

Each takes ``workspace=<id>`` (default: the user's first workspace) and answers only within the
workspaces the signed-in user may use (``serving.access``). A document or passage taken offline
is served only to those who may govern its workspace (so they can look before putting it back).
The chat page shows its pictures of indexed content through these routes, never through
Gradio's cache (which serves any file in it to anyone signed in, whatever its state).

Ids travel as query parameters: chunk ids hold ``#`` and ``@``, file names anything.

The files are anyone's: an indexed HTML page may hold scripts, a ``.png`` may hold HTML. So a
file is a download unless it is a PDF or a raster picture by the catalog and by its own first
bytes, and every response here forbids sniffing and, by its Content-Security-Policy, runs no
script and loads nothing, in a sandbox of its own origin: nothing served here can act as the
page.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import quote, urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute

from rag_pipeline.catalog import DocumentRecord
from serving.access import HTTP_ROUTES, Action, Unlisted, User
from serving.assistant import Assistant
from serving.preview import PreviewError, cited_picture, preview, source_file
from serving.retrieval import QueryError
from serving.workspaces import NotAllowed, NotSignedIn, ServedWorkspaces

# Inline styles only: Chromium styles its own viewer of a picture with them.
CONTENT_SECURITY_POLICY = (
    "sandbox; default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
)
SAFE_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
}
# What a browser may show in place: the picture formats by the name Pillow reads in their bytes.
_PICTURE_TYPES = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
    "BMP": "image/bmp",
}


class _Guarded(APIRoute):
    """A route whose every response, refusals included, carries :data:`SAFE_HEADERS`, and
    whose action is the one the permission table lists for its path (a route it does not list
    is not made)."""

    def __init__(self, path: str, *arguments: Any, **options: Any) -> None:
        if path not in HTTP_ROUTES:
            raise Unlisted(f"{path} is not in serving.access.permissions.HTTP_ROUTES")
        super().__init__(path, *arguments, **options)
        self.action: Action = HTTP_ROUTES[path]

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                response = await handler(request)
            except HTTPException as error:
                error.headers = {**(error.headers or {}), **SAFE_HEADERS}
                raise
            response.headers.update(SAFE_HEADERS)
            return response

        return guarded


WorkspaceId = Annotated[
    str | None, Query(description="the workspace's id (default: the user's first)")
]


_Shown = TypeVar("_Shown")


def api_routes(workspaces: ServedWorkspaces) -> APIRouter:
    router = APIRouter(route_class=_Guarded)

    def asked(request: Request, workspace: str | None) -> tuple[Assistant, User]:
        """The assistant of the workspace a request names (default: the user's first), and
        the user, if they may do the route's action there; 404 for a workspace the user may
        not use, as for one that is not."""
        action = request.scope["route"].action
        try:
            user = workspaces.signed_in(request.headers)
            return workspaces.assistant(user, workspace, action), user
        except NotSignedIn as error:  # the middleware lets none of these through
            raise HTTPException(status_code=401, detail=str(error)) from error
        except NotAllowed as error:
            raise HTTPException(status_code=404, detail=str(error)) from error

    @router.get("/api/search")
    def search(
        request: Request,
        q: Annotated[str, Query(description="what to search for")] = "",
        k: Annotated[
            int | None, Query(ge=1, description="passages to retrieve (at most serving.max_k)")
        ] = None,
        workspace: WorkspaceId = None,
    ) -> JSONResponse:
        assistant, user = asked(request, workspace)
        try:
            documents = assistant.search_documents(q, k, owner=user.name)
        except QueryError as error:
            raise HTTPException(status_code=400, detail=str(error)) from error
        return JSONResponse(documents)

    def shown_to(
        request: Request, workspace: str | None, show: Callable[[Assistant, bool], _Shown]
    ) -> _Shown:
        """``show(assistant, governs)`` for whoever asks (an offline document or passage shown
        only to one who may govern it); what the preview module refuses is a 404."""
        assistant, user = asked(request, workspace)
        try:
            return show(assistant, user.may(Action.SEE_OFFLINE, assistant.settings.workspace))
        except PreviewError as error:
            raise HTTPException(status_code=404, detail=str(error)) from error

    @router.get("/api/preview", response_model=None)
    def page_preview(
        request: Request, chunk_id: str, page: int | None = None, workspace: WorkspaceId = None
    ) -> Response:
        shown = shown_to(
            request,
            workspace,
            lambda assistant, governs: preview(
                assistant.settings, assistant.catalog, chunk_id, page=page, offline_shown=governs
            ),
        )
        if shown.png is not None:
            return Response(shown.png, media_type="image/png")
        title = html.escape(shown.doc_id)
        return HTMLResponse(
            f"<!doctype html><meta charset='utf-8'><title>{title}</title>"
            f"<h3>{title}</h3>{shown.html}"
        )

    @router.get("/api/picture", response_model=None)
    def picture(request: Request, chunk_id: str, workspace: WorkspaceId = None) -> Response:
        png = shown_to(
            request,
            workspace,
            lambda assistant, governs: cited_picture(
                assistant.settings, assistant.catalog, chunk_id, offline_shown=governs
            ),
        )
        return Response(png, media_type="image/png")

    def original(assistant: Assistant, doc_id: str, governs: bool) -> tuple[DocumentRecord, Path]:
        redaction = assistant.settings.redaction
        if redaction.enabled and not redaction.serve_originals:
            raise HTTPException(
                status_code=403,
                detail="original files hold what redaction removes: not served while redaction "
                "is on (redaction.serve_originals)",
            )
        record, path = source_file(
            assistant.settings, assistant.catalog, doc_id, offline_shown=governs
        )
        if record.state != "indexed":  # a failed version's file is no indexed document's
            raise PreviewError(f"{doc_id!r} is not indexed: its indexing failed")
        return record, path

    @router.get("/api/file")
    @router.get("/api/file/{name}")  # named for the tab a PDF opens in: the id decides
    def original_file(request: Request, doc_id: str, workspace: WorkspaceId = None) -> FileResponse:
        record, path = shown_to(
            request, workspace, lambda assistant, governs: original(assistant, doc_id, governs)
        )
        shown_as = inline_type(record.file_type, path)
        return FileResponse(
            path,
            filename=path.name,  # RFC 5987-encoded when it is not ASCII
            media_type=shown_as or "application/octet-stream",
            content_disposition_type="inline" if shown_as else "attachment",
        )

    return router


def preview_url(chunk_id: str, workspace_id: str | None, page: int | None = None) -> str:
    """The route of a passage's page (``page``, by default its first) or picture, its passage
    marked."""
    return _route("/api/preview", chunk_id, workspace_id, {"page": page} if page else {})


def original_url(
    doc_id: str, file_name: str, workspace_id: str | None, page: int | None = None
) -> str:
    """The original file's route under its file name (a browser's PDF viewer titles its tab
    by the last part of the path), opened at ``page`` (a PDF viewer's ``#page=``)."""
    workspace = {"workspace": workspace_id} if workspace_id else {}
    at = f"#page={page}" if page else ""
    query = urlencode({"doc_id": doc_id, **workspace})
    return f"/api/file/{quote(file_name, safe='')}?{query}{at}"


def picture_url(chunk_id: str, workspace_id: str | None) -> str:
    """The route of a picture chunk's picture."""
    return _route("/api/picture", chunk_id, workspace_id)


def _route(
    path: str, chunk_id: str, workspace_id: str | None, more: dict[str, int] | None = None
) -> str:
    workspace = {"workspace": workspace_id} if workspace_id else {}
    return f"{path}?{urlencode({'chunk_id': chunk_id, **(more or {}), **workspace})}"


def inline_type(file_type: str, path: Path) -> str | None:
    """The media type a file may be shown as in the browser, or None: it is only downloaded.

    Only a PDF or a raster picture by the catalog's file type whose first bytes say the same;
    never a type guessed from the name (an ``.html`` renamed ``.pdf`` stays a download).
    """
    from PIL import Image

    try:
        if file_type == "pdf":
            with path.open("rb") as handle:
                return "application/pdf" if b"%PDF-" in handle.read(1024) else None
        if file_type == "image":
            with Image.open(path) as picture:  # reads the header only
                return _PICTURE_TYPES.get(picture.format or "")
    except (OSError, Image.DecompressionBombError):  # unreadable, not a picture, too many pixels
        return None
    return None
