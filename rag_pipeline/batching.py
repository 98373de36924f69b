"""Values in lists of a bounded size or weight (like Python 3.12's itertools.batched)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def batched(
    values: Iterable[T], size: int, weight: Callable[[T], int] | None = None
) -> Iterator[list[T]]:
    """Lists of at most ``size`` values, or of values whose ``weight`` sums to at most ``size``
    (a single heavier value makes a list of its own)."""
    batch: list[T] = []
    total = 0
    for value in values:
        cost = weight(value) if weight else 1
        if batch and total + cost > size:
            yield batch
            batch, total = [], 0
        batch.append(value)
        total += cost
    if batch:
        yield batch
