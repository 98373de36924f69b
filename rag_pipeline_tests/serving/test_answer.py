"""Answers cite numbered passages; markers pointing nowhere are dropped; no evidence is said."""

from collections.abc import Iterator, Sequence

from rag_pipeline.config import Settings
from rag_pipeline.store.schema import QueryFilter
from serving.answer import (
    Answer,
    CitationFilter,
    Message,
    answer,
    build_messages,
)
from serving.extractive import ExtractiveAnswerer
from serving.retrieval import Candidate, Retrieval


def _passage(text: str, **payload: object) -> Candidate:
    return Candidate(point_id=text[:8], payload={"text": text, **payload}, fused_score=0.5)


def _retrieval(*passages: Candidate, query: str = "q") -> Retrieval:
    return Retrieval(
        query=query,
        query_filter=QueryFilter(langs=("en",)),
        candidates=list(passages),
        passages=list(passages),
        reranker=None,
    )


def test_markers_to_missing_passages_are_dropped_and_the_rest_numbered_as_first_cited() -> None:
    citations = CitationFilter(passages=3)
    text = citations.feed("Owls hunt at night [2]. Herons wade [7]. Both [1, 3, 9]. Again [2].")
    assert text == "Owls hunt at night [1]. Herons wade . Both [2][3]. Again [1]."
    assert citations.cited == [2, 1, 3]


def test_a_marker_split_across_streamed_pieces_is_judged_whole() -> None:
    citations = CitationFilter(passages=2)
    pieces = ["Owls hunt [", "1", "] and [", "12] more [x] text"]
    text = "".join(citations.feed(piece) for piece in pieces) + citations.flush()
    assert text == "Owls hunt [1] and  more [x] text"
    assert citations.cited == [1]


class _Scripted:
    name = "scripted"

    def __init__(self, *pieces: str) -> None:
        self.pieces = pieces

    def write(
        self,
        question: str,
        history: Sequence[Message],
        passages: Sequence[Candidate],
        context: str = "",
    ) -> Iterator[str]:
        yield from self.pieces


def test_the_answer_streams_and_its_last_state_is_final() -> None:
    retrieval = _retrieval(_passage("Owls hunt at night."), _passage("Herons wade."))
    states = [
        (state.text, list(state.cited))
        for state in answer(_Scripted("Owls hunt", " at night [1", "][5]."), "q", [], retrieval)
    ]
    assert states[-1] == ("Owls hunt at night [1].", [1])
    assert len(states) >= 3  # streamed, not all at once


def test_an_answers_citations_are_numbered_1_to_n_and_its_passages_follow_them() -> None:
    passages = [_passage(f"Passage {n} about otters.") for n in range(1, 6)]
    scripted = _Scripted("Otters float [1] and hold hands [4]", " while asleep [4][1].")
    final = list(answer(scripted, "q", [], _retrieval(*passages)))[-1]
    assert final.text == "Otters float [1] and hold hands [2] while asleep [2][1]."
    assert final.cited == [1, 2]
    numbered = [passage.text for passage in final.passages]
    assert numbered[:2] == ["Passage 1 about otters.", "Passage 4 about otters."]
    assert sorted(numbered) == [passage.text for passage in passages]


def test_with_no_passages_the_answer_says_so_and_shows_the_query_and_filters() -> None:
    final = list(answer(_Scripted("never used"), "Where is Atlantis?", [], _retrieval()))[-1]
    assert not final.supported
    assert "found nothing" in final.text and "“q”" in final.text and '"lang": ["en"]' in final.text


def test_passages_with_nothing_to_quote_are_still_shown_cited() -> None:
    passages = [_passage(f"Passage {n} about otters.") for n in range(1, 6)]
    final = list(answer(_Scripted(), "Why do otters hold hands?", [], _retrieval(*passages)))[-1]
    assert not final.supported
    assert final.text == "Nothing here answers this directly. The closest passages: [1] [2] [3]"
    assert final.cited == [1, 2, 3]


def test_a_chinese_question_gets_a_chinese_answer_frame() -> None:
    final = list(answer(_Scripted(), "三峡大坝在哪里？", [], _retrieval()))[-1]
    assert "没有找到" in final.text


def test_the_extractive_answer_quotes_the_matching_sentences_with_citations(
    indexed: Settings,
) -> None:
    passages = [
        _passage("Kingfishers dive from a perch. They nest in river banks."),
        _passage("Owls hunt at night. Their soft feathers make their flight almost silent."),
    ]
    final: Answer = list(
        answer(ExtractiveAnswerer(indexed), "When do owls hunt?", [], _retrieval(*passages))
    )[-1]
    assert "Owls hunt at night. [1]" in final.text
    assert "Kingfishers" not in final.text
    assert final.cited == [1] and final.passages[0] is passages[1]


