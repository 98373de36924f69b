"""The sentences the extractive answer quotes from a passage: a sentence that a page break cuts
in two is quoted whole, and one the passage starts in the middle of is quoted as a piece."""

from __future__ import annotations

from serving.extractive import _statements
from serving.retrieval import Candidate


def _passage(text: str) -> Candidate:
    return Candidate("p", {"text": text, "file_path": "/docs/notes.md", "title": "notes"})


def test_a_sentence_over_a_page_break_is_quoted_from_its_start() -> None:
    passage = _passage(
        "The tower is white.\nThe light is a white flash every ten seconds and is\n"
        "visible for 21 nautical miles in clear weather.\nIt was automated in 1969."
    )

    assert _statements(passage) == [
        "The tower is white.",
        "The light is a white flash every ten seconds and is visible for 21 nautical miles in "
        "clear weather.",
        "It was automated in 1969.",
    ]


def test_a_sentence_the_passage_starts_in_the_middle_of_is_quoted_with_an_ellipsis() -> None:
    passage = _passage(
        "visible for 21 nautical miles in clear weather.\nThe tower is 34 metres tall."
    )

    assert _statements(passage) == [
        "…visible for 21 nautical miles in clear weather.",
        "The tower is 34 metres tall.",
    ]
