"""The chat page: Gradio Blocks, thin over :class:`serving.assistant.Assistant`.

Answers stream into the chat with their citation markers as links; under the chat the cited
passages are listed by file; a click on a citation (in the answer or in the list) shows its page
with the passage highlighted, or the passage in its text, beside a link to the original file.
Pictures among the passages show as a gallery; with CLIP configured, an uploaded image finds the
pictures like it and the pages that hold them. Conversations are kept and can be reopened or
deleted; the last query traces are one tab away.
"""

from __future__ import annotations

import html
import io
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rag_pipeline.store.schema import QueryFilter
from serving.answer import Answer
from serving.assistant import Assistant, Source
from serving.preview import PreviewError, preview
from serving.retrieval import Candidate, QueryError

# Gradio reads these when it builds the page; without them it looks for updates and counts use.
for _name, _value in (("GRADIO_ANALYTICS_ENABLED", "False"), ("HF_HUB_DISABLE_TELEMETRY", "1")):
    os.environ.setdefault(_name, _value)

import gradio as gr  # noqa: E402  (after the variables above)

_CITE_PREFIX = "#cite:"
_MARKER = re.compile(r"\[(\d+)\]")
LANGUAGES = ["en", "zh", "ja", "ko", "fr", "de", "es", "it", "pt", "nl", "ru", "ar"]

# One listener for every citation link on the page (in answers and in the evidence list): it
# sends the cited chunk id to Python instead of following the link.
_CITATION_CLICKS = f"""
document.addEventListener('click', (event) => {{
  const link = event.target.closest('a[href^="{_CITE_PREFIX}"]');
  if (!link) return;
  event.preventDefault();
  event.stopPropagation();
  const chunk = decodeURIComponent(link.getAttribute('href').slice({len(_CITE_PREFIX)}));
  trigger('select', {{index: 0, value: chunk}});
}}, true);
"""

PAGE_CSS = """
.evidence .file { margin: 0.4em 0 0.2em; font-weight: 600; }
.evidence .cite { margin: 0.1em 0 0.3em 0.8em; font-size: 0.92em; }
.evidence .where, .preview .where { color: var(--body-text-color-subdued); }
.preview .context { color: var(--body-text-color-subdued); }
.preview mark { background: #ffe08a; }
"""


