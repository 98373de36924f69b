"""Answers whose every claim cites a numbered passage: extractive (``serving.extractive``), an
OpenAI-compatible endpoint, or a local transformers model.

The passages an answer may use are numbered [1], [2], … in retrieval order. Whatever writes the
answer, its text goes through :class:`CitationFilter`, which drops markers that point to no
passage (a model inventing [7] of five) and numbers the rest 1, 2, … in the order they are first
cited, so an answer citing the first and fourth passages shows [1] and [2], and its evidence
the same two. With no passage
to go on, the answer says so and repeats the query and filters that found nothing; with passages
but nothing quoted from them, it says so and cites the closest ones, so their evidence shows.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rag_pipeline.config import AnswerSettings, Settings
from rag_pipeline.embedding import models_folder
from rag_pipeline.language import detect_language
from serving.extractive import ExtractiveAnswerer
from serving.questions import question_parts
from serving.retrieval import Candidate, Retrieval, shown_text
from serving.wording import MARKER, Message, language_name, phrases, quoted

_LONGEST_MARKER = 24  # characters held back while a "[" may still open a marker
_CLOSEST = 3  # passages cited when the answerer found nothing in them to quote


class AnswerError(RuntimeError):
    """The answer backend failed; the message says why (shown on the page)."""


_LANGUAGE_NAMES = {"en": "English", "zh": "Chinese (简体中文)"}


@dataclass(slots=True)
class Answer:
    """An answer as it streams: the text so far and the passage numbers it cites (1 to n, in
    the order first cited)."""

    text: str = ""
    cited: list[int] = field(default_factory=list)
    # Passage n is passages[n - 1]: the cited ones first, as numbered, then the others.
    passages: list[Candidate] = field(default_factory=list)
    pictures: list[Candidate] = field(default_factory=list)  # shown beside it (CLIP search)
    backend: str = ""
    supported: bool = True  # False when no passage could back an answer
    # Of each passage's document, the headings that head a table (as its sections are shown).
    captions: dict[str, frozenset[str]] = field(default_factory=dict)


class Answerer(Protocol):
    name: str

    def write(
        self,
        question: str,
        history: Sequence[Message],
        passages: Sequence[Candidate],
        context: str = "",
    ) -> Iterator[str]:
        """The answer's text in pieces, citing passages as [n] (1-based). ``context``: the
        question a follow-up refers back to, searched with it (empty: it stands alone); a
        language model reads it in ``history`` instead."""


def answer(
    answerer: Answerer,
    question: str,
    history: Sequence[Message],
    retrieval: Retrieval,
    *,
    context: str = "",
) -> Iterator[Answer]:
    """Stream an answer to ``question`` from ``retrieval``'s passages; the last one is final.
    ``context``: the question a follow-up refers back to, searched with it, which the answer
    then says."""
    passages = list(retrieval.passages)
    state = Answer(passages=passages, pictures=list(retrieval.pictures), backend=answerer.name)
    if not passages:
        state.supported = False
        state.text = nothing_found(question, retrieval)
        yield state
        return
    citations = CitationFilter(len(passages))
    for piece in answerer.write(question, history, passages, context):
        state.text += citations.feed(piece)
        _number_as_cited(state, passages, citations.cited)
        yield state
    state.text = (state.text + citations.flush()).strip()
    _number_as_cited(state, passages, citations.cited)
    if not state.text:  # passages found, none quoted: show them, cited, rather than nothing
        state.supported = False
        closest, in_other_language = _closest(question, passages)
        _number_as_cited(state, passages, closest)
        markers = " ".join(f"[{number}]" for number in state.cited)
        state.text = f"{phrases(question)['closest']} {markers}{in_other_language}"
    if context:
        state.text += f"\n\n{searched_line(question, retrieval)}"
    yield state


def _number_as_cited(state: Answer, passages: list[Candidate], cited: list[int]) -> None:
    """The answer's passages renumbered as :class:`CitationFilter` numbers its markers: the
    ``cited`` retrieval numbers first, in that order."""
    state.passages = [passages[number - 1] for number in cited] + [
        passage for number, passage in enumerate(passages, 1) if number not in cited
    ]
    state.cited = list(range(1, len(cited) + 1))


def other_language(question: str, passage: Candidate) -> str | None:
    """The passage's language when it is English and the question Chinese or the reverse."""
    asked, language = detect_language(question), detect_language(shown_text(passage.payload))
    return language if language != asked and {language, asked} == {"en", "zh"} else None


