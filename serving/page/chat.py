"""Asking: answers streamed into the chat with their evidence and pictures, pictures found by
an image, the kept conversations and query traces, and the preview of a cited passage."""

from __future__ import annotations

import html
from collections.abc import Iterator
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import gradio as gr

from rag_pipeline.availability import AvailabilityError
from rag_pipeline.store import is_picture
from rag_pipeline.store.schema import QueryFilter
from serving.access import Action
from serving.answer import Answer
from serving.api import original_url, picture_url, preview_url
from serving.assistant import Assistant, Source, cited_sources
from serving.governance import Standing
from serving.page.governance import offered
from serving.page.handlers import Handlers
from serving.page.render import (
    cite_href,
    cite_target,
    cited_passage,
    evidence_html,
    link_markers,
    linked,
)
from serving.preview import Preview, PreviewError, preview
from serving.retrieval import Candidate, QueryError


class Chat(Handlers):
    def check_question(
        self,
        text: str,
        workspace_id: str | None,
        since: str | None,
        until: str | None,
        request: gr.Request,
    ) -> None:
        """Refuse a question too long, or dates not understood (the other filters are chosen
        from lists), before its answer streams: this step has no outputs, so its refusal is
        said in a toast alone (Gradio's "Error" would cover each output of a failed event, the
        question box among them)."""
        assistant, _ = self.serving(request, workspace_id)
        try:
            assistant.check_length((text or "").strip())
            _query_filter(None, None, None, since, until)
        except ValueError as error:  # a QueryError is one too
            raise gr.Error(str(error)) from error

    def ask(
        self,
        text: str,
        workspace_id: str | None,
        conversation_id: str | None,
        history: list[dict[str, Any]],
        doc_ids: list[str] | None,
        types: list[str] | None,
        langs: list[str] | None,
        since: str | None,
        until: str | None,
        request: gr.Request,
    ) -> Iterator[tuple[Any, ...]]:
        """The chat as the answer streams in, the question box emptied, and the conversation;
        last, the conversations listed, the evidence, the pictures among the passages, and the
        passage to preview: the first cited (none when nothing is, or when nothing answers and
        the closest passages are cited)."""
        assistant, owner = self.serving(request, workspace_id)
        governs = self.signed_in(request).may(Action.SEE_OFFLINE, assistant.settings.workspace)
        text = (text or "").strip()
        if not text:
            yield history, "", conversation_id, *[gr.skip()] * 4
            return
        try:
            query_filter = _query_filter(doc_ids, types, langs, since, until)
        except ValueError as error:
            raise gr.Error(str(error)) from error
        history = [*_plain(history), {"role": "user", "content": text}]
        final, opened = Answer(), conversation_id
        try:
            asked = assistant.ask(text, conversation_id, query_filter, owner=owner, governs=governs)
            for opened, final in asked:
                # Its text as it streams; its markers linked once whole (a citation's page is
                # where what the finished answer quotes lies).
                shown = [*history, {"role": "assistant", "content": final.text}]
                yield shown, "", opened, *[gr.skip()] * 4
        except QueryError as error:
            raise gr.Error(str(error)) from error
        sources = cited_sources(final)
        yield (
            [*history, {"role": "assistant", "content": linked(final)}],
            "",
            opened,
            conversation_choices(assistant, owner, opened),
            evidence_html(sources, workspace_id),
            pictures_html([*final.passages, *final.pictures], workspace_id),
            # No passage highlighted as if it answered: the closest ones are listed, said so.
            _first_chunk(sources) if final.supported else None,
        )

    def search_by_picture(
        self,
        picture: Any,
        workspace_id: str | None,
        doc_ids: list[str] | None,
        types: list[str] | None,
        langs: list[str] | None,
        since: str | None,
        until: str | None,
        request: gr.Request,
    ) -> tuple[Any, ...]:
        """The pictures like ``picture`` as evidence and among the pictures, and the first to
        preview; a search refused is said in a warning, what was shown left as it was."""
        assistant, _ = self.serving(request, workspace_id)
        try:
            if picture is None:
                raise ValueError("Choose an image to search with first.")
            chosen = _query_filter(doc_ids, types, langs, since, until)
            found = assistant.search_pictures(picture, chosen)
        except ValueError as error:  # a QueryError is one too
            gr.Warning(str(error))
            return gr.skip(), gr.skip(), gr.skip()
        if not found:
            gr.Info("No indexed picture is like it.")
        sources = [Source.of(n, candidate).as_dict() for n, candidate in enumerate(found, 1)]
        evidence = evidence_html(sources, workspace_id)
        return evidence, pictures_html(found, workspace_id), _first_chunk(sources)

    def open_conversation(
        self, conversation_id: str | None, workspace_id: str | None, request: gr.Request
    ) -> tuple[Any, ...]:
        assistant, owner = self.serving(request, workspace_id)
        governs = self.signed_in(request).may(Action.SEE_OFFLINE, assistant.settings.workspace)
        return reopened(assistant, owner, conversation_id, workspace_id, governs=governs)

    def delete_conversation(
        self, conversation_id: str | None, workspace_id: str | None, request: gr.Request
    ) -> tuple[Any, ...]:
        assistant, owner = self.serving(request, workspace_id)
        if conversation_id:
            assistant.history.delete_conversation(conversation_id, owner)
        return [], None, "", None, conversation_choices(assistant, owner, None)

    def show_traces(self, workspace_id: str | None, request: gr.Request) -> Any:
        assistant, owner = self.serving(request, workspace_id, Action.SEE_TRACES)
        return assistant.history.traces(owner, 20)

    def show_citation(
        self, workspace_id: str | None, event: gr.SelectData, request: gr.Request
    ) -> tuple[Any, ...]:
        return self.show_chunk(request, workspace_id, str(event.value))  # a citation's target

    def show_passage(
        self, chunk_id: str | None, workspace_id: str | None, request: gr.Request
    ) -> tuple[Any, ...]:
        """The preview of the passage chosen by the event before (none: the preview empty)."""
        return self.show_chunk(request, workspace_id, chunk_id)

    def show_chunk(
        self, request: gr.Request, workspace_id: str | None, target: str | None
    ) -> tuple[Any, ...]:
        """The passage's preview (an empty one without a passage), its chunk id, and, for
        those who may govern, the governing row and buttons that fit where it stands.

        ``target``: a chunk id, or a citation's target, which names the page to show too.
        """
        if not target:
            return gr.HTML("", visible=False), "", None, *offered(None)
        chunk_id, page = cited_passage(target)
        assistant, _ = self.serving(request, workspace_id, Action.READ_FILE)
        user = self.signed_in(request)
        may_govern = user.may(Action.SEE_OFFLINE, assistant.settings.workspace)
        standing = None
        if may_govern:
            with suppress(AvailabilityError):  # changed since: its preview says so
                standing = self.workspaces.standing(user, assistant.settings.workspace, chunk_id)
        image, caption = _previewed(assistant, workspace_id, chunk_id, page, may_govern)
        return image, _standing_html(standing) + caption, chunk_id, *offered(standing)


