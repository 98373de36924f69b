"""One indexing run over a batch of documents, stage by stage, as plain functions.

Each method is one asset of the Dagster graph (``defs/assets.py`` only wires them): it takes the
batch's document ids, reads the previous stage's files, writes its own, and returns per-document
metadata for the UI (gathered by ``reports.py``). A document that fails is marked failed with its
reason and the rest of the batch goes on; whatever was indexed for it before stays searchable.
A document's pictures are made chunks by ``pictures.py``. The last stage, writing points and
committing them, is ``commit.py``; the checks after it, ``checks.py``.
"""

from __future__ import annotations

import functools
import gc
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from itertools import groupby
from operator import itemgetter
from typing import Any

from upath import UPath

from rag_pipeline.catalog import Catalog, CollectionRecord
from rag_pipeline.chunking import chunk_as_record, chunk_document, document_name, without_header
from rag_pipeline.config import Settings
from rag_pipeline.embedding import (
    DenseEncoder,
    EmbeddingCache,
    LanguageDenseEncoders,
    SparseEncoder,
    ensure_dense,
    ensure_sparse,
    open_embedding_cache,
)
from rag_pipeline.embedding.image import Captioner, ClipEncoder, ensure_picture_vectors
from rag_pipeline.faults import fault_point
from rag_pipeline.indexing.pictures import CaptionError, captioned_picture_chunks
from rag_pipeline.indexing.reports import Metadata, _ChunkSummary, _EmbeddingTally, _progress
from rag_pipeline.manifest import SourceFile, describe_file, needs_indexing
from rag_pipeline.parsing import ParseOptions
from rag_pipeline.parsing.pool import parse_in_workers, start_parser_server
from rag_pipeline.redaction import Redactor
from rag_pipeline.stages import DocumentTask, StageFiles, StageMeta, write_parsed_stage
from rag_pipeline.store import (
    VectorModels,
    VectorStore,
    open_vector_store,
    page_chunks,
    page_key,
)
from rag_pipeline.store.schema import is_picture

logger = logging.getLogger(__name__)

_EMBED_SLICE = 2048  # texts looked up and embedded at a time, and written to the cache


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


