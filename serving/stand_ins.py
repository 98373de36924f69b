"""What a sentence says for a question's term without holding the term itself: a number with a
fitting unit for a word asking a measurement ("The tower is 34 metres tall" for "height").

A sentence's terms are taken with the question's terms it holds this way, so the extractive
answerer weighs and requires them as it does the words themselves.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from rag_pipeline.embedding import SparseEncoder

_DIGITS = r"\d+(?:[.,]\d+)*\s*"
_CHINESE_NUMBER = r"[\d零〇一二两三四五六七八九十百千万亿.]+\s*"
_HEIGHT = (
    rf"{_DIGITS}(?:met(?:re|er)s?|m|feet|foot|ft|storeys?|stories|floors)\b"
    rf"|{_CHINESE_NUMBER}(?:米|英尺|层)"
)
_LENGTH = (
    rf"{_DIGITS}(?:(?:kilo|centi|milli)?met(?:re|er)s?|k?m|cm|mm|(?:nautical\s+)?miles?|feet|"
    rf"foot|ft|yards?|inch(?:es)?)\b|{_CHINESE_NUMBER}(?:公里|千米|厘米|米|海里|英里|英尺)"
)
_DURATION = (
    rf"{_DIGITS}(?:seconds?|minutes?|mins?|hours?|days?|weeks?|months?|years?)\b"
    rf"|{_CHINESE_NUMBER}(?:秒|分钟|小时|天|周|个月|年)"
)
_WEIGHT = (
    rf"{_DIGITS}(?:k?g|grams?|kilo(?:gram)?s?|tonnes?|tons?|pounds?|lbs?|ounces?|oz)\b"
    rf"|{_CHINESE_NUMBER}(?:千克|公斤|克|吨|斤)"
)
# An age: a year something began in, or a count of years old.
_AGE = (
    r"\b(?:founded|established|built|opened|started|born|since)\b\D{0,40}\b(?:1\d{3}|20\d{2})\b"
    rf"|{_DIGITS}years?\s+old\b|{_CHINESE_NUMBER}岁|(?:创办|成立|建于|始于)"
)
_TEMPERATURE = rf"{_DIGITS}(?:degrees?|°\s*[CF]?)|{_CHINESE_NUMBER}(?:摄氏度|度|℃)"


def _pattern(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{a})" for a in alternatives), re.IGNORECASE)


# A word asking a measurement → the quantities that answer it. Kept to the common ones: a word
# here is answered by any sentence with such a quantity in a passage about the question's subject.
_MEASUREMENTS: dict[str, re.Pattern[str]] = {
    **dict.fromkeys(["height", "tall", "high", "高度"], _pattern(_HEIGHT)),
    **dict.fromkeys(["long"], _pattern(_LENGTH, _DURATION)),  # how long: a way or a while
    **dict.fromkeys(
        ["length", "far", "distance", "wide", "width", "deep", "depth", "长度", "距离"],
        _pattern(_LENGTH),
    ),
    **dict.fromkeys(["weigh", "weight", "heavy", "重量"], _pattern(_WEIGHT)),
    **dict.fromkeys(["old", "age", "年龄"], _pattern(_AGE)),
    **dict.fromkeys(["temperature", "hot", "cold", "warm", "温度"], _pattern(_TEMPERATURE)),
}
# Chinese question words asking a measurement, which are no term (多高 is read as 多 and 高):
# an answer must hold the quantity.
_CHINESE_ASKING_MEASUREMENT = {
    "多高": _pattern(_HEIGHT),
    "多长": _pattern(_LENGTH, _DURATION),
    "多远": _pattern(_LENGTH),
    "多重": _pattern(_WEIGHT),
    "多久": _pattern(_DURATION),
}


@dataclass(frozen=True, slots=True)
class StandIns:
    """For the terms of a question (and its conversation) asking a measurement, the quantity
    that answers each: an answer to a part asking one holds the word or the quantity."""

    quantities: dict[int, re.Pattern[str]]

    def held(self, sentence: str) -> set[int]:
        """The question's terms that ``sentence`` holds through a stand-in."""
        return {term for term, quantity in self.quantities.items() if quantity.search(sentence)}


def stand_ins(terms: frozenset[int], sparse: SparseEncoder) -> StandIns:
    """The stand-ins for those of ``terms`` (a question's) that the tables know."""
    quantities: dict[int, re.Pattern[str]] = {}
    for word, quantity in _MEASUREMENTS.items():
        for term in _own_ids(word, sparse) & terms:
            quantities[term] = quantity
    return StandIns(quantities)


def asked_quantity(part: str) -> re.Pattern[str] | None:
    """The quantity that a Chinese question word of ``part`` asks for (多高: a height), which an
    answer must hold."""
    return next((q for word, q in _CHINESE_ASKING_MEASUREMENT.items() if word in part), None)


@functools.lru_cache(maxsize=512)
def _own_ids(word: str, sparse: SparseEncoder) -> frozenset[int]:
    """The sparse model's term for ``word`` itself, not for the shorter words in it that
    search also cuts out (面包 in 面包师)."""
    ids = frozenset(sparse.embed_query(word).indices.tolist())
    if len(ids) > 1:
        import jieba

        shorter = (piece for piece in jieba.cut_for_search(word) if piece != word)
        for piece in shorter:
            ids -= set(sparse.embed_query(piece).indices.tolist())
    return ids
