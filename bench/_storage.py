"""Where a bench's home keeps its catalog and Dagster's runs and events, and what they hold.

The embedded default: SQLite files in the home. With a PostgreSQL server (``postgres``: a URL
of a database on it whose user may create databases), two databases the bench makes afresh
there, one for the catalog and one for Dagster, as docs/scaling.md sets a team up.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

CATALOG_DATABASE = "rag_bench_catalog"
DAGSTER_DATABASE = "rag_bench_dagster"


@dataclass(frozen=True)
class Storage:
    postgres: str | None = None

    def url_of(self, database: str) -> str:
        assert self.postgres
        return urlunsplit(urlsplit(self.postgres)._replace(path=f"/{database}"))

    @property
    def settings(self) -> dict[str, str]:
        """The settings (environment) that point a home at the storage."""
        if not self.postgres:
            return {}
        return {
            "RAG_PIPELINE_CATALOG__URL": self.url_of(CATALOG_DATABASE),
            "RAG_PIPELINE_DAGSTER__POSTGRES_URL": self.url_of(DAGSTER_DATABASE),
        }

    def make_afresh(self) -> None:
        """Drop and create the bench's databases (nothing to do for SQLite: a new home)."""
        if not self.postgres:
            return
        for database in (CATALOG_DATABASE, DAGSTER_DATABASE):
            self._execute(self.postgres, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            self._execute(self.postgres, f'CREATE DATABASE "{database}"')

    def chunks(self, home: Path) -> int:
        """Chunk rows in the catalog."""
        if self.postgres:
            return self._execute(self.url_of(CATALOG_DATABASE), "SELECT count(*) FROM chunks")
        with sqlite3.connect(f"file:{home / 'catalog' / 'catalog.sqlite'}?mode=ro", uri=True) as db:
            return db.execute("SELECT count(*) FROM chunks").fetchone()[0]

    def event_log(self, home: Path) -> str:
        """Rows and bytes of Dagster's event log."""
        if self.postgres:
            url = self.url_of(DAGSTER_DATABASE)
            rows = self._execute(url, "SELECT count(*) FROM event_logs")
            size = self._execute(url, "SELECT pg_total_relation_size('event_logs')")
            return f"{rows:,} rows in PostgreSQL's event_logs; {mb(size)}"
        # SQLite: one database per run, and the index of the events Dagster looks up across
        # runs (materializations, partitions).
        runs = home / "dagster" / "history" / "runs"
        counts = {"per-run": 0, "index": 0}
        for database in runs.glob("?*.db"):  # ".db" is an empty one Dagster leaves
            with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
                tables = {row[0] for row in connection.execute("select name from sqlite_master")}
                if "event_logs" in tables:
                    (rows,) = connection.execute("select count(*) from event_logs").fetchone()
                    counts["index" if database.name == "index.db" else "per-run"] += rows
        return (
            f"{counts['per-run']:,} rows in {len(list(runs.glob('*-*.db')))} run databases, "
            f"{counts['index']:,} in the index; {mb(disk_bytes(runs))}"
        )

    def databases(self) -> str:
        """The PostgreSQL databases' sizes ("" for SQLite: its files are in the home)."""
        if not self.postgres:
            return ""
        sizes = {
            name: self._execute(self.postgres, f"SELECT pg_database_size('{name}')")
            for name in (CATALOG_DATABASE, DAGSTER_DATABASE)
        }
        return ", ".join(f"{name} {mb(size)}" for name, size in sizes.items())

    @staticmethod
    def _execute(url: str, statement: str) -> int:
        import psycopg2

        connection = psycopg2.connect(url)
        connection.autocommit = True  # CREATE DATABASE runs outside a transaction
        try:
            with connection.cursor() as cursor:
                cursor.execute(statement)
                return cursor.fetchone()[0] if cursor.description else 0
        finally:
            connection.close()


def disk_bytes(folder: Path) -> int:
    """Bytes the folder's files take on disk (allocated blocks), symbolic links not followed."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


def mb(size: float) -> str:
    return f"{size / 2**20:,.0f} MB"
