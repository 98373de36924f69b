"""One indexing run over a batch of documents, stage by stage, as plain functions.

Each method is one asset of the Dagster graph (``defs/assets.py`` only wires them): it takes the
batch's document ids, reads the previous stage's files, writes its own, and returns per-document
metadata for the UI. A document that fails is marked failed with its reason and the rest of the
batch goes on; whatever was indexed for it before stays searchable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from rag_pipeline.catalog import Catalog, DocumentRecord
from rag_pipeline.chunking import Chunk, chunk_as_record, chunk_document, picture_chunks
from rag_pipeline.config import Settings
from rag_pipeline.embedding import (
    DenseEncoder,
    EmbeddingCache,
    SparseEncoder,
    SparseVector,
    ensure_dense,
    ensure_sparse,
)
from rag_pipeline.embedding.image import (
    Captioner,
    ClipEncoder,
    clip_dim,
    clip_model_id,
    ensure_captions,
    ensure_picture_vectors,
)
from rag_pipeline.embedding.models import dense_model_dim
from rag_pipeline.manifest import describe_file
from rag_pipeline.parsing import ParseOptions
from rag_pipeline.parsing.pool import parse_in_workers, start_parser_server
from rag_pipeline.stages import DocumentTask, StageFiles, element_from_row
from rag_pipeline.store import VectorStore, open_vector_store
from rag_pipeline.store.schema import DocumentFacts, IndexPoint, chunk_point, is_picture

Metadata = dict[str, Any]

logger = logging.getLogger(__name__)

_PREVIEW_CHARS = 300


@dataclass(frozen=True, slots=True)
class VectorModels:
    """The models whose ids key a point's vectors in the embedding cache."""

    dense: str
    sparse: str
    image: str | None  # no image vectors when None

    @classmethod
    def of(cls, settings: Settings) -> VectorModels:
        return cls(
            dense=settings.embedding.dense_model,
            sparse=settings.embedding.sparse_model_id,
            image=clip_model_id(settings.images),
        )


def parse_options(settings: Settings) -> ParseOptions:
    images = settings.images
    return ParseOptions(
        ocr_languages=images.ocr_languages,
        ocr_dpi=images.ocr_dpi,
        ocr_pictures=images.ocr_pictures,
        # Pictures are kept only when something can make them searchable.
        images=bool(images.clip_model or images.caption_model),
        min_image_side=images.min_side,
    )


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    passed: bool
    failures: dict[str, str]  # doc id (or "*") → what is wrong
    summary: Metadata


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


