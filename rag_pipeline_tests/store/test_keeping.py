"""The embedded store kept open between a long-lived process's uses, and handed over when
another process asks for it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rag_pipeline.store.edge import EdgeStore
from rag_pipeline.store.keeping import StoreKeeper, keeping_open
from rag_pipeline_tests.store.test_stores import DIM, _point


def _count_in_another_process(path: Path, *, add: int = 0) -> int:
    """What a process that opens the shard at ``path`` (waiting for it) counts, after adding
    ``add`` points of document "b"."""
    code = (
        "from pathlib import Path\n"
        "from rag_pipeline.store.edge import EdgeStore\n"
        "from rag_pipeline_tests.store.test_stores import _point\n"
        f"store = EdgeStore(Path({str(path)!r}), wait_seconds=60)\n"
        f"store.upsert([_point('b', 'v1', i, 1000 + i) for i in range({add})])\n"
        "print(store.count())\n"
        "store.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return int(done.stdout)


def _kept_with_points(keeper: StoreKeeper, path: Path) -> EdgeStore:
    """The shard at ``path`` opened through ``keeper`` with 20 points of document "a" written,
    and closed: kept open."""
    store = keeper.open(path, wait_seconds=0)
    store.ensure_collection(DIM)
    store.upsert([_point("a", "v1", i, i + 1) for i in range(20)])
    store.close()
    return store


def test_a_store_closed_while_kept_is_the_same_open_shard_at_the_next_open(tmp_path: Path) -> None:
    path = tmp_path / "edge"
    with keeping_open() as keeper:
        first = _kept_with_points(keeper, path)
        again = keeper.open(path, wait_seconds=0)
        assert again is first and again.count() == 20
        again.close()
    EdgeStore(path).close()  # let go when the keeping ended


def test_another_process_asking_for_a_kept_store_gets_it_with_what_was_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "edge"
    with keeping_open() as keeper:
        first = _kept_with_points(keeper, path)  # what it wrote on disk
        assert _count_in_another_process(path, add=5) == 25
        # Let go for that process: opened afresh here, with what the other one wrote.
        again = keeper.open(path, wait_seconds=10)
        assert again is not first and again.count() == 25
        again.close()


def test_a_replica_copies_a_store_kept_open_elsewhere(tmp_path: Path) -> None:
    source = tmp_path / "edge"
    with keeping_open() as keeper:
        _kept_with_points(keeper, source)
        replica = EdgeStore(tmp_path / "replica")
        assert replica.replace_with_copy_of(source)  # not written point by point instead
        assert replica.count() == 20
        replica.close()


def test_a_kept_store_that_is_dropped_is_let_go(tmp_path: Path) -> None:
    path = tmp_path / "edge"
    with keeping_open() as keeper:
        kept = keeper.open(path, wait_seconds=0)
        kept.ensure_collection(DIM)
        kept.drop()
        kept.close()
        opened = EdgeStore(path)  # not refused: the lock went with the close
        assert opened.count() == 0
        opened.close()


def test_what_a_kept_store_wrote_survives_its_process_killed_while_it_is_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "edge"
    code = (
        "import os, signal\n"
        "from pathlib import Path\n"
        "from rag_pipeline.store.keeping import keeping_open\n"
        "from rag_pipeline_tests.store.test_keeping import _kept_with_points\n"
        "with keeping_open() as keeper:\n"
        f"    _kept_with_points(keeper, Path({str(path)!r}))\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", code], timeout=120)
    assert killed.returncode == -9
    reopened = EdgeStore(path, wait_seconds=10)
    assert reopened.count() == 20
    assert len(reopened.owners_of(reopened.point_ids())) == 20  # every payload decodes
    reopened.close()
