import time
from pathlib import Path

import pytest

from rag_pipeline.parsing import ParseOptions
from rag_pipeline.parsing.pool import parse_in_workers
from rag_pipeline_tests.conftest import needs_tesseract
from rag_pipeline_tests.documents import scanned_pdf, two_column_pdf

# OCR of a small scanned page takes about 0.3 s here: sixty take longer than this limit in all,
# and none takes it alone, even on a machine ten times as busy.
PER_PAGE_LIMIT = 10.0  # a page of OCR on a loaded machine (CI beside a build) took over 5 s
SCANNED_PAGES = 60
# ``endless_pdf`` takes well past this limit to parse, which a small file meets even on a busy
# machine.
HANG_LIMIT = 4.0


def test_each_document_gets_an_outcome_and_failures_do_not_stop_the_batch(tmp_path: Path) -> None:
    good = two_column_pdf(tmp_path / "good.pdf")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    outcomes = {
        o.key: o
        for o in parse_in_workers([("good", good), ("empty", empty)], workers=2, timeout_seconds=60)
    }
    assert outcomes["good"].result is not None and outcomes["good"].error is None
    assert outcomes["empty"].result is None and "empty" in outcomes["empty"].error


def test_a_parser_over_its_time_limit_is_stopped_and_the_next_document_still_parses(
    tmp_path: Path, endless_pdf: Path
) -> None:
    fast = tmp_path / "fast.txt"
    fast.write_text("quick", encoding="utf-8")
    outcomes = list(
        parse_in_workers(
            [("slow", endless_pdf), ("fast", fast)], workers=1, timeout_seconds=HANG_LIMIT
        )
    )
    by_key = {o.key: o for o in outcomes}
    assert "longer than" in by_key["slow"].error
    assert by_key["fast"].result is not None


@pytest.fixture
def long_scan(tmp_path: Path) -> Path:
    return scanned_pdf(tmp_path / "scan.pdf", ["Pump station seven"], pages=SCANNED_PAGES)


@needs_tesseract
def test_a_long_scan_is_not_stopped_while_ocr_advances_page_by_page(long_scan: Path) -> None:
    options = ParseOptions(ocr_languages="eng")
    started = time.monotonic()
    (outcome,) = parse_in_workers(
        [("scan", long_scan)], workers=1, timeout_seconds=PER_PAGE_LIMIT, options=options
    )
    assert outcome.error is None, outcome.error
    assert time.monotonic() - started > PER_PAGE_LIMIT  # longer than the limit in all
    assert {element.page for element in outcome.result.elements} == set(range(1, SCANNED_PAGES + 1))
