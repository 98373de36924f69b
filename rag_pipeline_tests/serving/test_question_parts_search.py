"""A question of several parts is searched part by part too: through the real Assistant, with
one passage kept per search, a part whose answer lies in a passage the whole question's search
left out (on the next page of a PDF) is answered from its own search's passage, which the
answer, its passages and the trace all show; a question of one part is searched once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pymupdf
import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import Settings, load_settings
from rag_pipeline.store import QueryFilter
from rag_pipeline_tests.conftest import IndexedPlaces
from serving.assistant import Assistant
from serving.questions import standing_alone
from serving.retrieval import Candidate, Retrieval

OWNER = "local"
PAGES = [
    "The Gull Bay lighthouse was first lit on 14 March 1872 by the keeper Thomas Hale.\n"
    + "".join(
        f"The coast saw shipwreck number {n} in a winter storm long ago.\n" for n in range(30)
    ),
    "Its light is visible for 21 nautical miles in clear weather.\n"
    "The lighthouse is maintained by the Northern Lights Board.",
]


def _index(root: Path) -> None:
    folder = root / "docs"
    folder.mkdir()
    pdf = pymupdf.open()
    for text in PAGES:
        pdf.new_page().insert_textbox(pymupdf.Rect(72, 72, 523, 800), text, fontsize=11)
    pdf.save(folder / "gull-bay.pdf")
    assert main(["index", "--home", str(root / "home"), "--source", str(folder)]) == 0


@pytest.fixture(scope="module")
def one_passage_per_search(indexed_places: IndexedPlaces) -> Settings:
    settings = load_settings(indexed_places.fresh("question-parts", _index) / "home")
    return settings.model_copy(
        update={"retrieval": settings.retrieval.model_copy(update={"top_k": 1})}
    )


@pytest.fixture(scope="module")
def assistant(one_passage_per_search: Settings) -> Iterator[Assistant]:
    assistant = Assistant(one_passage_per_search)
    yield assistant
    assistant.close()


TWO_PARTS = "When was the Gull Bay lighthouse first lit and how far is its light visible?"


def test_each_part_of_a_question_is_answered_from_its_own_search_too(
    assistant: Assistant,
) -> None:
    whole = assistant.retriever.retrieve(TWO_PARTS)
    assert all("21 nautical miles" not in passage.text for passage in whole.passages)

    final = list(assistant.ask(TWO_PARTS, owner=OWNER))[-1][1]

    assert "14 March 1872" in final.text
    assert "21 nautical miles" in final.text
    assert "nothing here says" not in final.text
    cited = [final.passages[number - 1] for number in final.cited]
    assert any("21 nautical miles" in passage.text for passage in cited)
    trace = assistant.history.traces(OWNER, limit=1)[0]
    used = {passage.payload["chunk_id"] for passage in final.passages}
    assert set(trace["chosen"]) == used
    assert used <= {candidate["chunk_id"] for candidate in trace["candidates"]}


def test_a_question_of_one_part_is_searched_once(assistant: Assistant) -> None:
    retrieval = assistant.retrieve_question("How far is the Gull Bay light visible?")

    assert len(retrieval.passages) == 1
    assert not retrieval.passages[0].parts


def test_a_part_is_made_to_stand_alone_with_the_questions_names_or_topic() -> None:
    assert standing_alone("how far is its light visible?", TWO_PARTS) == (
        "Gull Bay how far is its light visible?"
    )
    assert standing_alone("When was the Gull Bay lighthouse first lit", TWO_PARTS) == (
        "When was the Gull Bay lighthouse first lit"
    )
    assert standing_alone("每天几点开门？", "青溪茶园是哪一年创办的？每天几点开门？") == (
        "青溪 每天几点开门？"
    )


def _passage(point_id: str) -> Candidate:
    return Candidate(point_id, {"chunk_id": point_id, "text": point_id})


def _retrieval(*point_ids: str) -> Retrieval:
    passages = [_passage(point_id) for point_id in point_ids]
    return Retrieval("q", QueryFilter(), passages, passages, None)


def test_a_parts_passages_join_the_questions_without_duplicates_marked_as_the_parts() -> None:
    merged = (
        _retrieval("a", "b")
        .with_part("first", _retrieval("b", "c"))
        .with_part("second", _retrieval("c", "d"))
    )

    assert [(p.point_id, set(p.parts)) for p in merged.passages] == [
        ("a", set()),
        ("b", set()),
        ("c", {"first", "second"}),
        ("d", {"second"}),
    ]
    assert [c.point_id for c in merged.candidates] == ["a", "b", "c", "d"]