def build_page(assistant: Assistant) -> gr.Blocks:
    settings = assistant.settings
    notice = (
        f"Passages reranked by {assistant.reranker_name}."
        if assistant.reranker_name
        else "No reranker configured: passages stay in the fused order of dense and keyword search."
    )
    with gr.Blocks(title="rag-pipeline") as page:
        conversation = gr.State(None)  # the open conversation's id
        with gr.Row():
            with gr.Column(scale=1, min_width=220):
                conversations = gr.Dropdown(
                    label="Conversations", choices=[], elem_id="conversations"
                )
                with gr.Row():
                    new = gr.Button("New", size="sm", elem_id="new-conversation")
                    delete = gr.Button("Delete", size="sm", variant="stop", elem_id="delete")
                with gr.Accordion("Filters", open=False):
                    documents = gr.Dropdown(label="Documents", multiselect=True, choices=[])
                    file_types = gr.CheckboxGroup(label="File types", choices=[])
                    languages = gr.CheckboxGroup(label="Languages", choices=LANGUAGES)
                    after = gr.Textbox(label="Modified after (YYYY-MM-DD)")
                    before = gr.Textbox(label="Modified before (YYYY-MM-DD)")
                gr.Markdown(notice, elem_id="rerank-notice")
                with gr.Accordion(
                    "Search by image", open=False, visible=assistant.searches_pictures
                ):
                    query_picture = gr.Image(
                        label="Image",
                        type="pil",
                        sources=["upload", "clipboard"],
                        elem_id="query-picture",
                    )
                    find_similar = gr.Button(
                        "Find similar pictures", size="sm", elem_id="find-similar"
                    )
            with gr.Column(scale=3):
                chat = gr.Chatbot(label="Answers", height=460, buttons=["copy"], elem_id="chat")
                question = gr.Textbox(
                    label="Question", placeholder="Ask in any language…", elem_id="question"
                )
                evidence = gr.HTML(
                    "", js_on_load=_CITATION_CLICKS, elem_id="evidence", elem_classes="evidence"
                )
                gallery = gr.Gallery(
                    label="Pictures", columns=4, height=240, visible=False, elem_id="pictures"
                )
                shown_pictures = gr.State([])  # chunk id of each picture in the gallery
            with gr.Column(scale=2):
                shown_page = gr.Image(
                    label="Cited page",
                    type="pil",
                    format="png",
                    visible=False,
                    elem_id="preview-image",
                )
                shown_text = gr.HTML("", elem_id="preview-text", elem_classes="preview")
        with gr.Tab("Traces"):
            refresh_traces = gr.Button("Show the last queries", size="sm")
            traces = gr.JSON(label="Traces, newest first")

        filters = [documents, file_types, languages, after, before]

        def ask(
            text: str,
            conversation_id: str | None,
            history: list[dict[str, Any]],
            *chosen: Any,
        ) -> Iterator[tuple[Any, ...]]:
            text = (text or "").strip()
            if not text:
                yield history, "", conversation_id, gr.skip(), gr.skip(), gr.skip(), gr.skip()
                return
            try:
                query_filter = _query_filter(*chosen)
            except ValueError as error:
                raise gr.Error(str(error)) from error
            history = [*_plain(history), {"role": "user", "content": text}]
            final, opened = Answer(), conversation_id
            try:
                for opened, final in assistant.ask(text, conversation_id, query_filter):
                    shown = [*history, {"role": "assistant", "content": _linked(final)}]
                    yield shown, "", opened, gr.skip(), gr.skip(), gr.skip(), gr.skip()
            except QueryError as error:
                raise gr.Error(str(error)) from error
            sources = [Source.of(n, final.passages[n - 1]).as_dict() for n in final.cited]
            yield (
                [*history, {"role": "assistant", "content": _linked(final)}],
                "",
                opened,
                _conversation_choices(assistant, opened),
                _evidence_html(sources),
                *_gallery(assistant, [*final.passages, *final.pictures]),
            )

        def search_by_picture(picture: Any, *chosen: Any) -> tuple[Any, ...]:
            if picture is None:
                raise gr.Error("Choose an image to search with first.")
            try:
                found = assistant.search_pictures(picture, _query_filter(*chosen))
            except (QueryError, ValueError) as error:
                raise gr.Error(str(error)) from error
            sources = [Source.of(n, candidate).as_dict() for n, candidate in enumerate(found, 1)]
            return _evidence_html(sources), *_gallery(assistant, found)

        def open_conversation(conversation_id: str | None) -> tuple[Any, ...]:
            if not conversation_id:
                return [], None, ""
            messages = assistant.history.messages(conversation_id)
            history = [
                {"role": m.role, "content": _link_markers(m.content, m.sources)} for m in messages
            ]
            last = next((m.sources for m in reversed(messages) if m.role == "assistant"), [])
            return history, conversation_id, _evidence_html(last)

        def delete_conversation(conversation_id: str | None) -> tuple[Any, ...]:
            if conversation_id:
                assistant.history.delete_conversation(conversation_id)
            return [], None, "", _conversation_choices(assistant, None)

        def show_citation(event: gr.SelectData) -> tuple[Any, str]:
            return show_chunk(str(event.value))

        def show_picture(chunk_ids: list[str], event: gr.SelectData) -> tuple[Any, str]:
            return show_chunk(chunk_ids[event.index])

        def show_chunk(chunk_id: str) -> tuple[Any, str]:
            try:
                shown = preview(settings, assistant.catalog, chunk_id)
            except PreviewError as error:
                return gr.Image(value=None, visible=False), f"<p>{html.escape(str(error))}</p>"
            link = f"/api/file?doc_id={quote(shown.doc_id)}"
            where = f", page {shown.page}" if shown.page else ""
            caption = (
                f"<p><b>{html.escape(shown.doc_id)}</b>{where} · "
                f"<a href='{link}' target='_blank' id='original-file'>open the original</a></p>"
            )
            image = gr.Image(value=_image(shown.png), visible=True) if shown.png else None
            return image or gr.Image(value=None, visible=False), caption + shown.html

        def on_load() -> tuple[Any, ...]:
            live = assistant.catalog.live_collection()
            records = assistant.catalog.documents(live.name).values() if live else []
            indexed = sorted(r.doc_id for r in records if r.indexed_version)
            types = sorted({r.file_type for r in records if r.indexed_version})
            return (
                _conversation_choices(assistant, None),
                gr.Dropdown(choices=indexed),
                gr.CheckboxGroup(choices=types),
            )

        question.submit(
            ask,
            [question, conversation, chat, *filters],
            [chat, question, conversation, conversations, evidence, gallery, shown_pictures],
            api_name="ask",
        )
        find_similar.click(
            search_by_picture,
            [query_picture, *filters],
            [evidence, gallery, shown_pictures],
            api_name="similar_pictures",
        )
        gallery.select(
            show_picture, shown_pictures, [shown_page, shown_text], api_visibility="private"
        )
        conversations.input(
            open_conversation, conversations, [chat, conversation, evidence], api_name="open"
        )
        new.click(
            lambda: ([], None, "", gr.Dropdown(value=None), gr.Gallery(value=None, visible=False)),
            None,
            [chat, conversation, evidence, conversations, gallery],
        )
        delete.click(
            delete_conversation,
            conversation,
            [chat, conversation, evidence, conversations],
            api_name="delete",
        )
        evidence.select(show_citation, None, [shown_page, shown_text], api_visibility="private")
        refresh_traces.click(lambda: assistant.history.traces(20), None, traces, api_name="traces")
        page.load(on_load, None, [conversations, documents, file_types])
    return page


