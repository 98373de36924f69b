"""BM25's set of punctuation characters, read from a file instead of made afresh each time.

fastembed's BM25 model builds, whenever one is created, the set of every Unicode punctuation
character by testing all 1.1 million code points: a quarter of a second of pure Python, on the
path of every indexing run (and of the chat server's start). The set depends only on the Unicode
database of the Python that runs, so it is kept in a file named for that database's version,
in the models folder, and handed to fastembed. (fastembed internal: the function
``fastembed.sparse.bm25.get_all_punctuation``, replaced by one that returns the same set; pinned
by ``fastembed==0.9.*`` and by ``rag_pipeline_tests/embedding/test_punctuation.py``.)
"""

from __future__ import annotations

import json
import logging
import threading
import unicodedata
from collections.abc import Callable
from pathlib import Path

from rag_pipeline.files import write_atomically

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_known: set[str] | None = None  # once read or computed, for the process
_folder: list[Path] = []  # where the set is read from and saved to: the last folder given


def punctuation_file(folder: Path) -> Path:
    return folder / f"punctuation-unicode-{unicodedata.unidata_version}.json"


def use_saved_punctuation(folder: Path) -> None:
    """Make fastembed's BM25 take its punctuation set from ``folder`` (saved there when new)."""
    from fastembed.sparse import bm25

    _folder[:] = [folder]
    compute = bm25.get_all_punctuation
    if getattr(compute, "reads_saved_set", False):
        return

    def saved() -> set[str]:
        return set(_punctuation(_folder[0], compute))

    saved.reads_saved_set = True  # type: ignore[attr-defined]
    bm25.get_all_punctuation = saved


def _punctuation(folder: Path, compute: Callable[[], set[str]]) -> set[str]:
    global _known
    with _lock:
        if _known is None:
            _known = _read(punctuation_file(folder))
        if _known is None:
            _known = set(compute())
            try:
                text = json.dumps(sorted(ord(character) for character in _known))
                write_atomically(punctuation_file(folder), lambda path: Path(path).write_text(text))
            except OSError:  # a read-only home: computed again next time
                logger.debug("cannot save the punctuation set in %s", folder, exc_info=True)
        return _known


def _read(path: Path) -> set[str] | None:
    try:
        return {chr(code) for code in json.loads(path.read_text())}
    except (OSError, ValueError, TypeError):
        return None
