"""Fusion of the dense and sparse rankings, by hand-computed cases."""

import time
from pathlib import Path

import pytest

from rag_pipeline.config import RetrievalSettings, load_settings
from rag_pipeline.store.schema import Hit, NearestHits
from serving.retrieval import Retriever, fuse


def _hits(*scored: tuple[str, float]) -> list[Hit]:
    return [Hit(point_id, score, {"text": point_id}) for point_id, score in scored]


NEAREST = NearestHits(
    dense=_hits(("a", 0.9), ("b", 0.8), ("c", 0.1)),
    sparse=_hits(("c", 12.0), ("a", 6.0), ("d", 3.0)),
)


def test_rrf_sums_reciprocal_ranks() -> None:
    fused = fuse(NEAREST, RetrievalSettings(fusion="rrf", rrf_k=1))
    scores = {candidate.point_id: candidate.fused_score for candidate in fused}
    assert scores == pytest.approx({"a": 1 / 2 + 1 / 3, "c": 1 / 4 + 1 / 2, "b": 1 / 3, "d": 1 / 4})
    assert [candidate.point_id for candidate in fused] == ["a", "c", "b", "d"]
    first = fused[0]
    assert (first.dense_rank, first.sparse_rank, first.dense_score) == (1, 2, 0.9)


def test_weights_scale_each_ranking() -> None:
    fused = fuse(NEAREST, RetrievalSettings(fusion="rrf", rrf_k=1, sparse_weight=0.5))
    scores = {candidate.point_id: candidate.fused_score for candidate in fused}
    assert scores == pytest.approx({"a": 1 / 2 + 1 / 6, "c": 1 / 4 + 1 / 4, "b": 1 / 3, "d": 1 / 8})


def test_a_ranking_weighted_zero_brings_no_candidates_but_keeps_its_ranks() -> None:
    fused = fuse(NEAREST, RetrievalSettings(fusion="rrf", rrf_k=1, dense_weight=0.0))
    assert [candidate.point_id for candidate in fused] == ["c", "a", "d"]  # b: dense only
    assert fused[1].dense_rank == 1 and fused[1].fused_score == pytest.approx(1 / 3)


def test_pictures_found_by_clip_join_the_passages_only_when_weighted() -> None:
    nearest = NearestHits(
        dense=NEAREST.dense, sparse=NEAREST.sparse, image=_hits(("p", 0.3), ("a", 0.2))
    )
    unweighted = fuse(nearest, RetrievalSettings(fusion="rrf", rrf_k=1))
    assert "p" not in {candidate.point_id for candidate in unweighted}
    assert next(c for c in unweighted if c.point_id == "a").image_rank == 2
    weighted = fuse(nearest, RetrievalSettings(fusion="rrf", rrf_k=1, image_weight=1.0))
    assert {c.point_id: c.fused_score for c in weighted}["p"] == pytest.approx(1 / 2)


def test_minmax_normalises_each_ranking_to_zero_one() -> None:
    fused = fuse(NEAREST, RetrievalSettings(fusion="minmax"))
    scores = {candidate.point_id: candidate.fused_score for candidate in fused}
    assert scores == pytest.approx({"a": 1.0 + 3 / 9, "b": 0.7 / 0.8, "c": 0.0 + 1.0, "d": 0.0})


def test_dbsf_clips_scores_to_three_standard_deviations() -> None:
    fused = fuse(NEAREST, RetrievalSettings(fusion="dbsf"))
    assert all(0.0 <= candidate.fused_score <= 2.0 for candidate in fused)
    assert fused[0].point_id == "a"


def test_one_empty_ranking_leaves_the_other_order() -> None:
    fused = fuse(NearestHits(dense=_hits(("x", 0.5), ("y", 0.4)), sparse=[]), RetrievalSettings())
    assert [candidate.point_id for candidate in fused] == ["x", "y"]
    single = fuse(
        NearestHits(dense=_hits(("x", 0.5)), sparse=[]), RetrievalSettings(fusion="minmax")
    )
    assert single[0].fused_score == 1.0


@pytest.mark.parametrize("fusion", ["dbsf", "minmax"])
def test_a_keyword_ranking_of_one_hit_or_of_ties_counts_as_fully_as_its_best(fusion: str) -> None:
    # An identifier's chunk, which the dense model ranks near the bottom of its 20.
    dense = _hits(*((f"d{i}", 0.9 - 0.02 * i) for i in range(19)), ("x", 0.52))
    settings = RetrievalSettings(fusion=fusion)  # type: ignore[arg-type]
    unique = fuse(NearestHits(dense=dense, sparse=_hits(("x", 7.5))), settings)
    assert unique[0].point_id == "x"
    tied = fuse(NearestHits(dense=dense, sparse=_hits(("x", 2.0), ("d5", 2.0))), settings)
    assert [candidate.point_id for candidate in tied[:2]] == ["d5", "x"]


