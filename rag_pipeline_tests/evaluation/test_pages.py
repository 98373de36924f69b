"""``rag-pipeline eval`` on a PDF question set: evidence pages found, against the page baseline."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pymupdf
import pytest

from evaluation.metrics import evaluate_pages, evaluate_passages, hit_at
from evaluation.pages import PageBaseline, document_fold, first_tokens, passages_of
from rag_pipeline.config import load_settings
from rag_pipeline.embedding import DenseEncoder, SparseVector
from rag_pipeline.store import Hit, payload_pages
from rag_pipeline_tests.conftest import Cli

# doc_name → its pages, each (heading, text); every fact sits on one known page.
DOCUMENTS: dict[str, list[tuple[str, str]]] = {
    "ACME_2022_10K": [
        (
            "Business overview",
            "Acme Corporation designs garden tools and sells them through hardware stores in "
            "Europe. Its best known product is a cordless hedge trimmer.",
        ),
        (
            "Risk factors",
            "Weather drives demand for garden tools: a wet spring lowers sales of lawn mowers, "
            "and a drought raises sales of sprinklers and hoses.",
        ),
        (
            "Consolidated balance sheet",
            "Total inventories were 4,812 million dollars at the end of fiscal 2022, up from "
            "3,990 million dollars a year earlier, because of slower shipments.",
        ),
        (
            "Human capital",
            "Acme employs 12,400 people, most of them in its factories in Poland and Portugal; "
            "staff turnover fell to nine percent.",
        ),
    ],
    "BOREAL_2023_10Q": [
        (
            "Fleet",
            "Boreal Shipping operates forty-two container vessels on routes between Asia and "
            "northern Europe, chartered for three years on average.",
        ),
        (
            "Fuel hedging",
            "The company hedges bunker fuel with swaps covering sixty percent of the fuel it "
            "expects to burn over the next twelve months.",
        ),
        (
            "Dividends",
            "The board declared a quarterly dividend of 0.85 dollars per share, payable to "
            "shareholders of record on the first of September.",
        ),
        (
            "Legal proceedings",
            "A class action about port congestion surcharges is pending in Rotterdam; Boreal "
            "believes the claims are without merit.",
        ),
    ],
    "CIRRUS_2021_8K": [
        (
            "Leadership change",
            "Cirrus Airlines appointed Maria Okafor as chief executive officer, succeeding "
            "Tom Brandt, who retires after eleven years at the helm.",
        ),
        (
            "Share repurchase",
            "The board authorised the repurchase of up to 500 million dollars of common stock "
            "over the next two years.",
        ),
        (
            "Aircraft order",
            "Cirrus ordered thirty narrow-body aircraft for delivery from 2024, to replace its "
            "oldest jets and cut fuel burn per seat.",
        ),
    ],
    "DELTAFOODS_2020_10K": [
        (
            "Segments",
            "Delta Foods reports two segments: frozen meals, and snacks sold to supermarkets "
            "and vending machine operators.",
        ),
        (
            "Raw materials",
            "Wheat, cocoa and palm oil are the main raw materials; cocoa prices rose by a third "
            "during the year and squeezed the snack margin.",
        ),
        (
            "Research and development",
            "The laboratory in Lyon developed a plant-based frozen lasagne launched in the "
            "autumn across French supermarkets.",
        ),
        (
            "Properties",
            "Delta Foods owns six bakeries and leases its head office in Chicago under a lease "
            "that expires in 2031.",
        ),
    ],
}
# (question, doc_name, 0-based evidence pages)
QUESTIONS = [
    ("How many people does Acme employ?", "ACME_2022_10K", [3]),
    ("What were Acme's total inventories at the end of fiscal 2022?", "ACME_2022_10K", [2]),
    ("What quarterly dividend per share did Boreal's board declare?", "BOREAL_2023_10Q", [2]),
    ("Who became chief executive officer of Cirrus Airlines?", "CIRRUS_2021_8K", [0]),
    (
        "How much stock may Cirrus repurchase, and which aircraft did it order?",
        "CIRRUS_2021_8K",
        [1, 2],
    ),
    ("Which raw material prices hurt Delta Foods' snack margin?", "DELTAFOODS_2020_10K", [1]),
]
PAGE_COUNT = sum(len(pages) for pages in DOCUMENTS.values())
METHODS = {
    "dense",
    "bm25",
    "hybrid rrf",
    "hybrid dbsf",
    "hybrid minmax",
    "hybrid dbsf + freshness",
    "hybrid dbsf - page context",
    "hybrid dbsf - page keywords",
    "hybrid dbsf - page diversity",
    "hybrid dbsf - named parts",
    "hybrid dbsf - query length",
    "hybrid dbsf - named year",
    "hybrid dbsf - identifiers",
}
BASELINES = {"pages dense + name", "pages hybrid + name", "pages dense", "pages hybrid"}


# Boilerplate around the facts, so that a page is a page's worth of text: each page gets its own
# rotation of it, and fills most of a chunk (so chunks do not pack two pages together).
FILLER = [
    "Amounts are stated in millions unless noted otherwise.",
    "See the notes to the consolidated financial statements for further detail.",
    "Forward-looking statements involve risks and uncertainties described elsewhere.",
    "Management reviews these figures with the audit committee every quarter.",
    "Comparative figures were reclassified to conform to the current presentation.",
    "The information below should be read together with the annual report.",
    "No single customer accounted for more than ten percent of revenue.",
    "Seasonal patterns may cause results to vary from one quarter to the next.",
    "Certain totals may not add up because of rounding.",
    "The discussion that follows compares the period with the prior year.",
]


def write_pdf(path: Path, pages: list[tuple[str, str]], start: int) -> None:
    doc = pymupdf.open()
    for number, (heading, text) in enumerate(pages, start):
        filler = " ".join(FILLER[number % len(FILLER) :] + FILLER[: number % len(FILLER)])
        page = doc.new_page(width=595, height=842)
        page.insert_text((72, 110), heading, fontsize=16, fontname="hebo")
        page.insert_textbox(pymupdf.Rect(72, 130, 523, 700), f"{text} {filler}", fontsize=10)
    doc.save(path)


def write_dataset(folder: Path) -> Path:
    (folder / "pdfs").mkdir(parents=True)
    for number, (name, pages) in enumerate(DOCUMENTS.items()):
        write_pdf(folder / "pdfs" / f"{name}.pdf", pages, start=3 * number)
    lines = [
        json.dumps(
            {
                "question": text,
                "doc_name": doc_name,
                "evidence": [{"evidence_page_num": page} for page in pages],
            }
        )
        for text, doc_name, pages in QUESTIONS
    ]
    (folder / "questions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


# -- the whole evaluation, through the real pipeline -----------------------------------------------


def test_page_eval_finds_the_evidence_pages_and_reports_the_page_baseline(
    cli: Cli, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = write_dataset(tmp_path / "minibench")
    result = cli("eval", dataset, "--home", home, "--json")
    assert result.code == 0, result.err
    report = result.json()
    assert METHODS | BASELINES | {"run"} == report.keys()
    run = report["run"]
    assert run["documents"] == len(DOCUMENTS) and run["pages"] == PAGE_COUNT
    assert run["configured_method"] == "hybrid dbsf"
    # The configured method is compared with the strongest naive line of the run.
    strongest = run["reference_baseline"]
    assert strongest in BASELINES
    assert report[strongest]["passage-hit@5"] == max(
        report[line]["passage-hit@5"] for line in BASELINES
    )
    assert run["sides"] == ["dense", "bm25"]
    assert run["not_indexed"] == {}
    # Each fact is on one page, in words of its own: every pipeline method puts that page
    # first, pages beyond a document's first (0-based evidence numbers) included.
    for method in METHODS:
        metrics = report[method]
        assert metrics["queries"] == len(QUESTIONS), method
        assert metrics["page-hit@1"] == metrics["passage-hit@1"] == 1.0, method
        assert metrics["mrr@10"] == 1.0, method
        assert metrics["doc-hit@5"] == 1.0, method
    # The naive baseline finds the pages too, less sharply (15 pages: @5 is not a given).
    for method in BASELINES:
        metrics = report[method]
        assert metrics["queries"] == len(QUESTIONS), method
        assert metrics["page-hit@5"] == 1.0, method
        assert 0 < metrics["page-hit@1"] <= metrics["page-hit@5"], method
        assert metrics["page-hit@1"] <= metrics["mrr@10"] <= metrics["page-hit@10"], method
    baseline = report[strongest]
    assert run["passage_hit@5_over_reference"] == pytest.approx(
        report["hybrid dbsf"]["passage-hit@5"] / baseline["passage-hit@5"], abs=1e-4
    )
    # Each question counts in the fold of its document; the dataset names no evidence sources.
    groups = run["groups"]
    assert groups.keys() == {"fold A", "fold B"}
    folds = {document_fold(doc_name) for _, doc_name, _ in QUESTIONS}
    assert sum(groups[f"fold {f}"]["hybrid dbsf"]["queries"] for f in folds) == len(QUESTIONS)
    # The scratch home watches the dataset's pdfs/ in place: nothing is copied.
    scratch = home / "eval" / "minibench"
    assert json.loads((scratch / "settings.json").read_text())["sources"] == [
        str((dataset / "pdfs").resolve())
    ]
    assert not list(scratch.rglob("ACME_2022_10K.pdf"))
    # `query --json` names every page a passage lies on, 1-based, as the eval counts them.
    [top, *_] = cli("query", QUESTIONS[0][0], "--home", scratch, "--json").json()
    assert (top["file_path"].endswith("ACME_2022_10K.pdf"), top["pages"]) == (True, [4])

    # Again: the pipeline indexes nothing and the baseline's page vectors come from the cache.
    def no_embedding(*args: object, **kwargs: object) -> None:
        raise AssertionError("embedded again")

    monkeypatch.setattr(DenseEncoder, "embed_documents", no_embedding)
    table = cli("eval", dataset, "--home", home)
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    assert lines[2].split() == [
        "method",
        "p-hit@1",
        "p-hit@5",
        "p-hit@10",
        "page@1",
        "page@5",
        "page@10",
        "doc@5",
        "MRR@10",
    ]
    assert any(
        line.startswith(f"{strongest} (baseline)") and "← the strongest naive line" in line
        for line in lines
    )
    assert any(line.startswith("hybrid dbsf ") and "← the chat page's" in line for line in lines)
    ours = report["hybrid dbsf"]["passage-hit@5"]
    ratio = f"{ours / baseline['passage-hit@5']:.2f} ×"
    dense, bm25 = (report[side]["passage-hit@5"] for side in ("dense", "bm25"))
    assert (
        f"  all        (  6): {ours:.4f} = {ratio} {strongest} ({baseline['passage-hit@5']:.4f}); "
        f"dense alone {dense:.4f} ({ours / dense:.2f} ×); "
        f"bm25 alone {bm25:.4f} ({ours / bm25:.2f} ×)"
    ) in lines
    for fold in ("A", "B"):
        assert run["group_reference_baselines"][f"fold {fold}"] in BASELINES
        assert any(line.startswith(f"  fold {fold}") for line in lines)


# -- scoring ---------------------------------------------------------------------------------------


def test_page_hits_doc_hits_and_mrr_on_hand_made_rankings() -> None:
    rankings = {
        "first": [("A", 3), ("A", 4), ("B", 1)],  # evidence first
        "third": [("B", 1), ("A", 1), ("A", 2), ("C", 9)],  # evidence third; doc A second
        "late": [("B", n) for n in range(1, 7)] + [("A", 7)],  # evidence 7th, doc beyond 5
        "missed": [("A", 1)] + [("B", n) for n in range(1, 12)],  # doc, never its page
        # "empty" retrieved nothing: it counts as zero
    }
    evidence = {
        "first": {("A", 3)},
        "third": {("A", 2), ("A", 9)},  # either evidence page counts
        "late": {("A", 7)},
        "missed": {("A", 2)},
        "empty": {("A", 1)},
    }
    scores = evaluate_pages(rankings, evidence)
    assert scores["queries"] == 5
    assert scores["page-hit@1"] == pytest.approx(1 / 5)
    assert scores["page-hit@5"] == pytest.approx(2 / 5)
    assert scores["page-hit@10"] == pytest.approx(3 / 5)
    assert scores["doc-hit@5"] == pytest.approx(3 / 5)  # first, third, missed
    assert scores["mrr@10"] == pytest.approx((1 + 1 / 3 + 1 / 7) / 5)


def test_a_page_of_another_document_with_the_same_number_is_no_hit() -> None:
    assert hit_at([("B", 3), ("C", 3)], {("A", 3)}, 10) == 0.0
    assert hit_at([("B", 3), ("A", 3)], {("A", 3)}, 1) == 0.0
    assert hit_at([("B", 3), ("A", 3)], {("A", 3)}, 2) == 1.0


def test_a_chunk_ranks_the_pages_its_boxes_lie_on_in_order() -> None:
    boxes = [{"page": 5, "x0": 0}, {"page": 5, "x0": 1}, {"page": 6, "x0": 0}]
    assert payload_pages({"page": 5, "page_end": 6, "bboxes": boxes}) == [5, 6]
    assert payload_pages({"page": 2, "page_end": 4, "bboxes": []}) == [2, 3, 4]  # no boxes
    assert payload_pages({"page": 7, "bboxes": None}) == [7]
    assert payload_pages({"page": None, "bboxes": []}) == []  # e.g. a Markdown chunk


def test_passages_count_for_their_pages_and_take_their_place_among_the_first_k() -> None:
    def hit(doc_id: str, *pages: int) -> Hit:
        bboxes = [{"page": page} for page in pages]
        return Hit("p", 0.0, {"doc_id": doc_id, "page": pages[0], "bboxes": bboxes})

    names = {"pdfs/A.pdf": "A", "pdfs/B.pdf": "B"}
    hits = [
        hit("pdfs/B.pdf", 2),
        hit("pdfs/other.md", 1),
        hit("pdfs/A.pdf", 4, 5),
        hit("pdfs/B.pdf", 2),
    ]
    passages = passages_of(hits, names)
    assert passages == [(("B", 2),), (), (("A", 4), ("A", 5)), (("B", 2),)]
    # Pages rank by their first passage; passages by what the answerer reads of the first k.
    evidence = {"q": {("A", 5)}}
    scores = evaluate_passages({"q": passages}, evidence)
    assert (scores["passage-hit@1"], scores["passage-hit@5"]) == (0.0, 1.0)
    assert scores["page-hit@1"] == 0.0 and scores["mrr@10"] == pytest.approx(1 / 3)
    # Five passages of one page show one page: the sixth passage's page is beyond five.
    one_page = [(("B", 2),)] * 5 + [(("A", 5),)]
    scores = evaluate_passages({"q": one_page}, evidence)
    assert (scores["passage-hit@5"], scores["passage-hit@10"], scores["page-hit@5"]) == (
        0.0,
        1.0,
        1.0,
    )


# -- the page baseline's parts ---------------------------------------------------------------------


def test_the_baseline_feeds_the_dense_model_a_pages_first_256_tokens(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "home")
    tokens = DenseEncoder(settings.embedding, settings.home).tokens
    page = " ".join(f"word{number}" for number in range(400))
    cut = first_tokens(page, tokens)
    assert page.startswith(cut) and len(cut) < len(page)
    assert tokens.count([cut])[0] + tokens.special_tokens == 256
    short = "Total inventories were 4,812 million dollars."
    assert first_tokens(short, tokens) == short


def test_baseline_keywords_score_as_bm25_with_qdrant_idf() -> None:
    def vector(terms: dict[int, float]) -> SparseVector:
        return SparseVector(
            np.array(list(terms), dtype=np.int64), np.array(list(terms.values()), dtype=np.float32)
        )

    pages = [vector({1: 1.0, 2: 0.5}), vector({1: 1.0}), vector({1: 0.2, 3: 2.0})]
    baseline = PageBaseline([("A", 1), ("A", 2), ("B", 1)], np.eye(3, dtype=np.float32), pages)
    idf = {n: np.log1p((3 - n + 0.5) / (n + 0.5)) for n in (1, 3)}  # by pages holding the term
    hits = baseline.nearest_sparse(vector({1: 1.0, 3: 1.0}), limit=10)
    assert [hit.payload["unit"] for hit in hits] == [("B", 1), ("A", 1), ("A", 2)]
    assert hits[0].score == pytest.approx(0.2 * idf[3] + 2.0 * idf[1])
    assert hits[1].score == pytest.approx(1.0 * idf[3])
    assert baseline.nearest_sparse(vector({9: 1.0}), limit=10) == []  # no shared term: no hit
    nearest = baseline.nearest_dense(np.array([0, 1, 0], dtype=np.float32), limit=2)
    assert [hit.payload["unit"] for hit in nearest] == [("A", 2), ("A", 1)]


# -- bad input -------------------------------------------------------------------------------------


def question(
    doc_name: str = "CIRRUS_2021_8K", evidence: Sequence[object] = ({"evidence_page_num": 0},)
) -> str:
    return json.dumps({"question": "q", "doc_name": doc_name, "evidence": list(evidence)})


@pytest.mark.parametrize(
    ("questions", "message"),
    [
        (f"{question()}\n{{not json\n", "questions.jsonl:2: not JSON"),
        (f"{question()}\n[1, 2]\n", "questions.jsonl:2: not a JSON object"),
        (question("NOPE_2020_10K"), "questions.jsonl:1: doc_name 'NOPE_2020_10K' has no PDF"),
        (
            question(evidence=[{"evidence_page_num": 3}]),
            "questions.jsonl:1: evidence page 3 (0-based) is beyond CIRRUS_2021_8K.pdf's 3 pages",
        ),
        (
            question(evidence=[{"evidence_page_num": "2"}]),
            "evidence_page_num must be a 0-based page index, not '2'",
        ),
        (question(evidence=[]), "questions.jsonl:1: no evidence"),
        ("\n", "questions.jsonl: no questions"),
    ],
    ids=[
        "bad JSON",
        "not an object",
        "unknown doc_name",
        "page beyond",
        "page text",
        "no evidence",
        "empty",
    ],
)
def test_bad_question_lines_are_refused_naming_file_and_line(
    cli: Cli, home: Path, tmp_path: Path, questions: str, message: str
) -> None:
    dataset = write_dataset(tmp_path / "broken")
    (dataset / "questions.jsonl").write_text(questions, encoding="utf-8")
    result = cli("eval", dataset, "--home", home)
    assert result.code == 2 and message in result.err, result.err
    assert not (home / "eval").exists()  # refused before anything was indexed


def test_missing_questions_or_pdfs_are_refused_with_the_layout(
    cli: Cli, home: Path, tmp_path: Path
) -> None:
    only_pdfs = write_dataset(tmp_path / "only-pdfs")
    (only_pdfs / "questions.jsonl").unlink()  # pdfs/ alone: a page dataset, not BEIR
    result = cli("eval", only_pdfs, "--home", home)
    assert result.code == 2 and "questions.jsonl is missing" in result.err, result.err
    assert "pdfs/<doc_name>.pdf" in result.err
    no_pdf = write_dataset(tmp_path / "no-pdf")
    for pdf in (no_pdf / "pdfs").iterdir():
        pdf.unlink()
    result = cli("eval", no_pdf, "--home", home)
    assert result.code == 2 and "holds no PDF" in result.err, result.err
    not_a_pdf = write_dataset(tmp_path / "not-a-pdf")
    (not_a_pdf / "pdfs" / "ACME_2022_10K.pdf").write_text("plain text")
    result = cli("eval", not_a_pdf, "--home", home)
    assert result.code == 2 and "ACME_2022_10K.pdf: not a readable PDF" in result.err, result.err


def test_a_split_is_refused_for_a_pdf_question_set(cli: Cli, home: Path, tmp_path: Path) -> None:
    result = cli("eval", write_dataset(tmp_path / "set"), "--home", home, "--split", "dev")
    assert result.code == 2 and "--split is for BEIR datasets" in result.err, result.err
    assert not (home / "eval").exists()


def test_only_the_file_name_tells_twin_filings_apart_and_the_reference_baseline_reads_it(
    cli: Cli, home: Path, tmp_path: Path
) -> None:
    dataset = tmp_path / "twins"
    (dataset / "pdfs").mkdir(parents=True)
    page = [("Results", "Revenue for the year was 512 million dollars. " + " ".join(FILLER))]
    names = ["NORTHWIND_TRADERS", "SOUTHWIND_TRADERS"]  # the same page in both
    for name in names:
        write_pdf(dataset / "pdfs" / f"{name}.pdf", page, start=0)
    questions = [
        {"question": f"What was {name.split('_')[0].title()}'s revenue?", "doc_name": name}
        for name in names
    ]
    (dataset / "questions.jsonl").write_text(
        "".join(json.dumps(q | {"evidence": [{"evidence_page_num": 0}]}) + "\n" for q in questions),
        encoding="utf-8",
    )
    result = cli("eval", dataset, "--home", home, "--json")
    assert result.code == 0, result.err
    report = result.json()
    # The pages' texts are equal: without the name, the first page in the folder wins both.
    assert report["pages dense"]["passage-hit@1"] == 0.5
    assert report["pages dense + name"]["passage-hit@1"] == 1.0
    assert report["hybrid dbsf"]["passage-hit@1"] == 1.0  # each chunk is headed by its file's name
