import time
from pathlib import Path

import yaml
from dagster import AssetKey, DagsterInstance

from rag_pipeline.config import load_settings
from rag_pipeline.definitions import defs
from rag_pipeline.defs.assets import document_assets
from rag_pipeline.defs.instance import instance_config, write_instance_config
from rag_pipeline.defs.partitions import (
    DOCUMENTS,
    arrange_partition_ranges,
    remove_other_workspaces_partitions,
)
from rag_pipeline.ids import DEFAULT_WORKSPACE, is_bucket, partition_key
from rag_pipeline.indexing.stage_table import STAGES

PIPELINE = [
    "file_manifest",
    "parsed_pages",
    "chunks",
    "dense_embeddings",
    "sparse_embeddings",
    "image_embeddings",
    "qdrant_points",
]


def test_every_definition_loads() -> None:
    repository = defs.get_repository_def()
    assert {key.to_user_string() for key in repository.asset_graph.get_all_asset_keys()} == set(
        PIPELINE
    )
    assert repository.get_job("index_documents")
    assert {sensor.name for sensor in repository.sensor_defs} == {"watched_folders_sensor"}
    assert {schedule.name for schedule in repository.schedule_defs} == {"hourly_index_schedule"}


def test_the_asset_graph_follows_the_data() -> None:
    graph = defs.get_repository_def().asset_graph
    parents = {
        key: {p.to_user_string() for p in graph.get(AssetKey(key)).parent_keys} for key in PIPELINE
    }
    assert parents == {
        "file_manifest": set(),
        "parsed_pages": {"file_manifest"},
        "chunks": {"parsed_pages"},
        "dense_embeddings": {"chunks"},
        "sparse_embeddings": {"chunks"},
        "image_embeddings": {"chunks"},
        "qdrant_points": {"dense_embeddings", "sparse_embeddings", "image_embeddings"},
    }


def test_a_run_without_dagster_runs_the_stages_in_an_order_their_parents_allow() -> None:
    done: set[str] = set()
    for stage in STAGES:  # indexing/direct.py runs them in the table's order
        assert set(stage.parents) <= done, stage.name
        done.add(stage.name)
    assert done == set(PIPELINE)


def test_each_asset_is_its_stage_in_the_table() -> None:
    graph = defs.get_repository_def().asset_graph
    for stage in STAGES:
        node = graph.get(AssetKey(stage.name))
        assert {p.to_user_string() for p in node.parent_keys} == set(stage.parents)
        assert node.description == stage.description


def test_the_checked_in_dagster_yaml_is_the_default_home_configuration() -> None:
    """``dagster dev`` in the checkout reads ./dagster.yaml: it must match what the CLI writes."""
    checkout = Path(__file__).resolve().parents[2]
    written = instance_config(load_settings(checkout / "data"))
    checked_in = yaml.safe_load((checkout / "dagster.yaml").read_text())
    as_text = yaml.safe_dump(written).replace(str(checkout) + "/", "")
    assert yaml.safe_load(as_text) == checked_in


def test_postgres_storage_names_the_psycopg2_driver(home: Path) -> None:
    settings = load_settings(
        home, dagster={"postgres_url": "postgresql://rag:secret@db.local:5433/dagster"}
    )
    postgres = instance_config(settings)["storage"]["postgres"]["postgres_db"]
    assert postgres == {
        "username": "rag",
        "password": "secret",
        "hostname": "db.local",
        "port": 5433,
        "db_name": "dagster",
        "scheme": "postgresql+psycopg2",
    }


def test_the_instance_file_holding_a_password_stays_private_when_rewritten(home: Path) -> None:
    url = "postgresql://rag:secret@db.local:5433/dagster"
    written = write_instance_config(load_settings(home)) / "dagster.yaml"
    write_instance_config(load_settings(home, dagster={"postgres_url": url}))
    assert "secret" in written.read_text()
    assert written.stat().st_mode & 0o077 == 0
    assert [path.name for path in written.parent.iterdir() if path.name.endswith(".tmp")] == []


def _arrange(
    instance: DagsterInstance, workspace: str, documents: list[str], listed: list[str]
) -> list[str]:
    """The partition range of ``documents`` planned as one run."""
    ranges = arrange_partition_ranges(
        instance, workspace, documents, listed, max(len(documents), 1)
    )
    assert len(ranges) <= 1
    return ranges[0] if ranges else []


