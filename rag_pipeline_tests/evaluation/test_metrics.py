"""The metrics against hand-computed cases."""

import math

import pytest

from evaluation.metrics import evaluate, mrr_at, ndcg_at, rank_by_score, recall_at

GRADES = {"b": 2, "c": 1, "d": 1}


def test_ndcg_uses_graded_gains_and_the_ideal_order_of_all_judged_documents() -> None:
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    ideal = 2 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at(["a", "b", "c"], GRADES, 10) == pytest.approx(dcg / ideal)
    assert ndcg_at(["b", "c", "d"], GRADES, 10) == pytest.approx(1.0)
    assert ndcg_at(["a", "e", "b"], GRADES, 2) == 0.0  # b is beyond the cut


def test_recall_counts_relevant_documents_in_the_cut() -> None:
    assert recall_at(["a", "b", "c"], GRADES, 100) == pytest.approx(2 / 3)
    assert recall_at(["a", "b", "c"], GRADES, 1) == 0.0


def test_mrr_is_the_reciprocal_rank_of_the_first_relevant_document() -> None:
    assert mrr_at(["a", "b", "c"], GRADES, 10) == 0.5
    assert mrr_at(["a", "e"], GRADES, 10) == 0.0
    assert mrr_at(["a", "b"], GRADES, 1) == 0.0


def test_ties_are_broken_by_document_id() -> None:
    assert rank_by_score({"x": 1.0, "a": 1.0, "m": 2.0}) == ["m", "a", "x"]


def test_queries_without_a_relevant_document_are_left_out_of_the_means() -> None:
    qrels = {"q1": {"b": 1}, "q2": {"z": 0}, "q3": {"c": 1}}
    rankings = {"q1": ["b"], "q2": ["z"]}  # q3 retrieved nothing: zero
    scores = evaluate(rankings, qrels)
    assert scores["queries"] == 2
    assert scores["ndcg@10"] == pytest.approx(0.5)
    assert scores["recall@100"] == pytest.approx(0.5)
    assert scores["mrr@10"] == pytest.approx(0.5)
