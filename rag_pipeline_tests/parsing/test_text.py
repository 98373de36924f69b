from pathlib import Path

import pytest

from rag_pipeline.parsing import ParseError, read_document
from rag_pipeline.parsing.text import decode_text

CHINESE = "北京大学是中国著名的高等学府，位于北京市海淀区。"


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "gb18030", "utf-16", "utf-16-le"])
def test_chinese_text_decodes_in_common_encodings(encoding: str) -> None:
    assert decode_text(CHINESE.encode(encoding)) == CHINESE


def test_latin1_text_decodes() -> None:
    assert (
        decode_text("Café crème, déjà vu à Genève.".encode("latin-1"))
        == "Café crème, déjà vu à Genève."
    )


def test_binary_data_named_txt_fails_clearly(tmp_path: Path) -> None:
    path = tmp_path / "binary.txt"
    path.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(ParseError, match="binary"):
        read_document(path)


def test_an_empty_file_fails_clearly(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    with pytest.raises(ParseError, match="empty"):
        read_document(path)


def test_paragraphs_split_at_blank_lines_and_wrapped_prose_is_rejoined(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(
        "The first paragraph was wrapped by an editor at a\n"
        "narrow width and should read as one.\n\n"
        "line one\nline two\n",
        encoding="utf-8",
    )
    texts = [e.text for e in read_document(path).elements]
    assert texts == [
        "The first paragraph was wrapped by an editor at a narrow width and should read as one.",
        "line one\nline two",
    ]


def test_csv_becomes_one_table_with_its_header_first(tmp_path: Path) -> None:
    path = tmp_path / "prices.csv"
    path.write_text("item;price\napple;1.20\npear;0.90\n", encoding="utf-8")
    (element,) = read_document(path).elements
    assert element.kind == "table"
    assert element.text.splitlines() == ["item | price", "apple | 1.20", "pear | 0.90"]


def test_json_is_indexed_pretty_printed(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"name": "rag", "nested": {"answer": 42}}', encoding="utf-8")
    text = "\n".join(e.text for e in read_document(path).elements)
    assert '"answer": 42' in text
