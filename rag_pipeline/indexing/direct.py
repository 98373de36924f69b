"""Small changes indexed without a Dagster run, and what they did kept for Dagster.

Dagster takes about two seconds to import and open before a run's first step: more than
indexing one edited file takes. So the CLI's ``index`` runs a change of at most
``indexing.direct_documents`` documents through the same stages itself (``stage_table.py``), and
keeps what each stage reported per document in ``<home>/unreported-runs/``.
The next time Dagster opens for the home (a run, the sensor, ``rag-pipeline ui``),
``defs/direct.py`` reports them as the assets' materializations and check evaluations. Losing
such a record (a crash right after the commit) loses history shown in Dagster, never the index.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rag_pipeline.config import Settings
from rag_pipeline.files import write_atomically
from rag_pipeline.indexing.checks import CheckOutcome, record_verified, store_verified
from rag_pipeline.indexing.run import Indexer, Metadata
from rag_pipeline.indexing.stage_table import PLAN_STAGE, STAGES, run_stage

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DirectRun:
    """What a run without Dagster did: per asset, each document's metadata; and the checks."""

    run_id: str
    workspace: str
    trigger: str  # what asked for it: cli, eval
    finished_at: float
    documents: list[str]
    deleted: list[str]  # those of ``documents`` whose file is gone
    stages: dict[str, dict[str, Metadata]]  # asset → doc id (or "*": the batch) → metadata
    checks: dict[str, CheckOutcome]

    @classmethod
    def read(cls, path: Path) -> DirectRun:
        data = json.loads(path.read_text(encoding="utf-8"))
        checks = {name: CheckOutcome(**check) for name, check in data.pop("checks").items()}
        return cls(**data, checks=checks)

    def write(self, folder: Path) -> None:
        path = folder / f"{self.finished_at:017.6f}-{self.run_id}.json"
        # default=str: a stage's metadata is for reading (a path, a timestamp), not computing.
        text = json.dumps(asdict(self), ensure_ascii=False, default=str)
        write_atomically(path, lambda temporary: Path(temporary).write_text(text, "utf-8"))


def unreported_runs_folder(settings: Settings) -> Path:
    return settings.home / "unreported-runs"


def unreported_runs(settings: Settings) -> Iterator[tuple[Path, DirectRun]]:
    """The workspace's runs not yet reported to Dagster, oldest first. A record that cannot be
    read (edited by hand, of another version) is renamed ``.unreadable`` and skipped: it is
    history, and must not stop the ones after it."""
    folder = unreported_runs_folder(settings)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            run = DirectRun.read(path)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            logger.warning("skipping the unreadable run record %s: %s", path, error)
            path.rename(path.with_suffix(".unreadable"))
            continue
        yield path, run


@dataclass(slots=True)
class _Recorded:
    """The journal of a run without Dagster: what it reports, kept for its record."""

    stages: dict[str, dict[str, Metadata]] = field(default_factory=dict)
    checks: dict[str, CheckOutcome] = field(default_factory=dict)

    def stage_done(self, stage: str, report: Mapping[str, Mapping[str, Any]]) -> None:
        self.stages[stage] = {doc_id: dict(metadata) for doc_id, metadata in report.items()}

    def checks_done(self, outcomes: Mapping[str, CheckOutcome]) -> None:
        self.checks.update(outcomes)


def indexes_directly(settings: Settings, documents: int) -> bool:
    """Whether ``index`` handles a change of ``documents`` documents without a Dagster run."""
    return settings.dagster.postgres_url is None and documents <= settings.indexing.direct_documents


def index_directly(
    settings: Settings,
    doc_ids: list[str],
    deleted: list[str],
    *,
    retry_failed: bool = False,
    trigger: str = "cli",
) -> DirectRun:
    """Index ``doc_ids`` as a Dagster run of them would, in this process, and keep the record.

    Call it holding the workspace's indexing lock, as a run's planner does.
    """
    indexer, journal = Indexer(settings), _Recorded()
    try:
        run_stage(PLAN_STAGE, indexer, doc_ids, journal, retry_failed=retry_failed)
        for stage in STAGES[1:]:
            run_stage(stage, indexer, doc_ids, journal)
        indexer.close_store()
        if store_verified(journal.checks):  # the next pass need not open the store to verify it
            record_verified(settings, indexer.catalog, indexer.collection.name)
    finally:
        indexer.close()
    run = DirectRun(
        run_id=uuid.uuid4().hex,
        workspace=settings.workspace,
        trigger=trigger,
        finished_at=time.time(),
        documents=doc_ids,
        deleted=deleted,
        stages=journal.stages,
        checks=journal.checks,
    )
    run.write(unreported_runs_folder(settings))
    return run
