from functools import cache

import pytest

from rag_pipeline.chunking import (
    Chunk,
    chunk_document,
    document_name,
    shown_section,
    table_captions,
    without_header,
)
from rag_pipeline.config import EmbeddingSettings
from rag_pipeline.embedding.dense import TokenCounter
from rag_pipeline.embedding.models import load_dense_tokenizer
from rag_pipeline.parsing import Element, TextBox


@cache
def counter() -> TokenCounter:
    tokenizer, max_length = load_dense_tokenizer(EmbeddingSettings(), None)  # type: ignore[arg-type]
    return TokenCounter(tokenizer, max_length)


def chunk(  # noqa: ANN201
    elements: list[Element], max_tokens: int = 64, overlap: int = 16, document: str | None = None
):
    return list(
        chunk_document(
            elements,
            doc_id="d",
            version="v",
            counter=counter(),
            max_tokens=max_tokens,
            overlap_tokens=overlap,
            document=document,
        )
    )


ENGLISH = " ".join(f"Sentence number {i} talks about retrieval and ranking." for i in range(40))
CHINESE = "".join(f"第{i}句话讨论检索和排序的问题。" for i in range(60))


@pytest.mark.parametrize("text", [ENGLISH, CHINESE])
def test_no_chunk_exceeds_the_budget_in_model_tokens_with_special_tokens(text: str) -> None:
    chunks = chunk([Element(text=text, kind="paragraph")], max_tokens=64)
    assert len(chunks) > 3
    assert all(c.token_count + counter().special_tokens <= 64 for c in chunks)


def test_the_default_budget_fits_the_model_sequence_length() -> None:
    assert counter().max_length == 256


def test_long_paragraphs_split_at_sentence_ends_with_overlap() -> None:
    chunks = chunk([Element(text=ENGLISH, kind="paragraph")], max_tokens=64, overlap=16)
    assert all(c.text.endswith(".") and c.text[0].isupper() for c in chunks)
    first_end = chunks[0].text.split(". ")[-1]
    assert first_end in chunks[1].text  # the last sentence is repeated: overlap


def test_chinese_splits_after_full_stops() -> None:
    chunks = chunk([Element(text=CHINESE, kind="paragraph")], max_tokens=64)
    assert all(c.text.endswith("。") for c in chunks)
    assert all(c.lang == "zh" for c in chunks)


def test_short_neighbours_in_a_section_merge_and_a_heading_starts_a_chunk() -> None:
    filler = "Enough words to make this section long enough to stand alone as a chunk of its own."
    elements = [
        Element(text="Intro", kind="title", section=("Intro",)),
        Element(text="Short one.", kind="paragraph", section=("Intro",)),
        Element(text="Short two.", kind="paragraph", section=("Intro",)),
        Element(text=filler, kind="paragraph", section=("Intro",)),
        Element(text="Methods", kind="title", section=("Methods",)),
        Element(text="Method text.", kind="paragraph", section=("Methods",)),
    ]
    chunks = chunk(elements, max_tokens=64)
    assert [c.text.split("\n")[0] for c in chunks] == ["Intro", "Methods"]
    assert chunks[1].section == ("Methods",)


def test_long_tables_split_between_rows_repeating_the_header() -> None:
    rows = ["name | city | score"] + [f"person {i} | city {i} | {i * 7}" for i in range(60)]
    chunks = chunk([Element(text="\n".join(rows), kind="table")], max_tokens=64)
    assert len(chunks) > 2
    assert all(c.text.startswith("name | city | score\n") for c in chunks)
    body = [line for c in chunks for line in c.text.splitlines()[1:]]
    assert body == rows[1:]


def test_pdf_chunks_carry_pages_and_the_boxes_of_their_lines() -> None:
    line_one, line_two = "First line of text.", "Second line of text."
    element = Element(
        text=f"{line_one} {line_two}",
        kind="paragraph",
        page=2,
        bbox=(10, 10, 200, 40),
        boxes=(
            TextBox(0, len(line_one), (10, 10, 150, 20)),
            TextBox(len(line_one) + 1, len(line_one) + 1 + len(line_two), (10, 25, 200, 40)),
        ),
    )
    (only,) = chunk([element])
    assert (only.page_start, only.page_end) == (2, 2)
    assert [(b.page, b.x0, b.y0, b.x1, b.y1) for b in only.bboxes] == [(2, 10, 10, 200, 40)]


