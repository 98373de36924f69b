"""What the tests of long-running commands (`ui`, `serve`) share: a free port, waiting for a
condition, and the processes a command started for a home."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path


def within(seconds: float, what: str, condition: Callable[[], bool]) -> float:
    """How long ``condition`` took to hold; fails after ``seconds``."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < seconds, f"not within {seconds:g} s: {what}"
        time.sleep(0.2)
    return time.monotonic() - started


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def processes_of(home: Path) -> list[int]:
    """Processes started for ``home`` (each has it in its environment: started with it, or by a
    process that was)."""
    marker = f"RAG_PIPELINE_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:  # ended meanwhile, or not ours to read
            continue
    return found
