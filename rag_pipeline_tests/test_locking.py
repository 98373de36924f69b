import threading
from pathlib import Path

from rag_pipeline.locking import LockTimeout, index_lock


def _taken_in_another_thread(home: Path) -> bool:
    """Whether another thread of this process gets the home's index lock within 0.3 s."""
    taken: list[bool] = []

    def take() -> None:
        try:
            with index_lock(home, timeout_seconds=0.3):
                taken.append(True)
        except LockTimeout:
            taken.append(False)

    thread = threading.Thread(target=take)
    thread.start()
    thread.join()
    return taken[0]


def test_the_index_lock_is_reentrant_in_one_thread_and_exclusive_between_threads(
    tmp_path: Path,
) -> None:
    with index_lock(tmp_path):  # planning
        with index_lock(tmp_path):  # the run it then executes in-process
            assert not _taken_in_another_thread(tmp_path)
        assert not _taken_in_another_thread(tmp_path)  # the outer holder still holds it
    assert _taken_in_another_thread(tmp_path)
