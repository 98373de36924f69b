"""Answers to the whole question, through the real Assistant on a small indexed corpus: each
part answered or said missing, nothing quoted that answers nothing asked, a question about
what no passage names said unanswered in any language, a follow-up joined with the
conversation only when it refers back, and then with the question it refers to."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pymupdf
import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import Settings, load_settings
from rag_pipeline.store import QueryFilter
from rag_pipeline_tests.conftest import IndexedPlaces, ask_on_the_page, open_workspace
from rag_pipeline_tests.serving.conftest import serving
from serving.answer import Answer, nothing_found, searched_line
from serving.assistant import Assistant
from serving.questions import question_parts, referred_question, refers_back
from serving.retrieval import Retrieval
from serving.server import BackgroundServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser

OWNER = "local"
KESTREL = """# Kestrel Bakery staff handbook

The head baker of Kestrel Bakery is Mira Olsen. Kestrel Bakery opens at 5:40 every morning.
The bakery is located in Bellhaven, on Quay Street. The safety officer is Jonas Field, who
checks the ovens every Monday. Kestrel Bakery was founded in 1987 by Ada Kestrel.
"""
TEA = """# 青溪茶园简介

青溪茶园由陈立明于1952年创办。每罐明前龙井净重250克。茶园每天早上八点开门。
"""
VELMORA = """# Velmora annual figures

