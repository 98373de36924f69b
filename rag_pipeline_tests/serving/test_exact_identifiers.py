"""An exact identifier finds its document first, through the real pipeline."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import load_settings
from serving.retrieval import Retriever, live_index

# 300 notes indexed (test_indexing's exact identifier, among 41 notes, is in the quick run).
pytestmark = pytest.mark.slow

WORDS = [
    "pump",
    "valve",
    "seal",
    "filter",
    "order",
    "invoice",
    "delivery",
    "warehouse",
    "shelf",
    "spare",
    "part",
    "motor",
    "belt",
    "bearing",
    "gasket",
    "hose",
    "clamp",
    "bolt",
    "nut",
    "washer",
    "bracket",
    "panel",
    "switch",
    "relay",
    "fuse",
    "cable",
    "sensor",
]


def test_each_notes_unique_token_finds_that_note_first(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    chance = random.Random(7)
    tokens = {f"note-{number:03d}.md": f"zq{number:04d}" for number in range(300)}
    for name, token in tokens.items():
        words = chance.sample(WORDS, 12)
        words.insert(chance.randrange(len(words)), token)
        (notes / name).write_text(" ".join(words).capitalize() + ".\n", encoding="utf-8")
    home = tmp_path / "home"
    assert main(["index", "--home", str(home), "--source", str(notes)]) == 0
    with live_index(load_settings(home)) as (settings, store):
        retriever = Retriever(settings, store)
        firsts = {
            name: retriever.retrieve(token, top_k=1).passages[0].payload["file_path"]
            for name, token in tokens.items()
        }
    missed = {name: first for name, first in firsts.items() if Path(first).name != name}
    assert missed == {}
