"""Chinese questions about English documents: a question word says what the answer holds (几点:
a time of day, 预算: an amount of money), and an answer that quotes nothing says which of the
closest passages are in the other language."""

from __future__ import annotations

from serving.answer import _closest
from serving.retrieval import Candidate
from serving.stand_ins import asked_quantity


def _passage(text: str) -> Candidate:
    return Candidate(text, {"text": text, "file_path": "/docs/notes.md", "title": "notes"})


def test_a_chinese_question_word_asks_a_time_of_day_or_an_amount_of_money() -> None:
    time_of_day = asked_quantity("Kestrel面包店几点开门？")
    money = asked_quantity("Nightjar项目的预算是多少？")

    assert time_of_day is not None and money is not None
    assert time_of_day.search("Kestrel Bakery opens at 5:40 every morning.")
    assert time_of_day.search("茶园每天早上八点开门。")
    assert not time_of_day.search("Kestrel Bakery was founded in 1987.")
    assert money.search("Its budget is 240,000 euros over three years.")
    assert not money.search("The survey covers 240 kilometres of coast.")


ENGLISH = [_passage(f"The ferry leaves Harrow Pier every {n} minutes.") for n in (10, 20, 30)]
CHINESE = _passage("长江是中国最长的河流，全长约六千三百公里。")


def test_an_unanswered_english_question_names_the_closest_chinese_passage() -> None:
    cited, said = _closest("How long is the Yangtze river?", [ENGLISH[0], CHINESE, *ENGLISH[1:]])

    assert cited == [1, 2, 3]
    assert said == " The closest in Chinese: [2]."


def test_a_passage_in_another_language_below_the_closest_is_not_cited() -> None:
    # An unrelated question over a workspace with Chinese documents: no fourth citation.
    assert _closest("What is the capital of Mongolia?", [*ENGLISH, CHINESE]) == ([1, 2, 3], "")


def test_an_unanswered_chinese_question_names_the_closest_english_passages() -> None:
    cited, said = _closest("渡轮多久一班？", [CHINESE, *ENGLISH])

    assert cited == [1, 2, 3]
    assert said == " 其中英文段落：[2] [3]。"


def test_nothing_is_said_of_language_when_the_closest_are_in_the_questions() -> None:
    assert _closest("How often does the ferry leave?", ENGLISH) == ([1, 2, 3], "")
