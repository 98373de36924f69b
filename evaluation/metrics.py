"""Ranking metrics as BEIR reports them (trec_eval's definitions), over ranked document lists.

- nDCG@k: gain is the graded relevance itself (trec_eval's, which BEIR uses through
  pytrec_eval), discount log2(rank + 1); the ideal ranking orders all judged documents by
  relevance;
- Recall@k: relevant documents (relevance > 0) in the first k, over all relevant ones;
- MRR@k: 1 / rank of the first relevant document in the first k, 0 without one.

A ranking is a list of document ids, best first, each at most once (ties must already be broken:
evaluation code sorts by score, then by id). Queries without any relevant document are left out
of the means, as BEIR leaves out queries missing from the qrels.

Page-level evidence (``evaluation.pages``) ranks pages, each a (document, page) unit:

- page-hit@k: 1 when one of the query's evidence pages is among the first k units, else 0;
- doc-hit@k: 1 when a page of an evidence document is among the first k units;
- MRR@k as above, over pages: 1 / rank of the first evidence page.

What an answer is built from is passages, in the retrieval's order, each on one or more pages:

- passage-hit@k: 1 when one of the query's evidence pages is among the pages of the first k
  passages (a passage counting for every page its boxes lie on), else 0. Five passages of one
  page count as one page, as the answerer reads them.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import TypeVar

Qrels = Mapping[str, Mapping[str, int]]  # query id → document id → graded relevance
PageUnit = tuple[str, int]  # (document name, 1-based page number)
Passage = tuple[PageUnit, ...]  # the pages one passage lies on
Unit = TypeVar("Unit", bound=Hashable)
PASSAGE_METRICS = ("passage-hit@1", "passage-hit@5", "passage-hit@10")
PAGE_METRICS = ("page-hit@1", "page-hit@5", "page-hit@10", "doc-hit@5", "mrr@10")


def ndcg_at(ranking: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    ideal = sorted((grade for grade in relevance.values() if grade > 0), reverse=True)[:k]
    ideal_dcg = sum(grade / math.log2(rank + 2) for rank, grade in enumerate(ideal))
    if ideal_dcg == 0:
        return 0.0
    dcg = sum(relevance.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranking[:k]))
    return dcg / ideal_dcg


def recall_at(ranking: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    relevant = {doc for doc, grade in relevance.items() if grade > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranking[:k])) / len(relevant)


def mrr_at(ranking: Sequence[Unit], relevance: Mapping[Unit, int], k: int) -> float:
    for rank, doc in enumerate(ranking[:k], 1):
        if relevance.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


def evaluate(rankings: Mapping[str, Sequence[str]], qrels: Qrels) -> dict[str, float]:
    """Mean nDCG@10, Recall@100 and MRR@10 over the queries with a relevant document.

    A judged query with no ranking (nothing retrieved) counts as zero.
    """
    judged = [query for query, grades in qrels.items() if any(g > 0 for g in grades.values())]
    if not judged:
        return {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0, "queries": 0}
    totals = {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    for query in judged:
        ranking, grades = rankings.get(query, []), qrels[query]
        totals["ndcg@10"] += ndcg_at(ranking, grades, 10)
        totals["recall@100"] += recall_at(ranking, grades, 100)
        totals["mrr@10"] += mrr_at(ranking, grades, 10)
    return {name: value / len(judged) for name, value in totals.items()} | {"queries": len(judged)}


def rank_by_score(scores: Mapping[str, float]) -> list[str]:
    """Document ids by score, highest first; equal scores in id order (deterministic)."""
    return [doc for doc, _ in sorted(scores.items(), key=lambda item: (-item[1], item[0]))]


def hit_at(ranking: Sequence[Unit], relevant: Collection[Unit], k: int) -> float:
    """1.0 when any of ``relevant`` is among the first ``k`` of ``ranking``, else 0.0."""
    return 1.0 if any(unit in relevant for unit in ranking[:k]) else 0.0


def evaluate_pages(
    rankings: Mapping[str, Sequence[PageUnit]], evidence: Mapping[str, Collection[PageUnit]]
) -> dict[str, float]:
    """Mean page-hit@1/5/10, doc-hit@5 and MRR@10 over the queries with evidence.

    A query with evidence and no ranking (nothing retrieved) counts as zero.
    """
    judged = [query for query, pages in evidence.items() if pages]
    totals = dict.fromkeys(PAGE_METRICS, 0.0)
    for query in judged:
        ranking, pages = rankings.get(query, []), evidence[query]
        documents = {document for document, _ in pages}
        for k in (1, 5, 10):
            totals[f"page-hit@{k}"] += hit_at(ranking, pages, k)
        totals["doc-hit@5"] += hit_at([document for document, _ in ranking], documents, 5)
        totals["mrr@10"] += mrr_at(ranking, dict.fromkeys(pages, 1), 10)
    count = max(len(judged), 1)
    return {name: value / count for name, value in totals.items()} | {"queries": len(judged)}


def pages_of(passages: Sequence[Passage]) -> list[PageUnit]:
    """The pages of ``passages`` in the order of their first passage, each once."""
    return list(dict.fromkeys(page for passage in passages for page in passage))


def evaluate_passages(
    rankings: Mapping[str, Sequence[Passage]], evidence: Mapping[str, Collection[PageUnit]]
) -> dict[str, float]:
    """Mean passage-hit@1/5/10 and the page metrics (pages ranked by their first passage) over
    the queries with evidence. A query with evidence and no passage counts as zero."""
    judged = [query for query, pages in evidence.items() if pages]
    totals = dict.fromkeys(PASSAGE_METRICS, 0.0)
    for query in judged:
        passages, pages = rankings.get(query, []), evidence[query]
        for k in (1, 5, 10):
            totals[f"passage-hit@{k}"] += float(
                any(page in pages for page in pages_of(passages[:k]))
            )
    count = max(len(judged), 1)
    by_page = evaluate_pages(
        {query: pages_of(passages) for query, passages in rankings.items()}, evidence
    )
    return {name: value / count for name, value in totals.items()} | by_page