def test_dbsf_matches_qdrant_on_a_hand_computed_case() -> None:
    # Sparse scores 12, 6, 3: mean 7, sample std 4.583; (s - (7 - 13.748)) / 27.495.
    fused = fuse(NearestHits(dense=[], sparse=NEAREST.sparse), RetrievalSettings(fusion="dbsf"))
    scores = {candidate.point_id: candidate.fused_score for candidate in fused}
    assert scores == pytest.approx({"c": 0.6818, "a": 0.4636, "d": 0.3545}, abs=1e-3)


def test_a_query_in_a_language_the_dense_model_lacks_is_ranked_by_keywords(
    tmp_path: Path,
) -> None:
    retriever = Retriever(load_settings(tmp_path), store=None)  # type: ignore[arg-type]
    english, _ = retriever.rank("owls at night", NEAREST, keep=4, rerank=False)
    chinese, _ = retriever.rank("猫头鹰在夜间捕猎吗", NEAREST, keep=4, rerank=False)
    assert [c.point_id for c in english][:2] == ["a", "c"]
    assert [c.point_id for c in chinese] == ["c", "a", "d"]  # b, found by dense only, is out
    multilingual = load_settings(tmp_path, embedding={"dense_languages": []})
    either = Retriever(multilingual, store=None)  # type: ignore[arg-type]
    assert [c.point_id for c in either.rank("猫头鹰", NEAREST, keep=4)[0]][:2] == ["a", "c"]


def test_equal_fused_scores_keep_the_order_of_the_ranking_that_weighs_more() -> None:
    clipped = NearestHits(
        dense=_hits(("x", 0.9), ("y", 0.8)),
        sparse=_hits(("y", 50.0), ("x", 49.0), *[(f"n{i}", 1.0) for i in range(20)]),
    )
    keywords = fuse(clipped, RetrievalSettings(fusion="dbsf", dense_weight=0.0))
    assert keywords[0].fused_score == keywords[1].fused_score == 1.0  # both clipped
    assert [c.point_id for c in keywords[:2]] == ["y", "x"]


def test_freshness_is_off_by_default_and_when_on_favours_the_more_recent_report(
    tmp_path: Path,
) -> None:
    def report(point_id: str, score: float, file_name: str, mtime: float) -> Hit:
        payload = {"text": point_id, "file_path": f"/docs/{file_name}", "mtime": mtime}
        return Hit(point_id, score, payload)

    now = time.time()
    nearest = NearestHits(
        dense=[
            report("old", 0.81, "ACME_2019_10K.pdf", now),  # its period, not its mtime, counts
            report("new", 0.80, "ACME_2024_10K.pdf", now - 5 * 365 * 86_400),
            report("undated", 0.79, "notes.md", now - 2 * 86_400),
        ],
        sparse=[],
    )
    # Reciprocal ranks: scores close enough for freshness to decide.
    off = Retriever(load_settings(tmp_path, retrieval={"fusion": "rrf"}), store=None)  # type: ignore[arg-type]
    ranked, _ = off.rank("acme revenue", nearest, keep=3)
    assert [c.point_id for c in ranked] == ["old", "new", "undated"]
    assert all(c.freshness_score is None for c in ranked)

    on = Retriever(
        load_settings(
            tmp_path,
            retrieval={"fusion": "rrf", "freshness_half_life_days": 365, "freshness_weight": 0.5},
        ),
        store=None,  # type: ignore[arg-type]
    )
    ranked, _ = on.rank("acme revenue", nearest, keep=3)
    assert [c.point_id for c in ranked] == ["undated", "new", "old"]  # by mtime, two days old
    scores = {c.point_id: c.freshness_score for c in ranked}
    assert scores["undated"] == pytest.approx(0.5, abs=0.01)
    assert scores["new"] > scores["old"] > 0
    assert ranked[0].score == pytest.approx(ranked[0].fused_score + scores["undated"])


