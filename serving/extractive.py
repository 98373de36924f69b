"""The extractive answer: no language model, the passages' own sentences that bear most on the
question, each cited."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence

from rag_pipeline.config import Settings
from rag_pipeline.language import has_cjk, sentence_spans
from serving.answer import Message, phrases, quoted
from serving.retrieval import Candidate, query_encoders, shown_text


class ExtractiveAnswerer:
    """No language model: the passages' sentences that share the most telling terms with the
    question.

    Terms are those of the sparse model (stemmed English, jieba-segmented Chinese, no stop
    words), so "dams" matches "dam" and 三峡大坝 matches inside an unspaced sentence. A shared
    term tells as much as it is rare among the passages found (BM25's inverse document
    frequency over them): the document's name, in every passage of it, says little about which
    sentence answers; a word of the question found in one passage says a lot. After the best
    sentence, others are quoted only if they tell at least ``_SHARE_OF_BEST`` as much, so an
    answer is not padded with sentences that share a word or two ("Velmora", "point").

    A sentence that shares nothing telling is never quoted, not even from the best passage: the
    dense search ranks some passage first for any question ("What is the capital of
    Mongolia?" too), so being first vouches for nothing. With nothing to quote, :func:`answer`
    cites the closest passages instead, which shows a passage found by meaning alone without
    claiming it answers.
    """

    name = "extractive"

    def __init__(self, settings: Settings) -> None:
        self.sentences = settings.answer.extractive_sentences
        self._encoders = query_encoders(settings)  # kept: the retriever's, shared
        self.terms = self._encoders.sparse

    def write(
        self, question: str, history: Sequence[Message], passages: Sequence[Candidate]
    ) -> Iterator[str]:
        query_terms = set(self.terms.embed_query(question).indices.tolist())
        statements = [_statements(passage) for passage in passages]
        # The question's terms in each passage: its sentences' and its own (the line naming
        # its document, which is not quoted, included).
        whole = self.terms.embed_documents([passage.text for passage in passages])
        found: list[list[tuple[str, set[int]]]] = []
        in_passages: list[set[int]] = []
        for sentences, vector in zip(statements, whole, strict=True):
            vectors = self.terms.embed_documents(sentences) if sentences else []
            terms = [query_terms & set(v.indices.tolist()) for v in vectors]
            found.append(list(zip(sentences, terms, strict=True)))
            in_passages.append(query_terms & set(vector.indices.tolist()).union(*terms))
        weight = _rarity(in_passages)
        candidates: list[tuple[float, float, int, int, str]] = []
        for number, sentences in enumerate(found, 1):
            for position, (sentence, shared) in enumerate(sentences):
                if shared:
                    telling = sum(weight[term] for term in shared)
                    # Among equals, the better passage, then the shorter sentence (fewer words
                    # that do not bear on the question).
                    score = telling / (1 + 0.15 * (number - 1)) - 1e-4 * len(sentence)
                    rarest = max(weight[term] for term in shared)
                    candidates.append((score, rarest, number, position, sentence))
        if not candidates:
            return
        candidates.sort(key=lambda item: -item[0])
        best, rarest = candidates[0][:2]
        if len(passages) > 1 and rarest <= _idf(len(passages), len(passages)):
            return  # it shares only terms every passage has: no clue it answers
        chosen = [item for item in candidates if item[0] >= _SHARE_OF_BEST * best]
        chosen = chosen[: self.sentences]
        chosen.sort(key=lambda item: (item[2], item[3]))  # reading order: passage, position
        yield phrases(question)["lead"] + "\n\n"
        for *_, number, _, sentence in chosen:
            yield f"- {quoted(sentence)} [{number}]\n"


_SHARE_OF_BEST = 0.5  # of the best sentence's score, that another sentence needs to be quoted


def _statements(passage: Candidate) -> list[str]:
    """The sentences of a passage worth quoting, in order; not the line naming its document."""
    text = shown_text(passage.payload)
    sentences = [text[a:b].strip() for a, b in sentence_spans(text)]
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
