"""Runs through Dagster's run queue from the CLI (``rag-pipeline index --parallel N``).

The runs are created from the code location as a ``dagster-daemon`` loads it, and submitted to
the instance's ``QueuedRunCoordinator``; the daemon's queue starts them,
``dagster.max_concurrent_runs`` at a time, each in its own process through the instance's run
launcher. Creating a run of a code location is what ``dagster job launch`` does, with Dagster
internals (``compat.submit_runs_of_location``).

Queued runs start only while a daemon runs: when none does for this instance, one is started
for the command's duration (:func:`queue_daemon`); it drains the queue only (no sensor or
schedule in its code location, see ``definitions.py``): it plans no run of its own, though it
starts whatever else waits in the queue.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import yaml
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from rag_pipeline.config import Settings
from rag_pipeline.defs.compat import submit_runs_of_location
from rag_pipeline.defs.errors import NoDaemon
from rag_pipeline.defs.instance import get_instance, write_instance_config
from rag_pipeline.defs.runs import TRIGGER_TAG, PlannedRun, fail_abandoned_runs, index_documents_job
from rag_pipeline.files import write_atomically
from rag_pipeline.processes import start_process_group, stop_process_group

logger = logging.getLogger(__name__)


# The code location's name: a workspace file's python_module entry is named by its module, as in
# the checkout's workspace.yaml; runs submitted here name it, and the daemon launches them from it.
LOCATION = "rag_pipeline.definitions"
# Set for a daemon that only drains the queue: the code location then has no sensor or schedule.
QUEUE_ONLY_ENV = "RAG_PIPELINE_QUEUE_ONLY"

QUEUE_DAEMON = "QUEUED_RUN_COORDINATOR"
# A daemon beats every 30 s; Dagster's own "healthy" accepts a beat half an hour old, and a
# stopped daemon's last beat is never removed, so a daemon that stopped minutes ago would pass.
_ALIVE_SECONDS = 90.0


def workspace_file(settings: Settings) -> Path:
    """``<home>/dagster/workspace.yaml``: the code location, for the daemon and for submitting."""
    path = write_instance_config(settings) / "workspace.yaml"
    text = yaml.safe_dump({"load_from": [{"python_module": LOCATION}]})
    if not path.exists() or path.read_text() != text:
        write_atomically(path, lambda temporary: Path(temporary).write_text(text))
    return path


def submit_runs(
    instance: DagsterInstance,
    settings: Settings,
    planned: list[PlannedRun],
    *,
    retry_failed: bool,
    trigger: str,
) -> list[str]:
    """Create the planned runs from the code location and put them in the run queue."""
    return submit_runs_of_location(
        instance,
        workspace_file(settings),
        LOCATION,
        index_documents_job.name,
        [
            (
                run.run_config(settings, retry_failed=retry_failed),
                {**run.tags, TRIGGER_TAG: trigger},
            )
            for run in planned
        ],
    )


def daemon_running(instance: DagsterInstance) -> bool:
    """Whether a ``dagster-daemon`` drains this instance's run queue (its heartbeat is recent)."""
    beat = instance.get_daemon_heartbeats().get(QUEUE_DAEMON)
    return beat is not None and time.time() - beat.timestamp < _ALIVE_SECONDS


@contextmanager
def queue_daemon(settings: Settings) -> Iterator[Callable[[], bool]]:
    """A ``dagster-daemon`` draining the queue meanwhile: the running one, or one started here
    and stopped at the end. Yields whether it still runs."""
    with get_instance(settings) as instance:
        running = daemon_running(instance)
        if running:
            yield lambda: daemon_running(instance)
    if running:
        return
    home = write_instance_config(settings)
    environment = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "RAG_PIPELINE_HOME": str(settings.root),
        QUEUE_ONLY_ENV: "1",
    }
    with (home / "queue-daemon.log").open("ab") as log:
        process = start_daemon(workspace_file(settings), environment, log)
        logger.info("started dagster-daemon (process %d) to run the queue", process.pid)
        try:
            yield lambda: process.poll() is None
        finally:
            stop_process_group(process)
            # Its last beats would make the next command take it for a running daemon (no
            # other daemon ran: this one was started because none did).
            with get_instance(settings) as instance:
                instance.wipe_daemon_heartbeats()


def start_daemon(
    workspace: Path, environment: Mapping[str, str], log: IO[Any]
) -> subprocess.Popen[bytes]:
    """``dagster-daemon run`` for ``workspace``, stopped with this process
    (:func:`~rag_pipeline.processes.stop_process_group` stops the code server and runs it
    started too)."""
    # The venv's dagster-daemon, beside this interpreter (the venv need not be on PATH).
    daemon = str(Path(sys.executable).with_name("dagster-daemon"))
    return start_process_group([daemon, "run", "-w", str(workspace)], environment, log)


def wait_for_runs(
    instance: DagsterInstance,
    settings: Settings,
    run_ids: list[str],
    daemon_alive: Callable[[], bool],
    poll_seconds: float = 1.0,
) -> bool:
    """Wait until the runs end; whether all succeeded. A run whose process died is marked
    failed on the way (as the sensor does), so the wait ends. Interrupted (Ctrl-C), the wait
    cancels the runs first: left queued, they would block the next plan."""
    try:
        while True:
            runs = instance.get_runs(RunsFilter(run_ids=run_ids))
            if all(run.is_finished for run in runs):
                return all(run.status == DagsterRunStatus.SUCCESS for run in runs)
            if not daemon_alive() and any(run.status == DagsterRunStatus.QUEUED for run in runs):
                raise NoDaemon("the dagster-daemon stopped while runs were queued")
            fail_abandoned_runs(instance, settings)
            time.sleep(poll_seconds)
    except KeyboardInterrupt:
        cancel_runs(instance, run_ids)
        raise


def cancel_runs(
    instance: DagsterInstance, run_ids: list[str], timeout_seconds: float = 60.0
) -> None:
    """Cancel the runs not yet finished: queued ones never start; started ones are asked to
    stop by their launcher (what they committed stays) and waited for, up to
    ``timeout_seconds``, while the daemon that launched them still runs."""
    logger.warning("interrupted: cancelling the command's runs")
    for run in instance.get_runs(RunsFilter(run_ids=run_ids)):
        if not run.is_finished:
            instance.run_coordinator.cancel_run(run.run_id)
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if all(run.is_finished for run in instance.get_runs(RunsFilter(run_ids=run_ids))):
            return
        time.sleep(0.5)
