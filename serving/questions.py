"""What a question asks, read without a language model: its parts ("When was it lit and how
far is it visible?" asks two things), the terms each part is about (names and numbers, which a
passage must hold for it to bear on the part) and what each asks about them, and whether a
follow-up refers back to the conversation ("and in 2023?", "它有多长？") or stands alone.

Terms are the sparse model's (stemmed English, jieba-segmented Chinese), so they compare with a
passage's as retrieval compares them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rag_pipeline.embedding import SparseEncoder
from rag_pipeline.language import has_cjk

# English words that start a question or a request rather than name something (any other
# capitalised word is a name).
_OPENERS = frozenset(
    str.split(
        "how what when where who whom whose which why is are was were do does did can could would "
        "should will shall has have had tell list describe give show explain name please and or "
        "but in on at for from of the a an i"
    )
)
# Words that frame a question when they open it or a clause, rather than say what it asks:
# requests, modals, prepositions ("According to the handbook, who…", "Summarize what…",
# "Must children pay…", "During which year…"). There they are neither names nor asked.
_FRAMING = frozenset(
    str.split(
        "according summarize summarise find compare contrast list describe tell give show "
        "explain name identify state outline provide check look please must should may might "
        "ought need during after before between since until within among regarding concerning "
        "about per as by with without under over across through in on at for from of to"
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
_ASKING_WORDS = frozenset(_ENGLISH_ASKING.split("|"))
# "…lit and how far…", "…; who…": a new part starts where a joining word meets a question word.
_ENGLISH_JOIN = re.compile(
    rf"\s*(?:,\s*|;\s*)?\band\s+(?=(?:{_ENGLISH_ASKING})\b)|\s*;\s*(?=(?:{_ENGLISH_ASKING})\b)",
    re.IGNORECASE,
)
_CHINESE_JOIN = re.compile(r"[，,；;、]|以及|另外|还有")
_QUESTION_END = re.compile(r"(?<=[?？!！。])\s*")
_WORD = re.compile(r"\d+(?:[.,:]\d+)*|[A-Za-z\u00c0-\u024f][\w'’-]*|[\u3400-\u9fff]+")

# A follow-up that refers back: it opens with "and", "what about", 那, or ends in 呢; or it has
# a pronoun and no name of its own; or it has too little of its own to be a question ("in
# 2023?"). Not "that", "there", "then", "one": they are as often no reference at all.
_OPENS_FOLLOW_UP = re.compile(
    r"^\s*(?:and|but|also|what about|how about|or)\b|^\s*(?:那|还有|另外)|呢\s*[?？]?\s*$",
    re.IGNORECASE,
)
_ENGLISH_PRONOUN = re.compile(
    r"\b(?:it|its|it's|they|them|their|theirs|he|him|his|she|her|hers|this|these|those|"
    r"the same|the other)\b",
    re.IGNORECASE,
)
_CHINESE_REFERRING = _PRONOUNS | {"这里", "那里"}  # whole words: not 其 in 其他, 该 in 应该
_SHORT_FOLLOW_UP = 3  # words: a question this short leans on the one before it
# Capitalised, yet no name of a thing asked about: "Is it open on Sunday?" still leans back.
_CALENDAR = re.compile(
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)day|january|february|march|april|may|june|july|"
    r"august|september|october|november|december",
    re.IGNORECASE,
)

# What a question word asks for, which a sentence answering a part that asks nothing else
# ("…, and when?") must hold: a date for when, a number for how many or how much.
_DATE = re.compile(
    r"\b(?:1\d{3}|20\d{2})\b|\d{1,2}:\d{2}|\b(?:january|february|march|april|may|june|july|"
    r"august|september|october|november|december)\b|[\d〇零一二三四五六七八九十]+\s*年",
    re.IGNORECASE,
)
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"forty|fifty|hundred|thousand|million|billion)\b|[零〇一二两三四五六七八九十百千万亿]",
    re.IGNORECASE,
)
_ASKS_FOR = (
    (
        re.compile(
            r"\bwhen\b|\b(?:what|which) (?:year|date|day)\b|哪一?年|什么时候|何时|哪天",
            re.IGNORECASE,
        ),
        _DATE,
    ),
    (re.compile(r"\bhow (?:many|much)\b|多少|几", re.IGNORECASE), _NUMBER),
)


def question_parts(question: str) -> list[str]:
    """The questions that ``question`` asks, in order (itself when it asks one). A piece that
    asks nothing of its own and whose question word tells nothing to look for ("…, and
    where?") stays with the part before it; "…, and when?" is a part (a date is asked)."""
    parts: list[str] = []
    for sentence in _QUESTION_END.split(question.strip()):
        if not sentence.strip():
            continue
        if has_cjk(sentence):
            pieces = _pieces(sentence, _CHINESE_JOIN)
            if not all(_CHINESE_ASKING.search(sentence[a:b]) for a, b in pieces):
                pieces = [(0, len(sentence))]
        else:
            pieces = _pieces(sentence, _ENGLISH_JOIN)
        spans: list[tuple[int, int]] = []
        for start, end in pieces:
            piece = sentence[start:end]
            if spans and not _asks_of_its_own(piece) and answer_shape(piece) is None:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
        parts.extend(sentence[a:b].strip() for a, b in spans)
    # A piece with no word of its own (a stray "?") is no part.
    return [part for part in parts if _WORD.search(part)] or [question.strip()]


def standing_alone(part: str, question: str) -> str:
    """``part`` of ``question`` made to stand alone for a search of its own: with the names of
    the question it has none of itself ("…and how far is its light visible?": Skerrin Head),
    else with a Chinese question's topic (青溪茶园 for 每天几点开门？)."""
    if any(is_name for _, is_name in _words(part)):
        return part
    subject = list(dict.fromkeys(word for word, is_name in _words(question) if is_name))
    if not subject:
        subject = next(
            (
                [word]
                for word, _ in _words(question)
                if has_cjk(word) and word not in _CHINESE_FUNCTION_WORDS and len(word) > 1
            ),
            [],
        )
    return " ".join([*(word for word in subject if word not in part), part])


def _pieces(sentence: str, join: re.Pattern[str]) -> list[tuple[int, int]]:
    """The spans of ``sentence`` between the joins, those with a word only."""
    cuts = [(m.start(), m.end()) for m in join.finditer(sentence)]
    starts = [0, *(end for _, end in cuts)]
    ends = [*(start for start, _ in cuts), len(sentence)]
    return [(a, b) for a, b in zip(starts, ends, strict=True) if _WORD.search(sentence[a:b])]


def _asks_of_its_own(piece: str) -> bool:
    """Whether ``piece`` has a word other than question and function words ("when", 在哪里)."""
    return any(
        (word not in _CHINESE_FUNCTION_WORDS and len(word) > 1)
        if has_cjk(word)
        else word.lower() not in _OPENERS | _ASKING_AMOUNT | _ASKING_WHAT
        for word, _ in _words(piece)
    )


def answer_shape(part: str) -> re.Pattern[str] | None:
    """What a sentence answering ``part`` must hold by its question word (a date for "when",
    a number for "how many"), when it says."""
    return next((shape for asking, shape in _ASKS_FOR if asking.search(part)), None)


def refers_back(question: str) -> bool:
    """Whether a follow-up leans on the conversation before it ("and in 2023?", 那…呢, a
    pronoun in a question that names nothing itself), rather than asking something whole."""
    if _OPENS_FOLLOW_UP.search(question):
        return True
    words = _words(question)
    named = [
        word
        for word, is_name in words
        if is_name and not word[0].isdigit() and not _CALENDAR.fullmatch(word)
    ]
    if not named and (
        _ENGLISH_PRONOUN.search(question) or any(w in _CHINESE_REFERRING for w, _ in words)
    ):
        return True
    spelled = _WORD.findall(question)
    if any(has_cjk(word) for word in spelled):
        return sum(len(word) for word in spelled if has_cjk(word)) <= _SHORT_FOLLOW_UP
    # "In 2023?", "The bakery?": a fragment; "Who founded Velmora?" stands alone.
    return len(spelled) <= _SHORT_FOLLOW_UP and not re.match(
        rf"(?:{_ENGLISH_ASKING})\b", question.strip(), re.IGNORECASE
    )


def referred_question(asked: Sequence[str]) -> str:
    """The question a follow-up to a conversation that ``asked`` these questions (in order)
    refers back to: the last that stood alone, so that a chain of follow-ups ("And in
    2023?", "And in 2024?") keeps its subject."""
    return next(
        (
            question
            for position, question in reversed(list(enumerate(asked)))
            if position == 0 or not refers_back(question)
        ),
        "",
    )


@dataclass(frozen=True, slots=True)
class Terms:
    """A question's (or part's) terms: ``names`` (names, numbers) that a passage must hold to
    be about it, the ``numbers`` among them, the ``topic`` a Chinese question opens with (it
    names no name: the first word is what it is about, 黄河 in 黄河全长多少公里; none when that
    word is a pronoun), the terms ``asked`` about them, and the ``focus`` of an English
    question, the first thing it asks for (salary in "What is the salary of the safety
    officer?"), which an answer must hold."""

    names: frozenset[int]
    numbers: frozenset[int]
    topic: frozenset[int]
    asked: frozenset[int]
    focus: frozenset[int]

    @property
    def all(self) -> frozenset[int]:
        return self.names | self.topic | self.asked


NO_TERMS = Terms(frozenset(), frozenset(), frozenset(), frozenset(), frozenset())


def question_terms(text: str, sparse: SparseEncoder) -> Terms:
    """The sparse model's terms of ``text``, sorted as :class:`Terms` says."""
    names: set[int] = set()
    numbers: set[int] = set()
    asked: set[int] = set()
    topic: set[int] | None = None
    focus: set[int] | None = None
    after_asking = after_how = after_name = asking_seen = False
    for word, is_name in _words(text):
        lower = word.lower()
        if is_name:
            ids = _ids(word, sparse)
            names.update(ids)
            if word[0].isdigit():
                numbers.update(ids)
            after_name = True
            continue
        if has_cjk(word):
            if topic is None and word in _PRONOUNS:
                topic = set()  # it refers back: what it is about is the conversation's
            if word in _CHINESE_FUNCTION_WORDS or len(word) == 1:
                continue
            ids = _ids(word, sparse)
            if topic is None:
                topic = ids
            asked.update(ids)
        elif lower not in _ASKING_AMOUNT and not (after_asking and lower in _ASKING_WHAT):
            ids = _ids(word, sparse)
            # Not "long" in "how long", nor "ferry" in "the Lindqvist ferry" (a name's noun);
            # nothing before the question word ("Find the…" asks for no word in particular).
            if focus is None and ids and asking_seen and not after_how and not after_name:
                focus = ids
            asked.update(ids)
        after_asking, after_how = lower in {"how", "what", "which"}, lower == "how"
        asking_seen = asking_seen or lower in _ASKING_WORDS
        after_name = False
    return Terms(
        frozenset(names),
        frozenset(numbers),
        frozenset(topic or ()) if not names else frozenset(),
        frozenset(asked - names),
        frozenset(focus or ()),
    )


def _words(text: str) -> list[tuple[str, bool]]:
    """``text``'s words, each with whether it is a name (:func:`_is_name`), without a word
    that frames a clause it opens (:data:`_FRAMING`); Chinese runs cut as search cuts them
    (and the shorter words inside)."""
    import jieba

    jieba.setLogLevel(60)
    mixed = has_cjk(text)
    spelled = [(m.group(), _opens_clause(text, m.start())) for m in _WORD.finditer(text)]
    # A capitalised word seen where no clause starts is a name wherever it stands.
    named = {word for word, opens in spelled if not opens and word[0].isupper()}
    words: list[tuple[str, bool]] = []
    for word, opens in spelled:
        if has_cjk(word):
            # A Latin word or number that jieba cuts out of the run is a name (Northgate在…).
            tokens = (token for token in jieba.cut_for_search(word) if token.strip())
            words.extend((token, not has_cjk(token)) for token in tokens)
        elif opens and not mixed and word.lower() in _FRAMING:
            continue
        else:
            words.append((word, _is_name(word, mixed, opens=opens and word not in named)))
    return words


def _opens_clause(text: str, position: int) -> bool:
    """Whether the word at ``position`` is the first of a sentence or clause."""
    before = text[:position].rstrip(" \t\n\"'“‘(（")
    return not before or before[-1] in ".?!;:。？！；："


def _is_name(word: str, mixed: bool, *, opens: bool) -> bool:
    """A number, a Latin word in a Chinese question, a word in capitals (NATO) or of letters
    and digits (B12), or a capitalised word that is not a question word or a request ("When",
    "Tell"); the first word of a sentence or clause ("According", "Summarize", "During") is
    capitalised as the first, so a name only when it is one of those or capitalised again
    elsewhere too."""
    if word[0].isdigit() or mixed:
        return True
    if word.lower() in _OPENERS:
        return False
    if any(character.isdigit() for character in word) or (len(word) > 1 and word.isupper()):
        return True
    if not word[0].isupper():
        return any(character.isupper() for character in word[1:])  # iPhone, eBay
    return not opens


def _ids(word: str, sparse: SparseEncoder) -> set[int]:
    return set(sparse.embed_query(word).indices.tolist())