def _closest(question: str, passages: Sequence[Candidate]) -> tuple[list[int], str]:
    """For an answer that quotes nothing: the passages to cite (the first :data:`_CLOSEST`),
    and the sentence saying which of them are in another language than the question's (an
    English question about a Chinese document may be answered there, which matching words
    could not tell; empty: none)."""
    numbers = list(range(1, min(len(passages), _CLOSEST) + 1))
    other = [
        (n, language) for n in numbers if (language := other_language(question, passages[n - 1]))
    ]
    if not other:
        return numbers, ""
    markers = " ".join(f"[{n}]" for n, _ in other)
    name = language_name(other[0][1], question)
    return numbers, " " + phrases(question)["in_language"].format(language=name, markers=markers)


def nothing_found(question: str, retrieval: Retrieval) -> str:
    words = phrases(question)
    described = retrieval.query_filter.describe()
    filters = (
        f"{words['filters']} {json.dumps(described, ensure_ascii=False)}"
        if described
        else words["no_filters"]
    )
    searched = words["searched_with"].format(query=retrieval.query, filters=filters)
    return f"{words['nothing']}\n\n{searched}"


def searched_line(question: str, retrieval: Retrieval) -> str:
    """What was searched, said as such: a follow-up's search holds the question it refers to."""
    return phrases(question)["searched"].format(query=retrieval.query)


class CitationFilter:
    """Keeps the markers [n] and [n, m] that point to a passage, drops the rest, as text streams;
    a kept marker is numbered by when its passage was first cited (``cited``: the passages'
    own numbers in that order).

    A "[" is held back until it closes (or clearly is not a marker), so a marker split across
    streamed pieces is judged whole.
    """

    def __init__(self, passages: int) -> None:
        self.passages = passages
        self.cited: list[int] = []
        self._pending = ""

    def feed(self, piece: str) -> str:
        text = self._pending + piece
        self._pending = ""
        cut = text.rfind("[")
        if cut != -1 and "]" not in text[cut:] and len(text) - cut < _LONGEST_MARKER:
            text, self._pending = text[:cut], text[cut:]
        return MARKER.sub(self._keep, text)

    def flush(self) -> str:
        text, self._pending = self._pending, ""
        return MARKER.sub(self._keep, text)

    def _keep(self, match: re.Match[str]) -> str:
        numbers = [int(number) for number in re.findall(r"\d+", match.group(1))]
        valid = [number for number in numbers if 1 <= number <= self.passages]
        for number in valid:
            if number not in self.cited:
                self.cited.append(number)
        return "".join(f"[{self.cited.index(number) + 1}]" for number in dict.fromkeys(valid))


# -- language models -------------------------------------------------------------------------


def build_messages(
    question: str, history: Sequence[Message], passages: Sequence[Candidate]
) -> list[Message]:
    """The chat an LLM answers: instructions, the conversation so far, numbered passages."""
    language = _LANGUAGE_NAMES.get(detect_language(question), "the language of the question")
    words = phrases(question)
    system = (
        "You answer questions about the user's documents using only the numbered passages "
        "given with the question. After every claim, cite the passage it comes from as [n], "
        "or [n][m] for several. Do not cite a number that is not in the list. Say only what "
        "answers something the question asks, nothing else the passages say. If the question "
        "asks several things, answer each; for one the passages do not answer, write that "
        f"part as “{words['missing'].format(part='…')}”. If the passages do not name what the "
        "question is about (its names, numbers and things, in any language), say only "
        f"“{words['nothing']}”. Answer in {language}."
    )
    listed = "\n\n".join(
        f"[{number}] {_source_line(passage)}\n{quoted(passage.text)}"
        for number, passage in enumerate(passages, 1)
    )
    parts = question_parts(question)
    asked = (
        "\n\nIt asks:\n" + "\n".join(f"{n}. {part}" for n, part in enumerate(parts, 1))
        if len(parts) > 1
        else ""
    )
    return [
        {"role": "system", "content": system},
        *history,
        {"role": "user", "content": f"Passages:\n\n{listed}\n\nQuestion: {question}{asked}"},
    ]