def test_a_question_naming_a_year_prefers_the_documents_whose_file_name_names_it(
    tmp_path: Path,
) -> None:
    def document(point_id: str, score: float, file_name: str, title: str = "") -> Hit:
        payload = {"text": point_id, "file_path": f"/docs/{file_name}", "title": title}
        return Hit(point_id, score, payload)

    nearest = NearestHits(
        dense=[
            document("fy2021", 0.81, "ACME_2021_10K.pdf"),
            document("fy2022", 0.80, "ACME_2022_10K.pdf"),
            # A year in a title is a topic, not the document's period.
            document("olympics", 0.79, "winter-games.md", title="The 2022 Winter Olympics"),
        ],
        sparse=[],
    )
    retriever = Retriever(load_settings(tmp_path, retrieval={"fusion": "rrf"}), store=None)  # type: ignore[arg-type]
    ranked, _ = retriever.rank("ACME capital expenditure in FY2022", nearest, keep=3)
    assert [c.point_id for c in ranked] == ["fy2022", "fy2021", "olympics"]
    assert [c.named_year_score for c in ranked] == [0.5, 0.0, 0.0]
    assert ranked[0].score == pytest.approx(ranked[0].fused_score + 0.5)
    unnamed, _ = retriever.rank("ACME capital expenditure", nearest, keep=3)
    assert [c.point_id for c in unnamed] == ["fy2021", "fy2022", "olympics"]
    assert all(c.named_year_score is None for c in unnamed)
    off = Retriever(
        load_settings(tmp_path, retrieval={"fusion": "rrf", "named_year_weight": 0}),
        store=None,  # type: ignore[arg-type]
    )
    ranked, _ = off.rank("ACME capital expenditure in FY2022", nearest, keep=3)
    assert [c.point_id for c in ranked] == ["fy2021", "fy2022", "olympics"]


def test_a_page_that_several_passages_match_rises_by_its_best_other_passage(
    tmp_path: Path,
) -> None:
    def on_page(point_id: str, score: float, doc_id: str, page: int | None) -> Hit:
        return Hit(point_id, score, {"text": point_id, "doc_id": doc_id, "page": page})

    nearest = NearestHits(
        dense=[
            on_page("lone", 0.90, "report.pdf", 3),
            on_page("title", 0.85, "report.pdf", 7),
            on_page("notes", 0.84, "notes.md", None),
            on_page("rows", 0.80, "report.pdf", 7),
            on_page("other report", 0.79, "other.pdf", 7),  # page 7 of another document
            on_page("footnote", 0.70, "report.pdf", 7),
        ],
        sparse=[],
    )
    # Reciprocal ranks, with a page weight of 0.5 and without (the default); no diversity.
    alone_settings = load_settings(
        tmp_path, retrieval={"fusion": "rrf", "page_weight": 0, "page_passages": None}
    )
    alone = Retriever(alone_settings, store=None)  # type: ignore[arg-type]
    ranked, _ = alone.rank("cash flow statement", nearest, keep=6)
    assert [c.point_id for c in ranked] == [
        "lone",
        "title",
        "notes",
        "rows",
        "other report",
        "footnote",
    ]
    assert all(c.page_score is None for c in ranked)

    in_context_settings = load_settings(
        tmp_path, retrieval={"fusion": "rrf", "page_weight": 0.5, "page_passages": None}
    )
    in_context = Retriever(in_context_settings, store=None)  # type: ignore[arg-type]
    ranked, _ = in_context.rank("cash flow statement", nearest, keep=6)
    assert [c.point_id for c in ranked][:4] == ["title", "rows", "footnote", "lone"]
    scores = {c.point_id: c.page_score for c in ranked}
    assert scores["lone"] == scores["other report"] == 0.0  # nothing else on their pages
    assert scores["notes"] is None  # no page: no page context
    found = {c.point_id: c for c in ranked}
    title, rows, footnote = found["title"], found["rows"], found["footnote"]
    # The best other passage of the page, not the sum of the others.
    assert title.page_score == pytest.approx(0.5 * rows.fused_score)
    assert rows.page_score == footnote.page_score == pytest.approx(0.5 * title.fused_score)
    assert title.score == pytest.approx(title.fused_score + title.page_score)


