"""Retrieval settings chosen by cross-validation over documents, on both PDF dev sets.

Each dev set's documents are split in two fixed halves (``evaluation.pages.document_fold``). A
setting is tuned on the questions of one half of *both* sets (the mean of the two sets'
passage-hit@5) and reported on the other half, then the other way round. Printed in the same
run: on each fold, the strongest of the naive page lines (``pages dense``, ``pages hybrid``,
each with and without the file name) there, the configured settings, and
for each tuned setting every value's figures, so that a default is seen to hold on the half it
was not chosen on.

Each dataset is indexed as ``rag-pipeline eval`` indexes it (``<home>/eval/<name>``: run that
first, or let this do it); each question is searched once and every combination ranked from
that through ``Retriever.rank``, the chat page's code. SciFact and cmrc2018 have no pages, so
only the fusion moves them: check a new default there with ``rag-pipeline eval``.

    python bench/retrieval_folds.py [--home data] [DATASET_DIR ...]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluation.harness import index_in_scratch
from evaluation.metrics import Passage, evaluate_passages
from evaluation.pages import (
    FOLDS,
    PageBaseline,
    PageDataset,
    document_names,
    load_pages,
    named,
    page_sparse_encoder,
    passages_of,
    question_groups,
    rank_baselines,
    read_pages,
    strongest_baseline,
)
from evaluation.pages.report import over
from rag_pipeline.config import RetrievalSettings, load_settings
from rag_pipeline.embedding import open_embedding_cache
from rag_pipeline.store.schema import NearestHits
from serving.retrieval import Retriever, live_index

SHARED = Path(__file__).resolve().parents[2] / "shared"
DATASETS = [SHARED / "eval" / "financebench-dev", SHARED / "eval" / "mmlongbench-dev"]
# Every value tried for each tuned setting; the grid is their product.
GRID: dict[str, list[Any]] = {
    "fusion": ["dbsf", "rrf", "minmax"],
    "page_weight": [0.0, 0.05, 0.1, 0.25],
    "page_keyword_weight": [0.0, 0.2, 0.3, 0.5],
    "named_year_weight": [0.0, 0.01, 0.5],
    "page_passages": [None, 1, 2],
    "identifier_documents": [0, 3],
    "sparse_query_terms": [None, 10],
}
METRIC = "passage-hit@5"
KEEP = 10  # passages ranked per question: the metric looks at 5, passage-hit@10 at 10


@dataclass
class Searched:
    """One dataset's questions, each searched once."""

    name: str
    folds: dict[str, dict[str, frozenset]]  # fold → question id → evidence pages
    texts: dict[str, str]
    nearest: dict[str, NearestHits]
    names: dict[str, str]
    baselines: dict[str, dict[str, list[Passage]]]  # naive page line → question → passages


def search_dataset(home: Path, folder: Path, stack: ExitStack) -> tuple[Searched, Retriever]:
    settings = load_settings(home)
    dataset: PageDataset = load_pages(folder)
    indexed = index_in_scratch(settings, settings.home / "eval" / dataset.name, [dataset.pdfs])
    names = document_names(indexed.settings, dataset)
    texts = {query_id: question.text for query_id, question in dataset.questions.items()}
    groups = question_groups(dataset)
    folds = {fold: groups[f"fold {fold}"] for fold in FOLDS}
    live_settings, store = stack.enter_context(live_index(indexed.settings))
    retriever = Retriever(live_settings, store)
    config = live_settings.retrieval
    nearest = {}
    for query_id, text in texts.items():
        found = retriever.search(text, limit=config.prefetch)
        nearest[query_id] = found
    units, pages = read_pages(dataset)
    variants = {"": pages, " + name": named(units, pages)}
    sparse = {
        suffix: page_sparse_encoder(live_settings, unit_texts)
        for suffix, unit_texts in variants.items()
    }
    cache = open_embedding_cache(live_settings)
    try:
        built = {
            suffix: PageBaseline.build((units, unit_texts), retriever.dense, sparse[suffix], cache)
            for suffix, unit_texts in variants.items()
        }
    finally:
        cache.close()
    baselines = rank_baselines(built, texts, retriever.dense, sparse, config)
    return Searched(dataset.name, folds, texts, nearest, names, baselines), retriever