def test_the_extractive_answer_quotes_nothing_that_shares_no_term_with_the_question(
    indexed: Settings,
) -> None:
    passages = [
        _passage("Kingfishers dive from a perch. They nest in river banks."),
        _passage("Owls hunt at night. Their soft feathers make their flight almost silent."),
    ]
    question = "What is the capital of Mongolia?"
    final = list(answer(ExtractiveAnswerer(indexed), question, [], _retrieval(*passages)))[-1]
    assert not final.supported
    assert final.text == "Nothing here answers this directly. The closest passages: [1] [2]"


_GUIDE = {"file_path": "/d/velmora-guide.pdf"}


def test_the_extractive_answer_quotes_no_sentence_that_shares_only_common_or_few_terms(
    indexed: Settings,
) -> None:
    passages = [
        _passage(
            "velmora-guide\nThe Velmora orchard was planted in 1873 by Ilse Brandt. "
            "The orchard is irrigated by the Sorn creek.",
            **_GUIDE,
        ),
        _passage("velmora-guide\nEvery October the town of Velmora holds a festival.", **_GUIDE),
        _passage("The harbour of Ostrel was dug in 1650 by monks.", file_path="/d/ostrel.pdf"),
    ]
    question = "When was the Velmora orchard planted?"
    final = list(answer(ExtractiveAnswerer(indexed), question, [], _retrieval(*passages)))[-1]
    assert final.text == (
        "From the documents:\n\n- The Velmora orchard was planted in 1873 by Ilse Brandt. [1]"
    )


def test_the_extractive_answer_quotes_every_sentence_that_tells_about_as_much_as_the_best(
    indexed: Settings,
) -> None:
    passages = [
        _passage(
            "The Quillon lighthouse stands 38 metres tall. "
            "Its first keeper was Tomas Ferreira, who served from 1902 to 1931."
        ),
        _passage("The bell tower of Ostrel is 61 metres tall."),
    ]
    question = "How tall is the Quillon lighthouse and who was its first keeper?"
    final = list(answer(ExtractiveAnswerer(indexed), question, [], _retrieval(*passages)))[-1]
    assert final.text == (
        "From the documents:\n\n- The Quillon lighthouse stands 38 metres tall. [1]\n"
        "- Its first keeper was Tomas Ferreira, who served from 1902 to 1931. [1]"
    )


def test_the_extractive_answer_quotes_nothing_that_shares_only_what_every_passage_has(
    indexed: Settings,
) -> None:
    passages = [
        _passage("velmora-guide\nThe Velmora guide: orchard planted in 1873.", **_GUIDE),
        _passage("velmora-guide\nThe Velmora guide lists the Lantern Festival.", **_GUIDE),
    ]
    # One term every passage has, or two ("Velmora", "guide"): neither tells them apart.
    for question in ("Who founded Velmora?", "Who wrote the Velmora guide?"):
        final = list(answer(ExtractiveAnswerer(indexed), question, [], _retrieval(*passages)))
        assert not final[-1].supported, question
        assert final[-1].text == (
            "Nothing here answers this directly. The closest passages: [1] [2]"
        )


def test_the_extractive_answer_never_quotes_the_line_naming_a_passages_document(
    indexed: Settings,
) -> None:
    section = "Where and when the owls of the old forests hunt"
    named = _passage(
        f"owl-survey › {section}\nOwls hunt at night.",
        file_path="/d/owl-survey.md",
        title="Owl survey",
        section=section,
    )
    final = list(answer(ExtractiveAnswerer(indexed), "When do owls hunt?", [], _retrieval(named)))
    assert final[-1].text == "From the documents:\n\n- Owls hunt at night. [1]"


def test_a_sources_own_bracketed_numbers_never_become_citations(indexed: Settings) -> None:
    passages = [
        _passage("Owls hunt at night, as shown in [2] and [1, 3]."),
        _passage("Herons wade in shallow water."),
        _passage("Kingfishers dive."),
    ]
    final = list(
        answer(ExtractiveAnswerer(indexed), "When do owls hunt?", [], _retrieval(*passages))
    )[-1]
    assert final.cited == [1]
    assert "as shown in ［2］ and ［1, 3］. [1]" in final.text
    prompt = build_messages("When do owls hunt?", [], passages)[-1]["content"]
    assert "as shown in ［2］" in prompt


def test_the_extractive_answer_finds_chinese_words_inside_unspaced_sentences(
    indexed: Settings,
) -> None:
    passages = [_passage("长江是中国最长的河流。三峡大坝位于湖北省宜昌市。")]
    final = list(answer(ExtractiveAnswerer(indexed), "三峡大坝在哪里", [], _retrieval(*passages)))[
        -1
    ]
    assert final.text.startswith("根据文档")
    assert "三峡大坝位于湖北省宜昌市。 [1]" in final.text


def test_llm_prompts_number_the_passages_and_carry_the_conversation() -> None:
    messages = build_messages(
        "And at night?",
        [
            {"role": "user", "content": "Do owls hunt?"},
            {"role": "assistant", "content": "Yes [1]."},
        ],
        [_passage("Owls hunt at night.", file_path="/d/guide.md", page=2, section="Owls")],
    )
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert "[1] (guide.md, page 2, Owls)\nOwls hunt at night." in messages[-1]["content"]
    assert "Answer in English" in messages[0]["content"]
