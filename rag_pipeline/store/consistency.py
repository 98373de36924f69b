"""A store's points against the catalog's chunks, exactly: for ``check``, the passes' repair of
a store that lost points, and what the page's replica holds when it starts.

Point ids are derived from chunk ids (``ids.point_id``), so the store is read by id alone, a few
times quicker than by owner; only the points no indexed chunk names are read with their payload,
to tell whose they are. The catalog is read as two columns of each document and, document by
document, the keys of its chunks.

Reading every point costs the engine about the same per point whichever way it is read (scroll,
retrieve by id), a minute at a million documents; its exact count costs almost nothing. So a
census may be taken by count: when the store holds exactly as many points as the catalog's
indexed versions have chunks and no document awaits repair, each document is taken to hold its
chunks' points. A store that lost some points and gained as many others would pass it; the
census point by point names them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter

from rag_pipeline import ids
from rag_pipeline.catalog import Catalog
from rag_pipeline.store import VectorStore


@dataclass(frozen=True, slots=True)
class PointCensus:
    indexed: dict[str, tuple[str, int]]  # doc id → (indexed version, chunks), from the catalog
    found: Counter[str]  # doc id → its points that its indexed version's chunks name
    others: Counter[tuple[str, str]]  # (doc id, version) → points no indexed chunk names
    stray_chunks: list[str]  # indexed documents with catalog chunks not of their version
    counted: bool  # taken by the store's count, no point read (see take_census)

    def missing(self) -> dict[str, str]:
        """Indexed documents short of points, or with too many, → what is wrong."""
        extra: Counter[str] = Counter()
        for (doc_id, version), count in self.others.items():
            if self.indexed.get(doc_id, ("", 0))[0] == version:
                extra[doc_id] += count
        return {
            doc_id: f"{chunks} chunks but {points} points"
            for doc_id, (_, chunks) in self.indexed.items()
            if (points := self.found[doc_id] + extra[doc_id]) != chunks
        }

    def orphans(self) -> dict[str, str]:
        """Documents with points of a version that is not their indexed one → which."""
        orphans: dict[str, str] = {}
        for doc_id, version in self.others:
            indexed = self.indexed.get(doc_id)
            if indexed is None or indexed[0] != version:
                orphans[doc_id] = (
                    f"points of version {version} but the catalog has "
                    f"{indexed[0] if indexed else 'no indexed version'}"
                )
        return orphans


def take_census(
    catalog: Catalog, store: VectorStore, collection: str, *, by_count: bool = False
) -> PointCensus:
    """Every point of ``store`` against every chunk of ``collection`` in the catalog; with
    ``by_count``, the store's count instead of its points when that count agrees (see above).
    The catalog's chunks are read either way."""
    indexed = catalog.indexed_chunks(collection)
    counted = (
        by_count
        and store.count() == sum(chunks for _, chunks in indexed.values())
        and not catalog.repairs(collection)
    )
    unnamed = set() if counted else store.point_ids()
    found = Counter(
        {doc_id: chunks for doc_id, (_, chunks) in indexed.items() if chunks} if counted else {}
    )
    stray_chunks: list[str] = []
    read: set[str] = set()
    for doc_id, rows in groupby(catalog.chunk_keys(collection), key=itemgetter(0)):
        read.add(doc_id)
        version, chunks = indexed.get(doc_id, (None, 0))
        versions: Counter[str] = Counter()
        for _, chunk_version, chunk_id in rows:
            versions[chunk_version] += 1
            if (
                not counted
                and chunk_version == version
                and (point := ids.point_id(chunk_id)) in unnamed
            ):
                unnamed.discard(point)
                found[doc_id] += 1
        if version is not None and versions != Counter({version: chunks}):
            stray_chunks.append(doc_id)
    stray_chunks += [
        doc_id for doc_id, (_, chunks) in indexed.items() if chunks and doc_id not in read
    ]
    others = Counter(store.owners_of(unnamed).values())
    return PointCensus(indexed, found, others, stray_chunks, counted)
