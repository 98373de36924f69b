"""Named points where an indexing process can be made to die, for the fault tests.

``RAG_PIPELINE_FAULT=<point>`` kills the process with SIGKILL (as the kernel's OOM killer or a
power cut would end it: no cleanup, no ``finally``) when it reaches ``<point>``;
``<point>:<n>`` when it reaches it the n-th time. With ``RAG_PIPELINE_FAULT_ONCE=<file>`` too,
only while that file exists, and the process that dies removes it first: one kill among all
the processes that share the environment (the runs a Dagster daemon launches). Unset, a fault
point costs a dictionary lookup.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "RAG_PIPELINE_FAULT"
FAULT_ONCE_ENV = "RAG_PIPELINE_FAULT_ONCE"

_reached: dict[str, int] = {}


def fault_point(name: str) -> None:
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return
    point, _, nth = wanted.partition(":")
    if point != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] < int(nth or 1):
        return
    if once := os.environ.get(FAULT_ONCE_ENV):
        try:
            os.remove(once)
        except FileNotFoundError:
            return
    os.kill(os.getpid(), signal.SIGKILL)