def _plain(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gradio hands messages back as lists of content parts; keep role and text."""
    plain = []
    for message in history or []:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        plain.append({"role": message["role"], "content": content or ""})
    return plain


def _linked(answer: Answer) -> str:
    """The answer with each marker [n] as a link to its passage's preview."""
    sources = [
        {"number": n, "chunk_id": answer.passages[n - 1].payload.get("chunk_id", "")}
        for n in answer.cited
    ]
    return _link_markers(answer.text, sources)


def _link_markers(text: str, sources: list[dict[str, Any]]) -> str:
    chunks = {source["number"]: source["chunk_id"] for source in sources}

    def link(match: re.Match[str]) -> str:
        chunk = chunks.get(int(match.group(1)))
        return (
            f"[[{match.group(1)}]]({_CITE_PREFIX}{quote(chunk, safe='')})"
            if chunk
            else match.group(0)
        )

    return _MARKER.sub(link, text)


def _evidence_html(sources: list[dict[str, Any]]) -> str:
    """The cited passages, grouped by file, each citation a link to its preview."""
    if not sources:
        return ""
    by_file: dict[str, list[dict[str, Any]]] = {}
    for source in sources:
        by_file.setdefault(source["doc_id"], []).append(source)
    parts = ["<div class='evidence'><p><b>Evidence</b></p>"]
    for doc_id, cited in by_file.items():
        original = f"/api/file?doc_id={quote(doc_id)}"
        parts.append(
            f"<div class='file'>{html.escape(cited[0]['file_name'])} "
            f"<a href='{original}' target='_blank'>↗</a></div>"
        )
        for source in cited:
            where = ", ".join(
                part
                for part in (
                    f"p. {source['page']}" if source.get("page") else "",
                    html.escape(source.get("section") or ""),
                )
                if part
            )
            parts.append(
                f"<div class='cite'><a href='{_CITE_PREFIX}{quote(source['chunk_id'], safe='')}' "
                f"class='citation'>[{source['number']}]</a> "
                f"<span class='where'>{where}</span> {html.escape(source['snippet'])}</div>"
            )
    parts.append("</div>")
    return "\n".join(parts)


def _gallery(assistant: Assistant, found: list[Candidate]) -> tuple[Any, list[str]]:
    """The pictures among ``found`` as a gallery (hidden when none), and their chunk ids."""
    items, chunk_ids = [], []
    for candidate in found:
        if candidate.payload.get("chunk_id") in chunk_ids:
            continue
        picture = assistant.picture(candidate)
        if picture is not None:
            payload = candidate.payload
            page = f" · p. {payload['page']}" if payload.get("page") else ""
            items.append((picture, f"{Path(payload.get('file_path', '')).name}{page}"))
            chunk_ids.append(payload.get("chunk_id", ""))
    return gr.Gallery(value=items or None, visible=bool(items)), chunk_ids


def _conversation_choices(assistant: Assistant, selected: str | None) -> Any:
    choices = [(c.title, c.id) for c in assistant.history.conversations()]
    return gr.Dropdown(choices=choices, value=selected)


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


def _image(png: bytes) -> Any:
    from PIL import Image

    return Image.open(io.BytesIO(png))