def test_a_batch_becomes_one_contiguous_partition_range() -> None:
    with DagsterInstance.ephemeral() as instance:
        _arrange(instance, DEFAULT_WORKSPACE, ["a", "b", "c", "d"], [])
        # b and d changed: not contiguous, so they move to the end together.
        ranged = _arrange(instance, DEFAULT_WORKSPACE, ["b", "d"], ["a", "b", "c", "d"])
        keys = instance.get_dynamic_partitions(DOCUMENTS)
        assert keys[-2:] == ranged and sorted(ranged) == ["b", "d"]
        # A single document is always contiguous: nothing moves.
        before = instance.get_dynamic_partitions(DOCUMENTS)
        assert _arrange(instance, DEFAULT_WORKSPACE, ["a"], before) == ["a"]
        assert instance.get_dynamic_partitions(DOCUMENTS) == before
        # Partitions of documents that exist nowhere any more are removed.
        _arrange(instance, DEFAULT_WORKSPACE, [], ["a", "b"])
        assert sorted(instance.get_dynamic_partitions(DOCUMENTS)) == ["a", "b"]


def test_a_workspace_arranges_only_its_own_partitions() -> None:
    with DagsterInstance.ephemeral() as instance:
        _arrange(instance, DEFAULT_WORKSPACE, ["a", "b"], [])
        assert _arrange(instance, "acme", ["a", "c"], []) == ["/acme/a", "/acme/c"]
        # acme's "a" is not the default workspace's "a"; neither run removes the other's.
        _arrange(instance, DEFAULT_WORKSPACE, ["b"], ["b"])
        _arrange(instance, "acme", [], ["c"])
        assert sorted(instance.get_dynamic_partitions(DOCUMENTS)) == ["/acme/c", "b"]
        # A range that other workspaces' partitions would break up is moved.
        _arrange(instance, DEFAULT_WORKSPACE, ["a"], ["a", "b"])
        ranged = _arrange(instance, DEFAULT_WORKSPACE, ["b", "a"], ["a", "b"])
        keys = instance.get_dynamic_partitions(DOCUMENTS)
        assert keys[-2:] == ranged and sorted(ranged) == ["a", "b"]
        remove_other_workspaces_partitions(instance, {DEFAULT_WORKSPACE})
        assert sorted(instance.get_dynamic_partitions(DOCUMENTS)) == ["a", "b"]


def test_with_buckets_a_batch_is_ranged_by_bucket_and_runs_are_cut_by_documents() -> None:
    documents = [f"docs/{number}.md" for number in range(40)]
    buckets = {partition_key(DEFAULT_WORKSPACE, doc_id, 8) for doc_id in documents}
    assert len(buckets) == 8 and all(is_bucket(key) for key in buckets)
    with DagsterInstance.ephemeral() as instance:
        _arrange(instance, DEFAULT_WORKSPACE, ["docs/a.md"], [])  # a document's
        ranges = arrange_partition_ranges(
            instance, DEFAULT_WORKSPACE, documents, documents, 10, buckets=8
        )
        # The document partition is gone; every bucket is in one of the ranges.
        keys = instance.get_dynamic_partitions(DOCUMENTS)
        assert sorted(keys) == sorted(buckets)
        ranged = [keys[keys.index(part[0]) : keys.index(part[-1]) + 1] for part in ranges]
        assert ranged == ranges
        assert sorted(key for part in ranged for key in part) == sorted(buckets)
        # 40 documents in runs of about 10: 4 runs of 2 buckets (5 documents a bucket).
        assert [len(part) for part in ranged] == [2, 2, 2, 2]


def test_the_embedded_store_is_written_by_one_run_at_a_time_and_a_qdrant_server_by_all(
    home: Path,
) -> None:
    from rag_pipeline.defs.assets import VECTOR_STORE_POOL

    pools = {assets.key.to_user_string(): assets.op.pool for assets in document_assets}
    assert pools == {
        name: VECTOR_STORE_POOL if name == "qdrant_points" else None for name in PIPELINE
    }
    embedded = load_settings(home, dagster={"max_concurrent_runs": 3})
    assert instance_config(embedded)["concurrency"] == {
        "runs": {"max_concurrent_runs": 3},
        "pools": {"default_limit": 1},
    }
    server = load_settings(home, store={"url": "http://qdrant.internal:6333"})
    assert instance_config(server)["concurrency"] == {"runs": {"max_concurrent_runs": 1}}


def test_a_daemon_counts_as_running_only_while_it_beats(home: Path) -> None:
    from dagster._daemon.types import DaemonHeartbeat

    from rag_pipeline.defs.instance import get_instance
    from rag_pipeline.defs.queue import QUEUE_DAEMON, daemon_running

    with get_instance(load_settings(home)) as instance:
        assert not daemon_running(instance)
        for age_seconds, running in ((600.0, False), (5.0, True)):
            instance.add_daemon_heartbeat(
                DaemonHeartbeat(time.time() - age_seconds, QUEUE_DAEMON, "test", errors=[])
            )
            assert daemon_running(instance) is running
        instance.wipe_daemon_heartbeats()
        assert not daemon_running(instance)