def test_chunk_ids_are_deterministic() -> None:
    elements = [Element(text=ENGLISH, kind="paragraph")]
    assert [c.chunk_id for c in chunk(elements)] == [c.chunk_id for c in chunk(elements)]
    assert chunk(elements)[0].chunk_id == "d@v#0"


def test_a_split_paragraph_becomes_pieces_of_even_size_not_a_stub() -> None:
    text = ". ".join(ENGLISH.split(". ")[:14]) + "."  # a little over two chunks' worth
    chunks = chunk([Element(text=text, kind="paragraph")], max_tokens=64, overlap=8)
    sizes = [c.token_count for c in chunks]
    assert len(sizes) >= 3 and max(sizes) - min(sizes) <= 16, sizes


FIELD_GUIDE = [
    Element(text="Field guide", kind="title", section=("Field guide",)),
    Element(text="Owls", kind="title", section=("Field guide", "Owls")),
    Element(text=ENGLISH, kind="paragraph", section=("Field guide", "Owls")),
]


def test_a_chunk_from_the_middle_of_a_section_starts_with_the_section_path() -> None:
    chunks = chunk(FIELD_GUIDE, max_tokens=64)
    assert chunks[0].text.startswith("Field guide\nOwls\nSentence number 0")
    assert all(c.text.startswith("Field guide › Owls\nSentence") for c in chunks[1:])
    assert all(c.token_count + counter().special_tokens <= 64 for c in chunks)


def test_a_title_too_long_to_head_every_chunk_heads_them_with_its_first_words() -> None:
    title = "A randomised trial of " + " ".join(f"treatment{n}" for n in range(40))
    elements = [
        Element(text=title, kind="title", section=(title,)),
        Element(text=ENGLISH, kind="paragraph", section=(title,)),
    ]
    chunks = chunk(elements, max_tokens=128)
    assert len(chunks) >= 3
    first_line = chunks[1].text.split("\n")[0]
    assert first_line.startswith("A randomised trial of")
    assert title.startswith(first_line + " ")  # cut after a whole word
    assert all(c.text.startswith(first_line + "\nSentence") for c in chunks[1:])
    assert all(c.token_count + counter().special_tokens <= 128 for c in chunks)


def test_a_document_named_like_its_outermost_heading_is_not_named_twice() -> None:
    elements = [
        Element(text="Heron feeding", kind="title", section=("Heron feeding",)),
        Element(text="Herons strike fish. " * 30, kind="paragraph", section=("Heron feeding",)),
    ]
    chunks = chunk(elements, max_tokens=64, overlap=8, document="heron feeding")
    assert chunks[0].text.startswith("Heron feeding\nHerons strike")
    assert all(c.text.startswith("Heron feeding\n") for c in chunks[1:])


@pytest.mark.parametrize(
    ("path", "title", "name"),
    [
        ("reports/ACME_2023_10K.pdf", "UNITED STATES", "ACME 2023 10K"),
        ("corpus/4983.md", "Microstructural development", "Microstructural development"),
        ("reports/3M_2018_10K.pdf", "UNITED STATES", "3M 2018 10K"),
        ("corpus/DEV_0.md", "战国无双3", "战国无双3"),
    ],
)
def test_chunks_name_their_document_by_file_name_unless_it_is_a_code(
    path: str, title: str, name: str
) -> None:
    assert document_name(path, title) == name


LIQUIDITY = ("Acme report", "Liquidity")


def test_a_chunk_starting_at_a_deeper_heading_still_names_its_document() -> None:
    elements = [
        Element(text="Acme report", kind="title", section=("Acme report",)),
        Element(text="Opening words. " * 5, kind="paragraph", section=("Acme report",)),
        Element(text="Liquidity", kind="title", section=LIQUIDITY),
        Element(
            text="Cash covers debt. " * 30, kind="paragraph", section=("Acme report", "Liquidity")
        ),
    ]
    chunks = chunk(elements, max_tokens=64, overlap=8, document="acme report")
    (liquidity,) = [c for c in chunks if c.text.split("\n")[1:2] == ["Liquidity"]]
    assert liquidity.text.startswith("Acme report\nLiquidity\n")
    later = [c for c in chunks if c is not liquidity and "Cash" in c.text]
    assert later and all(c.text.startswith("Acme report › Liquidity\n") for c in later)


