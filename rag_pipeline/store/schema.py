"""The vector collection's contract: vector names, payload fields and how a chunk becomes a point.

Every backend builds its collection from these names, and everything that reads hits (CLI,
serving, evaluation) reads these payload fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rag_pipeline import ids

DENSE_VECTOR = "text_dense"  # cosine
# cosine; the multilingual model's vectors of text the dense model does not understand (declared
# when embedding.multilingual_model applies): a text chunk has this or DENSE_VECTOR, not both
MULTILINGUAL_VECTOR = "text_dense_multilingual"
SPARSE_VECTOR = "text_sparse"  # IDF modifier: Qdrant turns term weights into BM25 scores
# IDF modifier; the BM25 vector of the whole page a text chunk starts on, which every chunk
# starting there carries (declared when embedding.page_keywords applies)
PAGE_SPARSE_VECTOR = "page_sparse"
IMAGE_VECTOR = "image"  # cosine; CLIP vectors of pictures (declared when images.clip_model is set)

# Payload fields with a keyword index, and with a float index (filters on them are fast).
INDEXED_FIELDS = ("doc_id", "modality", "lang", "version", "file_type")
RANGE_FIELDS = ("mtime",)

SECTION_SEPARATOR = " > "  # between the headings of the payload's section

MODALITY_TEXT = "text"
MODALITY_IMAGE = "image"  # a picture: its CLIP vector, and its caption's text vectors if any


@dataclass(frozen=True, slots=True)
class VectorLayout:
    """What a collection's vectors are: the models that make them.

    A collection keeps its layout for life: other models are another collection, built beside
    the live one (see ``catalog.CollectionRecord``), so the live one never mixes vector spaces.
    """

    dense_model: str
    sparse_model: str
    image_model: str | None  # None: pictures have no vectors
    multilingual_model: str | None = None  # None: the dense model embeds every text
    page_sparse_model: str | None = None  # None: pages have no keyword vectors

    def collection_name(self, prefix: str) -> str:
        """``<prefix>-<hash of the layout>``: a valid Qdrant collection and folder name."""
        return f"{prefix}-{ids.fingerprint(self.as_dict())[:8]}"

    def as_dict(self) -> dict[str, str | None]:
        # Without multilingual or page vectors a layout is named as before they existed: such
        # collections keep their names.
        layout = asdict(self)
        for later in ("multilingual_model", "page_sparse_model"):
            if layout[later] is None:
                del layout[later]
        return layout


@dataclass(frozen=True, slots=True)
class VectorSizes:
    """The sizes of a collection's vectors, as the configured models make them."""

    dense: int | None  # None: no collection yet
    image: int | None  # None: pictures have no vectors
    multilingual: int | None  # None: no multilingual vectors

    def __str__(self) -> str:
        return (
            f"{self.dense}-d text, {self.image or 'no'} image and "
            f"{self.multilingual or 'no'} multilingual vectors"
        )


def payload_pages(payload: Mapping[str, Any]) -> list[int]:
    """The 1-based pages a point's chunk lies on, in its reading order: those of its boxes,
    else its ``page`` to ``page_end``; none for a chunk without a page."""
    pages = [box["page"] for box in payload.get("bboxes") or () if box.get("page") is not None]
    if not pages:
        first = payload.get("page")
        if first is None:
            return []
        last = payload.get("page_end")
        pages = list(range(first, (last if last is not None else first) + 1))
    return list(dict.fromkeys(pages))


def is_picture(chunk: dict[str, Any]) -> bool:
    """Whether a catalog chunk row is a picture (rows written before pictures existed are not)."""
    return chunk.get("modality") == MODALITY_IMAGE


@dataclass(slots=True)
class IndexPoint:
    point_id: str
    payload: dict[str, Any]
    dense: np.ndarray | None = None
    sparse: tuple[np.ndarray, np.ndarray] | None = None  # (indices, values)
    image: np.ndarray | None = None
    multilingual: np.ndarray | None = None
    page_sparse: tuple[np.ndarray, np.ndarray] | None = None  # (indices, values) of its page


@dataclass(slots=True)
class Hit:
    point_id: str
    score: float
    payload: dict[str, Any]