Velmora is a textile company. In 2022 revenue was 4 million euros. In 2023 revenue was 5 million
euros. In 2023 the staff moved to Bellhaven. In 2024 revenue was 6 million euros.
"""
LIGHTHOUSE = [
    "The Corvid Point lighthouse was first lit on 3 March 1874. It stands on a granite ledge.",
    "Its light is visible for 21 nautical miles in clear weather.",
    "The tower stands 34 metres tall. Its lamp turns once every 15 seconds.",
]


def _index(root: Path) -> None:
    folder = root / "docs"
    folder.mkdir()
    (folder / "kestrel-handbook.md").write_text(KESTREL, encoding="utf-8")
    (folder / "青溪茶园.md").write_text(TEA, encoding="utf-8")
    (folder / "velmora.md").write_text(VELMORA, encoding="utf-8")
    pdf = pymupdf.open()
    for text in LIGHTHOUSE:
        pdf.new_page().insert_textbox(pymupdf.Rect(72, 72, 523, 400), text, fontsize=11)
    pdf.save(folder / "corvid-point.pdf")
    assert main(["index", "--home", str(root / "home"), "--source", str(folder)]) == 0


@pytest.fixture(scope="module")
def corpus(indexed_places: IndexedPlaces) -> Settings:
    return load_settings(indexed_places.fresh("whole-answers", _index) / "home")


@pytest.fixture(scope="module")
def assistant(corpus: Settings) -> Iterator[Assistant]:
    yield from serving(corpus)


def _ask(assistant: Assistant, question: str, conversation: str | None = None) -> Answer:
    return list(assistant.ask(question, conversation, owner=OWNER))[-1][1]


def test_a_chinese_question_about_an_english_document_quotes_the_sentence_of_its_focus(
    assistant: Assistant,
) -> None:
    # 首席面包师 is read for its English counterpart (head baker); no other sentence rides along.
    final = _ask(assistant, "Kestrel面包店的首席面包师是谁？")
    assert final.text.startswith("根据文档：")
    assert "The head baker of Kestrel Bakery is Mira Olsen." in final.text
    assert "5:40" not in final.text and "Bellhaven" not in final.text and "陈立明" not in final.text
    founder = _ask(assistant, "Kestrel面包店是谁创办的？")
    assert "founded in 1987 by Ada Kestrel" in founder.text and "Mira Olsen" not in founder.text
    # A focus no passage about Velmora holds, or a thing with no counterpart: not answered.
    assert not _ask(assistant, "Velmora的首席面包师是谁？").supported
    assert not _ask(assistant, "Kestrel面包店的电话号码是多少？").supported
    # An entity no passage names: nothing answers, in Chinese as in English.
    for question in (
        "Marlow面包店的首席面包师是谁？",
        "Marlow茶园每天几点开门？",  # a tea garden is described, not Marlow's
        "Who is the head baker at Marlow Bakery?",
    ):
        assert not _ask(assistant, question).supported, question


def test_each_part_of_a_two_part_question_is_answered(assistant: Assistant) -> None:
    question = "When was the Corvid Point lighthouse first lit and how far is its light visible?"
    final = _ask(assistant, question)
    assert "first lit on 3 March 1874" in final.text
    assert "visible for 21 nautical miles" in final.text
    assert "granite ledge" not in final.text  # answers neither part


def test_a_part_no_passage_answers_is_said_missing_in_the_questions_language(
    assistant: Assistant,
) -> None:
    final = _ask(assistant, "Who is the head baker at Kestrel Bakery and what is its phone number?")
    assert "Mira Olsen" in final.text
    assert "- what is its phone number: nothing here says." in final.text
    chinese = _ask(assistant, "青溪茶园是谁创办的？茶园的电话号码是多少？")
    assert "陈立明" in chinese.text and "- 茶园的电话号码是多少：文档中没有提到。" in chinese.text


def test_only_sentences_that_answer_what_is_asked_are_quoted(assistant: Assistant) -> None:
    baker = _ask(assistant, "Who is the head baker at Kestrel Bakery?")
    assert "Mira Olsen" in baker.text and "5:40" not in baker.text
    officer = _ask(assistant, "Who is the safety officer at Kestrel Bakery?")
    assert "Jonas Field" in officer.text and "Bellhaven" not in officer.text
    salary = _ask(assistant, "What is the salary of the Kestrel safety officer?")
    assert not salary.supported  # the officer is named, the salary is not


def test_a_question_opening_with_a_request_or_a_preposition_is_answered(
    assistant: Assistant,
) -> None:
    # The opening word is capitalised as the first, not as a name the passage must hold.
    framed = _ask(assistant, "According to the handbook, who is the head baker?")
    assert "Mira Olsen" in framed.text
    summary = _ask(assistant, "Summarize what Kestrel Bakery does.")
    assert summary.supported and "Kestrel Bakery" in summary.text
    during = _ask(assistant, "During which year was Kestrel Bakery founded?")
    assert "1987" in during.text


def test_a_part_that_is_only_a_question_word_asks_it_of_the_part_before(
    assistant: Assistant,
) -> None:
    final = _ask(assistant, "Who founded Kestrel Bakery, and when?")
    assert "Ada Kestrel" in final.text and "1987" in final.text
    assert "nothing here says" not in final.text


def test_a_part_asking_a_measurement_is_answered_by_a_number_with_a_fitting_unit(
    assistant: Assistant,
) -> None:
    # "height" is not in "The tower stands 34 metres tall": the quantity says it.
    asked = "When was the Corvid Point lighthouse first lit?"
    conversation, _ = list(assistant.ask(asked, owner=OWNER))[-1]
    height = _ask(assistant, "And its height?", conversation)
    assert "34 metres tall" in height.text
    assert "21 nautical miles" not in height.text and "15 seconds" not in height.text
    # Metres, miles and seconds are no weight, and the bakery's figures no height.
    assert not _ask(assistant, "How heavy is the Corvid Point lighthouse?").supported
    assert not _ask(assistant, "What is the height of Kestrel Bakery?").supported


def test_a_figure_of_another_year_is_not_quoted(assistant: Assistant) -> None:
    final = _ask(assistant, "What was Velmora's revenue in 2022?")
    assert "4 million" in final.text
    assert "5 million" not in final.text and "6 million" not in final.text


def test_a_follow_up_asking_only_a_year_asks_what_the_conversation_asked(
    assistant: Assistant,
) -> None:
    conversation, _ = list(assistant.ask("What was Velmora's revenue in 2022?", owner=OWNER))[-1]
    final = _ask(assistant, "And in 2023?", conversation)
    assert "5 million" in final.text
    assert "moved to Bellhaven" not in final.text and "4 million" not in final.text


def test_a_chain_of_follow_ups_keeps_the_question_they_refer_to(assistant: Assistant) -> None:
    first = "What was Velmora's revenue in 2022?"
    conversation, _ = list(assistant.ask(first, owner=OWNER))[-1]
    _ask(assistant, "And in 2023?", conversation)
    final = _ask(assistant, "And in 2024?", conversation)
    assert assistant.history.traces(OWNER, 1)[0]["query"] == f"{first} And in 2024?"
    assert "6 million" in final.text and "5 million" not in final.text


def test_a_follow_up_naming_its_own_subject_is_searched_by_itself(assistant: Assistant) -> None:
    conversation, _ = list(assistant.ask("Who is the head baker at Kestrel Bakery?", owner=OWNER))[
        -1
    ]
    question = "What is the capital of Mongolia and its population?"
    final = _ask(assistant, question, conversation)
    assert assistant.history.traces(OWNER, 1)[0]["query"] == question
    assert not final.supported and "Mira Olsen" not in final.text


def test_an_unrelated_follow_up_is_searched_by_itself(assistant: Assistant) -> None:
    conversation, _ = list(assistant.ask("What is the capital of Mongolia?", owner=OWNER))[-1]
    final = _ask(assistant, "火星上有几个卫星？", conversation)
    assert assistant.history.traces(OWNER, 1)[0]["query"] == "火星上有几个卫星？"
    assert not final.supported and "Mongolia" not in final.text


def test_a_follow_up_that_refers_back_is_searched_with_the_question_before_and_says_so(
    assistant: Assistant,
) -> None:
    first = "When was the Corvid Point lighthouse first lit?"
    conversation, _ = list(assistant.ask(first, owner=OWNER))[-1]
    final = _ask(assistant, "How far is its light visible?", conversation)
    searched = f"{first} How far is its light visible?"
    assert assistant.history.traces(OWNER, 1)[0]["query"] == searched
    assert "21 nautical miles" in final.text
    assert final.text.endswith(f"(Searched for: “{searched}”)")
    conversation, _ = list(assistant.ask("青溪茶园是谁创办的？", owner=OWNER))[-1]
    final = _ask(assistant, "它几点开门？", conversation)
    assert "八点" in final.text and final.text.endswith(
        "（检索词：“青溪茶园是谁创办的？ 它几点开门？”）"
    )


@pytest.mark.parametrize(
    ("question", "refers"),
    [
        ("And in 2023?", True),
        ("How tall is it?", True),
        ("What about the safety officer?", True),
        ("它位于哪里？", True),
        ("那三峡大坝呢？", True),
        ("How many moons does Mars have?", False),
        ("Who founded Velmora?", False),
        ("火星上有几个卫星？", False),
        ("青溪茶园是谁创办的？", False),
        ("因此它几点开门？", True),
        # That/there/then/one are no reference by themselves; a pronoun beside a name of the
        # question's own refers to it; a Chinese pronoun is a word, not a character in one.
        ("Which document says that the bakery opens at 5:40?", False),
        ("Are there safety officers at Kestrel?", False),
        ("Which one of the bakeries opens first?", False),
        ("What did Velmora do then?", False),
        ("What is the capital of Mongolia and its population?", False),
        ("What was its revenue in 2023?", True),
        # A day or a month is no name of a thing asked about.
        ("Is it open on Sunday?", True),
        ("What does it cost in March?", True),
        ("其他茶园几点开门？", False),
        ("茶园应该几点关门？", False),
    ],
)
def test_a_follow_up_refers_back_by_pronoun_ellipsis_or_opening_and(
    question: str, refers: bool
) -> None:
    assert refers_back(question) is refers


def test_a_question_is_cut_into_the_parts_it_asks() -> None:
    assert question_parts("When was it first lit and how far is its light visible?") == [
        "When was it first lit",
        "how far is its light visible?",
    ]
    assert question_parts("Who makes bread and butter?") == ["Who makes bread and butter?"]
    assert question_parts("青溪茶园是哪一年创办的？每天几点开门？") == [
        "青溪茶园是哪一年创办的？",
        "每天几点开门？",
    ]
    assert question_parts("长江流经几个省，三峡大坝位于哪里？") == [
        "长江流经几个省",
        "三峡大坝位于哪里？",
    ]


def test_a_question_word_alone_is_a_part_only_when_it_says_what_to_look_for() -> None:
    assert question_parts("Who founded Kestrel, and when?") == ["Who founded Kestrel", "when?"]
    assert question_parts("How many in 2022 and how many in 2023?") == [
        "How many in 2022",
        "how many in 2023?",
    ]
    assert question_parts("Who founded Kestrel, and where?") == ["Who founded Kestrel, and where?"]
    assert question_parts("青溪茶园是谁创办的，哪一年？") == ["青溪茶园是谁创办的", "哪一年？"]
    assert question_parts("青溪茶园是谁创办的，在哪里？") == ["青溪茶园是谁创办的，在哪里？"]


def test_a_follow_up_refers_to_the_last_question_that_stood_alone() -> None:
    asked = ["What was Velmora's revenue in 2022?", "And in 2023?"]
    assert referred_question(asked) == "What was Velmora's revenue in 2022?"
    assert referred_question([*asked, "Who founded Kestrel?"]) == "Who founded Kestrel?"
    assert referred_question(["And what?"]) == "And what?"  # the first stands alone
    assert referred_question([]) == ""


@pytest.mark.parametrize(
    ("question", "after_nothing", "after_an_answer"),
    [
        (
            "Who founded Marrow Bakery?",
            "Searched for: “Who founded Marrow Bakery?”, with no filters.",
            "(Searched for: “Who founded Marrow Bakery?”)",
        ),
        (
            "火星上有几个卫星？",
            "检索词：“火星上有几个卫星？”，未设筛选条件。",
            "（检索词：“火星上有几个卫星？”）",
        ),
    ],
)
def test_what_was_searched_is_punctuated_as_the_questions_language_is(
    question: str, after_nothing: str, after_an_answer: str
) -> None:
    retrieval = Retrieval(question, QueryFilter(), [], [], None)
    assert nothing_found(question, retrieval).endswith("\n\n" + after_nothing)
    assert searched_line(question, retrieval) == after_an_answer


def test_the_answerers_modules_import_without_a_cycle() -> None:
    # The extractive answerer loads without the module that frames every answerer.
    code = "import serving.extractive, sys; print('serving.answer' in sys.modules)"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "False"


@pytest.mark.slow
def test_on_the_page_an_unrelated_follow_up_is_not_glued_to_the_question_before(
    indexed_places: IndexedPlaces,
) -> None:
    from gradio_client import Client

    # A home of its own: the module's assistant holds the other one's store open.
    served = load_settings(indexed_places.fresh("whole-answers-page", _index) / "home")
    with BackgroundServer(served) as server:
        client = Client(server.url + "/", verbose=False)
        try:
            ask = ("default", [], [], [], [], "", "")  # the chat shown, no filters
            client.predict("What is the capital of Mongolia?", *ask, api_name="/ask")
            chat, *_ = client.predict("火星上有几个卫星？", *ask, api_name="/ask")
        finally:
            client.close()
    shown = chat[-1]["content"]
    text = shown if isinstance(shown, str) else "".join(p.get("text", "") for p in shown)
    assert "Mongolia" not in text and "没有" in text.splitlines()[0]  # said unanswered, alone


def test_in_a_browser_an_unanswered_question_highlights_no_passage_in_the_preview(
    indexed_places: IndexedPlaces, browser: Browser
) -> None:
    from playwright.sync_api import expect

    served = load_settings(indexed_places.fresh("whole-answers-preview", _index) / "home")
    with BackgroundServer(served) as server:
        page = browser.new_page()
        page.goto(server.url + "/")
        open_workspace(page)
        chat, preview = page.locator("#chat"), page.locator("#preview-text")
        # Opened whole (its preview emptied) before the first question.
        expect(page.locator("#workspace-status")).to_contain_text("indexed", timeout=60_000)
        ask_on_the_page(page, "Who is the head baker at Kestrel Bakery?")
        expect(preview).to_contain_text("kestrel-handbook.md", timeout=180_000)  # answered
        ask_on_the_page(page, "What is the salary of the Kestrel safety officer?")
        expect(chat).to_contain_text("Nothing here answers this directly", timeout=60_000)
        expect(page.locator("#evidence")).to_contain_text("kestrel-handbook.md")  # the closest
        expect(preview).to_have_text("")
        expect(page.locator("#preview-image")).to_be_hidden()
        page.close()


def test_a_chinese_question_word_finds_its_answer_in_an_english_document(
    assistant: Assistant,
) -> None:
    assert "5:40" in _ask(assistant, "Kestrel面包店几点开门？").text
    assert "34 metres" in _ask(assistant, "Corvid Point灯塔有多高？").text
    assert "1874" in _ask(assistant, "Corvid Point灯塔是哪一年首次点亮的？").text
    assert not _ask(assistant, "Corvid Point灯塔几点开门？").supported
