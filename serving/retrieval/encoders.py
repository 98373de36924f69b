"""The models a query is embedded with, loaded once per process for all that share them."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

from rag_pipeline.config import Settings
from rag_pipeline.embedding import ClipEncoder, DenseEncoder, LanguageDenseEncoders, SparseEncoder


@dataclass(eq=False)
class QueryEncoders:
    """The models a query is embedded with."""

    dense: DenseEncoder
    sparse: SparseEncoder
    clip: ClipEncoder | None  # pictures are searched by CLIP's text tower too, when configured
    # the questions of a collection that holds multilingual vectors are embedded by it too
    multilingual: DenseEncoder | None


_ENCODERS: weakref.WeakValueDictionary[tuple[str, ...], QueryEncoders] = (
    weakref.WeakValueDictionary()
)
_ENCODERS_LOCK = threading.Lock()


def query_encoders(settings: Settings) -> QueryEncoders:
    """The query models for these settings, shared while anything uses them: a server's
    workspaces with the same models hold one copy of the weights, not one each."""
    key = (
        settings.embedding.model_dump_json(),
        settings.images.model_dump_json(),
        str(settings.root),
    )
    with _ENCODERS_LOCK:
        encoders = _ENCODERS.get(key)
        if encoders is None:  # models load at first use, not under this lock
            dense = LanguageDenseEncoders(settings.embedding, settings.root)
            encoders = QueryEncoders(
                dense.dense,
                SparseEncoder(settings.embedding, settings.root),
                ClipEncoder(settings.images) if settings.images.clip_model else None,
                dense.multilingual,
            )
            _ENCODERS[key] = encoders
        return encoders