class Indexer:
    """What a run shares between stages: settings, files, and models and store opened on use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.catalog = Catalog(settings)
        self.stages = StageFiles(settings.stage_root)

    @cached_property
    def collection(self) -> CollectionRecord:
        """The collection this run writes to (a new one is built when the models changed)."""
        return target_collection(self.settings, self.catalog)

    @cached_property
    def dense_by_language(self) -> LanguageDenseEncoders:
        return LanguageDenseEncoders(self.settings.embedding, self.settings.root)

    @property
    def dense(self) -> DenseEncoder:
        return self.dense_by_language.dense

    @cached_property
    def sparse(self) -> SparseEncoder:
        return SparseEncoder(self.settings.embedding, self.settings.root)

    @cached_property
    def page_sparse(self) -> SparseEncoder | None:
        """The encoder of whole pages' keywords, None when pages have no vector of their own."""
        pages = self.settings.embedding.for_pages()
        return SparseEncoder(pages, self.settings.root) if pages else None

    @cached_property
    def clip(self) -> ClipEncoder:
        return ClipEncoder(self.settings.images)

    @cached_property
    def captioner(self) -> Captioner:
        return Captioner(self.settings.images)

    @cached_property
    def cache(self) -> EmbeddingCache:
        return open_embedding_cache(self.settings)

    @cached_property
    def store(self) -> VectorStore:
        return open_vector_store(self.settings, self.collection.name)

    def release_models(self) -> None:
        """Let go of the models (the stages after embedding need none): their memory, a few
        hundred MB, is then free for writing the points."""
        for name in ("dense", "sparse", "page_sparse", "clip", "captioner"):
            self.__dict__.pop(name, None)
        gc.collect()

    def close_store(self) -> None:
        """Let go of the vector store (the embedded engine admits one process at a time, so a
        run holds it only while it writes and checks)."""
        if "store" in self.__dict__:
            self.__dict__.pop("store").close()

    def close(self) -> None:
        self.close_store()
        if "cache" in self.__dict__:
            self.__dict__.pop("cache").close()
        self.catalog.close()

    # -- file_manifest -------------------------------------------------------------------------

    def plan(
        self, doc_ids: Iterable[str], *, force: bool = False, retry_failed: bool = False
    ) -> dict[str, Metadata]:
        """Decide per document: index it, leave it (unchanged), or delete it (file gone)."""
        doc_ids = list(doc_ids)
        known = self.catalog.documents(self.collection.name, doc_ids)
        now = time.time()
        report: dict[str, Metadata] = {}
        for doc_id in doc_ids:
            record = known.get(doc_id)
            file = describe_file(self.settings, doc_id, record)
            if file is None:
                task = DocumentTask(doc_id, "delete", None)
            elif force or needs_indexing(record, file.version, retry_failed=retry_failed, now=now):
                task = DocumentTask(doc_id, "index", file)
            else:
                task = DocumentTask(doc_id, "unchanged", file)
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
            # The workers write the stage files: a document's text never crosses a pipe.
            handler=functools.partial(
                write_parsed_stage, self.stages.root, Redactor.of(self.settings)
            ),
        )
        progress = _progress("parsing", "documents")
        loading = self._load_models_in_background() if jobs else None
        for done, outcome in enumerate(outcomes, 1):
            progress(done, len(jobs))
            fault_point("after-parse")
            entry: Metadata = {"seconds": round(outcome.seconds, 3)}
            if outcome.error is None:
                entry |= outcome.result
            else:
                self.stages.write_parsed(outcome.key, versions[outcome.key], None, outcome.error)
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
        report: dict[str, Metadata] = {}
        for task in self._tasks(doc_ids):
            assert task.file is not None
            version = task.file.version
            parsed = self.stages.parsed_meta(task.doc_id)
            if parsed is None or parsed.version != version:
                error = "no parse of this version: materialize parsed_pages first"
            elif parsed.error:
                error = parsed.error
            else:
                started = time.perf_counter()
                summary = _ChunkSummary()
                meta = {"title": parsed.meta.get("title"), "pages": parsed.meta.get("pages")}
                try:
                    rows = summary.counted(self._chunk_rows_of(task.file, parsed))
                    self.stages.write_chunks(task.doc_id, version, rows, meta)
                    error = None if summary.chunks else "no text to index after parsing"
                except CaptionError as failure:  # a captioner that cannot load fails the document
                    error = f"captioning failed: {failure}"
                if error is None:
                    report[task.doc_id] = summary.report(time.perf_counter() - started)
                    continue
            report[task.doc_id] = {"error": error}
            self.stages.write_chunks(task.doc_id, version, [], {"error": error})
        return report

    def _chunk_rows_of(self, file: SourceFile, parsed: StageMeta) -> Iterator[dict[str, Any]]:
        """A document's chunk rows as they are made: its text's, then its pictures'."""
        chunking = self.settings.chunking
        doc_id, version = file.doc_id, file.version
        count = 0
        for chunk in chunk_document(
            self.stages.parsed_elements(doc_id),
            doc_id=doc_id,
            version=version,
            counter=self.dense.tokens,
            max_tokens=chunking.max_tokens,
            overlap_tokens=chunking.overlap_tokens,
            document=document_name(file.relative_path, parsed.meta.get("title")),
        ):
            count += 1
            yield chunk_as_record(chunk)
        pictures = captioned_picture_chunks(
            self, parsed.meta.get("images") or [], doc_id, version, count
        )
        yield from (chunk_as_record(chunk) for chunk in pictures)

    def _chunk_batches(self, doc_ids: Iterable[str]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """(doc id, a batch of its chunk rows) for every document of the run whose chunks are
        of its current version (none for those that failed), a batch at a time."""
        for task in self._tasks(doc_ids):
            stage = self.stages.chunks_meta(task.doc_id)
            if stage is None or task.file is None or stage.version != task.file.version:
                continue
            for batch in self.stages.chunk_batches(task.doc_id):
                yield task.doc_id, batch

    # -- dense_embeddings / sparse_embeddings --------------------------------------------------

    def embed_dense(self, doc_ids: Iterable[str]) -> dict[str, Metadata]:
        return self._embed(
            doc_ids,
            self.dense.model_id,
            self._ensure_dense,
            _progress("dense embeddings", "texts"),
        )

    def _ensure_dense(self, rows: dict[str, dict[str, Any]]) -> set[str]:
        """Dense vectors of the rows' texts, each by the model for its language."""
        by_model: dict[DenseEncoder, dict[str, str]] = {}
        for text_hash, row in rows.items():
            encoder = self.dense_by_language.for_language(row["lang"])
            by_model.setdefault(encoder, {})[text_hash] = row["text"]
        embedded: set[str] = set()
        for encoder, texts in by_model.items():
            embedded |= ensure_dense(encoder, texts, self.cache)
        return embedded

    def embed_sparse(self, doc_ids: Iterable[str]) -> dict[str, Metadata]:
        doc_ids = list(doc_ids)
        report = self._embed(
            doc_ids,
            self.sparse.model_id,
            lambda rows: ensure_sparse(
                self.sparse, {text_hash: row["text"] for text_hash, row in rows.items()}, self.cache
            ),
            _progress("sparse embeddings", "texts"),
        )
        if self.page_sparse is not None:
            self._embed_pages(self.page_sparse, doc_ids)
        return report

    def _embed_pages(self, encoder: SparseEncoder, doc_ids: list[str]) -> None:
        """The keyword vectors of the run's documents' whole pages not in the cache yet, a
        slice of pages at a time: each page's text as its document has it (its chunks' texts
        without the line naming the document and section that heads each for search: that
        line, repeated on every chunk, would outweigh what the page says)."""
        pending: dict[str, str] = {}  # page key → the page's text
        for doc_id, batches in groupby(self._chunk_batches(doc_ids), key=itemgetter(0)):
            pages = page_chunks([row for _, batch in batches for row in batch])
            name = self._document_name(doc_id) if pages else None
            for chunks in pages.values():
                pending[page_key(chunks)] = "\n".join(
                    without_header(chunk["text"], name, chunk["section"]) for chunk in chunks
                )
            if len(pending) >= _EMBED_SLICE:
                ensure_sparse(encoder, pending, self.cache)
                pending.clear()
        if pending:
            ensure_sparse(encoder, pending, self.cache)

    def _document_name(self, doc_id: str) -> str | None:
        """The name a document's chunks were made with (see ``chunking.document_name``)."""
        task = self.stages.read_task(doc_id)
        parsed = self.stages.parsed_meta(doc_id)
        if task is None or task.file is None:
            return None
        return document_name(task.file.relative_path, parsed.meta.get("title") if parsed else None)

    def _embed(
        self,
        doc_ids: Iterable[str],
        model_id: str,
        ensure: Callable[[dict[str, dict[str, Any]]], set[str]],
        progress: Callable[[int, int], None],
    ) -> dict[str, Metadata]:
        """Vectors for the run's chunk texts not in the cache yet, a slice of texts at a time
        (across documents, so that small documents share model calls)."""
        doc_ids = list(doc_ids)
        total = sum(self.stages.chunk_count(task.doc_id) for task in self._tasks(doc_ids))
        tally = _EmbeddingTally(model_id, "chunks")
        owners: list[tuple[str, str]] = []  # (doc id, text hash) of the slice's chunks
        pending: dict[str, dict[str, Any]] = {}  # text hash → its chunk row
        done = 0

        def flush() -> None:
            tally.add(owners, ensure(pending))
            progress(done, total)
            fault_point("mid-embedding")
            owners.clear()
            pending.clear()

        for doc_id, batch in self._chunk_batches(doc_ids):
            texts = [row for row in batch if row["text"]]  # an uncaptioned picture has no text
            owners.extend((doc_id, row["text_hash"]) for row in texts)
            pending.update((row["text_hash"], row) for row in texts)
            done += len(batch)
            if len(pending) >= _EMBED_SLICE:
                flush()
        if pending:
            flush()
        return tally.report()

    # -- image_embeddings ----------------------------------------------------------------------

    def embed_pictures(self, doc_ids: Iterable[str]) -> dict[str, Metadata]:
        """CLIP vectors of the run's pictures (nothing to do when images.clip_model is unset)."""
        if not self.settings.images.clip_model:
            return {}
        tally = _EmbeddingTally(self.clip.model_id, "pictures")
        owners: list[tuple[str, str]] = []  # (doc id, image hash) of every picture
        files: dict[str, UPath] = {}
        for doc_id, batch in self._chunk_batches(doc_ids):
            for row in batch:
                if is_picture(row):
                    owners.append((doc_id, row["image_sha256"]))
                    files[row["image_sha256"]] = self.stages.root / row["image_file"]
        embedded = ensure_picture_vectors(
            self.clip, files, self.cache, _progress("image embeddings", "pictures")
        )
        tally.add(owners, embedded)
        return tally.report()


def target_collection(settings: Settings, catalog: Catalog) -> CollectionRecord:
    """The collection runs write to for the configured models (recorded when new)."""
    layout = VectorModels.of(settings).layout
    return catalog.target_collection(
        layout.collection_name(settings.collection_prefix),
        layout.as_dict(),
        settings.vector_models(),
    )
