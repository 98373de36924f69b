"""What a question asks, read without a language model: its parts ("When was it lit and how
far is it visible?" asks two things), the terms each part is about (names and numbers, which a
passage must hold for it to bear on the part) and what each asks about them, and whether a
follow-up refers back to the conversation ("and in 2023?", "它有多长？") or stands alone.

Terms are the sparse model's (stemmed English, jieba-segmented Chinese), so they compare with a
passage's as retrieval compares them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag_pipeline.embedding import SparseEncoder
from rag_pipeline.language import has_cjk

# English words that start a question or a request rather than name something (any other
# capitalised word is a name).
_OPENERS = frozenset(
    str.split(
        "how what when where who whom whose which why is are was were do does did can could would "
        "should will shall has have had tell list describe give show explain name please and or "
        "but in on at for from of the a an"
    )
)
# Chinese question and function words: they say what is asked, not what about. BM25's stop
# words are English only.
_CHINESE_FUNCTION_WORDS = frozenset(
    str.split(
        "的 了 是 在 有 和 与 及 或 吗 呢 吧 啊 呀 谁 哪 几 个 多 少 什 么 它 他 她 其 该 这 那 此 "
        "上 中 里 为 被 把 从 到 对 也 都 就 还 又 请 问 是否 是不是 什么 什么样 时候 哪里 哪儿 "
        "哪个 哪些 哪一年 哪年 哪天 多少 多长 多远 多高 多大 多久 多重 几个 几年 几点 怎么 "
        "怎样 如何 为什么 他们 她们 它们 我们 你们 这个 那个 这些 那些 以及 还有 另外 请问 一下 "
        "告诉 可以 能 会 要 么 谁是 是谁"
    )
)
_PRONOUNS = frozenset(str.split("它 他 她 其 该 此 它们 他们 她们 这个 那个 这些 那些"))
# Words that ask how much or when, not about what: "many" is no term a passage must hold, nor
# "time" in "what time".
_ASKING_AMOUNT = frozenset(["many", "much"])
_ASKING_WHAT = frozenset(str.split("time year day date month hour kind sort type"))
_CHINESE_ASKING = re.compile(r"谁|什么|哪|几|多少|多[长远高大久重]|怎|如何|为什么|何|吗|呢")
_ENGLISH_ASKING = (
    r"how|what|when|where|who|whom|whose|which|why|is|are|was|were|does|do|did|can|could|has|"
    r"have|had"
)
# "…lit and how far…", "…; who…": a new part starts where a joining word meets a question word.
_ENGLISH_JOIN = re.compile(
    rf"\s*(?:,\s*|;\s*)?\band\s+(?=(?:{_ENGLISH_ASKING})\b)|\s*;\s*(?=(?:{_ENGLISH_ASKING})\b)",
    re.IGNORECASE,
)
_CHINESE_JOIN = re.compile(r"[，,；;、]|以及|另外|还有")
_QUESTION_END = re.compile(r"(?<=[?？!！。])\s*")
_WORD = re.compile(r"\d+(?:[.,:]\d+)*|[A-Za-z\u00c0-\u024f][\w'’-]*|[\u3400-\u9fff]+")

# A follow-up that refers back: a pronoun or demonstrative, an opening "and"/"what about", or
# too little of its own to be a question ("in 2023?").
_REFERS_BACK_ENGLISH = re.compile(
    r"\b(?:it|its|it's|they|them|their|theirs|he|him|his|she|her|hers|this|that|these|those|"
    r"there|then|the same|the other|one|ones)\b|^\s*(?:and|but|also|what about|how about|or)\b",
    re.IGNORECASE,
)
_REFERS_BACK_CHINESE = re.compile(
    r"[它他她其该此]|这[个些里]|那[个些里]|^\s*那|呢\s*[?？]?\s*$|^\s*还有|^\s*另外"
)
_SHORT_FOLLOW_UP = 3  # words: a question this short leans on the one before it


def question_parts(question: str) -> list[str]:
    """The questions that ``question`` asks, in order (itself when it asks one)."""
    parts: list[str] = []
    for sentence in _QUESTION_END.split(question.strip()):
        if not sentence.strip():
            continue
        pieces = _CHINESE_JOIN.split(sentence) if has_cjk(sentence) else None
        if pieces and len(pieces) > 1 and all(_CHINESE_ASKING.search(p) for p in pieces):
            parts.extend(piece.strip() for piece in pieces if piece.strip())
        elif not has_cjk(sentence):
            parts.extend(p.strip() for p in _ENGLISH_JOIN.split(sentence) if p.strip())
        else:
            parts.append(sentence.strip())
    # A piece with no word of its own (a stray "?") is no part.
    return [part for part in parts if _WORD.search(part)] or [question.strip()]


def refers_back(question: str) -> bool:
    """Whether a follow-up leans on the conversation before it (pronouns, "and in 2023?",
    那…呢), rather than asking something whole by itself."""
    if _REFERS_BACK_ENGLISH.search(question) or _REFERS_BACK_CHINESE.search(question):
        return True
    words = _WORD.findall(question)
    if any(has_cjk(word) for word in words):
        return sum(len(word) for word in words if has_cjk(word)) <= _SHORT_FOLLOW_UP
    # "In 2023?", "The bakery?": a fragment; "Who founded Velmora?" stands alone.
    return len(words) <= _SHORT_FOLLOW_UP and not re.match(
        rf"(?:{_ENGLISH_ASKING})\b", question.strip(), re.IGNORECASE
    )


@dataclass(frozen=True, slots=True)
class Terms:
    """A question's (or part's) terms: ``names`` (names, numbers) that a passage must hold to
    be about it, the ``topic`` a Chinese question opens with (it names no name: the first word
    is what it is about, 黄河 in 黄河全长多少公里; none when that word is a pronoun), the terms
    ``asked`` about them, and the ``focus`` of an English question, the first thing it asks
    for (salary in "What is the salary of the safety officer?"), which an answer must hold."""

    names: frozenset[int]
    topic: frozenset[int]
    asked: frozenset[int]
    focus: frozenset[int]

    @property
    def all(self) -> frozenset[int]:
        return self.names | self.topic | self.asked


NO_TERMS = Terms(frozenset(), frozenset(), frozenset(), frozenset())


def question_terms(text: str, sparse: SparseEncoder) -> Terms:
    """The sparse model's terms of ``text``, sorted as :class:`Terms` says."""
    names: set[int] = set()
    asked: set[int] = set()
    topic: set[int] | None = None
    focus: set[int] | None = None
    mixed = has_cjk(text)
    after_asking = after_how = after_name = False
    for word in _words(text):
        lower = word.lower()
        if has_cjk(word):
            if topic is None and word in _PRONOUNS:
                topic = set()  # it refers back: what it is about is the conversation's
            if word in _CHINESE_FUNCTION_WORDS or len(word) == 1:
                continue
            ids = _ids(word, sparse)
            if topic is None:
                topic = ids
            asked.update(ids)
        elif _is_name(word, mixed):
            names.update(_ids(word, sparse))
            after_name = True
            continue
        elif lower not in _ASKING_AMOUNT and not (after_asking and lower in _ASKING_WHAT):
            ids = _ids(word, sparse)
            # Not "long" in "how long", nor "ferry" in "the Lindqvist ferry" (a name's noun).
            if focus is None and ids and not after_how and not after_name:
                focus = ids
            asked.update(ids)
        after_asking, after_how = lower in {"how", "what", "which"}, lower == "how"
        after_name = False
    return Terms(
        frozenset(names),
        frozenset(topic or ()) if not names else frozenset(),
        frozenset(asked - names),
        frozenset(focus or ()),
    )


def _words(text: str) -> list[str]:
    """``text``'s words, Chinese runs cut as search cuts them (and the shorter words inside)."""
    words: list[str] = []
    for word in _WORD.findall(text):
        if has_cjk(word):
            import jieba

            jieba.setLogLevel(60)
            words.extend(token for token in jieba.cut_for_search(word) if token.strip())
        else:
            words.append(word)
    return words


def _is_name(word: str, mixed: bool) -> bool:
    """A number, a Latin word in a Chinese question, or a capitalised word that is not a
    question word or a request ("When", "Tell")."""
    if word[0].isdigit() or mixed:
        return True
    if not word[0].isupper():
        return any(character.isupper() for character in word[1:])  # iPhone, eBay
    return word.lower() not in _OPENERS


def _ids(word: str, sparse: SparseEncoder) -> set[int]:
    return set(sparse.embed_query(word).indices.tolist())
