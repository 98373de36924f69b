from pathlib import Path

from rag_pipeline.parsing import read_document


def test_headings_lists_tables_and_code_keep_their_structure(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text(
        "---\ntitle: front matter\n---\n"
        "# Guide\n\nIntro with **bold** and a [link](http://x).\n\n"
        "## Install\n\n- step one\n- step two\n  1. nested\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "```\npip install rag\n```\n",
        encoding="utf-8",
    )
    parsed = read_document(path)
    kinds = [(e.kind, e.text) for e in parsed.elements]
    assert kinds == [
        ("title", "Guide"),
        ("paragraph", "Intro with bold and a link."),
        ("title", "Install"),
        ("list", "- step one\n- step two\n  1. nested"),
        ("table", "a | b\n1 | 2"),
        ("paragraph", "pip install rag"),
    ]
    assert parsed.elements[3].section == ("Guide", "Install")
    assert parsed.title == "Guide"
