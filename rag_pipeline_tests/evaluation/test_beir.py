"""``rag-pipeline eval`` on a tiny BEIR-layout dataset, through the real pipeline."""

import json
from pathlib import Path

import pytest

from rag_pipeline_tests.conftest import Cli

CORPUS = [
    ("d1", "Owls", "Owls hunt at night with soft feathers that make their flight silent."),
    ("d2", "Herons", "Herons stand in shallow water and strike fish with long bills."),
    ("d3", "Rivers", "The Yangtze is the longest river in China and flows east to the sea."),
    ("d4", "", "Kingfishers dive from a perch and beat their catch against a branch."),
    ("d5", "长江", "长江是中国最长的河流，三峡大坝位于湖北省宜昌市。"),
]
QUERIES = [
    ("q1", "when do owls hunt"),
    ("q2", "which bird strikes fish while standing in water"),
    ("q3", "三峡大坝在哪里"),
    ("q4", "a query nobody judged"),
    ("q5", "  "),  # an empty query: it retrieves nothing, and counts
]
QRELS = [("q1", "d1", 1), ("q2", "d2", 2), ("q2", "d4", 1), ("q3", "d5", 1), ("q5", "d1", 1)]


def write_dataset(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "\n".join(
            json.dumps({"_id": i, "title": t, "text": x}, ensure_ascii=False) for i, t, x in CORPUS
        ),
        encoding="utf-8",
    )
    (folder / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": i, "text": t}, ensure_ascii=False) for i, t in QUERIES),
        encoding="utf-8",
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "\n".join(f"{q}\t{d}\t{s}" for q, d, s in QRELS)
    )
    return folder


def test_eval_reports_every_method_through_the_real_pipeline(
    cli: Cli, home: Path, tmp_path: Path
) -> None:
    dataset = write_dataset(tmp_path / "tiny")
    result = cli("eval", dataset, "--home", home, "--json")
    assert result.code == 0, result.err
    report = result.json()
    assert {"dense", "bm25", "hybrid rrf", "hybrid dbsf", "hybrid minmax", "run"} <= report.keys()
    run = report["run"]
    assert run["documents"] == 5 and run["configured_method"] == "hybrid dbsf"
    assert run["query_latency_ms"]["p95"] > 0
    for method in ("bm25", "hybrid rrf"):
        assert report[method]["queries"] == 4  # q4 has no judgement
        assert report[method]["mrr@10"] == pytest.approx(3 / 4), method  # q5 finds nothing
    # d4 shares no word with q2: keywords miss it, the dense half of the hybrid does not.
    assert report["bm25"]["recall@100"] == pytest.approx((1 + 0.5 + 1 + 0) / 4)
    assert report["hybrid rrf"]["recall@100"] == pytest.approx(3 / 4)
    assert (home / "eval" / "tiny" / "corpus" / "d1.md").read_text().startswith("# Owls")
    table = cli("eval", dataset, "--home", home)  # again: nothing to index
    assert "hybrid rrf" in table.out and "← the chat page's" in table.out


def test_a_folder_that_is_not_a_dataset_is_refused_clearly(
    cli: Cli, home: Path, tmp_path: Path
) -> None:
    result = cli("eval", tmp_path, "--home", home)
    assert result.code == 2 and "corpus.jsonl is missing" in result.err
    broken = write_dataset(tmp_path / "broken")
    (broken / "qrels" / "test.tsv").write_text("q1\td1\n")
    result = cli("eval", broken, "--home", home)
    assert result.code == 2 and "expected query-id, corpus-id, score" in result.err