def _source_line(passage: Candidate) -> str:
    payload = passage.payload
    parts = [Path(payload.get("file_path", "")).name]
    if payload.get("page"):
        parts.append(f"page {payload['page']}")
    if payload.get("section"):
        parts.append(payload["section"])
    return "(" + ", ".join(parts) + ")"


class OpenAICompatibleAnswerer:
    """Any endpoint that speaks OpenAI's chat completions: vLLM, Ollama, DashScope, OpenAI…"""

    name = "openai"

    def __init__(self, settings: AnswerSettings) -> None:
        if not settings.base_url or not settings.model:
            raise AnswerError(
                "the openai answer backend needs answer.base_url and answer.model "
                "(RAG_PIPELINE_ANSWER__BASE_URL / OPENAI_BASE_URL, RAG_PIPELINE_ANSWER__MODEL)"
            )
        self.settings = settings
        self.name = f"openai:{settings.model}"

    def write(
        self,
        question: str,
        history: Sequence[Message],
        passages: Sequence[Candidate],
        context: str = "",
    ) -> Iterator[str]:
        import httpx

        config = self.settings
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        body = {
            "model": config.model,
            "messages": build_messages(question, history, passages),
            "stream": True,
            "temperature": config.temperature,
            "max_tokens": config.max_new_tokens,
        }
        url = f"{(config.base_url or '').rstrip('/')}/chat/completions"
        try:
            with httpx.stream(
                "POST", url, json=body, headers=headers, timeout=config.timeout_seconds
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    raise AnswerError(
                        f"the answer endpoint {url} said {response.status_code}: "
                        f"{response.text[:300]}"
                    )
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line.removeprefix("data:").strip()
                    if data == "[DONE]":
                        return
                    choices = json.loads(data).get("choices") or [{}]
                    if content := (choices[0].get("delta") or {}).get("content"):
                        yield content
        except httpx.HTTPError as error:
            raise AnswerError(f"cannot reach the answer endpoint {url}: {error}") from error


class TransformersAnswerer:
    """A causal language model run locally with transformers (a hub id or a folder; GGUF too)."""

    def __init__(self, settings: AnswerSettings, home: Path) -> None:
        if not settings.model:
            raise AnswerError("the transformers answer backend needs answer.model (id or folder)")
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as error:
            raise AnswerError(
                'the transformers answer backend needs: pip install -e ".[llm]"'
            ) from error
        self.settings = settings
        self.name = f"transformers:{Path(settings.model).name}"
        options: dict[str, Any] = {"cache_dir": str(models_folder(home) / "transformers")}
        if settings.gguf_file:
            options["gguf_file"] = settings.gguf_file
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(settings.model, **options)
            self._model = AutoModelForCausalLM.from_pretrained(settings.model, **options)
        except (OSError, ValueError) as error:
            raise AnswerError(f"cannot load the model {settings.model!r}: {error}") from error
        self._model.eval()

    def write(
        self,
        question: str,
        history: Sequence[Message],
        passages: Sequence[Candidate],
        context: str = "",
    ) -> Iterator[str]:
        from transformers import TextIteratorStreamer

        messages = build_messages(question, history, passages)
        if self._tokenizer.chat_template:
            prompt = self._tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
        else:  # a base model: the turns as plain text
            prompt = "".join(f"{m['role']}: {m['content']}\n\n" for m in messages) + "assistant:"
        inputs = self._tokenizer(prompt, return_tensors="pt")
        streamer = TextIteratorStreamer(
            self._tokenizer, skip_prompt=True, skip_special_tokens=True, timeout=300
        )
        config = self.settings
        generation = {
            **inputs,
            "streamer": streamer,
            "max_new_tokens": config.max_new_tokens,
            "do_sample": config.temperature > 0,
            "pad_token_id": self._tokenizer.pad_token_id or self._tokenizer.eos_token_id,
        }
        if config.temperature > 0:
            generation["temperature"] = config.temperature
        worker = threading.Thread(target=self._model.generate, kwargs=generation, daemon=True)
        worker.start()
        yield from streamer
        worker.join()


def load_answerer(settings: Settings) -> Answerer:
    backend = settings.answer.backend
    if backend == "openai":
        return OpenAICompatibleAnswerer(settings.answer)
    if backend == "transformers":
        return TransformersAnswerer(settings.answer, settings.root)
    return ExtractiveAnswerer(settings)
