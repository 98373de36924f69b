"""Child processes stopped with what they started."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from rag_pipeline.processes import start_process_group, stop_process_group

# A leader that ends at SIGTERM at once, and its child that ignores it: as `dagster dev`
# returning while its daemon still shuts down.
_LEADER = """
import signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open(sys.argv[1], 'w').close(); time.sleep(600)", sys.argv[1]])
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print(child.pid, flush=True)
time.sleep(600)
"""


def test_stopping_a_group_ends_what_its_leader_leaves_behind(tmp_path: Path) -> None:
    started = tmp_path / "child-started"
    with (tmp_path / "leader.out").open("wb") as out:
        leader = start_process_group([sys.executable, "-c", _LEADER, str(started)], os.environ, out)
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists()
        stop_process_group(leader, timeout_seconds=30)
    child = int((tmp_path / "leader.out").read_text().split()[0])
    deadline = time.monotonic() + 10  # the kill delivered; the child's end seen by the kernel
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(child)


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return status.rpartition(")")[2].split()[0] != "Z"
