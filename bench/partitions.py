"""Where one dynamic partition per document stops holding: Dagster on PostgreSQL at N documents.

For each N, a fresh scratch database (``rag_bench_partitions_<N>``, dropped at the end) holds
the instance the project writes (``defs/instance.py``: dagster-postgres, the queued run
coordinator). Timed, each with the project's own code:

- add: the first index of N documents, ``plan_index_runs`` (``arrange_partition_ranges``) from
  an empty instance: one ``add_dynamic_partitions`` call with the N keys, as the project makes it;
- arrange: ``plan_index_runs`` for 100 changed documents that are the last 100 partitions (left in
  place), 100 contiguous ones in the middle (left in place too), and 100 spread over all N
  (deleted one by one and added again at the end): median of ``--repeat``;
- plan+submit: what the sensor daemon does with the sensor's ``RunRequest`` over the spread batch
  (a gRPC code server for ``rag_pipeline.definitions``, as the daemon uses): ``get_job``,
  ``get_execution_plan``, ``create_run`` (which logs the planned events) and ``submit_run``,
  which queues the run; no daemon runs, so the run is never executed: median of ``--repeat``,
  as configured and with Dagster's ``DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS`` (one
  planned event per asset for the range rather than one per document), with the run's event
  rows counted;
- the asset page's Partitions tab for ``chunks``: a real ``dagster-webserver`` on 127.0.0.1,
  with every document's ``chunks`` partition materialized (N materialization events written in
  one batch, as a run writes them), timed over HTTP with the queries the installed UI sends
  (read from its bundle): ``PartitionHealthQuery`` (every partition key and the materialized
  ones; the first request also builds Dagster's partition status cache, hence cold and warm)
  and ``AssetPartitionStaleQuery`` for the selected (last) partition.

    python bench/partitions.py [--sizes 1000,10000,100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import dagster_webserver
import psycopg2
from dagster import AssetKey, AssetMaterialization, DagsterInstance
from dagster._core.definitions.selector import JobSubsetSelector
from dagster._core.events import (
    DagsterEvent,
    DagsterEventBatchMetadata,
    DagsterEventType,
    StepMaterializationData,
    generate_event_batch_id,
)
from dagster._core.storage.dagster_run import DagsterRun, DagsterRunStatus
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import ModuleTarget

from rag_pipeline.config import HOME_ENV, Settings, load_settings
from rag_pipeline.definitions import defs
from rag_pipeline.defs.instance import dagster_home, get_instance
from rag_pipeline.defs.runs import TRIGGER_TAG, PlannedRun, index_documents_job, plan_index_runs
from rag_pipeline.defs.sensors import watched_folders_sensor
from rag_pipeline.ids import DEFAULT_WORKSPACE, partition_key
from rag_pipeline.manifest import ManifestDiff
from rag_pipeline.processes import stop_process_group

# The test suite's database (as .ci/run creates it); its role needs CREATEDB for the scratch ones.
ADMIN_URL = os.environ.get(
    "RAG_PIPELINE_TEST_POSTGRES_URL", "postgresql://rag_ci:rag_ci@127.0.0.1:5432/rag_ci"
)
BATCH = 100
ASSET = "chunks"
LOCATION = "rag_pipeline.definitions"
UI_BUNDLE = Path(dagster_webserver.__file__).parent / "webapp" / "build"
SUBSET_EVENTS = "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"
T = TypeVar("T")


def timed(call: Callable[[], T]) -> tuple[float, T]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def median_seconds(calls: list[Callable[[], object]]) -> float:
    return statistics.median(timed(call)[0] for call in calls)


@contextmanager
def scratch_database(admin_url: str, name: str) -> Iterator[str]:
    """A new database beside ``admin_url``'s, dropped on the way out; yields its URL."""
    connection = psycopg2.connect(admin_url)
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
            cursor.execute(f'CREATE DATABASE "{name}"')
        try:
            yield urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))
        finally:
            with connection.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        connection.close()