def scores(
    searched: Searched, retriever: Retriever, variant: RetrievalSettings
) -> dict[str, float]:
    """fold → passage-hit@5 of ``variant``."""
    ranked: dict[str, list[Passage]] = {}
    for query_id, text in searched.texts.items():
        candidates, _ = retriever.rank(
            text, searched.nearest[query_id], keep=KEEP, fusion=variant, rerank=False
        )
        ranked[query_id] = passages_of(candidates[:KEEP], searched.names)
    return {
        fold: evaluate_passages(ranked, evidence)[METRIC]
        for fold, evidence in searched.folds.items()
    }


def reference_scores(searched: Searched) -> dict[str, tuple[str, float]]:
    """fold → the strongest naive page line there, and its passage-hit@5."""
    strongest = {}
    for fold, evidence in searched.folds.items():
        by_line = {
            line: evaluate_passages(ranked, evidence) for line, ranked in searched.baselines.items()
        }
        best = strongest_baseline(by_line)
        strongest[fold] = (best, by_line[best][METRIC])
    return strongest


def label(values: Mapping[str, Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in values.items())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("datasets", type=Path, nargs="*", default=DATASETS)
    parser.add_argument("--home", type=Path, default=Path("data"))
    args = parser.parse_args()
    with ExitStack() as stack:
        searched = [search_dataset(args.home, folder, stack) for folder in args.datasets]
        base = searched[0][1].settings.retrieval
        combos = [
            dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())
        ]
        table: dict[str, dict[str, dict[str, float]]] = {}  # combo → dataset → fold → score
        for combo in combos:
            variant = base.model_copy(update=combo)
            table[label(combo)] = {
                found.name: scores(found, retriever, variant) for found, retriever in searched
            }
        configured = {key: getattr(base, key) for key in GRID}
        sizes = {found.name: {f: len(e) for f, e in found.folds.items()} for found, _ in searched}
        print(f"{METRIC} by fold (questions per fold: {sizes})")
        reference = {found.name: reference_scores(found) for found, _ in searched}
        print(f"the strongest naive page line on each fold: {reference}")
        print(f"configured ({label(configured)}): {table[label(configured)]}")

        def mean_on(key: str, fold: str) -> float:
            return statistics.fmean(by_fold[fold] for by_fold in table[key].values())

        for tuned_on in FOLDS:
            reported_on = next(fold for fold in FOLDS if fold != tuned_on)
            best = max(table, key=lambda key: (mean_on(key, tuned_on), key == label(configured)))
            print(
                f"\ntuned on fold {tuned_on} (mean {mean_on(best, tuned_on):.4f}): {best}\n"
                f"  reported on fold {reported_on}: "
                + ", ".join(
                    f"{name} {by_fold[reported_on]:.4f} "
                    f"(strongest naive line {reference[name][reported_on][0]} "
                    f"{reference[name][reported_on][1]:.4f}, "
                    f"{over(by_fold[reported_on], reference[name][reported_on][1])})"
                    for name, by_fold in table[best].items()
                )
            )
        print("\nthe 8 best combinations by the mean of all four halves (dataset fold A / fold B):")
        for key in sorted(
            table, key=lambda key: -statistics.fmean([mean_on(key, fold) for fold in FOLDS])
        )[:8]:
            figures = "  ".join(
                f"{name} {by_fold['A']:.4f} / {by_fold['B']:.4f}"
                for name, by_fold in table[key].items()
            )
            print(f"  {key}: {figures}")
        print("\neach setting alone, the others as configured (dataset fold A / fold B):")
        for key, values in GRID.items():
            for value in values:
                row = table[label(configured | {key: value})]
                figures = "  ".join(
                    f"{name} {by_fold['A']:.4f} / {by_fold['B']:.4f}"
                    for name, by_fold in row.items()
                )
                mark = "  ← configured" if value == configured[key] else ""
                print(f"  {key}={value}: {figures}{mark}")


if __name__ == "__main__":
    main()