def new_conversation() -> tuple[Any, ...]:
    """A fresh chat: no messages, no conversation chosen, no evidence, no pictures, nothing
    to preview."""
    return [], None, "", None, gr.Dropdown(value=None), pictures_html([], None)


def reopened(
    assistant: Assistant,
    owner: str,
    conversation_id: str | None,
    workspace_id: str | None,
    *,
    governs: bool,
) -> tuple[Any, ...]:
    """A kept conversation as the chat shows it (see :meth:`Assistant.kept_messages`), its id,
    its last answer's evidence, and the first passage that answer cited, to preview (nothing
    for none, or another's)."""
    messages = (
        assistant.kept_messages(conversation_id, owner, governs=governs) if conversation_id else []
    )
    if not messages:
        return [], None, "", None
    history = [{"role": m.role, "content": link_markers(m.content, m.sources)} for m in messages]
    last = next((m.sources for m in reversed(messages) if m.role == "assistant"), [])
    return history, conversation_id, evidence_html(last, workspace_id), _first_chunk(last)


def conversation_choices(assistant: Assistant, owner: str, selected: str | None) -> Any:
    choices = [(c.title, c.id) for c in assistant.history.conversations(owner)]
    return gr.Dropdown(choices=choices, value=selected)


def _first_chunk(sources: list[dict[str, Any]]) -> str | None:
    """The first cited passage's target: its chunk id and the page to show."""
    return cite_target(sources[0]) if sources else None


def _standing_html(standing: Standing | None) -> str:
    """A governor's note of what of the passage is out of search."""
    if standing is None or standing.in_search:
        return ""
    said = (
        f"The document is {standing.document}: out of search."
        if standing.offline(whole=True)
        else "This passage is out of search."
    )
    return f"<p class='standing'><b>{said}</b></p>"