LONG_TITLE = " ".join(f"word{i}" for i in range(60))
LONG_TITLED = [
    Element(text=LONG_TITLE, kind="title", section=(LONG_TITLE,)),
    Element(text="Findings follow. " * 60, kind="paragraph", section=(LONG_TITLE,)),
]


def test_a_title_too_long_for_the_header_still_heads_its_chunks_with_its_first_words() -> None:
    chunks = chunk(LONG_TITLED, max_tokens=64, overlap=8, document=LONG_TITLE)
    later = [c for c in chunks[1:] if "Findings" in c.text]
    assert later and all(c.text.startswith("word0 word1") for c in later)


def _shown(chunks: list[Chunk], document: str | None) -> list[str]:
    return [without_header(c.text, document, c.section) for c in chunks]


def test_a_chunks_text_shown_is_its_documents_own_text_without_the_header() -> None:
    elements = [
        Element(text="Acme report", kind="title", section=("Acme report",)),
        Element(text="Opening words. " * 5, kind="paragraph", section=("Acme report",)),
        Element(text="Liquidity", kind="title", section=LIQUIDITY),
        Element(text="Cash covers debt. " * 30, kind="paragraph", section=LIQUIDITY),
    ]
    chunks = chunk(elements, max_tokens=64, overlap=8, document="acme-2023")
    assert chunks[0].text.startswith("acme-2023\nAcme report\nOpening words.")
    assert len(chunks) > 3 and chunks[-1].text.startswith("Liquidity\nCash")  # a shortened line
    shown = _shown(chunks, "acme-2023")
    assert shown == [c.text.split("\n", 1)[1] for c in chunks]
    assert all(
        text.startswith(("Acme report\nOpening", "Liquidity\nCash", "Cash")) for text in shown
    )


def test_a_chunk_headed_by_no_line_is_shown_whole() -> None:
    chunks = chunk(FIELD_GUIDE, max_tokens=64)
    shown = _shown(chunks, None)
    assert shown[0] == chunks[0].text and shown[0].startswith("Field guide\nOwls\nSentence")
    assert len(shown) > 2 and all(text.startswith("Sentence") for text in shown[1:])


def test_a_chunk_headed_by_the_first_words_of_a_long_title_is_shown_without_them() -> None:
    chunks = chunk(LONG_TITLED, max_tokens=64, overlap=8, document=LONG_TITLE)
    later = [c for c in chunks if "Findings" in c.text]
    assert later and all(text.startswith("Findings") for text in _shown(later, LONG_TITLE))


def test_a_passage_is_shown_under_the_headings_over_its_first_line() -> None:
    captions = frozenset({"Output by quarter"})
    # A table's caption heads its table only, not a heading after it (for display).
    assert shown_section(("Output by quarter", "Safety"), "Safety", captions) == ("Safety",)
    assert shown_section(("Output by quarter", "Safety"), "Wear gloves.", captions) == ("Safety",)
    assert shown_section(("Output by quarter",), "Q1 | 12", captions) == ("Output by quarter",)
    # A chunk starting at a heading goes on into its subsection: shown at the heading.
    assert shown_section(("Plant", "Safety"), "Plant", frozenset()) == ("Plant",)
    assert shown_section(("Plant", "Safety"), "Wear gloves.", frozenset()) == ("Plant", "Safety")


def test_a_tables_caption_is_the_line_over_its_rows_in_a_paged_document() -> None:
    text = "Plant report\nOutput by quarter\n($ in tonnes)\n | Q1 | Q2\nSteel | Q1: 4 | Q2: 5"
    paged = {"text": text, "kinds": ["title", "paragraph", "table"], "page_start": 2}
    assert table_captions([paged]) == {"Output by quarter"}
    assert table_captions([{**paged, "page_start": None}]) == set()  # Markdown: a heading
    assert table_captions([{**paged, "kinds": ["title", "paragraph"]}]) == set()
