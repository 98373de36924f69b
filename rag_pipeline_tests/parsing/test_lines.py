from rag_pipeline.parsing.elements import BBox
from rag_pipeline.parsing.lines import join_lines

BOX: BBox = (0.0, 0.0, 10.0, 10.0)


def test_lines_of_chinese_and_japanese_join_without_a_space() -> None:
    text, boxes = join_lines([("北京大学", BOX), ("位于海淀区", BOX), ("ひらがな", BOX)])
    assert text == "北京大学位于海淀区ひらがな"
    assert [text[box.start : box.end] for box in boxes] == ["北京大学", "位于海淀区", "ひらがな"]


def test_lines_of_korean_and_english_join_with_a_space() -> None:
    text, _ = join_lines(
        [("한국어 문장은", BOX), ("띄어 씁니다", BOX), ("and so", BOX), ("does this", BOX)]
    )
    assert text == "한국어 문장은 띄어 씁니다 and so does this"


def test_a_word_hyphenated_across_lines_is_joined() -> None:
    text, _ = join_lines([("dense em-", BOX), ("bedding", BOX)])
    assert text == "dense embedding"