def _previewed(
    assistant: Assistant,
    workspace_id: str | None,
    chunk_id: str,
    page: int | None,
    may_govern: bool,
) -> tuple[Any, str]:
    """The passage's page or picture, as a picture the preview route draws (the browser fetches
    it as the signed-in user, refused once the passage is offline to them), and its caption and
    text; an offline passage's note instead."""
    try:
        shown = preview(
            assistant.settings,
            assistant.catalog,
            chunk_id,
            page=page,
            offline_shown=may_govern,
            drawn=False,
        )
    except PreviewError as error:
        return gr.HTML("", visible=False), f"<p>{html.escape(str(error))}</p>"
    link = original_url(shown.doc_id, PurePosixPath(shown.doc_id).name, workspace_id, shown.page)
    where = f", page {shown.page}" if shown.page else ""
    caption = (
        f"<p><b>{html.escape(shown.doc_id)}</b>{where} · "
        f"<a href='{html.escape(link)}' target='_blank' id='original-file'>open the original</a>"
        f"</p>{_page_steps(shown)}"
    )
    if not shown.pictured:
        return gr.HTML("", visible=False), caption + shown.html
    drawn = html.escape(preview_url(chunk_id, workspace_id, shown.page))
    title = html.escape(f"{shown.doc_id}{where}")
    # A click zooms it in place (see workspace_layout); the link opens it alone in a tab.
    picture = (
        f"<a href='{drawn}' target='_blank' title='click to zoom'>"
        f"<img src='{drawn}' alt='{title}'></a>"
    )
    # Its text above the page in a box of a few lines: the page itself stays in sight.
    return gr.HTML(picture, visible=True), f"{caption}<div class='passage'>{shown.html}</div>"


def _page_steps(shown: Preview) -> str:
    """For a passage over several pages, the page shown among them, with links to the page
    before and after (each a citation's target: the preview redraws at that page)."""
    if len(shown.pages) < 2 or shown.page not in shown.pages:
        return ""
    at = shown.pages.index(shown.page)

    def step(offset: int, label: str, name: str) -> str:
        if not 0 <= at + offset < len(shown.pages):
            return f"<span class='page-step' aria-disabled='true'>{label}</span>"
        page = shown.pages[at + offset]
        target = html.escape(cite_href({"chunk_id": shown.chunk_id, "page": page}))
        return (
            f"<a href='{target}' class='page-step' id='{name}' "
            f"title='page {page}' aria-label='page {page}'>{label}</a>"
        )

    return (
        f"<p class='pages'>{step(-1, '‹', 'previous-page')} page {shown.page} of the passage's "
        f"pages {shown.pages[0]}–{shown.pages[-1]} {step(1, '›', 'next-page')}</p>"
    )


def _plain(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gradio hands messages back as lists of content parts; keep role and text."""
    plain = []
    for message in history or []:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        plain.append({"role": message["role"], "content": content or ""})
    return plain


def pictures_html(found: list[Candidate], workspace_id: str | None) -> Any:
    """The pictures among ``found`` (hidden when none), each drawn by the picture route and a
    link to its preview, as a citation is."""
    shown: dict[str, str] = {}
    for candidate in found:
        payload = candidate.payload
        chunk_id = payload.get("chunk_id", "")
        if is_picture(payload) and chunk_id not in shown:
            page = f" · p. {payload['page']}" if payload.get("page") else ""
            caption = html.escape(f"{Path(payload.get('file_path', '')).name}{page}")
            shown[chunk_id] = (
                f"<a href='{cite_href({'chunk_id': chunk_id})}' class='picture'>"
                f"<img src='{html.escape(picture_url(chunk_id, workspace_id))}' alt='{caption}'>"
                f"<span class='caption'>{caption}</span></a>"
            )
    if not shown:
        return gr.HTML("", visible=False)
    listed = "".join(shown.values())
    return gr.HTML(f"<p><b>Pictures</b></p><div class='pictures'>{listed}</div>", visible=True)


def _query_filter(
    documents: list[str] | None,
    file_types: list[str] | None,
    languages: list[str] | None,
    after: str | None,
    before: str | None,
) -> QueryFilter:
    return QueryFilter(
        doc_ids=tuple(documents or ()),
        file_types=tuple(file_types or ()),
        langs=tuple(languages or ()),
        modified_after=_date(after, "Modified after"),
        modified_before=_date(before, "Modified before", end_of_day=True),
    )


def _date(value: str | None, label: str, *, end_of_day: bool = False) -> float | None:
    if not value or not value.strip():
        return None
    try:
        day = datetime.strptime(value.strip(), "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError as error:
        raise ValueError(f"{label}: write the date as YYYY-MM-DD, e.g. 2025-03-31") from error
    return day.timestamp() + (86_399.999 if end_of_day else 0.0)
