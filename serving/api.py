"""HTTP routes beside the chat page: the search API for agents, page previews, original files.

- ``GET /api/search?q=…&k=…``: documents grouped from the retrieved passages, in the shape
  deer-flow's local search expects (``Assistant.search_documents``);
- ``GET /api/preview?chunk_id=…``: the cited page as PNG with the passage highlighted (PDF), or
  the passage in its text as HTML (other formats);
- ``GET /api/file?doc_id=…``: the original file, only for an indexed document inside a watched
  folder (``serving.preview.source_file``).

Ids travel as query parameters: chunk ids hold ``#`` and ``@``, file names anything.
"""

from __future__ import annotations

import html
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response

from serving.assistant import Assistant
from serving.preview import PreviewError, preview, source_file
from serving.retrieval import QueryError


def api_routes(assistant: Assistant) -> APIRouter:
    router = APIRouter()
    settings = assistant.settings

    @router.get("/api/search")
    def search(
        q: Annotated[str, Query(description="what to search for")] = "",
        k: Annotated[int, Query(ge=1, le=100, description="passages to retrieve")] = 8,
    ) -> JSONResponse:
        try:
            documents = assistant.search_documents(q, k)
        except QueryError as error:
            raise HTTPException(status_code=400, detail=str(error)) from error
        return JSONResponse(documents)

    @router.get("/api/preview", response_model=None)
    def page_preview(chunk_id: str) -> Response:
        try:
            shown = preview(settings, assistant.catalog, chunk_id)
        except PreviewError as error:
            raise HTTPException(status_code=404, detail=str(error)) from error
        if shown.png is not None:
            return Response(shown.png, media_type="image/png")
        title = html.escape(shown.doc_id)
        return HTMLResponse(
            f"<!doctype html><meta charset='utf-8'><title>{title}</title>"
            f"<h3>{title}</h3>{shown.html}"
        )

    @router.get("/api/file")
    def original_file(doc_id: str) -> FileResponse:
        try:
            _, path = source_file(settings, assistant.catalog, doc_id)
        except PreviewError as error:
            raise HTTPException(status_code=404, detail=str(error)) from error
        return FileResponse(path, filename=path.name, content_disposition_type="inline")

    return router
