"""The Dagster instance the CLI and ``dagster dev`` share: ``<home>/dagster`` is DAGSTER_HOME.

Its ``dagster.yaml`` is written from the settings: SQLite storage under the home folder by
default (with batched event writes, see ``compat.py``), PostgreSQL through dagster-postgres
when ``dagster.postgres_url`` is set. Dagster's storage classes are named as ``compat.py``'s,
which re-exports them: only that module names Dagster's private modules.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import yaml

from rag_pipeline.config import Settings
from rag_pipeline.files import write_atomically
from rag_pipeline.locking import FileLock

if TYPE_CHECKING:
    from dagster import DagsterInstance


# What Dagster reads from the environment: a run's per-document events written in batches (see
# compat.py), read per event by the process executing the run.
DAGSTER_ENVIRONMENT = {"DAGSTER_EVENT_BATCH_SIZE": "100000"}
# With PostgreSQL storage, also in the processes creating runs: one planned event per asset for
# a run's range of documents, as dagster-postgres stores each planned event on a connection of its
# own (bench/partitions.py). The cost: Dagster's UI no longer shows a run's documents as in
# progress, nor a failed run's as failed (each document's failure is in the catalog). SQLite
# storage keeps Dagster's per-document events, which cost little there.
POSTGRES_DAGSTER_ENVIRONMENT = {"DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS": "true"}


_COMPAT = "rag_pipeline.defs.compat"


def use_dagster_environment(settings: Settings | None = None) -> None:
    """Set in this process (and so in what it starts) what Dagster reads from the environment
    (unless set): :data:`DAGSTER_ENVIRONMENT`, and with ``settings`` naming PostgreSQL storage,
    :data:`POSTGRES_DAGSTER_ENVIRONMENT`."""
    postgres = settings is not None and settings.dagster.postgres_url
    for name, value in (
        DAGSTER_ENVIRONMENT | (POSTGRES_DAGSTER_ENVIRONMENT if postgres else {})
    ).items():
        os.environ.setdefault(name, value)


def dagster_home(settings: Settings) -> Path:
    """One instance per installation: every workspace's runs and partitions are in it."""
    return settings.root / "dagster"


def instance_config(settings: Settings) -> dict[str, Any]:
    base = dagster_home(settings)
    config: dict[str, Any] = {
        "local_artifact_storage": {
            "module": _COMPAT,
            "class": "LocalArtifactStorage",
            "config": {"base_dir": str(base)},
        },
        "compute_logs": {
            "module": _COMPAT,
            "class": "LocalComputeLogManager",
            "config": {"base_dir": str(base / "logs")},
        },
        "telemetry": {"enabled": False},
        "python_logs": {"managed_python_loggers": ["rag_pipeline"], "python_log_level": "INFO"},
        "concurrency": concurrency_config(settings),
        # Fails runs stuck starting, and runs whose worker died where the run launcher can
        # tell (Docker, Kubernetes); local processes are covered by runs.fail_abandoned_runs.
        # A dead run's concurrency slot is given back a minute after it is marked failed.
        "run_monitoring": {
            "enabled": True,
            "start_timeout_seconds": 180,
            "free_slots_after_run_end_seconds": 60,
        },
    }
    if settings.dagster.postgres_url:
        config["storage"] = {
            "postgres": {"postgres_db": _postgres_db(settings.dagster.postgres_url)}
        }
    else:
        config |= {
            "run_storage": {
                "module": _COMPAT,
                "class": "SqliteRunStorage",
                "config": {"base_dir": str(base / "history")},
            },
            "event_log_storage": {
                "module": _COMPAT,
                "class": "BatchedSqliteEventLogStorage",
                "config": {"base_dir": str(base / "history" / "runs")},
            },
            "schedule_storage": {
                "module": _COMPAT,
                "class": "SqliteScheduleStorage",
                "config": {"base_dir": str(base / "schedules")},
            },
        }
    return config


def concurrency_config(settings: Settings) -> dict[str, Any]:
    """Queued runs side by side (``dagster.max_concurrent_runs``), each in its own process;
    the embedded vector store written by one run at a time (the pool ``qdrant_points`` claims,
    of one slot). A Qdrant server takes every run's writes at once."""
    config: dict[str, Any] = {"runs": {"max_concurrent_runs": settings.dagster.max_concurrent_runs}}
    if not settings.store.url:  # the embedded engine, or qdrant-client's local mode
        config["pools"] = {"default_limit": 1}
    return config


def _postgres_db(url: str) -> dict[str, Any]:
    """postgresql://user:password@host:port/db as dagster-postgres' settings.

    The scheme is spelled out because SQLAlchemy 2.1 reads a bare ``postgresql://`` as
    psycopg 3, while dagster-postgres installs psycopg2.
    """
    parts = urlsplit(url)
    return {
        "username": parts.username or "postgres",
        "password": parts.password or "",
        "hostname": parts.hostname or "localhost",
        "port": parts.port or 5432,
        "db_name": parts.path.lstrip("/") or "postgres",
        "scheme": "postgresql+psycopg2",
    }


def write_instance_config(settings: Settings) -> Path:
    """Write ``<home>/dagster/dagster.yaml`` (when it changed) and return the folder; set what
    this storage needs from the environment (:func:`use_dagster_environment`), for this process
    and the daemon or webserver it starts."""
    use_dagster_environment(settings)
    home = dagster_home(settings)
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    text = yaml.safe_dump(instance_config(settings), sort_keys=False)
    if not path.exists() or path.read_text() != text:
        # Whole or not at all: running daemons and runs read it. Its mode stays the temporary
        # file's 0600, as it may hold a database password.
        write_atomically(path, lambda temporary: Path(temporary).write_text(text))
    return home


# Longer than any first opening (its migrations) takes.
OPENING_SECONDS = 300.0


def get_instance(settings: Settings) -> DagsterInstance:
    """The home's Dagster instance. Opened one process at a time (of ours): the first opening
    creates its SQLite tables, and two at once fail ("table run_tags already exists"), as a
    test and the watcher's report thread once did."""
    from dagster import DagsterInstance

    home = write_instance_config(settings)
    opening = FileLock(home / ".opening.lock")
    if not opening.acquire(OPENING_SECONDS, waiting=f"another process is opening {home}"):
        raise TimeoutError(f"{home} was being opened for more than {OPENING_SECONDS:g} s")
    try:
        return DagsterInstance.from_config(str(home))
    finally:
        opening.release()