def plan(
    instance: DagsterInstance, settings: Settings, batch: list[str], docs: list[str]
) -> PlannedRun:
    """The sensor's and CLI's planning for ``batch`` changed out of ``docs``, as one run."""
    one_run = settings.model_copy(
        update={"indexing": settings.indexing.model_copy(update={"run_documents": len(batch)})}
    )
    diff = ManifestDiff(files={}, changed=batch, catalogued=docs)
    [planned] = plan_index_runs(instance, one_run, diff)
    return planned


@dataclass
class Submitted:
    plan: float  # the job and its execution plan, from the code server
    create_submit: float  # create_run (which logs the planned events) and submit_run
    events: Counter[DagsterEventType | None]  # the run's event rows, by type


def submit_like_the_daemon(
    context: WorkspaceProcessContext,
    instance: DagsterInstance,
    request: PlannedRun,
    settings: Settings,
) -> Submitted:
    """The sensor daemon's handling of one RunRequest (``dagster._daemon.sensor``), without its
    telemetry and run-key checks."""
    started = time.perf_counter()
    request_context = context.create_request_context()
    location = request_context.get_code_location(LOCATION)
    repository = next(iter(location.get_repositories().values()))
    remote_job = location.get_job(
        JobSubsetSelector(
            location_name=location.name,
            repository_name=repository.name,
            job_name=index_documents_job.name,
            op_selection=None,
        )
    )
    run_config = request.run_config(settings)
    execution_plan = location.get_execution_plan(
        remote_job, run_config, step_keys_to_execute=None, known_state=None, instance=instance
    )
    planned = time.perf_counter()
    sensor = repository.get_sensor(watched_folders_sensor.name)
    run = instance.create_run(
        job_name=remote_job.name,
        run_id=None,
        run_config=run_config,
        resolved_op_selection=remote_job.resolved_op_selection,
        step_keys_to_execute=None,
        status=DagsterRunStatus.NOT_STARTED,
        op_selection=None,
        root_run_id=None,
        parent_run_id=None,
        tags={
            **(remote_job.run_tags or {}),
            **request.tags,
            TRIGGER_TAG: "sensor",
            **DagsterRun.tags_for_sensor(sensor),
        },
        job_snapshot=remote_job.job_snapshot,
        execution_plan_snapshot=execution_plan.execution_plan_snapshot,
        parent_job_snapshot=remote_job.parent_job_snapshot,
        remote_job_origin=remote_job.get_remote_origin(),
        job_code_origin=remote_job.get_python_origin(),
        asset_selection=None,
        asset_check_selection=None,
        asset_graph=repository.asset_graph,
    )
    instance.submit_run(run.run_id, request_context)
    finished = time.perf_counter()
    assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.QUEUED  # type: ignore[union-attr]
    events = Counter(
        record.event_log_entry.dagster_event_type
        for record in instance.get_records_for_run(run.run_id).records
    )
    return Submitted(planned - started, finished - planned, events)


def submit_runs(
    context: WorkspaceProcessContext,
    instance: DagsterInstance,
    request: PlannedRun,
    settings: Settings,
    repeat: int,
    *,
    subset_events: bool,
) -> Submitted:
    """Median timings of ``repeat`` submissions (and the last one's events), with Dagster's
    ``DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS`` (one planned event per asset for the
    whole range instead of one per partition) on or off."""
    before = os.environ.pop(SUBSET_EVENTS, None)
    if subset_events:
        os.environ[SUBSET_EVENTS] = "true"
    try:
        runs = [submit_like_the_daemon(context, instance, request, settings) for _ in range(repeat)]
    finally:
        os.environ.pop(SUBSET_EVENTS, None)
        if before is not None:
            os.environ[SUBSET_EVENTS] = before
    return Submitted(
        statistics.median(run.plan for run in runs),
        statistics.median(run.create_submit for run in runs),
        runs[-1].events,
    )


