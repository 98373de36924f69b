"""A page question set on disk (``questions.jsonl`` and ``pdfs/``), read and checked; the
documents' fixed folds and the questions' groups."""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from evaluation.harness import DatasetError, json_lines
from evaluation.metrics import PageUnit

QUESTIONS_FILE = "questions.jsonl"
PDFS_FOLDER = "pdfs"
LAYOUT = f"page layout: {QUESTIONS_FILE} and {PDFS_FOLDER}/<doc_name>.pdf"
FOLDS = ("A", "B")
# Where on its page an answer is (MMLongBench-Doc's evidence_sources), as short names.
SOURCES = {
    "Pure-text (Plain-text)": "text",
    "Table": "table",
    "Chart": "chart",
    "Figure": "image",
    "Image": "image",
    "Generalized-text (Layout)": "layout",
}


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    doc_name: str
    evidence: frozenset[PageUnit]  # (doc_name, 1-based page)
    sources: frozenset[str] = frozenset()  # SOURCES' short names, when the dataset says


@dataclass
class PageDataset:
    name: str
    pdfs: Path
    documents: dict[str, Path]  # doc_name → its PDF
    page_counts: dict[str, int]
    questions: dict[str, Question]  # id (its line in questions.jsonl) → question


def is_page_dataset(folder: Path) -> bool:
    """Whether ``folder`` is meant as a page-level dataset (else it is read as BEIR)."""
    return (folder / QUESTIONS_FILE).exists() or (folder / PDFS_FOLDER).exists()


def load_pages(folder: Path) -> PageDataset:
    questions_file, pdfs = folder / QUESTIONS_FILE, folder / PDFS_FOLDER
    if not questions_file.is_file():
        raise DatasetError(f"{questions_file} is missing ({LAYOUT})")
    if not pdfs.is_dir():
        raise DatasetError(f"{pdfs} is missing or not a folder ({LAYOUT})")
    documents = {
        path.stem: path
        for path in sorted(pdfs.iterdir())
        if path.is_file() and path.suffix.lower() == ".pdf"
    }
    if not documents:
        raise DatasetError(f"{pdfs} holds no PDF ({LAYOUT})")
    page_counts = {name: _page_count(path) for name, path in documents.items()}
    questions: dict[str, Question] = {}
    for number, row in json_lines(questions_file):
        where = f"{questions_file}:{number}"
        text = row.get("question")
        if not isinstance(text, str):
            raise DatasetError(f"{where}: no question (a string)")
        doc_name = _document(row.get("doc_name"), documents, pdfs, where)
        evidence = row.get("evidence")
        if not isinstance(evidence, list) or not evidence:
            raise DatasetError(f"{where}: no evidence (a list of {{evidence_page_num: …}})")
        pages: set[PageUnit] = set()
        for item in evidence:
            if not isinstance(item, dict):
                raise DatasetError(f"{where}: an evidence entry is not an object")
            document = _document(item.get("doc_name", doc_name), documents, pdfs, where)
            index = item.get("evidence_page_num")
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                raise DatasetError(
                    f"{where}: evidence_page_num must be a 0-based page index, not {index!r}"
                )
            if index >= page_counts[document]:
                raise DatasetError(
                    f"{where}: evidence page {index} (0-based) is beyond "
                    f"{documents[document].name}'s {page_counts[document]} pages"
                )
            pages.add((document, index + 1))
        sources = _sources(row.get("evidence_sources"), where)
        questions[str(number)] = Question(text, doc_name, frozenset(pages), sources)
    if not questions:
        raise DatasetError(f"{questions_file}: no questions")
    return PageDataset(folder.resolve().name, pdfs, documents, page_counts, questions)


def _sources(value: object, where: str) -> frozenset[str]:
    """``evidence_sources`` (a list, or a list written as a Python string, as MMLongBench-Doc
    has it) as SOURCES' short names; unknown kinds are kept as they are spelled."""
    if value is None:
        return frozenset()
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError) as error:
            raise DatasetError(f"{where}: evidence_sources is not a list ({error})") from error
    if not isinstance(value, list | tuple) or not all(isinstance(kind, str) for kind in value):
        raise DatasetError(f"{where}: evidence_sources is not a list of strings")
    return frozenset(SOURCES.get(kind, kind) for kind in value)


def document_fold(doc_name: str) -> str:
    """The fold a document belongs to, A or B: fixed by its name alone, so both halves hold
    documents of every kind and a fold never changes when documents are added."""
    return FOLDS[int(hashlib.sha256(doc_name.encode()).hexdigest(), 16) % 2]


def _page_count(path: Path) -> int:
    import pymupdf

    try:
        with pymupdf.open(path) as doc:
            return int(doc.page_count)
    except Exception as error:  # PyMuPDF raises several types for unreadable files
        raise DatasetError(f"{path}: not a readable PDF ({error})") from error


def _document(name: object, documents: Mapping[str, Path], pdfs: Path, where: str) -> str:
    """``name``, a doc_name with a PDF; else a :class:`DatasetError` saying which is missing."""
    if not isinstance(name, str) or not name:
        raise DatasetError(f"{where}: no doc_name")
    if name not in documents:
        raise DatasetError(f"{where}: doc_name {name!r} has no PDF ({pdfs / name}.pdf)")
    return name


def question_groups(dataset: PageDataset) -> dict[str, dict[str, frozenset[PageUnit]]]:
    """The questions' evidence by group: ``fold A`` and ``fold B`` (by their document's
    fold), and where the answer sits on its page (``text``, ``table``, … when the dataset says)."""
    groups: dict[str, dict[str, frozenset[PageUnit]]] = {f"fold {fold}": {} for fold in FOLDS}
    for query_id, question in dataset.questions.items():
        groups[f"fold {document_fold(question.doc_name)}"][query_id] = question.evidence
    for source in sorted({source for q in dataset.questions.values() for source in q.sources}):
        groups[source] = {
            query_id: question.evidence
            for query_id, question in dataset.questions.items()
            if source in question.sources
        }
    return groups
