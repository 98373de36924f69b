"""A generated document share: distinct texts of a realistic size mix, in nested folders.

Every document is a function of its number (the same number, the same file, on any machine), so
a share grows by writing the numbers it lacks. Words are English words drawn by Zipf's law from
the dense model's tokenizer vocabulary (whole words only: a word is about one token, as in
prose), so the keyword vectors have prose's shape and no two texts are alike: the embedding
cache takes nothing. The mix, by number of words (a chunk holds about 190): most documents are
short notes and pages, some long files, a few very long exports; 2.2 chunks a document on
average. A leaf folder holds 100 documents, ten leaves a team, ten teams an area.
"""

from __future__ import annotations

import json
from bisect import bisect
from pathlib import Path

import numpy as np

from rag_pipeline.config import DEFAULT_DENSE_MODEL
from rag_pipeline.embedding.models import OFFLINE_DENSE_MODELS

# (share of documents, fewest words, most words, suffix, what it stands for)
SIZE_MIX = (
    (0.55, 30, 150, ".md", "note"),
    (0.30, 150, 450, ".md", "page"),
    (0.12, 450, 1500, ".md", "long page"),
    (0.03, 1500, 4000, ".txt", "export"),
)
_CUMULATIVE = np.cumsum([share for share, *_ in SIZE_MIX])
FOLDER_DOCUMENTS = 100


def _vocabulary() -> tuple[np.ndarray, np.ndarray]:
    files = OFFLINE_DENSE_MODELS[DEFAULT_DENSE_MODEL].tokenizer_files
    vocabulary = json.loads((files / "tokenizer.json").read_text())["model"]["vocab"]
    ordered = sorted(vocabulary, key=vocabulary.__getitem__)  # roughly by frequency
    words = np.array([w for w in ordered if w.isascii() and w.isalpha() and len(w) >= 3])
    weights = 1 / np.arange(1, len(words) + 1) ** 1.05
    return words, weights / weights.sum()


WORDS, FREQUENCIES = _vocabulary()


def document_path(number: int) -> Path:
    """Where document ``number`` lives, relative to the share; its suffix is its kind's."""
    leaf = number // FOLDER_DOCUMENTS
    suffix = SIZE_MIX[_kind(number)][3]
    return (
        Path(f"area-{leaf // 100:04d}", f"team-{leaf // 10 % 10}", f"project-{leaf % 10}")
        / f"doc-{number:07d}{suffix}"
    )


def _kind(number: int) -> int:
    draw = np.random.default_rng([number, 1]).random()
    return min(bisect(_CUMULATIVE.tolist(), draw), len(SIZE_MIX) - 1)


def document_text(number: int) -> str:
    """Document ``number``: a title, sentences of 6-18 words, a section heading now and then."""
    rng = np.random.default_rng(number)
    _, fewest, most, _, _ = SIZE_MIX[_kind(number)]
    words = WORDS[rng.choice(len(WORDS), size=int(rng.integers(fewest, most + 1)), p=FREQUENCIES)]
    lengths = rng.integers(6, 19, size=len(words) // 6 + 1)
    parts = [f"# {' '.join(words[:4]).title()} {number}\n\n"]
    start, sentences = 0, 0
    for length in lengths:
        if start >= len(words):
            break
        parts.append(" ".join(words[start : start + length]).capitalize() + ". ")
        start, sentences = start + length, sentences + 1
        if sentences % 5 == 0:
            parts.append("\n\n")
        if sentences % 15 == 0:
            parts.append(f"## {' '.join(words[start : start + 3]).title()}\n\n")
    return "".join(parts).rstrip() + "\n"


def write_documents(share: Path, start: int, stop: int) -> None:
    """Write documents ``start`` … ``stop - 1`` under ``share``."""
    made: set[Path] = set()
    for number in range(start, stop):
        path = share / document_path(number)
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        path.write_text(document_text(number), encoding="utf-8")
