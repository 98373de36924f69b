"""Refused requests in the log: one line each (who, what, why), no traceback; a caller refused
again and again is logged a few times a minute, the rest counted and their number said."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger("rag_pipeline.serving.access")

# Of a name a request chose (a workspace's, an upload's), what a refusal (and so the log)
# repeats: a caller cannot write a long line into the log.
_NAMED_CHARS = 64


def as_refused(named: str) -> str:
    """``named`` as a refusal repeats it: cut, with an ellipsis, past ``_NAMED_CHARS``."""
    return named if len(named) <= _NAMED_CHARS else named[: _NAMED_CHARS - 1] + "…"


class RefusalLog:
    """Logs at most ``most`` refusals of one caller per ``window`` seconds; the first refusal
    after a window in which some went unlogged says how many did."""

    _MOST_CALLERS = 10_000  # beyond this, callers whose window has ended are forgotten

    def __init__(
        self, most: int = 5, window: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.most, self.window, self._clock = most, window, clock
        self._lock = threading.Lock()
        self._callers: dict[str, tuple[float, int]] = {}  # caller -> (window's start, refusals)

    def refused(self, caller: str, what: str, why: str) -> None:
        now = self._clock()
        with self._lock:
            if len(self._callers) > self._MOST_CALLERS:
                self._callers = {c: w for c, w in self._callers.items() if now - w[0] < self.window}
            start, count = self._callers.get(caller, (now, 0))
            if now - start >= self.window:
                unlogged = count - self.most
                if unlogged > 0:
                    logger.warning(
                        "refused %s %d more times in %.0f s (not logged)",
                        caller,
                        unlogged,
                        self.window,
                    )
                start, count = now, 0
            count += 1
            self._callers[caller] = (start, count)
        if count <= self.most:
            more = (
                " (further refusals this minute counted, not logged)" if count == self.most else ""
            )
            logger.warning("refused %s: %s: %s%s", caller, what, why, more)