def test_a_long_question_weighs_its_keywords_less_than_a_short_one(tmp_path: Path) -> None:
    # Both rankings find "both"; the runner-up is the keywords' best at equal weights.
    nearest = NearestHits(
        dense=_hits(("both", 0.9), ("read whole", 0.8), ("far", 0.1)),
        sparse=_hits(("shares words", 20.0), ("both", 12.0), ("few words", 2.0)),
    )
    short = "what owls hunt"
    long = (
        "Which of the small animals that barn owls hunt at night, such as mice, voles, shrews, "
        "rats, rabbits, frogs, lizards and insects, make up most of their diet in farmland and "
        "wetland across Europe?"
    )
    settings = load_settings(tmp_path, retrieval={"fusion": "rrf"})
    retriever = Retriever(settings, store=None)  # type: ignore[arg-type]
    assert retriever.sparse.query_terms(short) == 2
    assert retriever.sparse.query_terms(long) == 20

    def order(question: str, retriever: Retriever = retriever) -> list[str]:
        return [c.point_id for c in retriever.rank(question, nearest, keep=4)[0]]

    assert order(short)[:2] == ["both", "shares words"]
    ranked = retriever.rank(long, nearest, keep=4)[0]
    assert [c.point_id for c in ranked][:2] == ["both", "read whole"]
    keywords_only = next(c for c in ranked if c.point_id == "shares words")
    assert keywords_only.fused_score == pytest.approx(0.5 / (60 + 1))  # weight 10 / 20 terms

    full_weight = load_settings(tmp_path, retrieval={"fusion": "rrf", "sparse_query_terms": None})
    unscaled = Retriever(full_weight, store=None)  # type: ignore[arg-type]
    assert order(long, unscaled)[:2] == ["both", "shares words"]


def test_page_diversity_shows_other_pages_before_a_pages_further_passages(
    tmp_path: Path,
) -> None:
    def on_page(point_id: str, score: float, page: int | None, doc_id: str = "r.pdf") -> Hit:
        return Hit(point_id, score, {"text": point_id, "doc_id": doc_id, "page": page})

    nearest = NearestHits(
        dense=[
            on_page("p1 a", 0.9, 1),
            on_page("p1 b", 0.89, 1),
            on_page("p1 c", 0.88, 1),
            on_page("notes", 0.87, None, "notes.md"),
            on_page("other p1", 0.86, 1, "other.pdf"),
            on_page("p2", 0.5, 2),
        ],
        sparse=[],
    )

    def order(**retrieval: object) -> list[str]:
        settings = load_settings(
            tmp_path, retrieval={"fusion": "rrf", "page_weight": 0, **retrieval}
        )
        retriever = Retriever(settings, store=None)  # type: ignore[arg-type]
        return [c.point_id for c in retriever.rank("q", nearest, keep=6)[0]]

    assert order(page_passages=None) == ["p1 a", "p1 b", "p1 c", "notes", "other p1", "p2"]
    assert order(page_passages=1) == ["p1 a", "notes", "other p1", "p2", "p1 b", "p1 c"]
    assert order(page_passages=2) == ["p1 a", "p1 b", "notes", "other p1", "p2", "p1 c"]


# Both fusions tie a lone keyword hit with the dense side's best (DBSF spreads the dense scores).
@pytest.mark.parametrize("fusion", ["rrf", "minmax"])
def test_a_passage_holding_a_rare_identifier_comes_before_what_only_the_dense_side_found(
    tmp_path: Path, fusion: str
) -> None:
    def note(point_id: str, score: float, text: str) -> Hit:
        return Hit(point_id, score, {"text": text, "doc_id": point_id})

    nearest = NearestHits(
        dense=[
            note("lookalike", 0.62, "Note about zq0041 and other things."),  # dense-only
            note("near", 0.61, "Reminder to call the plumber on Monday."),
        ],
        sparse=[note("exact", 7.5, "Part ZQ0042 is the spare valve for the pump.")],
    )
    settings = load_settings(tmp_path, retrieval={"fusion": fusion})
    retriever = Retriever(settings, store=None)  # type: ignore[arg-type]
    ranked, _ = retriever.rank("zq0042", nearest, keep=3)
    assert [c.point_id for c in ranked] == ["exact", "lookalike", "near"]
    # A word found in many documents' passages is no identifier of one: the fused order stands.
    common = NearestHits(
        dense=nearest.dense,
        sparse=[note(f"form {n}", 7.5 - n, "Annual report on form 10-K.") for n in range(5)],
    )
    fused = [c.point_id for c in fuse(common, settings.retrieval)]
    assert [c.point_id for c in retriever.rank("10-K", common, keep=7)[0]] == fused
    off = load_settings(tmp_path, retrieval={"fusion": fusion, "identifier_documents": 0})
    plain = Retriever(off, store=None)  # type: ignore[arg-type]
    assert [c.point_id for c in plain.rank("zq0042", nearest, keep=3)[0]] == [
        "lookalike",
        "exact",
        "near",
    ]
