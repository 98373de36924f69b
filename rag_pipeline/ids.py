"""Every identifier the pipeline derives, in one place.

A workspace is named by an ASCII id derived from its display name; a document by its watched
folder and its path inside it (and, to Dagster, by its workspace too); a version by its content
and the pipeline settings that shaped its chunks; a chunk by document, version and position; a
Qdrant point by its chunk. All are deterministic, so a re-run after a crash writes the same ids
and converges instead of duplicating.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
import uuid
from typing import Any

# Fixed forever: changing it would change every point id.
POINT_NAMESPACE = uuid.UUID("6f1c2d3e-8a4b-5c6d-9e0f-a1b2c3d4e5f6")
_POINT_NAMESPACE_BYTES = POINT_NAMESPACE.bytes

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")

DEFAULT_WORKSPACE = "default"
_NOT_ID_CHARS = re.compile(r"[^a-z0-9]+")
_WORKSPACE_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")


def workspace_id(name: str) -> str:
    """The ASCII id of a workspace named ``name`` (any language): what collections, schemas,
    folders and Dagster keys are named by.

    A name that ASCII spells whole ("Client A") keeps its words ("client-a"); any other name gets
    a hash of itself after whatever ASCII it had ("研究 2024" -> "2024-1c6e0b"), so that two
    names differing only in their non-ASCII letters get two ids.
    """
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    whole = _NOT_ID_CHARS.sub("-", folded.lower()).strip("-")
    slug = whole[:32].strip("-")
    if slug and slug == whole and folded == name and slug != DEFAULT_WORKSPACE:
        return slug
    digest = hashlib.sha256(name.strip().encode()).hexdigest()[:6]
    return f"{slug}-{digest}" if slug else f"ws-{digest}"


def is_workspace_id(text: str) -> bool:
    return _WORKSPACE_ID.fullmatch(text) is not None


BUCKET_PREFIX = "bucket-"


def partition_key(workspace: str, doc_id: str, buckets: int = 0) -> str:
    """A document's Dagster partition key: its id, or with ``buckets`` the name of the bucket
    it falls in (``bucket-00042``, by a stable hash of the id), under ``/<workspace>/`` outside
    the default workspace. A document id never starts with ``/`` and always holds one, so
    none of these can meet."""
    name = doc_id
    if buckets:
        number = int.from_bytes(hashlib.sha256(doc_id.encode()).digest()[:8]) % buckets
        name = f"{BUCKET_PREFIX}{number:05d}"
    return name if workspace == DEFAULT_WORKSPACE else f"/{workspace}/{name}"


def partition_document(key: str) -> tuple[str, str]:
    """(workspace, document id or bucket name) of a :func:`partition_key`."""
    if not key.startswith("/"):
        return DEFAULT_WORKSPACE, key
    workspace, _, name = key[1:].partition("/")
    return workspace, name


def is_bucket(name: str) -> bool:
    """Whether the name part of a partition key (:func:`partition_document`) is a bucket's."""
    return name.startswith(BUCKET_PREFIX) and "/" not in name


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
    """``str(uuid.uuid5(POINT_NAMESPACE, chunk_id_))``, computed directly: a census derives one
    per chunk (millions), and building the ``UUID`` object takes most of uuid5's time."""
    digest = bytearray(hashlib.sha1(_POINT_NAMESPACE_BYTES + chunk_id_.encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


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
