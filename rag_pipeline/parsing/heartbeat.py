"""A long parse (OCR, page after page) says it is still making progress, so that the parser
time limit stops parsers that hang, not long documents that advance."""

from __future__ import annotations

from collections.abc import Callable

_listener: Callable[[], None] | None = None


def listen(listener: Callable[[], None] | None) -> None:
    """Call ``listener`` on every beat (a parser worker sends it to the pool); None: nobody."""
    global _listener
    _listener = listener


def beat() -> None:
    """A unit of work is done (a page read by OCR)."""
    if _listener is not None:
        _listener()
