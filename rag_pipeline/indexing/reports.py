"""What the stages report: per document, the metadata the UI shows (gathered while rows and
slices stream by, so that it stays small), and progress of the long stages in the log."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rag_pipeline.store.schema import is_picture

Metadata = dict[str, Any]

logger = logging.getLogger(__name__)

_PREVIEW_CHARS = 300


def _progress(what: str, unit: str, every_seconds: float = 5.0) -> Callable[[int, int], None]:
    """A progress callback for long stages: logs every few seconds, and at the end if it did."""
    last = time.monotonic()
    logged = False

    def report(done: int, total: int) -> None:
        nonlocal last, logged
        if time.monotonic() - last >= every_seconds or (logged and done == total):
            last, logged = time.monotonic(), True
            logger.info("%s: %d/%d %s", what, done, total, unit)

    return report


@dataclass(slots=True)
class _ChunkSummary:
    """What the chunks asset reports of a document, gathered while its rows stream by."""

    chunks: int = 0
    pictures: int = 0
    tokens: int = 0
    preview: str = ""

    def counted(self, rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            if not self.chunks:
                self.preview = row["text"][:_PREVIEW_CHARS]
            self.chunks += 1
            self.pictures += is_picture(row)
            self.tokens += row["token_count"]
            yield row

    def report(self, seconds: float) -> Metadata:
        return {
            "chunks": self.chunks,
            "pictures": self.pictures,
            "tokens": self.tokens,
            "seconds": round(seconds, 3),
            "preview": self.preview,
        }


@dataclass(slots=True)
class _EmbeddingTally:
    """An embedding asset's metadata, counted a slice of inputs at a time (so that it stays
    small however many chunks a document has): per document its inputs, how many of them this
    run embedded and how many it found in the cache; for the batch ("*") the texts or pictures
    embedded, the inputs found in the cache, and the seconds."""

    model_id: str
    unit: str
    started: float = field(default_factory=time.perf_counter)
    counts: dict[str, list[int]] = field(default_factory=dict)  # doc id → [embedded, cached]
    embedded: int = 0

    def add(self, owners: Iterable[tuple[str, str]], embedded: set[str]) -> None:
        """``owners``: (doc id, cache key) of each input of a slice; ``embedded``: the keys of
        the slice the model computed now (the others came from the cache)."""
        self.embedded += len(embedded)
        for doc_id, key in owners:
            self.counts.setdefault(doc_id, [0, 0])[key not in embedded] += 1

    def report(self) -> dict[str, Metadata]:
        report: dict[str, Metadata] = {
            doc_id: {
                "model": self.model_id,
                self.unit: embedded + cached,
                "embedded": embedded,
                "cached": cached,
            }
            for doc_id, (embedded, cached) in self.counts.items()
        }
        if self.counts:
            report["*"] = {
                "embedded": self.embedded,
                "cached": sum(cached for _, cached in self.counts.values()),
                "seconds": round(time.perf_counter() - self.started, 3),
            }
        return report
