"""What `rag-pipeline query` prints: a page's second passage, which the first passages put
after the other pages whatever its score, says that it is one."""

from __future__ import annotations

from pathlib import Path

import pymupdf

from rag_pipeline_tests.conftest import Cli

SENTENCE = "Otters float on their backs and hold hands while they sleep in the kelp. "


def test_a_second_passage_of_a_page_shown_above_says_so(
    cli: Cli, home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    pdf = pymupdf.open()
    for _ in range(2):  # two pages of several passages each
        page = pdf.new_page()
        page.insert_textbox(pymupdf.Rect(36, 36, 576, 806), SENTENCE * 40, fontsize=6)
    pdf.save(folder / "otters.pdf")
    assert cli("index", "--home", home, "--source", folder).code == 0
    hits = cli("query", "otters sleep", "--home", home, "--top-k", 3, "--json").json()
    assert sorted({hit["page"] for hit in hits}) == [1, 2]  # three passages, two pages
    lines = [
        line
        for line in cli("query", "otters sleep", "--home", home, "--top-k", 3).out.splitlines()
        if line[:1].isdigit()
    ]
    marked = [
        line.endswith(("(another passage of p. 1 above)", "(another passage of p. 2 above)"))
        for line in lines
    ]
    seen_above = [
        hit["page"] in [above["page"] for above in hits[:rank]] for rank, hit in enumerate(hits)
    ]
    assert marked == seen_above and marked.count(True) == 1
