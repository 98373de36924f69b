"""Child processes that go with the process that started them: each in a session of its own, so
that it and what it starts are stopped together (:func:`stop_process_group`); on Linux also
stopped (SIGTERM) when their parent dies, even by SIGKILL."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any


def start_process_group(
    command: Sequence[str], environment: Mapping[str, str], log: IO[Any] | None = None
) -> subprocess.Popen[bytes]:
    """``command`` in a session of its own; its output to ``log`` (else this process's)."""
    return subprocess.Popen(
        list(command),
        env=dict(environment),
        stdout=log,
        stderr=subprocess.STDOUT if log is not None else None,
        start_new_session=True,
        preexec_fn=_terminated_with_parent(os.getpid()) if sys.platform == "linux" else None,
    )


def _terminated_with_parent(parent: int) -> Callable[[], None]:
    """What a child runs before its program: ask the kernel for SIGTERM when its parent dies.
    The C function is looked up here, before the fork: the child only calls it."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    set_parent_death_signal = 1  # PR_SET_PDEATHSIG, <linux/prctl.h>

    def arrange() -> None:
        prctl(set_parent_death_signal, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the request was in place
            os.kill(os.getpid(), signal.SIGTERM)

    return arrange


def stop_process_group(process: subprocess.Popen[bytes], timeout_seconds: float = 60) -> None:
    """Stop a process started in a session of its own, and what it started: SIGTERM to them
    all, and once the leader has ended (or ``timeout_seconds`` passed), SIGKILL to what is left
    of the group: its leader ending does not end the rest (`dagster dev` may return while its
    daemon is still shutting down), which had as long as the leader to end by themselves."""
    os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=timeout_seconds)
    with contextlib.suppress(ProcessLookupError):  # the whole group ended
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
