"""Every identifier the pipeline derives, in one place.

A document is named by its watched folder and its path inside it; a version by its content and
the pipeline settings that shaped its chunks; a chunk by document, version and position; a
Qdrant point by its chunk. All are deterministic, so a re-run after a crash writes the same ids
and converges instead of duplicating.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from typing import Any

# Fixed forever: changing it would change every point id.
POINT_NAMESPACE = uuid.UUID("6f1c2d3e-8a4b-5c6d-9e0f-a1b2c3d4e5f6")

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


def document_id(root_label: str, relative_path: str) -> str:
    """``<watched folder label>/<path inside it>``, readable as a Dagster partition key.

    Control characters (legal in file names) are escaped so keys stay printable.
    """
    escaped = _CONTROL_CHARS.sub(lambda m: f"\\x{ord(m.group()):02x}", relative_path)
    return f"{root_label}/{escaped}"


def fingerprint(settings: Any) -> str:
    """A short stable hash of any JSON-serialisable description of settings."""
    encoded = json.dumps(settings, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(encoded.encode()).hexdigest()[:12]


def document_version(sha256: str, pipeline_version: str) -> str:
    """Content hash × pipeline version: what a document's chunks and points are keyed by."""
    return hashlib.sha256(f"{sha256}:{pipeline_version}".encode()).hexdigest()[:16]


def chunk_id(doc_id: str, version: str, index: int) -> str:
    return f"{doc_id}@{version}#{index}"


def point_id(chunk_id_: str) -> str:
    return str(uuid.uuid5(POINT_NAMESPACE, chunk_id_))


def text_hash(text: str) -> str:
    """Key of the embedding cache: equal texts share one vector per model."""
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def storage_key(doc_id: str) -> str:
    """File-system-safe name for a document's files under the home folder."""
    return hashlib.sha256(doc_id.encode()).hexdigest()[:24]


def parse_chunk_id(chunk_id_: str) -> tuple[str, str, int]:
    """(doc id, version, index) of a :func:`chunk_id`; ValueError when it is not one."""
    document, _, rest = chunk_id_.rpartition("@")
    version, _, index = rest.partition("#")
    if not document or not version or not index.isdigit():
        raise ValueError(f"not a chunk id: {chunk_id_!r}")
    return document, version, int(index)
