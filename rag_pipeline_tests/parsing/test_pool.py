from pathlib import Path

from rag_pipeline.parsing.pool import parse_in_workers
from rag_pipeline_tests.documents import long_pdf, two_column_pdf


def test_each_document_gets_an_outcome_and_failures_do_not_stop_the_batch(tmp_path: Path) -> None:
    good = two_column_pdf(tmp_path / "good.pdf")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    outcomes = {
        o.key: o
        for o in parse_in_workers([("good", good), ("empty", empty)], workers=2, timeout_seconds=60)
    }
    assert outcomes["good"].document is not None and outcomes["good"].error is None
    assert outcomes["empty"].document is None and "empty" in outcomes["empty"].error


def test_a_parser_over_its_time_limit_is_stopped_and_the_next_document_still_parses(
    tmp_path: Path,
) -> None:
    slow = long_pdf(tmp_path / "slow.pdf", pages=4000)
    fast = tmp_path / "fast.txt"
    fast.write_text("quick", encoding="utf-8")
    outcomes = list(
        parse_in_workers([("slow", slow), ("fast", fast)], workers=1, timeout_seconds=1.0)
    )
    by_key = {o.key: o for o in outcomes}
    assert "longer than" in by_key["slow"].error
    assert by_key["fast"].document is not None