@dataclass(slots=True)
class NearestHits:
    """The nearest points by each vector, best first, as one search returns them."""

    dense: list[Hit]
    sparse: list[Hit]
    image: list[Hit] = field(default_factory=list)  # by a CLIP query vector, when one was given
    # by the multilingual model's query vector, when one was given
    multilingual: list[Hit] = field(default_factory=list)
    # the other rankings' points scored by the query's keywords against their whole pages
    # (PAGE_SPARSE_VECTOR; ``SearchableStore.page_keyword_scores``), when the collection has them
    pages: list[Hit] = field(default_factory=list)
    # the passages of the parts of documents a question names (``serving.retrieval.named_parts``)
    named: list[Hit] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class QueryFilter:
    """Restrictions on a search; every field left empty means no restriction."""

    doc_ids: tuple[str, ...] = ()
    pages: tuple[int, ...] = ()  # where a passage starts, 1-based
    langs: tuple[str, ...] = ()
    modalities: tuple[str, ...] = ()
    file_types: tuple[str, ...] = ()
    modified_after: float | None = None  # file modification time, seconds since the epoch
    modified_before: float | None = None
    # What operators took out of search (``rag-pipeline archive|reject``): never returned.
    offline_doc_ids: tuple[str, ...] = ()
    offline_point_ids: tuple[str, ...] = ()

    def conditions(self) -> dict[str, tuple[str, ...]]:
        """payload field → accepted values, for the fields that restrict."""
        wanted = {
            "doc_id": self.doc_ids,
            "page": self.pages,
            "lang": self.langs,
            "modality": self.modalities,
            "file_type": self.file_types,
        }
        return {key: values for key, values in wanted.items() if values}

    def mtime_range(self) -> tuple[float | None, float | None] | None:
        """(from, to) on the ``mtime`` payload field, or None when dates do not restrict."""
        if self.modified_after is None and self.modified_before is None:
            return None
        return self.modified_after, self.modified_before

    def is_empty(self) -> bool:
        return (
            not self.conditions()
            and self.mtime_range() is None
            and not self.offline_doc_ids
            and not self.offline_point_ids
        )

    def describe(self) -> dict[str, Any]:
        """The restrictions in force, for traces and for telling the user what was searched."""
        described: dict[str, Any] = dict(self.conditions())
        if self.modified_after is not None:
            described["modified_after"] = self.modified_after
        if self.modified_before is not None:
            described["modified_before"] = self.modified_before
        if self.offline_doc_ids or self.offline_point_ids:
            described["offline"] = {
                "documents": len(self.offline_doc_ids),
                "chunks": len(self.offline_point_ids),
            }
        return described


@dataclass(frozen=True, slots=True)
class DocumentFacts:
    """What every point of a document repeats in its payload, for citations and filters."""

    doc_id: str
    file_path: str
    file_type: str
    title: str
    version: str
    sha256: str
    mtime: float


def chunk_point(
    chunk: dict[str, Any],
    document: DocumentFacts,
    dense: np.ndarray | None,
    sparse: tuple[np.ndarray, np.ndarray] | None,
    image: np.ndarray | None = None,
    *,
    multilingual: np.ndarray | None = None,
    page_sparse: tuple[np.ndarray, np.ndarray] | None = None,
) -> IndexPoint:
    """A catalog chunk row (see ``chunking.chunk_as_record``) as a point.

    A text chunk has both text vectors (its dense one by the dense or the multilingual model),
    and its page's keyword vector when pages have them; a picture has its CLIP vector and, when
    it has a caption, the caption's text vectors.
    """
    bboxes = chunk["bboxes"]
    first = bboxes[0] if bboxes else None
    return IndexPoint(
        point_id=ids.point_id(chunk["chunk_id"]),
        dense=dense,
        sparse=sparse,
        image=image,
        multilingual=multilingual,
        page_sparse=page_sparse,
        payload={
            "doc_id": document.doc_id,
            "chunk_id": chunk["chunk_id"],
            "chunk_index": chunk["chunk_index"],
            "file_path": document.file_path,
            "file_type": document.file_type,
            "title": document.title,
            "section": SECTION_SEPARATOR.join(chunk["section"]),
            "page": chunk["page_start"],
            "page_end": chunk["page_end"],
            "bbox": [first["x0"], first["y0"], first["x1"], first["y1"]] if first else None,
            "bboxes": bboxes,
            "lang": chunk["lang"],
            "modality": chunk.get("modality") or MODALITY_TEXT,
            "version": document.version,
            "sha256": document.sha256,
            "mtime": document.mtime,
            "text": chunk["text"],
            "token_count": chunk["token_count"],
            **(
                {
                    "image_file": chunk["image_file"],
                    "phash": chunk["phash"],
                    "caption": chunk["text"],
                }
                if is_picture(chunk)
                else {}
            ),
        },
    )
