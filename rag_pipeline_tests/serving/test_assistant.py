"""The service behind the page: retrieval, cited answers, conversations, traces, search API."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_pipeline.config import Settings, load_settings
from rag_pipeline.store.schema import QueryFilter
from rag_pipeline.workspaces import create_workspace
from rag_pipeline_tests.serving.conftest import serving
from serving.assistant import Assistant, Source
from serving.extractive import ExtractiveAnswerer
from serving.retrieval import Candidate, QueryError, query_encoders

OWNER = "local"


@pytest.fixture(scope="module")
def assistant(indexed: Settings) -> Iterator[Assistant]:
    yield from serving(indexed)


def test_a_question_gets_a_cited_answer_and_the_conversation_is_kept(
    assistant: Assistant,
) -> None:
    conversation, final = list(assistant.ask("When do owls hunt?", owner=OWNER))[-1]
    assert "Owls hunt at night" in final.text and "[" in final.text
    cited = final.passages[final.cited[0] - 1].payload
    assert cited["doc_id"] == "docs/guide.md"
    messages = assistant.history.messages(conversation, OWNER)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[1].sources[0]["doc_id"] == "docs/guide.md"
    assert messages[1].sources[0]["file_name"] == "guide.md"
    # The guide's own text, not the line naming it ("guide") that heads the passage for search,
    # nor its first heading, shown as its section beside it.
    assert messages[1].sources[0]["section"] == "Field guide"
    assert messages[1].sources[0]["snippet"].startswith("Herons Herons stand")
    assert any(c.id == conversation for c in assistant.history.conversations(OWNER))


def test_a_follow_up_searches_with_the_previous_question(assistant: Assistant) -> None:
    conversation, _ = list(assistant.ask("Tell me about herons", owner=OWNER))[-1]
    _, final = list(assistant.ask("What do they strike?", conversation, owner=OWNER))[-1]
    assert "strike fish" in final.text
    assert (
        assistant.history.traces(OWNER, 1)[0]["query"]
        == "Tell me about herons What do they strike?"
    )


def test_every_query_leaves_a_trace_with_each_stage(assistant: Assistant) -> None:
    assistant.search("hybrid search product codes", QueryFilter(file_types=("pdf",)), owner=OWNER)
    trace = assistant.history.traces(OWNER, 1)[0]
    assert trace["query"] == "hybrid search product codes"
    assert trace["filters"] == {"file_type": ["pdf"]}
    assert {"embed", "search", "fuse"} <= trace["timings_ms"].keys()
    first = trace["candidates"][0]
    assert {"dense_rank", "sparse_rank", "fused_score", "rerank_score"} <= first.keys()
    assert trace["chosen"] and all(
        chunk.startswith("docs/report.pdf@") for chunk in trace["chosen"]
    )


def test_filters_keep_other_documents_out(assistant: Assistant) -> None:
    retrieval = assistant.search("rivers", QueryFilter(langs=("zh",)), owner=OWNER)
    assert {p.payload["doc_id"] for p in retrieval.passages} == {"docs/rivers.txt"}


def test_the_search_api_groups_passages_by_document(assistant: Assistant) -> None:
    documents = assistant.search_documents("三峡大坝在哪里", k=3, owner=OWNER)
    first = documents[0]
    assert first["id"] == "docs/rivers.txt" and first["title"] == "rivers"
    assert first["url"] == "/api/file?doc_id=docs/rivers.txt&workspace=default"  # no path
    assert "宜昌" in first["chunks"][0]["content"] and first["chunks"][0]["similarity"] > 0
    assert first["extra"]["source"]["doc_id"] == "docs/rivers.txt"
    assert first["extra"]["source"]["file_path"] == "rivers.txt"  # inside its watched folder
    assert len({document["id"] for document in documents}) == len(documents)


def test_too_long_questions_and_searches_and_too_many_results_are_refused(
    assistant: Assistant,
) -> None:
    too_long = "owl " * (assistant.settings.serving.max_query_chars // 4 + 1)
    conversations = len(assistant.history.conversations(OWNER))
    with pytest.raises(QueryError, match="at most 2000 are accepted"):
        list(assistant.ask(too_long, owner=OWNER))
    assert len(assistant.history.conversations(OWNER)) == conversations  # nothing kept
    with pytest.raises(QueryError, match="at most 2000 are accepted"):
        assistant.search_documents(too_long, owner=OWNER)
    with pytest.raises(QueryError, match="at most 100 passages"):
        assistant.search_documents("owls", k=101, owner=OWNER)


def test_workspaces_with_the_same_models_share_one_copy_of_the_query_models(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    settings = load_settings(home)
    other = create_workspace(settings, "Other").settings
    shared = query_encoders(settings)
    assert query_encoders(other) is shared
    assert ExtractiveAnswerer(other).terms is shared.sparse
    own_model = load_settings(home, embedding={"dense_model": "BAAI/bge-small-en-v1.5"})
    assert query_encoders(own_model).dense is not shared.dense


def test_a_passage_that_starts_at_its_heading_lists_the_heading_once() -> None:
    payload = {
        "text": "bike-policy\nBicycle fleet policy\nThe company keeps 27 cargo bicycles.",
        "file_path": "/d/bike-policy.docx",
        "section": "Fleet > Bicycle fleet policy",
    }
    source = Source.of(1, Candidate("p1", payload))
    assert source.section == "Fleet > Bicycle fleet policy"
    assert source.snippet == "The company keeps 27 cargo bicycles."
