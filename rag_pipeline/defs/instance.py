"""The Dagster instance the CLI and ``dagster dev`` share: ``<home>/dagster`` is DAGSTER_HOME.

Its ``dagster.yaml`` is written from the settings: SQLite storage under the home folder by
default (with batched event writes, see ``storage.py``), PostgreSQL through dagster-postgres
when ``dagster.postgres_url`` is set.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import yaml

from rag_pipeline.config import Settings
from rag_pipeline.files import write_atomically

if TYPE_CHECKING:
    from dagster import DagsterInstance


def dagster_home(settings: Settings) -> Path:
    """One instance per installation: every workspace's runs and partitions are in it."""
    return settings.root / "dagster"


def instance_config(settings: Settings) -> dict[str, Any]:
    base = dagster_home(settings)
    config: dict[str, Any] = {
        "local_artifact_storage": {
            "module": "dagster._core.storage.root",
            "class": "LocalArtifactStorage",
            "config": {"base_dir": str(base)},
        },
        "compute_logs": {
            "module": "dagster._core.storage.local_compute_log_manager",
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
                "module": "dagster._core.storage.runs",
                "class": "SqliteRunStorage",
                "config": {"base_dir": str(base / "history")},
            },
            "event_log_storage": {
                "module": "rag_pipeline.defs.storage",
                "class": "BatchedSqliteEventLogStorage",
                "config": {"base_dir": str(base / "history" / "runs")},
            },
            "schedule_storage": {
                "module": "dagster._core.storage.schedules",
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
    """Write ``<home>/dagster/dagster.yaml`` (when it changed) and return the folder."""
    home = dagster_home(settings)
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    text = yaml.safe_dump(instance_config(settings), sort_keys=False)
    if not path.exists() or path.read_text() != text:
        # Whole or not at all: running daemons and runs read it. Its mode stays the temporary
        # file's 0600, as it may hold a database password.
        write_atomically(path, lambda temporary: Path(temporary).write_text(text))
    return home


def get_instance(settings: Settings) -> DagsterInstance:
    from dagster import DagsterInstance

    return DagsterInstance.from_config(str(write_instance_config(settings)))
