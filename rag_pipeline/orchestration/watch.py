"""Live folders: a change is indexed as soon as it settles, not at the sensor's next tick.

The watched folders of every workspace are watched for file-system events (``watchfiles``:
inotify and its kin, or polling where events are not delivered). Once they have been quiet for
``indexing.watch_settle_ms``, each workspace with a change gets one incremental pass
(:func:`index_once`) over the paths the events named: a few documents through the direct path,
compared alone with the catalog (no walk of every folder, no read of every row); a folder or
more documents get the whole pass, as a run. What a pass
indexed without Dagster is reported to Dagster right after it, while the watcher waits for the
next change: shown at once, and not left for a burst's run to report first. Idle, it waits on
the events and costs nothing (but the store it keeps open for the next pass, until another
process asks for it); a full pass every ``indexing.watch_rescan_seconds`` catches what
no event told of. A folder that disappears keeps its documents, as in any pass; the list of
folders and workspaces is read again after each pass, so a folder added or a workspace created
is watched from then on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from rag_pipeline.config import Settings
from rag_pipeline.orchestration.incremental import IndexOutcome, index_once
from rag_pipeline.store.keeping import keeping_open
from rag_pipeline.workspaces import Workspace, list_workspaces

logger = logging.getLogger("rag_pipeline.watch")

Passed = Callable[[Workspace, IndexOutcome], None]


def watch(settings: Settings, stop: threading.Event, on_pass: Passed | None = None) -> None:
    """Index every workspace's changes as they settle, until ``stop`` is set."""
    passes = _Passes(settings, on_pass)
    # The store stays open from one pass to the next (opening a large one is most of a small
    # pass), until another process asks for it.
    with keeping_open():
        try:
            _follow_changes(settings, stop, passes)
        finally:
            _wait_for(passes.reporting)


def _follow_changes(settings: Settings, stop: threading.Event, passes: _Passes) -> None:
    from watchfiles import watch as file_events

    indexing = settings.indexing
    rescan_ms = int(indexing.watch_rescan_seconds * 1000)
    while not stop.is_set():
        workspaces = list_workspaces(settings)
        passes.run(workspaces)  # what changed while nobody watched
        folders = _folders(workspaces)
        if not folders:
            stop.wait(indexing.watch_settle_ms / 1000)
            continue
        for changes in file_events(
            *folders,
            step=indexing.watch_settle_ms,
            debounce=max(indexing.watch_settle_ms * 10, 60_000),
            stop_event=stop,
            rust_timeout=rescan_ms,
            yield_on_timeout=True,
            force_polling=indexing.watch_polling,
            ignore_permission_denied=True,
        ):
            if not changes:  # the rescan's time: a full pass, folders read again
                break
            changed = [Path(path) for _, path in changes]
            touched = [
                workspace
                for workspace in workspaces
                if any(_inside(path, workspace.settings.watched_folders) for path in changed)
            ]
            passes.run(touched, changed)
            if _folders(list_workspaces(settings)) != folders:
                break  # a folder or workspace came or went: watch the new set


class _Passes:
    """The watcher's passes, each in a thread of its own: a Dagster run in the main thread would
    take over the process's signal handlers and swallow the SIGTERM meant to stop the watcher
    (which then ends once the pass is over). A pass that indexed something is followed by its
    report to Dagster in another thread, which the watcher does not wait for: it overlaps the
    settling of the next change, and the next pass waits for it instead."""

    def __init__(self, settings: Settings, on_pass: Passed | None) -> None:
        self.settings = settings
        self.on_pass = on_pass
        self.reporting: threading.Thread | None = None

    def run(self, workspaces: list[Workspace], paths: list[Path] | None = None) -> None:
        """A pass over each of ``workspaces``: over ``paths`` alone when given, else whole."""
        _wait_for(self.reporting)  # the report holds the workspaces' indexing locks
        self.reporting = None
        indexed: list[Workspace] = []
        _wait_for(_started("watch-pass", _index_each, workspaces, paths, self.on_pass, indexed))
        if indexed:
            self.reporting = _started("watch-report", _report, self.settings)


def _started(name: str, target: Callable[..., None], *args: object) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, name=name)
    thread.start()
    return thread


def _wait_for(thread: threading.Thread | None) -> None:
    """Join ``thread`` in short waits: the main thread must still see a signal meanwhile."""
    while thread is not None and thread.is_alive():
        thread.join(0.5)


def _index_each(
    workspaces: list[Workspace],
    paths: list[Path] | None,
    on_pass: Passed | None,
    indexed: list[Workspace],
) -> None:
    for workspace in workspaces:
        folders = workspace.settings.watched_folders
        inside = None if paths is None else [path for path in paths if _inside(path, folders)]
        try:
            outcome = index_once(workspace.settings, trigger="watch", paths=inside)
        except Exception:  # a pass that fails is tried again at the next change or rescan
            logger.exception("watch: indexing %s failed", workspace.name)
            continue
        diff = outcome.diff
        if diff.to_process:
            indexed.append(workspace)
            logger.info(
                "watch: %s: added %d, changed %d, deleted %d, failed %d in %.1f s",
                workspace.name,
                len(diff.new),
                len(diff.changed),
                len(diff.deleted),
                len(outcome.failed),
                outcome.seconds,
            )
        if on_pass is not None:
            on_pass(workspace, outcome)


def _report(settings: Settings) -> None:
    """Report to Dagster what the passes indexed without it (Dagster imported only now)."""
    try:
        from rag_pipeline.defs.direct import report_every_workspace

        report_every_workspace(settings)
    except Exception:  # left for the next pass's report, a run's planner or the sensor
        logger.exception("watch: reporting to Dagster failed")


def _folders(workspaces: list[Workspace]) -> list[Path]:
    """The watched folders that exist now (an unmounted one is watched again once back)."""
    found = {folder for w in workspaces for folder in w.settings.watched_folders if folder.is_dir()}
    return sorted(found)


def _inside(path: Path, folders: list[Path]) -> bool:
    return any(path.is_relative_to(folder) for folder in folders)
