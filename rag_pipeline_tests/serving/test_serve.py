"""`rag-pipeline serve`: the page and the API in a process of their own, which stops whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from rag_pipeline_tests.processes import answers, free_port, processes_of, within

FILE_DATA = {"_type": "gradio.FileData"}  # what Gradio's client says of a file it sends


@pytest.mark.slow  # a server in a process of its own, which starts an index run
def test_serve_stopped_by_sigterm_while_indexing_an_upload_leaves_no_process_behind(
    home: Path, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "rag_pipeline.cli", "serve", "--home", str(home)]
    # Each process started for the home carries it (processes_of finds them by it).
    environment = os.environ | {"RAG_PIPELINE_HOME": str(home)}
    with (tmp_path / "serve.log").open("wb") as log:
        serve = subprocess.Popen(
            [*command, "--port", str(port)], env=environment, stdout=log, stderr=log
        )
        try:
            within(180, "the page served", lambda: answers(f"{url}/"))
            with httpx.Client(base_url=url, timeout=60) as http:
                # A page open meanwhile: its heartbeat stream does not hold the server up.
                heartbeat = threading.Thread(
                    target=_read_heartbeat, args=(url, "open-page"), daemon=True
                )
                heartbeat.start()
                files = {"files": ("pelicans.md", b"# Pelicans\n\nPelicans scoop fish.\n")}
                [path] = http.post("/gradio_api/upload", files=files).json()
                sent = {"path": path, "orig_name": "pelicans.md", "meta": FILE_DATA}
                event = http.post(
                    "/gradio_api/call/upload", json={"data": [[sent], "default", False]}
                )
                answer = http.get(f"/gradio_api/call/upload/{event.json()['event_id']}").text
            assert "event: complete" in answer, answer
            within(60, "an index run started", lambda: set(processes_of(home)) - {serve.pid})
        finally:
            signalled = time.monotonic()
            serve.send_signal(signal.SIGTERM)
            code = serve.wait(timeout=60)
    ended = within(10, "every process of the home gone", lambda: not processes_of(home))
    assert time.monotonic() - signalled < 10, ended
    assert code == 0, (tmp_path / "serve.log").read_text(errors="replace")[-3000:]


def _read_heartbeat(url: str, session: str) -> None:
    """Gradio's heartbeat stream of an open page, read until the server ends it."""
    with (
        httpx.Client(base_url=url, timeout=None) as http,
        http.stream("GET", f"/gradio_api/heartbeat/{session}") as stream,
    ):
        for _ in stream.iter_lines():
            pass