def materialize_all(instance: DagsterInstance, keys: list[str], run_config: dict[str, Any]) -> None:
    """Record a materialization of ``chunks`` for every key in one batch, as a run's step writes
    them (the project sets ``DAGSTER_EVENT_BATCH_SIZE``), in a run then marked successful."""
    job = defs.resolve_job_def(index_documents_job.name)
    run = instance.create_run_for_job(
        job, run_config=run_config, tags={TRIGGER_TAG: "bench"}, asset_selection={AssetKey(ASSET)}
    )
    batch_id = generate_event_batch_id()
    for index, key in enumerate(keys):
        event = DagsterEvent(
            event_type_value=DagsterEventType.ASSET_MATERIALIZATION.value,
            job_name=job.name,
            step_key=ASSET,
            event_specific_data=StepMaterializationData(
                AssetMaterialization(asset_key=ASSET, partition=key)
            ),
        )
        metadata = DagsterEventBatchMetadata(batch_id, index == len(keys) - 1)
        instance.report_dagster_event(event, run.run_id, batch_metadata=metadata)
    instance.report_dagster_event(
        DagsterEvent(event_type_value=DagsterEventType.RUN_SUCCESS.value, job_name=job.name),
        run.run_id,
    )


def ui_query(name: str) -> str:
    """The text of the GraphQL query ``name`` as the installed Dagster UI sends it."""
    pattern = re.compile(r'"((?:\\n|\s)*query ' + name + r'\(.*?)"([\],])', re.DOTALL)
    for script in UI_BUNDLE.glob("_next/static/chunks/**/*.js"):
        found = pattern.search(script.read_text(encoding="utf-8", errors="replace"))
        if found:
            if found.group(2) != "]":
                raise ValueError(f"{name} uses fragments; only self-contained queries are read")
            return str(json.loads(f'"{found.group(1)}"'))
    raise LookupError(f"query {name} is not in the installed Dagster UI")


@dataclass
class Webserver:
    url: str
    process: subprocess.Popen[bytes]

    def graphql(self, query: str, variables: dict[str, Any]) -> tuple[float, int]:
        """Seconds until the whole answer is read, and its size in bytes."""
        body = json.dumps({"query": query, "variables": variables}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", body, {"Content-Type": "application/json"}
        )
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=300) as response:
            answer = response.read()
        seconds = time.perf_counter() - started
        errors = json.loads(answer).get("errors")
        if errors:
            raise RuntimeError(f"GraphQL errors: {errors}")
        return seconds, len(answer)


@contextmanager
def webserver(home: Path, log: Path) -> Iterator[Webserver]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [str(Path(sys.executable).parent / "dagster-webserver"), "-m", LOCATION]
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*argv, "-h", "127.0.0.1", "-p", str(port)],
            env=os.environ | {"DAGSTER_HOME": str(home)},
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its code server too, stopped with it below
        )
    server = Webserver(f"http://127.0.0.1:{port}", process)
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(f"{server.url}/server_info", timeout=5):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"dagster-webserver did not start, see {log}") from None
                time.sleep(1)
        yield server
    finally:
        stop_process_group(process)


@dataclass
class Figures:
    documents: int
    add: float
    arrange_end: float
    arrange_middle: float
    arrange_spread: float
    submitted: Submitted
    submitted_subset: Submitted
    materialize: float
    page_cold: float
    page_warm: float
    page_mb: float
    stale: float


