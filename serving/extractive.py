"""The extractive answer: no language model, the passages' own sentences that bear most on the
question, each cited."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rag_pipeline.config import Settings
from rag_pipeline.language import has_cjk, sentence_spans
from serving.questions import NO_TERMS, answer_shape, question_parts, question_terms
from serving.retrieval import Candidate, query_encoders, shown_text
from serving.stand_ins import asked_quantity, stand_ins
from serving.wording import Message, phrases, quoted


class ExtractiveAnswerer:
    """No language model: for each part of the question, the passages' sentences that answer
    it, cited; a part that none answers is said missing.

    A part (:func:`serving.questions.question_parts`) is about its names and numbers (or,
    with none of its own, the question's: "…and how far is its light visible?"; a Chinese
    question's topic, 黄河 in 黄河全长多少公里; for a follow-up's pronoun, the conversation's) and
    asks the rest of its terms (with none: "…, and when?" asks what the part before asked;
    a follow-up's "And in 2023?", what the conversation asked). Terms are those of the
    sparse model (stemmed English, jieba-segmented Chinese, no stop words), so "dams"
    matches "dam" and 三峡大坝 matches inside an unspaced sentence. A passage bears on a part
    only when it holds all that the part is about and at least half of what it asks (more
    than half in Chinese): "What is the capital of Mongolia?" finds no passage naming
    Mongolia, whatever the dense search ranked first, and a Chinese question naming
    "Kestrel" no passage without it.

    In a passage that bears on it, a sentence answers a part when it holds something the part
    asks, not merely its names ("opens at 5:40" does not answer who the head baker is), and an
    English part's focus (the salary in "What is the salary of the safety officer?") and the
    part's numbers (2022 in "revenue in 2022": another year's figure does not answer); a part
    asking a measurement, the word or a number with a fitting unit ("And its height?": "The
    tower stands 34 metres tall"; :mod:`serving.stand_ins`); a Chinese part about an English
    document, the English counterparts of its focus words (head baker for 首席面包师). A
    shared term tells as much as it is rare among the passages found (BM25's inverse document
    frequency over them): the document's name, in every passage of it, says little; a word of
    the question found in one passage says a lot. After a part's best sentence, others are
    quoted only if they tell at least ``_SHARE_OF_BEST`` as much.
    """

    name = "extractive"

    def __init__(self, settings: Settings) -> None:
        self.sentences = settings.answer.extractive_sentences
        self._encoders = query_encoders(settings)  # kept: the retriever's, shared
        self.terms = self._encoders.sparse

    def write(
        self,
        question: str,
        history: Sequence[Message],
        passages: Sequence[Candidate],
        context: str = "",
    ) -> Iterator[str]:
        whole = question_terms(question, self.terms)
        conversation = question_terms(context, self.terms) if context else NO_TERMS
        # The passages' terms: their sentences' and their own (the line naming the document,
        # which is not quoted, included).
        every = whole.all | conversation.all
        # A sentence holds the question's terms it says without their words (34 metres: height).
        standing_in = stand_ins(every, self.terms)
        things = standing_in.things
        statements = [_statements(passage) for passage in passages]
        vectors = self.terms.embed_documents([passage.text for passage in passages])
        found: list[list[tuple[str, set[int]]]] = []
        in_passages: list[set[int]] = []
        for sentences, vector in zip(statements, vectors, strict=True):
            terms = (
                [
                    (held := set(v.indices.tolist())) | standing_in.held(sentence, held)
                    for sentence, v in zip(
                        sentences, self.terms.embed_documents(sentences), strict=True
                    )
                ]
                if sentences
                else []
            )
            found.append(list(zip(sentences, terms, strict=True)))
            in_passages.append(set(vector.indices.tolist()).union(*terms))
        weight = _rarity([terms & every for terms in in_passages])
        chosen: dict[tuple[int, int], str] = {}
        missing: list[str] = []
        asked_before: frozenset[int] = frozenset()
        for part in question_parts(question):
            terms = question_terms(part, self.terms)
            # What the part is about: its own names, else the question's (…and how far is
            # its light visible?), else what the conversation was about, else its topic.
            about = (
                terms.names
                or whole.names
                or (
                    conversation.names | conversation.topic if context and not whole.topic else None
                )
                or whole.topic
            )
            # What it asks: its own terms; else, "…, and when?", what the part before asked
            # (its question word saying what to look for); else its own subject; else, "And in
            # 2023?" (a number asks nothing), what the conversation asked.
            shape = None
            asked = terms.asked - about
            if not asked and asked_before:
                asked, shape = asked_before, answer_shape(part)
            asked = asked or (terms.names - terms.numbers) or terms.topic or conversation.asked
            asked_before = asked
            numbers = about & (terms.numbers | whole.numbers | conversation.numbers)
            found_part = Asked(
                about,
                asked,
                terms.focus | ((translated := asked & standing_in.counterparts.keys()) - things),
                translated,
                numbers,
                asked & standing_in.quantities.keys(),
                # A Chinese part's question word says what to look for (哪一年: a year).
                shape or asked_quantity(part) or (answer_shape(part) if has_cjk(part) else None),
                has_cjk(part),
                conversation.all,
            )
            # The whole question's passages and those its own search added (none of another's).
            usable = [not passage.parts or part in passage.parts for passage in passages]
            answers = found_part.answers(found, in_passages, weight, usable)
            if not answers:
                missing.append(part)
            limit = max(self.sentences - len(chosen), 1)
            for number, position, sentence in answers[:limit]:
                chosen[number, position] = sentence
        if not chosen:
            return
        words = phrases(question)
        yield words["lead"] + "\n\n"
        for (number, _), sentence in sorted(chosen.items()):  # reading order
            yield f"- {quoted(sentence)} [{number}]\n"
        for part in missing:
            yield "- " + words["missing"].format(part=part.rstrip("?？。. ")) + "\n"


@dataclass(frozen=True, slots=True)
class Asked:
    """One part of a question: the terms it is ``about`` (a passage must hold them all), those
    it ``asks`` (the passage at least half of them, more than half in Chinese, where a
    ``focus`` cannot tell what is asked; a sentence one of them), the ``focus`` and the
    ``numbers`` (2022 in "revenue in 2022") an answering sentence holds itself (a Chinese
    part's focus: its words with English counterparts, ``translated``, which a passage holding
    them all bears on, whatever other Chinese words it lacks), the terms
    asking a measurement of which it holds one (the word, or a quantity that fits it), the
    ``shape`` of what it asks for that the sentence matches (a date for "…, and when?", a
    height for 多高), and the conversation's terms, which tell equal sentences apart."""

    about: frozenset[int]
    asks: frozenset[int]
    focus: frozenset[int]
    translated: frozenset[int]
    numbers: frozenset[int]
    measured: frozenset[int]
    shape: re.Pattern[str] | None
    unspaced: bool
    context: frozenset[int]

    def bears_on(self, terms: set[int]) -> bool:
        if not self.about <= terms or not self.asks:
            return False
        if self.translated and self.translated <= terms:
            return True  # an English passage holds no Chinese word: what it is about and asks
        covered = len(self.asks & terms) / len(self.asks)
        return covered > 0.5 if self.unspaced else covered >= 0.5

    def answers(
        self,
        found: list[list[tuple[str, set[int]]]],
        in_passages: list[set[int]],
        weight: dict[int, float],
        usable: list[bool],
    ) -> list[tuple[int, int, str]]:
        """The sentences that answer it, as (passage number, position, sentence), from the
        ``usable`` passages: the best first, then those that tell about as much."""
        scored: list[tuple[float, int, int, str]] = []
        passages = zip(found, in_passages, usable, strict=True)
        for number, (sentences, terms, allowed) in enumerate(passages, 1):
            if not allowed or not self.bears_on(terms):
                continue
            for position, (sentence, shared) in enumerate(sentences):
                telling = [weight.get(term, 0.0) for term in self.asks & shared]
                if not telling or not (self.focus | self.numbers) <= shared:
                    continue  # it asks nothing of this sentence, or not what it asks for
                if self.measured and not self.measured & shared:
                    continue  # "how tall?" and no height in it
                if self.shape and not self.shape.search(sentence):
                    continue  # "when?" and no date in it
                # What it asks counts most; what it is about and the conversation's terms tell
                # equals apart; then the better passage, then the shorter sentence.
                bearing = sum(
                    weight.get(term, 0.0) for term in (self.about | self.context) & shared
                )
                score = (sum(telling) + 0.25 * bearing) / (1 + 0.15 * (number - 1))
                scored.append((score - 1e-4 * len(sentence), number, position, sentence))
        if not scored:
            return []
        scored.sort(key=lambda item: -item[0])
        best = scored[0][0]
        return [item[1:] for item in scored if item[0] >= _SHARE_OF_BEST * best]


_SHARE_OF_BEST = 0.5  # of a part's best sentence's score, that another sentence needs


def _statements(passage: Candidate) -> list[str]:
    """The sentences of a passage worth quoting, in order; not the line naming its document.
    A sentence that a line (a page) breaks is one ("…and is" then "visible for 21 nautical
    miles."); one the passage starts in the middle of is quoted as such ("…visible for…")."""
    text = shown_text(passage.payload)
    sentences: list[str] = []
    for start, end in sentence_spans(text):
        sentence = text[start:end].strip()
        if not sentence[:1].islower():
            sentences.append(sentence)
        elif sentences and not _ENDS_SENTENCE.search(sentences[-1]):
            sentences[-1] += " " + sentence
        else:
            sentences.append(("…" if not text[:start].strip() else "") + sentence)
    return [sentence for sentence in sentences if is_statement(sentence)]


def _rarity(in_passages: Sequence[set[int]]) -> dict[int, float]:
    """Each term's inverse document frequency over the passages (sets of terms)."""
    counts: dict[int, int] = {}
    for terms in in_passages:
        for term in terms:
            counts[term] = counts.get(term, 0) + 1
    return {term: _idf(count, len(in_passages)) for term, count in counts.items()}


def _idf(count: int, passages: int) -> float:
    """BM25's inverse document frequency of a term in ``count`` of ``passages``."""
    return math.log(1 + (passages - count + 0.5) / (count + 0.5))


_ENDS_SENTENCE = re.compile(r"[.!?。！？；…:：)）\]」』\"”’']$")


def is_statement(sentence: str) -> bool:
    """A sentence worth quoting: not a heading or a label (short and unpunctuated)."""
    if _ENDS_SENTENCE.search(sentence):
        return len(sentence) > 1
    if has_cjk(sentence):  # no spaces between words: count characters
        return len(sentence) >= 8
    return len(sentence.split()) >= 8