class Indexer:
    """What a run shares between stages: settings, files, and models and store opened on use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.catalog = Catalog(settings.home)
        self.stages = StageFiles(settings.home)

    @cached_property
    def dense(self) -> DenseEncoder:
        return DenseEncoder(self.settings.embedding, self.settings.home)

    @cached_property
    def sparse(self) -> SparseEncoder:
        return SparseEncoder(self.settings.embedding, self.settings.home)

    @cached_property
    def clip(self) -> ClipEncoder:
        return ClipEncoder(self.settings.images)

    @cached_property
    def captioner(self) -> Captioner:
        return Captioner(self.settings.images)

    @cached_property
    def cache(self) -> EmbeddingCache:
        return EmbeddingCache(self.settings.home / "cache" / "embeddings.sqlite")

    @cached_property
    def store(self) -> VectorStore:
        return open_vector_store(self.settings)

    def close(self) -> None:
        for name in ("store", "cache"):
            if name in self.__dict__:
                self.__dict__.pop(name).close()

    # -- file_manifest -------------------------------------------------------------------------

    def plan(self, doc_ids: Iterable[str], *, force: bool = False) -> dict[str, Metadata]:
        """Decide per document: index it, leave it (unchanged), or delete it (file gone)."""
        known = self.catalog.documents()
        report: dict[str, Metadata] = {}
        for doc_id in doc_ids:
            record = known.get(doc_id)
            file = describe_file(self.settings, doc_id, record)
            if file is None:
                task = DocumentTask(doc_id, "delete", None)
            elif record and record.version == file.version and not force:
                task = DocumentTask(doc_id, "unchanged", file)
            else:
                task = DocumentTask(doc_id, "index", file)
            self.stages.write_task(task)
            report[doc_id] = {"action": task.action}
            if file:
                report[doc_id] |= {
                    "path": str(file.path),
                    "file_type": file.file_type,
                    "bytes": file.size,
                    "sha256": file.sha256,
                    "version": file.version,
                }
        if any(entry["action"] == "index" for entry in report.values()):
            start_parser_server()  # it starts in the background while the run goes on
        return report

    def _tasks(self, doc_ids: Iterable[str], action: str = "index") -> list[DocumentTask]:
        tasks = [self.stages.read_task(doc_id) for doc_id in doc_ids]
        return [task for task in tasks if task is not None and task.action == action]

    # -- parsed_pages --------------------------------------------------------------------------

    def parse(self, doc_ids: Iterable[str]) -> dict[str, Metadata]:
        limits = self.settings.parsing
        report: dict[str, Metadata] = {}
        jobs = []
        for task in self._tasks(doc_ids):
            assert task.file is not None
            refusal = task.file.error
            if refusal is None and task.file.size > limits.max_file_mb * 1024 * 1024:
                refusal = (
                    f"the file is {task.file.size / 1024 / 1024:.0f} MB, over the "
                    f"{limits.max_file_mb:g} MB limit (parsing.max_file_mb)"
                )
            if refusal:
                self.stages.write_parsed(task.doc_id, task.file.version, None, refusal)
                report[task.doc_id] = {"error": refusal}
            else:
                jobs.append((task, task.file.path))
        versions = {task.doc_id: task.file.version for task, _ in jobs if task.file}
        outcomes = parse_in_workers(
            ((task.doc_id, path) for task, path in jobs),
            workers=limits.workers,
            timeout_seconds=limits.timeout_seconds,
            options=parse_options(self.settings),
        )
        progress = _progress("parsing", "documents")
        loading = self._load_models_in_background() if jobs else None
        for done, outcome in enumerate(outcomes, 1):
            progress(done, len(jobs))
            self.stages.write_parsed(
                outcome.key, versions[outcome.key], outcome.document, outcome.error
            )
            entry: Metadata = {"seconds": round(outcome.seconds, 3)}
            if outcome.document:
                entry |= {
                    "pages": outcome.document.page_count or 0,
                    "elements": len(outcome.document.elements),
                    "pictures": len(outcome.document.images),
                    "title": outcome.document.title or "",
                }
            else:
                entry["error"] = outcome.error
            report[outcome.key] = entry
        if loading:
            loading.join()
        return report

    def _load_models_in_background(self) -> threading.Thread:
        """Load the tokenizer and the models the next stages use, while parsers work.

        This process only waits for the parser processes meanwhile, so the loading costs no
        time. A failure here is left for the stage that needs the model to report.
        """
        dense, sparse = self.dense, self.sparse
        clip = self.clip if self.settings.images.clip_model else None

        def load() -> None:
            try:
                dense.tokens  # noqa: B018 (a cached property: touching it loads it)
                dense.model  # noqa: B018
                sparse.model  # noqa: B018
                if clip is not None:
                    clip.dim  # noqa: B018 (loads the model)
            except Exception:
                logger.debug("loading the models ahead of use failed", exc_info=True)

        thread = threading.Thread(target=load, name="load-models", daemon=True)
        thread.start()
        return thread

    # -- chunks --------------------------------------------------------------------------------

    def chunk(self, doc_ids: Iterable[str]) -> dict[str, Metadata]:
        chunking = self.settings.chunking
        report: dict[str, Metadata] = {}
        for task in self._tasks(doc_ids):
            assert task.file is not None
            version = task.file.version
            parsed = self.stages.read_parsed(task.doc_id)
            meta: Metadata = {}
            rows: list[dict[str, Any]] = []
            if parsed is None or parsed.version != version:
                meta["error"] = "no parse of this version: materialize parsed_pages first"
            elif parsed.error:
                meta["error"] = parsed.error
            else:
                started = time.perf_counter()
                chunks = chunk_document(
                    [element_from_row(row) for row in parsed.rows],
                    doc_id=task.doc_id,
                    version=version,
                    counter=self.dense.tokens,
                    max_tokens=chunking.max_tokens,
                    overlap_tokens=chunking.overlap_tokens,
                )
                try:
                    chunks += self._picture_chunks(
                        parsed.meta.get("images") or [], task.doc_id, version, len(chunks)
                    )
                except Exception as error:  # a captioner that cannot load fails the document
                    meta["error"] = f"captioning failed: {error}"
                rows = [chunk_as_record(chunk) for chunk in chunks]
                meta |= {"title": parsed.meta.get("title"), "pages": parsed.meta.get("pages")}
                if not rows:
                    meta["error"] = "no text to index after parsing"
                report[task.doc_id] = {
                    "chunks": len(rows),
                    "pictures": sum(1 for row in rows if is_picture(row)),
                    "tokens": sum(row["token_count"] for row in rows),
                    "seconds": round(time.perf_counter() - started, 3),
                    "preview": rows[0]["text"][:_PREVIEW_CHARS] if rows else "",
                }
            if "error" in meta:
                report[task.doc_id] = {"error": meta["error"]}
            self.stages.write_chunks(task.doc_id, version, rows, meta)
        return report

    def _picture_chunks(
        self, pictures: list[dict[str, Any]], doc_id: str, version: str, first_index: int
    ) -> list[Chunk]:
        """A chunk per picture, captioned when a captioner is configured."""
        images = self.settings.images
        if not pictures:
            return []
        captions: dict[str, str] = {}
        if images.caption_model:
            files = {p["sha256"]: self.settings.home / p["file"] for p in pictures}
            captions = ensure_captions(self.captioner, files, self.cache)
        if not images.clip_model:  # without image vectors, only captioned pictures are found
            pictures = [p for p in pictures if captions.get(p["sha256"])]
        return picture_chunks(
            pictures,
            captions,
            doc_id=doc_id,
            version=version,
            first_index=first_index,
            counter=self.dense.tokens,
        )

    def _chunk_rows(self, doc_ids: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
        """The current version's chunks of every document to index (empty when it failed)."""
        rows: dict[str, list[dict[str, Any]]] = {}
        for task in self._tasks(doc_ids):
            stage = self.stages.read_chunks(task.doc_id)
            current = (
                stage is not None and task.file is not None and stage.version == task.file.version
            )
            rows[task.doc_id] = stage.rows if current and stage else []
        return rows

    # -- dense_embeddings / sparse_embeddings --------------------------------------------------

    def embed_dense(self, doc_ids: Iterable[str]) -> dict[str, Metadata]:
        return self._embed(
            doc_ids,
            self.dense.model_id,
            lambda texts, progress: ensure_dense(self.dense, texts, self.cache, progress),
            _progress("dense embeddings", "texts"),
        )

    def embed_sparse(self, doc_ids: Iterable[str]) -> dict[str, Metadata]:
        return self._embed(
            doc_ids,
            self.sparse.model_id,
            lambda texts, progress: ensure_sparse(self.sparse, texts, self.cache, progress),
            _progress("sparse embeddings", "texts"),
        )

    def _embed(
        self,
        doc_ids: Iterable[str],
        model_id: str,
        ensure: Callable[[dict[str, str], Callable[[int, int], None]], set[str]],
        progress: Callable[[int, int], None],
    ) -> dict[str, Metadata]:
        per_document = {
            doc_id: [row for row in rows if row["text"]]  # an uncaptioned picture has no text
            for doc_id, rows in self._chunk_rows(doc_ids).items()
        }
        texts = {row["text_hash"]: row["text"] for rows in per_document.values() for row in rows}
        started = time.perf_counter()
        embedded = ensure(texts, progress)
        keys = {doc_id: [row["text_hash"] for row in rows] for doc_id, rows in per_document.items()}
        return _embedding_report(model_id, "chunks", keys, embedded, started)

    # -- image_embeddings ----------------------------------------------------------------------

    def embed_pictures(self, doc_ids: Iterable[str]) -> dict[str, Metadata]:
        """CLIP vectors of the run's pictures (nothing to do when images.clip_model is unset)."""
        if not self.settings.images.clip_model:
            return {}
        per_document = {
            doc_id: pictures
            for doc_id, rows in self._chunk_rows(doc_ids).items()
            if (pictures := [row for row in rows if is_picture(row)])
        }
        files = {
            row["image_sha256"]: self.settings.home / row["image_file"]
            for rows in per_document.values()
            for row in rows
        }
        started = time.perf_counter()
        embedded = ensure_picture_vectors(
            self.clip, files, self.cache, _progress("image embeddings", "pictures")
        )
        keys = {
            doc_id: [row["image_sha256"] for row in rows] for doc_id, rows in per_document.items()
        }
        return _embedding_report(self.clip.model_id, "pictures", keys, embedded, started)

    # -- qdrant_points -------------------------------------------------------------------------

    def write_points(self, doc_ids: Iterable[str]) -> dict[str, Metadata]:
        """Upsert each document's new version, delete its older ones, and commit the catalog."""
        doc_ids = list(doc_ids)
        store = self.store
        store.ensure_collection(*vector_sizes(self.settings))
        known = self.catalog.documents()
        report: dict[str, Metadata] = {}
        for doc_id in doc_ids:
            task = self.stages.read_task(doc_id)
            if task is None:
                report[doc_id] = {"error": "not planned: materialize file_manifest first"}
            elif task.action == "delete":
                store.delete_document(doc_id)
                self.catalog.remove_chunks(doc_id)
                known.pop(doc_id, None)
                self.stages.remove(doc_id)
                report[doc_id] = {"state": "deleted"}
            elif task.action == "unchanged":
                report[doc_id] = {"state": known[doc_id].state if doc_id in known else "unknown"}
            else:
                known[doc_id] = self._write_document(task, known.get(doc_id))
                record = known[doc_id]
                report[doc_id] = {
                    "state": record.state,
                    "points": record.chunks if record.state == "indexed" else 0,
                }
                if record.error:
                    report[doc_id]["error"] = record.error
        self.catalog.write_documents(known.values())
        return report

    def _write_document(
        self, task: DocumentTask, previous: DocumentRecord | None
    ) -> DocumentRecord:
        file = task.file
        assert file is not None
        stage = self.stages.read_chunks(task.doc_id)
        record = DocumentRecord(
            doc_id=task.doc_id,
            source=file.source,
            relative_path=file.relative_path,
            file_type=file.file_type,
            size=file.size,
            mtime_ns=file.mtime_ns,
            sha256=file.sha256,
            version=file.version,
            state="failed",
            indexed_version=previous.indexed_version if previous else None,
            title=previous.title if previous else None,
            pages=previous.pages if previous else None,
            chunks=previous.chunks if previous else 0,
            tokens=previous.tokens if previous else 0,
            updated_at=time.time(),
        )
        if stage is None or stage.version != file.version:
            record.error = "no chunks of this version: materialize the chunks asset first"
            return record
        if stage.error:
            record.error = stage.error
            return record
        rows = stage.rows
        title = stage.meta.get("title") or file.path.stem
        points = self.document_points(task, rows, title)
        if len(points) < len(rows):
            record.error = (
                f"{len(rows) - len(points)} chunks have no vectors: "
                "materialize the embedding assets first"
            )
            return record
        # New version first, then the old ones: a crash in between leaves both versions, which
        # the next run (seeing the catalog still on the old version) converges to the new one.
        self.store.upsert(points)
        self.store.delete_document(task.doc_id, keep_version=file.version)
        self.catalog.write_chunks(task.doc_id, rows)
        self.stages.keep_pictures(
            task.doc_id, {row["image_file"] for row in rows if row["image_file"]}
        )
        record.state = "indexed"
        record.indexed_version = file.version
        record.error = None
        record.title = title
        record.pages = stage.meta.get("pages")
        record.chunks = len(rows)
        record.tokens = sum(row["token_count"] for row in rows)
        return record

    def document_points(
        self, task: DocumentTask, rows: list[dict[str, Any]], title: str
    ) -> list[IndexPoint]:
        """Points for a document's chunks, vectors from the cache (chunks without one left out)."""
        file = task.file
        assert file is not None
        facts = DocumentFacts(
            doc_id=task.doc_id,
            file_path=str(file.path),
            file_type=file.file_type,
            title=title,
            version=file.version,
            sha256=file.sha256,
            mtime=file.mtime_ns / 1e9,
        )
        return points_from_cache(rows, facts, self.cache, VectorModels.of(self.settings))

    # -- checks --------------------------------------------------------------------------------

    def check_every_chunk_has_point(self, doc_ids: Iterable[str]) -> CheckOutcome:
        known = self.catalog.documents()
        indexed = [
            doc_id for doc_id in doc_ids if doc_id in known and known[doc_id].state == "indexed"
        ]
        failures: dict[str, str] = {}
        for doc_id in indexed:
            points = self.store.count(doc_id)
            if points != known[doc_id].chunks:
                failures[doc_id] = f"{known[doc_id].chunks} chunks but {points} points"
        return CheckOutcome(not failures, failures, {"documents_checked": len(indexed)})

    def check_no_orphan_points(self) -> CheckOutcome:
        known = self.catalog.documents()
        live = {
            doc_id: record.indexed_version
            for doc_id, record in known.items()
            if record.indexed_version
        }
        expected = sum(known[doc_id].chunks for doc_id in live)
        points = self.store.count()
        if points == expected:
            # Each run checks its own documents' point counts (every_chunk_has_point), and only
            # a run changes its documents' points: with equal totals no point can be an orphan.
            # Only a mismatch is worth reading every point's owner (slow on a large index).
            return CheckOutcome(True, {}, {"points": points})
        failures: dict[str, str] = {}
        owners = self.store.point_owners()
        for doc_id, version in owners.values():
            if live.get(doc_id) != version:
                failures[doc_id] = (
                    f"points of version {version} but the catalog has "
                    f"{live.get(doc_id) or 'no indexed version'}"
                )
        return CheckOutcome(not failures, failures, {"points": len(owners)})

    def check_vector_size(self) -> CheckOutcome:
        dense, image = vector_sizes(self.settings)
        stored_dense, stored_image = self.store.dense_size(), self.store.image_size()
        failures: dict[str, str] = {}
        if stored_dense not in (None, dense):
            failures["*"] = f"text vectors are {stored_dense}-d, the model gives {dense}"
        elif stored_dense is not None and stored_image != image:
            failures["*"] = (
                f"image vectors are {stored_image or 'absent'}, CLIP gives {image or 'none'}"
            )
        summary: Metadata = {"model": self.settings.embedding.dense_model, "dim": dense}
        if image:
            summary |= {"image_model": clip_model_id(self.settings.images), "image_dim": image}
        return CheckOutcome(not failures, failures, summary)

    def check_no_silent_empty(self, doc_ids: Iterable[str]) -> CheckOutcome:
        known = self.catalog.documents()
        failures: dict[str, str] = {}
        for doc_id in doc_ids:
            record = known.get(doc_id)
            if record is None:
                continue
            if record.state == "indexed" and record.chunks == 0:
                failures[doc_id] = "indexed with no chunks"
            elif record.state == "failed" and not record.error:
                failures[doc_id] = "failed without a reason"
        return CheckOutcome(not failures, failures, {})


