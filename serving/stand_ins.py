"""What a sentence says for a question's term without holding the term itself: a number with a
fitting unit for a word asking a measurement ("The tower is 34 metres tall" for "height"), and
the English counterpart of a Chinese question's focus word (baker for 面包师, in a Chinese
question about an English document).

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
_TIME_OF_DAY = (
    r"\b\d{1,2}[:.]\d{2}\b|\b\d{1,2}\s*(?:am|pm|a\.m\.|p\.m\.|o'clock)"
    r"|[\d零〇一二两三四五六七八九十]+\s*点"
)
_MONEY = (
    rf"{_DIGITS}(?:euros?|dollars?|pounds?|yuan|francs?|crowns?)\b|[€$£¥]\s*\d"
    rf"|{_CHINESE_NUMBER}(?:元|美元|欧元|英镑|块)"
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
# Chinese question words asking a measurement, a time of day or an amount of money, which are no
# term (多高 is read as 多 and 高): an answer must hold the quantity. (A year or date, 哪一年, and
# a number, 多少, are :func:`serving.questions.answer_shape`'s.)
_CHINESE_ASKING_MEASUREMENT = {
    "几点": _pattern(_TIME_OF_DAY),
    "多少钱": _pattern(_MONEY),
    "预算": _pattern(_MONEY),
    "费用": _pattern(_MONEY),
    "多高": _pattern(_HEIGHT),
    "多长": _pattern(_LENGTH, _DURATION),
    "多远": _pattern(_LENGTH),
    "多重": _pattern(_WEIGHT),
    "多久": _pattern(_DURATION),
}

# A Chinese question's focus word → its English counterparts, each held by a sentence holding
# all its words. Only common focus words of questions (roles, founding, building, place,
# height), not the things they are asked of (面包店 in Kestrel面包店 is the name's noun): an
# English passage answers a Chinese part when it holds the part's names and all its focus
# words' counterparts, and the sentence quoted holds them (Velmora Textiles的首席面包师是谁？
# stays unanswered).
_ENGLISH_COUNTERPARTS = {
    "首席": ("head", "chief"),
    "面包师": ("baker",),
    "创始人": ("founder", "founded"),
    "创始": ("founder", "founded"),  # search cuts it out of 创始人 too
    "创办": ("founded", "founder"),
    "创立": ("founded", "founder"),
    "成立": ("founded", "established"),
    "建造": ("built",),
    "建成": ("built", "completed"),
    "位于": ("located",),
    "总部": ("headquarters", "headquartered"),
    "首席执行官": ("ceo", "chief executive"),
    "经理": ("manager",),
    "安全员": ("safety officer",),
    "高度": ("height", "tall"),
    "收入": ("revenue",),
    "员工": ("staff", "employees"),
    "首次": ("first",),
    "点亮": ("lit",),
    "开门": ("open",),
    "关门": ("close",),
    "预算": ("budget",),
    "费用": ("cost", "fee"),
    "灯塔": ("lighthouse", "tower"),
}
# Of those, the things asked about rather than what is asked (灯塔 in Corvid Point灯塔有多高？):
# a passage answering holds them, its sentence need not ("The tower is 34 metres tall" in a
# passage about the lighthouse, "It was built by Hollis Brand" in one naming it).
_THINGS = frozenset(["灯塔"])


@dataclass(frozen=True, slots=True)
class StandIns:
    """For the terms of a question (and its conversation) asking a measurement, the quantity
    that answers each: an answer to a part asking one holds the word or the quantity; for its
    Chinese focus words, their English counterparts (the terms of each)."""

    quantities: dict[int, re.Pattern[str]]
    counterparts: dict[int, tuple[frozenset[int], ...]]
    things: frozenset[int]  # the counterparts' terms that are things asked about (_THINGS)

    def held(self, sentence: str, terms: set[int]) -> set[int]:
        """The question's terms that ``sentence`` (of these ``terms``) holds through a
        stand-in."""
        measured = {term for term, quantity in self.quantities.items() if quantity.search(sentence)}
        translated = {
            term
            for term, english in self.counterparts.items()
            if any(words <= terms for words in english)
        }
        return measured | translated


def stand_ins(terms: frozenset[int], sparse: SparseEncoder) -> StandIns:
    """The stand-ins for those of ``terms`` (a question's) that the tables know."""
    quantities: dict[int, re.Pattern[str]] = {}
    for word, quantity in _MEASUREMENTS.items():
        for term in _own_ids(word, sparse) & terms:
            quantities[term] = quantity
    counterparts: dict[int, tuple[frozenset[int], ...]] = {}
    things: set[int] = set()
    for word, english in _ENGLISH_COUNTERPARTS.items():
        for term in _own_ids(word, sparse) & terms:
            counterparts[term] = tuple(_ids(phrase, sparse) for phrase in english)
            if word in _THINGS:
                things.add(term)
    return StandIns(quantities, counterparts, frozenset(things))


def asked_quantity(part: str) -> re.Pattern[str] | None:
    """The quantity that a Chinese question word of ``part`` asks for (多高: a height, 几点: a
    time of day), which an answer must hold."""
    return next((q for word, q in _CHINESE_ASKING_MEASUREMENT.items() if word in part), None)


@functools.lru_cache(maxsize=1024)
def _ids(text: str, sparse: SparseEncoder) -> frozenset[int]:
    return frozenset(sparse.embed_query(text).indices.tolist())


def _own_ids(word: str, sparse: SparseEncoder) -> frozenset[int]:
    """The sparse model's term for ``word`` itself, not for the shorter words in it that
    search also cuts out (面包 in 面包师)."""
    ids = _ids(word, sparse)
    if len(ids) > 1:
        import jieba

        shorter = (piece for piece in jieba.cut_for_search(word) if piece != word)
        for piece in shorter:
            ids -= _ids(piece, sparse)
    return ids
