"""Parse documents in worker processes, each under a time limit.

A parser can hang or crash inside C code (MuPDF, lxml, pandoc) where no Python timeout reaches,
so every document is parsed in a worker process that is killed when it overruns its time limit
or replaced when it dies; the rest of the batch goes on. The limit runs from the moment the
worker holds the job, not from its start-up. A parser that reports progress (OCR,
after each page: ``heartbeat.beat``) gets the time limit afresh after each report, so a long scan
is not stopped while it advances.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_pipeline.parsing import ParsedDocument, ParseError, ParseOptions, heartbeat, parse_document

# What a worker does with a parsed document, in the worker (it must pickle): its return value,
# not the document, comes back. The indexer's writes the stage file there and returns a summary.
Handler = Callable[[str, ParsedDocument], Any]
_Job = tuple[str, str, ParseOptions, Handler]  # (key, path, options, handler)
_BEAT = ("beat",)  # a worker's "still making progress", between jobs' results


@dataclass(frozen=True, slots=True)
class ParseOutcome:
    key: str
    result: Any  # what the handler returned; None when parsing failed
    error: str | None
    seconds: float


def whole_document(key: str, parsed: ParsedDocument) -> ParsedDocument:
    """The default handler: the parsed document itself, its elements read into a list."""
    parsed.elements = list(parsed.elements)
    return parsed


def _work(connection: multiprocessing.connection.Connection) -> None:
    heartbeat.listen(lambda: connection.send(_BEAT))
    while True:
        try:
            job = connection.recv()
        except EOFError:
            return
        if job is None:
            return
        # The job is in hand (its handler's modules imported): the time limit runs from here, so
        # a worker's start on a busy machine does not count against a small file's limit.
        connection.send(_BEAT)
        key, path, options, handler = job
        try:
            result: tuple[Any, str | None] = (
                handler(key, parse_document(Path(path), options)),
                None,
            )
        except ParseError as error:
            result = (None, str(error))
        except Exception as error:  # a parser bug must fail one document, not the batch
            result = (None, f"parser error ({type(error).__name__}: {error})")
        connection.send((key, *result))


class _Worker:
    def __init__(self, context: multiprocessing.context.BaseContext) -> None:
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_work, args=(child,), daemon=True)
        self.process.start()
        child.close()
        self.job: _Job | None = None
        self.started = 0.0
        self.alive_at = 0.0  # the job's start or its last heartbeat: the time limit runs from it

    def submit(self, job: _Job) -> None:
        self.job, self.started = job, time.monotonic()
        self.alive_at = self.started
        self.connection.send(job)

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.process.kill()
        else:
            with contextlib.suppress(OSError):
                self.connection.send(None)
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.connection.close()


def start_parser_server() -> multiprocessing.context.ForkServerContext:
    """Start (once per process) the server that parser workers are forked from.

    A forkserver: workers start from a clean single-threaded process, whatever threads the
    caller (Dagster, ONNX Runtime) already runs, and heavy libraries are imported there once.
    It starts in the background, so calling this early hides its start-up behind other work.
    """
    from multiprocessing import forkserver

    context = multiprocessing.get_context("forkserver")
    # Third-party libraries only: Python 3.11's forkserver imports its preloads with the
    # working directory first on sys.path, where another checkout of this project would shadow
    # the installed one; workers import the project themselves, with the caller's sys.path.
    # Not PyMuPDF: importing it takes half a second, which a batch without PDFs need not wait.
    context.set_forkserver_preload(["numpy", "markdown_it"])
    forkserver.ensure_running()
    return context


def parse_in_workers(
    jobs: Iterable[tuple[str, Path]],
    *,
    workers: int,
    timeout_seconds: float,
    options: ParseOptions | None = None,
    handler: Handler = whole_document,
) -> Iterator[ParseOutcome]:
    """Parse ``(key, path)`` jobs; yield one outcome per job as soon as it is known."""
    options = options or ParseOptions()
    pending = deque((key, str(path), options, handler) for key, path in jobs)
    if not pending:
        return
    context = start_parser_server()
    pool = [_Worker(context) for _ in range(min(workers, len(pending)))]
    try:
        while pending or any(worker.job for worker in pool):
            for worker in pool:
                if worker.job is None and pending:
                    worker.submit(pending.popleft())
            busy = [worker for worker in pool if worker.job]
            deadline = min(worker.alive_at for worker in busy) + timeout_seconds
            ready = multiprocessing.connection.wait(
                [worker.connection for worker in busy] + [w.process.sentinel for w in busy],
                timeout=max(deadline - time.monotonic(), 0),
            )
            for index, worker in enumerate(pool):
                if worker.job is None:
                    continue
                key = worker.job[0]
                elapsed = time.monotonic() - worker.started
                if worker.connection in ready:
                    try:
                        message = worker.connection.recv()
                    except (EOFError, OSError):
                        error = "the parser crashed"
                    else:
                        if message == _BEAT:
                            worker.alive_at = time.monotonic()
                            continue
                        _, result, error = message
                        worker.job = None
                        yield ParseOutcome(key, result, error, elapsed)
                        continue
                elif worker.process.sentinel in ready:
                    error = f"the parser crashed (exit code {worker.process.exitcode})"
                elif time.monotonic() - worker.alive_at >= timeout_seconds:
                    error = (
                        f"parsing took longer than the {timeout_seconds:g} s limit and was stopped"
                    )
                else:
                    continue
                worker.stop(kill=True)
                pool[index] = _Worker(context)
                yield ParseOutcome(key, None, error, elapsed)
    finally:
        for worker in pool:
            worker.stop(kill=worker.job is not None)
