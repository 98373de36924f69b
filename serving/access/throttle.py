"""Wrong passwords counted per user name and per client address, and the wait they bring."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable


class Throttled(Exception):
    """Too many wrong passwords: no password is checked for ``seconds`` more."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"too many wrong passwords: try again in {seconds:.0f} s")
        self.seconds = seconds


class Throttle:
    """Wrong passwords counted per key (a user name, a client address): after ``free`` in a
    row, each further try waits ``delay`` seconds, doubling with every further wrong one, up to
    ``cap``. A right password clears the keys it is told of (its user name's: not its address's,
    which an insider's right password would otherwise clear for a guesser of other names); a
    key with no wrong password for ``forget_after`` seconds after its wait ended starts again
    (an office behind one address does not pile up its typos for ever)."""

    _MOST_KEYS = 100_000  # beyond this, keys quiet for longer than the cap are forgotten

    def __init__(
        self,
        free: int,
        delay: float,
        cap: float,
        clock: Callable[[], float] = time.monotonic,
        forget_after: float = 3600.0,
    ) -> None:
        self.free, self.delay, self.cap, self._clock = free, delay, cap, clock
        self.forget_after = forget_after
        self._lock = threading.Lock()
        self._wrong: dict[str, tuple[int, float]] = {}  # key -> (wrong in a row, allowed from)
        self._pruned = float("-inf")

    def wait(self, keys: Iterable[str]) -> float:
        """Seconds until a try with ``keys`` is allowed (0: now)."""
        now = self._clock()
        with self._lock:
            return max([0.0, *(self._wrong.get(key, (0, now))[1] - now for key in keys)])

    def failed(self, keys: Iterable[str]) -> float:
        """Count a wrong password for ``keys``; the wait it brings (0 while tries are free)."""
        now = self._clock()
        waits = []
        with self._lock:
            if len(self._wrong) > self._MOST_KEYS and now - self._pruned > self.cap:
                # A key still being guessed (allowed again within a cap) keeps its count.
                self._wrong = {k: v for k, v in self._wrong.items() if v[1] + self.cap > now}
                self._pruned = now
            for key in keys:
                before, allowed_from = self._wrong.get(key, (0, now))
                count = (0 if now - allowed_from > self.forget_after else before) + 1
                # The free tries' last brings the first wait; 2**64 × any delay is past any cap.
                beyond = min(count - self.free + 1, 64)
                wait = 0.0 if beyond <= 0 else min(self.cap, self.delay * 2 ** (beyond - 1))
                self._wrong[key] = (count, now + wait)
                waits.append(wait)
        return max(waits, default=0.0)

    def succeeded(self, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                self._wrong.pop(key, None)
