"""The question-answering service behind the chat page and the search API, without any UI.

It owns what a serving process holds open: the store it searches (see
``rag_pipeline.store.replica``), the query models, the reranker, the answer backend and the
history database.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from rag_pipeline.catalog import Catalog
from rag_pipeline.chunking import shown_section, table_captions
from rag_pipeline.config import Settings
from rag_pipeline.store import (
    SECTION_SEPARATOR,
    QueryFilter,
    RefreshLoop,
    RefreshReport,
    is_picture,
    open_serving_store,
)
from serving.answer import Answer, Message, answer, load_answerer
from serving.citing import quoted_pages, quoted_spans
from serving.history import History, StoredMessage
from serving.questions import question_parts, referred_question, refers_back, standing_alone
from serving.rerank import load_reranker
from serving.retrieval import (
    Candidate,
    OnlineOnly,
    QueryError,
    Retrieval,
    Retriever,
    shown_text,
)

if TYPE_CHECKING:
    from PIL.Image import Image

logger = logging.getLogger(__name__)

_SNIPPET_CHARS = 280
_PART_PASSAGES = 2  # a part's own best passages added to a several-part question's


@dataclass(frozen=True, slots=True)
class Source:
    """A cited passage as the page lists it and a conversation keeps it."""

    number: int
    doc_id: str
    chunk_id: str
    title: str
    file_name: str
    file_type: str
    page: int | None  # the page to show: where most of what the answer quotes from it lies
    section: str
    snippet: str
    score: float
    pages: list[int]  # those the sentences quoted from it lie on, in order (none: unplaced)

    @classmethod
    def of(
        cls,
        number: int,
        passage: Candidate,
        answer_text: str = "",
        captions: frozenset[str] = frozenset(),
    ) -> Source:
        """Passage ``number`` as cited by the answer ``answer_text`` (none: as found), under
        the section shown for it (its document's table ``captions`` heading no other
        heading)."""
        payload = passage.payload
        pages = quoted_pages(payload, answer_text) if answer_text else []
        stored = payload.get("section", "")
        shown = shown_text(payload)
        first, newline, rest = shown.partition("\n")
        # For display: the headings over its first line (what search matched is unchanged).
        where = shown_section(stored.split(SECTION_SEPARATOR) if stored else (), first, captions)
        if where and newline and first.strip() == where[-1]:
            shown = rest  # its heading: the section is shown beside it already
        text = " ".join(shown.split())
        if not text and is_picture(payload):
            text = "(a picture)"
        if quotes := quoted_spans(shown, answer_text) if answer_text else []:
            quote = " ".join(shown[quotes[0][0] : quotes[0][1]].split())
            at = text.find(quote)
            if at > 0 and at + len(quote) >= _SNIPPET_CHARS:  # the cut would take part of it
                text = "… " + text[at:]
        return cls(
            number=number,
            doc_id=payload.get("doc_id", ""),
            chunk_id=payload.get("chunk_id", ""),
            title=payload.get("title") or Path(payload.get("file_path", "")).stem,
            file_name=Path(payload.get("file_path", "")).name,
            file_type=payload.get("file_type", ""),
            page=pages[0] if pages else payload.get("page"),
            section=SECTION_SEPARATOR.join(where),
            snippet=text if len(text) <= _SNIPPET_CHARS else text[: _SNIPPET_CHARS - 1] + "…",
            score=passage.score,
            pages=sorted(pages),
        )

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


ANSWER_TAKEN_OFFLINE = "This answer cited a passage that has been taken offline since."


class Assistant:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.catalog = Catalog(settings)
        self.history = History(settings.home)
        self.store = open_serving_store(settings, self.catalog)
        self._reranker = load_reranker(settings)
        self.retriever = self._retriever()
        self._refreshing = threading.Lock()  # the refresh loop's and the page's own
        self.refresh()  # a first page load sees the whole index
        if self.retriever.clip is not None:
            self.retriever.clip.dim  # noqa: B018 (loads CLIP now: a bad model fails at start)
        self.answerer = load_answerer(settings)
        self._refresh = RefreshLoop(self.refresh, settings.serving.refresh_seconds)
        self._refresh.start()

    def _retriever(self) -> Retriever:
        """A retriever with the models of the collection that answers."""
        live = self.store.collection
        settings = self.settings.with_vector_models(live.models) if live else self.settings
        return Retriever(settings, OnlineOnly(self.store, self.catalog), self._reranker)

    def refresh(self) -> RefreshReport:
        """Take in what indexing runs changed; follow a collection of new models going live."""
        with self._refreshing:
            before = self.store.collection
            report = self.store.refresh()
            after = self.store.collection
            if after is not None and (before is None or before.name != after.name):
                self.retriever = self._retriever()
            return report

    @property
    def reranker_name(self) -> str | None:
        return self.retriever.reranker.name if self.retriever.reranker else None

    def search(
        self,
        query: str,
        query_filter: QueryFilter | None = None,
        top_k: int | None = None,
        *,
        owner: str,
    ) -> Retrieval:
        """Retrieve passages for ``query``, traced as ``owner``'s."""
        self.check_length(query)
        retrieval = self.retriever.retrieve(query, query_filter, top_k=top_k)
        self.history.record_trace(retrieval, owner)
        return retrieval

    def ask(
        self,
        question: str,
        conversation_id: str | None = None,
        query_filter: QueryFilter | None = None,
        *,
        owner: str,
        governs: bool = False,
    ) -> Iterator[tuple[str, Answer]]:
        """Stream the answer to ``question``, as (conversation id, answer so far), in one of
        ``owner``'s conversations (a new one when ``conversation_id`` is None).

        The conversation so far (as :meth:`kept_messages` gives it to the owner, who
        ``governs`` the workspace or not) is the model's context. A follow-up that refers
        back (:func:`serving.questions.refers_back`: "and in 2021?", 它呢？) is searched with
        the question it refers to (:func:`serving.questions.referred_question`: the last that
        stood alone, so that a chain of follow-ups keeps its subject), and its answer says what
        was searched; one that stands alone is searched by itself.
        """
        self.check_length(question)
        if conversation_id is None:
            conversation_id = self.history.new_conversation(question, owner)
        elif not self.history.owns(conversation_id, owner):
            raise QueryError("no such conversation")
        earlier = self.kept_messages(conversation_id, owner, governs=governs)
        history: list[Message] = [{"role": m.role, "content": m.content} for m in earlier]
        asked = [m.content for m in earlier if m.role == "user"]
        context = referred_question(asked) if refers_back(question) else ""
        retrieval = self.retrieve_question(question, context, query_filter)
        self.history.add_message(conversation_id, "user", question)
        captions = self.table_captions({p.payload.get("doc_id", "") for p in retrieval.passages})
        final = Answer()
        try:
            for final in answer(self.answerer, question, history, retrieval, context=context):
                final.captions = captions
                yield conversation_id, final
        finally:
            self.history.record_trace(retrieval, owner, final.backend or self.answerer.name)
            self.history.add_message(conversation_id, "assistant", final.text, cited_sources(final))

    def retrieve_question(
        self, question: str, context: str = "", query_filter: QueryFilter | None = None
    ) -> Retrieval:
        """The passages for ``question`` (searched with the ``context`` it refers back to);
        for a question of several parts (:func:`serving.questions.question_parts`), each part
        searched too, made to stand alone, and its best :data:`_PART_PASSAGES` added for it:
        a part whose answer lies in a passage the whole question's search ranks low ("…and
        how far is its light visible?", on the next page) still finds it."""

        def searched(text: str) -> str:
            return f"{context} {text}" if context else text

        retrieval = self.retriever.retrieve(searched(question), query_filter)
        parts = question_parts(question)
        if len(parts) > 1:
            for part in parts:
                found = self.retriever.retrieve(
                    searched(standing_alone(part, question)), query_filter, top_k=_PART_PASSAGES
                )
                retrieval = retrieval.with_part(part, found)
        return retrieval

    def table_captions(self, doc_ids: set[str]) -> dict[str, frozenset[str]]:
        """Of each document, the headings that head a table, which its passages' sections are
        shown without where another heading follows (see ``chunking.shown_section``)."""
        live = self.catalog.live_collection()
        if live is None:
            return {}
        return {
            doc_id: table_captions(self.catalog.table_chunks(live.name, doc_id))
            for doc_id in doc_ids
        }

    def kept_messages(
        self, conversation_id: str, owner: str, *, governs: bool
    ) -> list[StoredMessage]:
        """``owner``'s conversation as kept. For one who may not govern the workspace, an answer
        that cited a document or passage taken offline since reads :data:`ANSWER_TAKEN_OFFLINE`,
        without its sources: offline is offline in kept answers too, on the page and in a
        model's context."""
        messages = self.history.messages(conversation_id, owner)
        if governs:
            return messages
        documents, passages = self.catalog.live_offline()
        return [
            StoredMessage(message.role, ANSWER_TAKEN_OFFLINE, [])
            if any(s["doc_id"] in documents or s["chunk_id"] in passages for s in message.sources)
            else message
            for message in messages
        ]

    @property
    def searches_pictures(self) -> bool:
        """Whether pictures have CLIP vectors, so that an image can be a query."""
        return self.retriever.clip is not None

    def search_pictures(
        self, picture: Image, query_filter: QueryFilter | None = None, k: int = 12
    ) -> list[Candidate]:
        """The indexed pictures most like ``picture``, best first."""
        return self.retriever.search_by_picture(picture, query_filter, limit=k)

    def search_documents(
        self, query: str, k: int | None = None, *, owner: str
    ) -> list[dict[str, Any]]:
        """The search API's answer: passages grouped by document, best document first.

        The shape deer-flow's local search expects of a retriever's Documents; a document's
        url is the original-file route, its path the one inside its watched folder. ``k``
        passages (:meth:`found`).
        """
        retrieval = self.found(query, k, owner=owner)
        documents: dict[str, dict[str, Any]] = {}
        for passage in retrieval.passages:
            payload = passage.payload
            doc_id = payload.get("doc_id", "")
            file_path = payload.get("file_path", "")
            document = documents.setdefault(
                doc_id,
                {
                    "id": doc_id,
                    "title": payload.get("title") or Path(file_path).stem,
                    "url": file_url(doc_id, self.settings.workspace),
                    "chunks": [],
                    "extra": {
                        "source": {
                            "doc_id": doc_id,
                            "file_path": self.shown_path(file_path),
                            "page": payload.get("page"),
                            "bbox": payload.get("bbox"),
                        }
                    },
                },
            )
            document["chunks"].append({"content": passage.text, "similarity": passage.score})
        return list(documents.values())

    def found(self, query: str, k: int | None = None, *, owner: str) -> Retrieval:
        """What an agent's search finds (the search API's, the MCP endpoint's): ``k`` passages
        at most ``serving.max_k``, by default ``retrieval.top_k`` (within that bound)."""
        limit = self.settings.serving.max_k
        if k is None:
            k = min(self.settings.retrieval.top_k, limit)
        elif k > limit:
            raise QueryError(f"k is {k}: at most {limit} passages are returned")
        return self.search(query, top_k=k, owner=owner)

    def check_length(self, query: str) -> None:
        """Refuse a question or search longer than ``serving.max_query_chars``: the page and the
        API are open to others, and embedding and reranking a long text costs the server."""
        limit = self.settings.serving.max_query_chars
        if len(query) > limit:
            raise QueryError(
                f"the query is {len(query)} characters long: at most {limit} are accepted"
            )

    def shown_path(self, file_path: str) -> str:
        """A file's path inside its watched folder: all a remote reader sees of where it lies."""
        path = Path(file_path)
        folder = next((f for f in self.settings.watched_folders if path.is_relative_to(f)), None)
        return path.relative_to(folder).as_posix() if folder else path.name

    def close(self) -> None:
        self._refresh.stop()
        self.store.close()
        self.history.close()
        self.catalog.close()


def cited_sources(answer: Answer) -> list[dict[str, Any]]:
    """The passages ``answer`` cites, as the page lists them and a conversation keeps them."""
    return [
        Source.of(
            number,
            passage := answer.passages[number - 1],
            answer.text,
            answer.captions.get(passage.payload.get("doc_id", ""), frozenset()),
        ).as_dict()
        for number in answer.cited
    ]


def file_url(doc_id: str, workspace_id: str | None) -> str:
    """The original file's route; without a workspace, the user's first one answers."""
    workspace = f"&workspace={quote(workspace_id)}" if workspace_id else ""
    return f"/api/file?doc_id={quote(doc_id)}{workspace}"
