"""The indexing runs the page starts for uploads: ``rag-pipeline index --workspace …`` in a child
process (the page never runs Dagster itself), stopped with what it started when the server stops.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from rag_pipeline.processes import start_process_group, stop_process_group

logger = logging.getLogger(__name__)

# How long a run has to end on SIGTERM before it is killed: what `serve` leaves of its 10 s to
# stop once the web server has shut down.
STOP_SECONDS = 3


class BackgroundIndexing:
    """One ``rag-pipeline index`` child process per workspace at a time; a request while one
    runs makes it run once more when it ends (the new files may have come too late for it)."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._lock = threading.Lock()
        self._busy: set[str] = set()
        self._again: set[str] = set()
        self._processes: dict[str, subprocess.Popen[bytes]] = {}  # the runs under way
        self._stopped = False

    def request(self, workspace_id: str) -> None:
        with self._lock:
            if self._stopped:
                return
            if workspace_id in self._busy:
                self._again.add(workspace_id)
                return
            self._busy.add(workspace_id)
        threading.Thread(
            target=self._run, args=(workspace_id,), name=f"index-{workspace_id}", daemon=True
        ).start()

    def running(self, workspace_id: str) -> bool:
        with self._lock:
            return workspace_id in self._busy

    def stop(self) -> None:
        """Stop the runs under way, each with what it started, and start no other."""
        with self._lock:
            self._stopped = True
            processes = list(self._processes.values())
        for process in processes:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                stop_process_group(process, timeout_seconds=STOP_SECONDS)

    def _run(self, workspace_id: str) -> None:
        command = [
            sys.executable,
            "-m",
            "rag_pipeline.cli",
            "index",
            "--home",
            str(self._root),
            "--workspace",
            workspace_id,
        ]
        while True:
            with tempfile.TemporaryFile() as output:
                with self._lock:
                    if self._stopped:
                        self._busy.discard(workspace_id)
                        return
                    # Started (and waited for) by this thread: a run is told to stop when the
                    # thread that started it ends, and this one outlives it.
                    process = start_process_group(command, os.environ, output)
                    self._processes[workspace_id] = process
                if process.wait() != 0 and not self._stopped:
                    output.seek(0)
                    said = output.read().decode(errors="replace")
                    logger.error("indexing %s failed: %s", workspace_id, said[-2000:])
            with self._lock:
                del self._processes[workspace_id]
                if workspace_id not in self._again or self._stopped:
                    self._busy.discard(workspace_id)
                    return
                self._again.discard(workspace_id)