def _embedding_report(
    model_id: str, unit: str, keys: dict[str, list[str]], embedded: set[str], started: float
) -> dict[str, Metadata]:
    """An embedding asset's metadata: per document its inputs (cache keys) and how many of them
    were embedded now or found in the cache; for the batch ("*") the totals and seconds."""
    report: dict[str, Metadata] = {}
    for doc_id, doc_keys in keys.items():
        unique = set(doc_keys)
        report[doc_id] = {
            "model": model_id,
            unit: len(doc_keys),
            "embedded": len(unique & embedded),
            "cached": len(unique - embedded),
        }
    if keys:
        total = len({key for doc_keys in keys.values() for key in doc_keys})
        report["*"] = {
            "embedded": len(embedded),
            "cached": total - len(embedded),
            "seconds": round(time.perf_counter() - started, 3),
        }
    return report


def vector_sizes(settings: Settings) -> tuple[int, int | None]:
    """(text vector size, image vector size or None): the collection's layout."""
    return dense_model_dim(settings.embedding, settings.home), clip_dim(settings.images)


def points_from_cache(
    rows: list[dict[str, Any]],
    facts: DocumentFacts,
    cache: EmbeddingCache,
    models: VectorModels,
) -> list[IndexPoint]:
    """A document's chunk rows as points, their vectors read from the embedding cache.

    A chunk with text needs both text vectors, a picture its image vector when pictures have
    vectors. Chunks missing one are left out (the caller compares the counts).
    """
    hashes = [row["text_hash"] for row in rows if row["text"]]
    dense = cache.get_many(models.dense, hashes)
    sparse = cache.get_many(models.sparse, hashes)
    pictures = [row["image_sha256"] for row in rows if is_picture(row)]
    images = cache.get_many(models.image, pictures) if models.image and pictures else {}
    points: list[IndexPoint] = []
    for row in rows:
        text_hash = row["text_hash"]
        has_text = bool(row["text"])
        if has_text and not (text_hash in dense and text_hash in sparse):
            continue
        image = None
        if is_picture(row) and models.image:
            if row["image_sha256"] not in images:
                continue
            image = np.frombuffer(images[row["image_sha256"]], dtype=np.float32)
        text_vectors = None
        if has_text:
            vector = SparseVector.from_bytes(sparse[text_hash])
            text_vectors = (vector.indices, vector.values)
        dense_vector = np.frombuffer(dense[text_hash], dtype=np.float32) if has_text else None
        points.append(chunk_point(row, facts, dense_vector, text_vectors, image))
    return points
