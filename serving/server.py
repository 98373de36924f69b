"""The web server: the API routes, the MCP endpoint for agents and the chat page on one FastAPI
app, run by uvicorn.

``rag-pipeline serve`` runs it in the foreground; tests and benchmarks run it in a thread with
:class:`BackgroundServer`.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from types import TracebackType

import uvicorn
from fastapi import FastAPI
from starlette.routing import BaseRoute, Mount

from rag_pipeline.config import Settings
from serving.access import AccessMiddleware, check_binding, check_listed, sign_in_routes
from serving.api import api_routes
from serving.mcp import MCP_PATH, McpEndpoint
from serving.page import PAGE_CSS, build_page, gr
from serving.workspaces import ServedWorkspaces

# Gradio refuses a whole batch when one of its files is over Gradio's limit (in the browser,
# before sending, and in its upload route). serving.max_upload_mb is checked per file instead
# (ServedWorkspaces.upload, each refusal with its reason), so Gradio's limit is a hard cap this
# many times above it: no file much larger reaches the disk.
UPLOAD_HARD_CAP = 4


def build_app(workspaces: ServedWorkspaces) -> FastAPI:
    agents = McpEndpoint(workspaces)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with agents.running():
            yield

    app = FastAPI(
        title="rag-pipeline",
        docs_url="/api/docs",
        openapi_url="/api/openapi.json",
        lifespan=lifespan,
    )
    app.include_router(api_routes(workspaces))
    app.include_router(sign_in_routes(workspaces.authenticator))
    app.add_route(MCP_PATH, agents, include_in_schema=False)
    # Outermost: no route, Gradio's own included, answers anyone not signed in.
    app.add_middleware(AccessMiddleware, authenticator=workspaces.authenticator)
    page = build_page(workspaces)
    # Gradio refuses an event naming a file it was not sent (an upload naming any file of the
    # server, which it would copy for the handler) only once it counts itself launched, which a
    # mounted page never does.
    page.has_launched = True
    app = gr.mount_gradio_app(
        app,
        page,
        path="/",
        # An unexpected error's text (a path of the server, a database's message) stays in the
        # log; what a user is told is said by gr.Error, which Gradio shows regardless.
        show_error=False,
        max_file_size=round(
            workspaces.settings.serving.max_upload_mb * UPLOAD_HARD_CAP * gr.FileSize.MB
        ),
        css=PAGE_CSS,
        footer_links=["api"],
        theme=gr.themes.Default(font=["system-ui", "sans-serif"]),  # no web fonts: offline
    )
    # Every route and event says who may use it (serving.access.permissions), or none is served.
    check_listed(route_paths(app), page_events(page))
    return app


def route_paths(app: FastAPI) -> list[str]:
    """The paths of the app's routes, those of the routers it includes too (none is included
    under a prefix), the page's mount as "/"."""

    def paths(routes: list[BaseRoute]) -> Iterator[str]:
        for route in routes:
            included = getattr(route, "original_router", None)  # FastAPI's include_router
            if included is not None:
                yield from paths(included.routes)
            else:
                yield getattr(route, "path", "") or "/"

    return list(paths(app.routes))


def page_events(page: gr.Blocks) -> list[str]:
    """The API names of the page's events that run Python (public and private alike)."""
    return [fn.api_name for fn in page.fns.values() if fn.fn is not None and fn.api_name]


# How long requests under way (an answer being written) may take to end once `serve` is told to
# stop: its index runs are stopped after them, all within 10 s.
STOP_REQUESTS_SECONDS = 5


def serve(workspaces: ServedWorkspaces, host: str, port: int) -> None:
    """Serve until Ctrl-C or SIGTERM; refuses a host beyond loopback while nobody has to sign
    in."""
    check_binding(host, workspaces.authenticator.access)
    config = uvicorn.Config(
        build_app(workspaces),
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=STOP_REQUESTS_SECONDS,
    )
    # uvicorn shuts down on either signal, then raises it again: SIGTERM's default would end the
    # process there, before the caller stops what it started; as an interrupt it returns here.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with contextlib.suppress(KeyboardInterrupt):
        _Server(config).run()


class _Server(uvicorn.Server):
    """uvicorn's server, which ends Gradio's event streams as it shuts down (a heartbeat stream
    per open page, which uvicorn would wait for)."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for route in self.config.app.routes:
            if isinstance(route, Mount) and hasattr(route.app, "stop_event"):
                route.app.stop_event.set()
        await super().shutdown(sockets)


class BackgroundServer:
    """The app served from a thread, for tests and benchmarks: ``with BackgroundServer(...)``."""

    def __init__(self, settings: Settings, host: str = "127.0.0.1", port: int = 0) -> None:
        check_binding(host, settings.access)
        self.workspaces = ServedWorkspaces(settings)
        self.app = build_app(self.workspaces)
        config = uvicorn.Config(self.app, host=host, port=port, log_level="warning")
        self._server = _Server(config)
        self._thread = threading.Thread(target=self._server.run, name="web", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the web server did not start")
            time.sleep(0.05)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self.workspaces.close()
