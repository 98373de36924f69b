"""What the benchmarks share: the CLI run as a fresh process, timed, its memory watched."""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from rag_pipeline.processes import start_process_group, stop_process_group

SHARED = Path(__file__).resolve().parents[2] / "shared"
CLI = [sys.executable, "-m", "rag_pipeline.cli"]

_VOCABULARY = """
retrieval index document passage query vector dense sparse hybrid fusion rank score model token
chunk page section heading table figure citation answer question search corpus river mountain city
history science energy market policy health water forest ocean climate data network system design
method result analysis report summary process value growth risk
"""
WORDS = _VOCABULARY.split()


@dataclass(frozen=True)
class Measured:
    seconds: float
    peak_rss_mb: float  # the process and its children, summed, at their peak
    stdout: str
    # User + system CPU of the process and every descendant it waited for: unlike wall time,
    # barely moved by other jobs sharing the cores.
    cpu_seconds: float
    peak_anonymous_mb: float  # the same peak without mapped files' pages (see _Peak)

    @property
    def summary(self) -> str:
        """The line ``rag-pipeline index`` ends its report with (counts and seconds)."""
        return next(line for line in self.stdout.splitlines() if line.startswith("added "))


def run_cli(
    *args: str | Path,
    env: dict[str, str] | None = None,
    heartbeat: Callable[[float, float], None] | None = None,
) -> Measured:
    """Run ``rag-pipeline`` in a fresh process; wall time and peak memory of its process tree."""
    return run_command([*CLI, *map(str, args)], env, heartbeat)


def run_command(
    argv: list[str],
    env: dict[str, str] | None = None,
    heartbeat: Callable[[float, float], None] | None = None,
) -> Measured:
    """Run a command in a fresh process; wall time and peak memory of its process tree.
    ``heartbeat(seconds so far, peak MB so far)`` is called every 15 s while it runs (what a
    run that may be killed with its session keeps of itself)."""
    # Without PYTHONDONTWRITEBYTECODE (some sandboxes set it): an installed package runs from
    # cached bytecode, as a peer installed by pip does, instead of compiling its modules anew
    # in every process.
    inherited = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environment = inherited | {"HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1"} | (env or {})
    cpu_before = children_cpu_seconds()
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
    )
    peak = peak_rss_of(process.pid)
    if heartbeat:
        _beat_while(process, lambda: heartbeat(time.perf_counter() - started, peak.peak / 2**20))
    out, err = process.communicate()
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{err[-3000:]}")
    return Measured(
        seconds,
        peak.result() / 2**20,
        out,
        children_cpu_seconds() - cpu_before,
        peak.peak_anonymous / 2**20,
    )


def _beat_while(process: subprocess.Popen, beat: Callable[[], None]) -> None:
    def beating() -> None:
        while True:
            try:
                process.wait(timeout=15)
                return
            except subprocess.TimeoutExpired:
                beat()

    threading.Thread(target=beating, daemon=True).start()


@contextlib.contextmanager
def served(
    home: Path, env: dict[str, str] | None = None, timeout: float = 180
) -> Iterator[tuple[str, _Peak]]:
    """`rag-pipeline serve` of ``home`` on a free port until the block ends: its URL, once it
    answers HTTP, and the watch on its memory (``.peak``, bytes)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [*CLI, "serve", "--home", str(home), "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:  # what it says, kept out of the figures
        server = start_process_group(command, os.environ | (env or {}), log)
        memory = peak_rss_of(server.pid)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    httpx.get(url + "/", timeout=2)
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise RuntimeError("rag-pipeline serve did not start") from None
                    time.sleep(0.5)
            yield url, memory
        finally:
            stop_process_group(server)


def children_cpu_seconds() -> float:
    """CPU seconds used so far by this process's waited-for children and their descendants."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class _Peak(threading.Thread):
    """The peak of the summed RSS (``peak``) and of its anonymous part (``peak_anonymous``: RSS
    less the pages of mapped files, such as a vector store's, which the page cache shares and
    the kernel takes back under pressure)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.peak_anonymous = pid, 0, 0

    def run(self) -> None:
        try:
            root = psutil.Process(self.pid)
            while root.is_running() and root.status() != psutil.STATUS_ZOMBIE:
                total = anonymous = 0
                for process in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        memory = process.memory_info()
                        total += memory.rss
                        anonymous += memory.rss - memory.shared
                self.peak = max(self.peak, total)
                self.peak_anonymous = max(self.peak_anonymous, anonymous)
                time.sleep(0.05)
        except psutil.Error:
            pass

    def result(self) -> int:
        self.join()
        return self.peak


def peak_rss_of(pid: int) -> _Peak:
    """Start watching the summed RSS of ``pid`` and its children; ``.result()`` waits for it."""
    watcher = _Peak(pid)
    watcher.start()
    return watcher


def write_short_markdown(folder: Path, count: int, seed: int = 7) -> list[Path]:
    """``count`` short Markdown files (a heading and 40-300 words), deterministic per seed."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for number in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(40, 300))]
        sentences = [
            " ".join(words[i : i + 12]).capitalize() + "." for i in range(0, len(words), 12)
        ]
        path = folder / f"note-{number:05d}.md"
        path.write_text(f"# Note {number}\n\n" + " ".join(sentences) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def on_both_corpora(measure: Callable[[str, Path, Path], None]) -> None:
    """``measure(name, corpus, scratch folder)`` on 1,000 generated short notes and on
    ``../shared/corpus`` (``--only short|corpus`` for one), in a scratch folder removed after."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=["corpus", "short"])
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rag-bench-"))
    try:
        if args.only in (None, "short"):
            write_short_markdown(work / "short", 1000)
            measure("1,000 short Markdown files", work / "short", work)
        if args.only in (None, "corpus"):
            require_shared()
            measure("../shared/corpus", SHARED / "corpus", work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def require_shared() -> None:
    if not SHARED.is_dir():
        sys.exit(f"this benchmark needs ../shared beside the checkout ({SHARED} is missing)")
