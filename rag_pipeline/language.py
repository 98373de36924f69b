"""Which language a text is in, from its script and, for Latin script, its commonest words; and
where its sentences and lines are.

Fast enough to run on every chunk and every query: no model, no dictionary beyond a few
function words per language.
"""

from __future__ import annotations

import re

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# Characters of scripts written without spaces between words (Chinese, Japanese kana), with
# their punctuation and full-width forms, as a regex class body: where text is re-joined (line
# breaks, wrapped paragraphs, OCR words), two of these meet without a space. Korean is left out:
# it spaces its words.
UNSPACED_CHARACTERS = (
    "\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
)
_UNSPACED = re.compile(f"[{UNSPACED_CHARACTERS}]")
_KANA = re.compile(r"[\u3040-\u30ff]")
_HANGUL = re.compile(r"[\uac00-\ud7af\u1100-\u11ff]")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_ARABIC = re.compile(r"[\u0600-\u06ff]")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")
_WORD = re.compile(r"[a-zà-ÿ]+")

_FUNCTION_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        [
            "the",
            "of",
            "and",
            "to",
            "in",
            "is",
            "that",
            "for",
            "it",
            "with",
            "as",
            "was",
            "on",
            "are",
            "by",
            "this",
            "be",
        ]
    ),
    "fr": frozenset(
        [
            "le",
            "la",
            "les",
            "des",
            "et",
            "est",
            "une",
            "un",
            "du",
            "pour",
            "que",
            "dans",
            "qui",
            "en",
            "au",
            "sur",
        ]
    ),
    "de": frozenset(
        [
            "der",
            "die",
            "und",
            "das",
            "ist",
            "nicht",
            "ein",
            "eine",
            "zu",
            "den",
            "mit",
            "von",
            "sich",
            "des",
            "auf",
        ]
    ),
    "es": frozenset(
        [
            "el",
            "la",
            "los",
            "las",
            "y",
            "es",
            "que",
            "en",
            "un",
            "una",
            "del",
            "por",
            "con",
            "para",
            "se",
        ]
    ),
    "it": frozenset(
        [
            "il",
            "lo",
            "la",
            "gli",
            "le",
            "di",
            "che",
            "è",
            "e",
            "un",
            "una",
            "per",
            "con",
            "del",
            "della",
            "non",
        ]
    ),
    "pt": frozenset(
        [
            "o",
            "os",
            "as",
            "e",
            "é",
            "que",
            "um",
            "uma",
            "do",
            "da",
            "em",
            "para",
            "com",
            "não",
            "dos",
            "das",
        ]
    ),
    "nl": frozenset(
        [
            "de",
            "het",
            "een",
            "en",
            "van",
            "is",
            "dat",
            "op",
            "te",
            "in",
            "zijn",
            "met",
            "voor",
            "niet",
        ]
    ),
}


# Told apart by a few function words, often wrongly for tables, lists and names.
LATIN_SCRIPT_LANGUAGES = frozenset(_FUNCTION_WORDS)
UNDETERMINED = "und"  # no letters to tell a language by (numbers, symbols)


def detect_language(text: str) -> str:
    """An ISO 639-1 code: zh, ja, ko, ru, ar, en, fr, de, es, it, pt, nl; ``und`` if unknown."""
    sample = text[:2000]
    han = len(_HAN.findall(sample))
    kana = len(_KANA.findall(sample))
    hangul = len(_HANGUL.findall(sample))
    latin = len(_LATIN.findall(sample))
    scripts = {
        "ja": kana + (han if kana else 0),
        "zh": han if not kana else 0,
        "ko": hangul,
        "ru": len(_CYRILLIC.findall(sample)),
        "ar": len(_ARABIC.findall(sample)),
    }
    script, count = max(scripts.items(), key=lambda item: item[1])
    # Han characters carry a word each, Latin letters a fifth of one: weigh them alike.
    if count and count * 5 >= latin:
        return script
    if not latin:
        return UNDETERMINED
    words = _WORD.findall(sample.lower())
    votes = {
        lang: sum(word in vocabulary for word in words)
        for lang, vocabulary in _FUNCTION_WORDS.items()
    }
    best, hits = max(votes.items(), key=lambda item: item[1])
    return best if hits else "en"


def is_unspaced(character: str) -> bool:
    """Whether ``character`` belongs to a script written without spaces between words."""
    return _UNSPACED.match(character) is not None


def has_cjk(text: str) -> bool:
    return bool(_HAN.search(text) or _KANA.search(text) or _HANGUL.search(text))


# Sentence ends: ASCII terminators before a space and a capital, digit or opening quote;
# CJK terminators anywhere (Chinese puts no space after them). Closing quotes stay with the end.
_SENTENCE_END = re.compile(
    r"(?<=[.!?])['\"”’)\]]*\s+(?=[\"“‘(\[A-Z0-9\u00c0-\u024f])"
    r"|(?<=[。！？；…])['\"”’）」』]*\s*"
    r"|(?<=[.!?])['\"”’)\]]*\s*(?=[\u3400-\u9fff])"
)
_ABBREVIATION = re.compile(
    r"(\b(e\.g|i\.e|etc|vs|cf|al|Fig|Figs|Eq|Eqs|No|Nos|Dr|Mr|Mrs|Ms|Prof|St|Inc|Ltd|Co|Jr|Sr|"
    r"approx|Vol|pp|Sec|Ch)|\b[A-Z])\.$"
)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        if match.start() <= start or _ABBREVIATION.search(text[start : match.start()]):
            continue
        end = match.end()
        while end > start and text[end - 1].isspace():
            end -= 1
        spans.append((start, end))
        start = match.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    # Lines are sentences too when the text has no punctuation to split at (logs, code, lists).
    return [span for a, b in spans for span in line_spans(text, a, b)]


def line_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The spans of the non-blank lines of ``text[start:end]``."""
    if "\n" not in text[start:end]:
        return [(start, end)]
    spans, cursor = [], start
    for line in text[start:end].split("\n"):
        if line.strip():
            spans.append((cursor, cursor + len(line)))
        cursor += len(line) + 1
    return spans