def measure(documents: int, admin_url: str, repeat: int, work: Path) -> Figures:
    docs = [f"notes/doc-{number:06d}.md" for number in range(documents)]
    keys = [partition_key(DEFAULT_WORKSPACE, doc) for doc in docs]
    root = work / f"home-{documents}"
    os.environ[HOME_ENV] = str(root)  # the code servers' load_settings(): this scratch home
    with scratch_database(admin_url, f"rag_bench_partitions_{documents}") as url:
        settings = load_settings(root, dagster={"postgres_url": url})
        with get_instance(settings) as instance:
            add, _ = timed(lambda: plan(instance, settings, docs, docs))
            assert instance.get_dynamic_partitions("documents") == keys
            end = median_seconds([lambda: plan(instance, settings, docs[-BATCH:], docs)] * repeat)
            middle_start = documents // 2 - BATCH // 2
            middle = docs[middle_start : middle_start + BATCH]
            in_middle = median_seconds([lambda: plan(instance, settings, middle, docs)] * repeat)
            assert instance.get_dynamic_partitions("documents") == keys  # nothing moved
            step = documents // BATCH
            spread_batches = [docs[offset::step][:BATCH] for offset in range(repeat)]
            spread_times = [
                timed(lambda b=b: plan(instance, settings, b, docs)) for b in spread_batches
            ]
            request = spread_times[-1][1]
            assert instance.get_dynamic_partitions("documents")[-BATCH:] == spread_batches[-1]
            with WorkspaceProcessContext(
                instance,
                ModuleTarget(LOCATION, None, str(Path.cwd()), LOCATION),
                code_server_log_level="WARNING",
            ) as context:
                submitted = submit_runs(
                    context, instance, request, settings, repeat, subset_events=False
                )
                submitted_subset = submit_runs(
                    context, instance, request, settings, repeat, subset_events=True
                )
            materialize, _ = timed(
                lambda: materialize_all(instance, keys, request.run_config(settings))
            )
        health, stale = ui_query("PartitionHealthQuery"), ui_query("AssetPartitionStaleQuery")
        asset = {"assetKey": {"path": [ASSET]}}
        with webserver(dagster_home(settings), work / f"webserver-{documents}.log") as server:
            server.graphql(
                'query { assetNodeOrError(assetKey: {path: ["chunks"]}) { __typename } }', {}
            )
            cold, size = server.graphql(health, asset)
            warm = statistics.median(server.graphql(health, asset)[0] for _ in range(repeat))
            selected = asset | {"partitionKey": keys[-1]}
            stale_seconds = statistics.median(
                server.graphql(stale, selected)[0] for _ in range(repeat)
            )
    return Figures(
        documents=documents,
        add=add,
        arrange_end=end,
        arrange_middle=in_middle,
        arrange_spread=statistics.median(seconds for seconds, _ in spread_times),
        submitted=submitted,
        submitted_subset=submitted_subset,
        materialize=materialize,
        page_cold=cold,
        page_warm=warm,
        page_mb=size / 2**20,
        stale=stale_seconds,
    )


def print_details(f: Figures) -> None:
    for label, submitted in (("", f.submitted), (f" with {SUBSET_EVENTS}", f.submitted_subset)):
        events = ", ".join(
            f"{count} {kind.value if kind else 'other'}"
            for kind, count in sorted(submitted.events.items(), key=lambda item: -item[1])
        )
        print(
            f"N={f.documents:,}{label}: plan {submitted.plan:.3f} s, create+submit "
            f"{submitted.create_submit:.3f} s; the queued run's event rows: {events}"
        )
    print(
        f"N={f.documents:,}: {f.documents:,} chunks materializations written in "
        f"{f.materialize:.2f} s (one batch); AssetPartitionStaleQuery {f.stale:.3f} s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated N")
    parser.add_argument("--repeat", type=int, default=3, help="timings per median")
    parser.add_argument(
        "--postgres", default=ADMIN_URL, help="a database the role may create others beside"
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"Dagster on PostgreSQL, batch of {BATCH} documents, medians of {args.repeat}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="rag-bench-partitions-") as work:
        for documents in sizes:
            figures = measure(documents, args.postgres, args.repeat, Path(work))
            rows.append(figures)
            print_details(figures)
    print()
    print(
        "| N | add s | arrange end / middle / spread s | plan+submit s (subset events) "
        "| PartitionHealthQuery cold / warm s (MB) |"
    )
    print("| --- | --- | --- | --- | --- |")
    for f in rows:
        default, subset = f.submitted, f.submitted_subset
        print(
            f"| {f.documents:,} | {f.add:.2f} | {f.arrange_end:.3f} / {f.arrange_middle:.3f} / "
            f"{f.arrange_spread:.3f} | {default.plan + default.create_submit:.2f} "
            f"({subset.plan + subset.create_submit:.2f}) | "
            f"{f.page_cold:.2f} / {f.page_warm:.2f} ({f.page_mb:.2f}) |"
        )


if __name__ == "__main__":
    main()
