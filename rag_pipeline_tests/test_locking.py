import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rag_pipeline.config import load_settings
from rag_pipeline.locking import (
    DatabaseLocks,
    HomeLocks,
    LockPlace,
    LockTimeout,
    index_lock,
    lock_place,
    run_lock_state,
)


@pytest.fixture(params=["home", "postgres"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> LockPlace:
    if request.param == "home":
        return HomeLocks(tmp_path)
    url = request.getfixturevalue("postgres_url")
    return lock_place(load_settings(tmp_path, catalog={"url": url}))


def _taken_in_another_thread(place: LockPlace) -> bool:
    """Whether another thread of this process gets the index lock within 0.3 s."""
    taken: list[bool] = []

    def take() -> None:
        try:
            with index_lock(place, timeout_seconds=0.3):
                taken.append(True)
        except LockTimeout:
            taken.append(False)

    thread = threading.Thread(target=take)
    thread.start()
    thread.join()
    return taken[0]


def test_the_index_lock_is_reentrant_in_one_thread_and_exclusive_between_threads(
    place: LockPlace,
) -> None:
    with index_lock(place):  # planning
        with index_lock(place):  # the run it then executes in-process
            assert not _taken_in_another_thread(place)
        assert not _taken_in_another_thread(place)  # the outer holder still holds it
    assert _taken_in_another_thread(place)


Holder = Callable[[Path, str], subprocess.Popen[str]]
_HOLD = """
import sys, time
from rag_pipeline.config import load_settings
from rag_pipeline.locking import index_lock, lock_place, run_lock
place = lock_place(load_settings(sys.argv[1], catalog={"url": sys.argv[2]}))
with index_lock(place) if sys.argv[3] == "index" else run_lock(place, sys.argv[3]):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def holder(postgres_url: str) -> Iterator[Holder]:
    """Starts a process (another machine's, with a home of its own) that takes a lock of the
    installation whose catalog is at ``postgres_url``, and kills it at the end."""
    started: list[subprocess.Popen[str]] = []

    def hold(home: Path, name: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-c", _HOLD, str(home), postgres_url, name],
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        assert process.stdout is not None and process.stdout.readline() == "held\n"
        return process

    yield hold
    for process in started:
        process.kill()
        process.wait()


def test_with_the_catalog_on_postgresql_machines_with_their_own_homes_share_one_index_lock(
    tmp_path: Path, postgres_url: str, holder: Holder
) -> None:
    elsewhere = holder(tmp_path / "machine-a" / "home", "index")
    here = lock_place(load_settings(tmp_path / "machine-b" / "home", catalog={"url": postgres_url}))
    with pytest.raises(LockTimeout), index_lock(here, timeout_seconds=0.3):
        pass
    elsewhere.send_signal(signal.SIGKILL)  # no chance to let go: its connection ends with it
    elsewhere.wait()
    with index_lock(here, timeout_seconds=5):
        pass


def test_a_run_lock_in_postgresql_tells_a_living_run_elsewhere_from_a_killed_one(
    tmp_path: Path, postgres_url: str, holder: Holder
) -> None:
    run = holder(tmp_path / "worker" / "home", "run-1")
    here = lock_place(load_settings(tmp_path / "planner" / "home", catalog={"url": postgres_url}))
    assert isinstance(here, DatabaseLocks)
    living = run_lock_state(here, "run-1")
    assert living is not None and living.holding and living.pid == run.pid
    assert time.time() - living.changed < 60
    run.send_signal(signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 10  # PostgreSQL ends the session once it sees the socket close
    while (dead := run_lock_state(here, "run-1")) and dead.holding and time.monotonic() < deadline:
        time.sleep(0.1)
    assert dead is not None and not dead.holding and dead.pid == run.pid
    assert run_lock_state(here, "never-ran") is None
