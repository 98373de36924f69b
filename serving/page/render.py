"""The page's HTML and markdown: answers with their citation markers as links, the evidence under
them, the workspace's sources, a workspace's card and what deleting it takes away, and who is
signed in."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Collection, Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from rag_pipeline.catalog import DocumentRecord
from rag_pipeline.config import Settings
from rag_pipeline.manifest import source_labels
from rag_pipeline.workspaces import Workspace
from serving.access import SIGN_OUT, User
from serving.answer import Answer
from serving.api import original_url
from serving.assistant import cited_sources, file_url
from serving.workspaces import Contents, Documents, indexed_documents

CITE_PREFIX = "#cite:"
_MARKER = re.compile(r"\[(\d+)\]")
# A citation's target: its chunk id (which ends in "#<index>"), then the page to show, if any.
_TARGET = re.compile(r"(.+#\d+)&page=(\d+)", re.DOTALL)
# An absolute path: in quotes (spaces and all), or at the start or after a space, bracket or
# ``=``, up to the next one.
_PATH = re.compile(
    r"(?P<quote>['\"])(?P<quoted>/[^'\"]+)(?P=quote)|(?<![^\s(\[=])/[^\s'\"()\[\],;]+"
)


def cite_target(source: dict[str, Any]) -> str:
    """What a citation of ``source`` opens: its chunk id, and the page to show if it has
    pages."""
    page = f"&page={source['page']}" if source.get("page") else ""
    return f"{source['chunk_id']}{page}"


def cite_href(source: dict[str, Any]) -> str:
    """The link to a cited passage's preview: its target, encoded, after :data:`CITE_PREFIX`."""
    return f"{CITE_PREFIX}{quote(cite_target(source), safe='')}"


def cited_passage(target: str) -> tuple[str, int | None]:
    """(chunk id, page) of a citation's target (see :func:`cite_target`), or of a bare chunk
    id (no page: its first)."""
    named = _TARGET.fullmatch(target)
    return (named.group(1), int(named.group(2))) if named else (target, None)


def linked(answer: Answer) -> str:
    """The answer with each marker [n] as a link to its passage's preview."""
    return link_markers(answer.text, cited_sources(answer))


def link_markers(text: str, sources: list[dict[str, Any]]) -> str:
    cited = {source["number"]: source for source in sources if source["chunk_id"]}

    def link(match: re.Match[str]) -> str:
        source = cited.get(int(match.group(1)))
        return f"[[{match.group(1)}]]({cite_href(source)})" if source else match.group(0)

    return _MARKER.sub(link, text)


def evidence_html(sources: list[dict[str, Any]], workspace_id: str | None) -> str:
    """The cited passages, grouped by file, each citation a link to its preview, each file a
    link to its original opened at its first cited page."""
    if not sources:
        return ""
    by_file: dict[str, list[dict[str, Any]]] = {}
    for source in sources:
        by_file.setdefault(source["doc_id"], []).append(source)
    parts = ["<div class='evidence'><p><b>Evidence</b></p>"]
    for doc_id, cited in by_file.items():
        original = html.escape(
            original_url(doc_id, PurePosixPath(doc_id).name, workspace_id, cited[0].get("page"))
        )
        parts.append(
            f"<div class='file'>{html.escape(cited[0]['file_name'])} "
            f"<a href='{original}' target='_blank'>↗</a></div>"
        )
        for source in cited:
            where = ", ".join(
                part for part in (_pages(source), html.escape(source.get("section") or "")) if part
            )
            parts.append(
                f"<div class='cite'><a href='{html.escape(cite_href(source))}' "
                f"class='citation'>[{source['number']}]</a> "
                f"<span class='where'>{where}</span> {html.escape(source['snippet'])}</div>"
            )
    parts.append("</div>")
    return "\n".join(parts)


def _pages(source: dict[str, Any]) -> str:
    """ "p. 2", or "pp. 1–2" when what the answer quotes from it runs over pages."""
    pages = source.get("pages") or []  # kept conversations from before have none
    if len(pages) > 1:
        return f"pp. {pages[0]}–{pages[-1]}"
    return f"p. {source['page']}" if source.get("page") else ""


def sources_html(
    settings: Settings,
    documents: Documents,
    workspace_id: str | None,
    *,
    running: bool,
    removable: Collection[str] = (),
    governs: bool = False,
    own_offline: Mapping[str, str] = {},
) -> str:
    """The workspace's folders and each document's state as the user sees them (indexing,
    indexed, taken offline, or failed and why), with a download of each original, a "remove"
    beside each upload named in ``removable`` (those the user may remove), and for one who
    ``governs`` the workspace, a "put back" beside each document taken offline and an "archive"
    beside each other one indexed; for another, the documents of their own uploads a governor
    took offline (``own_offline``: each one's state), marked as such."""
    records = documents.records
    labels = source_labels(settings.watched_folders)  # a document id starts with its label
    uploads = next((label for label, f in labels.items() if f == settings.upload_folder), None)
    states = {
        doc_id: f"indexed, {counted(record.chunks, 'chunk')}"
        if record.state == "indexed"
        else failure(record)
        for doc_id, record in records.items()
    }
    for doc_id in states.keys() & documents.offline.keys():  # shown to a governor
        states[doc_id] = f"{documents.offline[doc_id]}: out of search, {states[doc_id]}"
    folder = settings.upload_folder
    uploaded = folder.iterdir() if uploads and folder.is_dir() else []
    for path in uploaded:  # not in the catalog yet (or offline, and not shown)
        if (doc_id := f"{uploads}/{path.name}") not in documents.offline:
            states.setdefault(doc_id, "indexing" if running else "not indexed yet")
    for doc_id, state in own_offline.items():  # not in ``records``: out of their search
        states[doc_id] = f"{state} by a governor: only a governor may replace or put it back"
    # Each folder's documents under its name; a folder no longer watched keeps its label.
    listed: dict[str, list[str]] = {label: [] for label in labels}
    for doc_id, state in sorted(states.items()):
        download = (
            f" <a href='{file_url(doc_id, workspace_id)}' download class='download'>download</a>"
            if doc_id in records and records[doc_id].state == "indexed"
            else ""
        )
        label, _, name = doc_id.partition("/")
        remove = (
            f" <button class='remove' data-remove='{html.escape(name)}'>remove</button>"
            if label == uploads and name in removable
            else ""
        )
        govern = _governing_button(doc_id, documents) if governs and doc_id in records else ""
        listed.setdefault(label, []).append(
            f"<div class='cite' data-doc='{html.escape(doc_id)}'>{html.escape(doc_id)} "
            f"<span class='where'>{html.escape(state)}</span>{download}{remove}{govern}</div>"
        )
    parts = ["<div class='evidence'>"]
    if running:
        parts.append("<p><i>indexing…</i></p>")
    for label, rows in listed.items():
        folder = labels.get(label)
        name = "uploads" if label == uploads else folder.name if folder else label
        parts.append(f"<div class='file'>{html.escape(name)}</div>")
        parts.extend(rows or ["<p><i>no documents</i></p>"])
    parts.append("</div>")
    return "\n".join(parts)


def _governing_button(doc_id: str, documents: Documents) -> str:
    """A governor's "put back" for a document taken offline, "archive" for one in search (its
    ``data-state``: the state it sets)."""
    offline = doc_id in documents.offline
    state, label = ("active", "put back") if offline else ("archived", "archive")
    return (
        f" <button class='govern' data-govern='{html.escape(doc_id)}' data-state='{state}'>"
        f"{label}</button>"
    )


def uploads_html(
    batch: list[dict[str, Any]],
    records: Mapping[str, DocumentRecord],
    parsed: set[str],
    *,
    running: bool,
) -> str:
    """What became of each file of the last upload: refused and why, received or parsed (the
    documents ``parsed`` names) and indexed meanwhile, searchable, or failed and why."""
    if not batch:
        return ""
    parts = ["<div class='evidence'><p><b>Last upload</b></p>"]
    for sent in batch:
        record = records.get(sent["doc_id"]) if sent["doc_id"] else None
        if record is not None and record.version != sent["version"]:
            record = None  # an earlier upload's of the same name: this one is not indexed yet
        reached = "parsed" if sent["doc_id"] in parsed else "received"
        row, shown = "cite", "where"
        if sent["refused"]:  # as readable as an error
            state, row, shown = f"refused: {sent['refused']}", "cite refused", "refusal"
        elif running:
            state = f"{reached}, indexing…"
        elif record is None:
            state = f"{reached}, not indexed yet"
        elif record.state == "indexed":
            state = "searchable"
        else:
            state = failure(record)
        parts.append(
            f"<div class='{row}' data-upload='{html.escape(sent['name'])}'>"
            f"{html.escape(sent['name'])} <span class='{shown}'>{html.escape(state)}</span></div>"
        )
    parts.append("</div>")
    return "\n".join(parts)


def failure(record: DocumentRecord) -> str:
    """Why a document failed, without the server's paths a parser's message may name (its
    file's name kept): the operator's ``status`` and log hold them."""
    reason = _PATH.sub(_file_name, record.error or "")
    return f"failed: {reason or 'unknown reason'}"


def _file_name(path: re.Match[str]) -> str:
    if path["quoted"]:
        return f"{path['quote']}{PurePosixPath(path['quoted']).name}{path['quote']}"
    return PurePosixPath(path.group()).name


def indexed_status(records: Iterable[DocumentRecord]) -> str:
    """The open workspace's line: how many documents are indexed."""
    return f"{counted(sum(1 for r in records if r.indexed_version), 'document')} indexed"


def counted(count: int, thing: str) -> str:
    """``1 document``, ``2 documents``, ``0 documents``."""
    return f"{count} {thing}{'' if count == 1 else 's'}"


# The spans a time ago is said in, longest first.
_SPANS = (
    (365 * 86_400, "year"),
    (30 * 86_400, "month"),
    (7 * 86_400, "week"),
    (86_400, "day"),
    (3_600, "hour"),
    (60, "minute"),
)


def time_ago(then: float, now: float) -> str:
    """``5 minutes ago``, ``1 day ago``, ``just now``: the same in every time zone."""
    elapsed = max(0.0, now - then)
    for seconds, unit in _SPANS:
        if elapsed >= seconds:
            return f"{counted(int(elapsed // seconds), unit)} ago"
    return "just now"


def card_html(listed: Workspace, user: str, *, governs: bool) -> str:
    """A workspace's card: name, sources (its upload folder once something was uploaded),
    documents (those taken offline only for those who ``governs`` it), when ``user`` opened it
    last; "no documents yet" for a workspace with neither."""
    settings = listed.settings
    sources = _sources(settings)
    documents = indexed_documents(settings, governs=governs)
    last_opened = listed.last_opened(user)
    opened = f"opened {time_ago(last_opened, time.time())}" if last_opened else "not opened yet"
    held = (
        f"{counted(sources, 'source')} · {counted(documents, 'document')}"
        if sources or documents
        else "no documents yet"
    )
    facts = html.escape(f"{held} · {opened}")
    return (
        f"<div class='name' data-workspace='{html.escape(listed.id)}'>"
        f"{html.escape(listed.name)}</div><div class='facts'>{facts}</div>"
    )


def _sources(settings: Settings) -> int:
    """The folders a workspace watches, its upload folder once something was uploaded."""
    folder = settings.upload_folder
    return sum(1 for f in settings.watched_folders if f != folder or any(f.iterdir()))


def adding_documents(settings: Settings, documents: int, *, may_contribute: bool) -> str | None:
    """For a workspace with no documents and nothing to index, how to add some: for one who
    ``may_contribute``, by uploading or by watching a folder; for others, whom to ask."""
    if documents or _sources(settings):
        return None
    if not may_contribute:
        return (
            "**No documents here yet.** Ask someone who may contribute to this workspace "
            "(or govern it) to add some."
        )
    return (
        "**No documents here yet.** Upload files under *Sources*, or have the server watch a "
        f"folder: `rag-pipeline sources add DIR --workspace {settings.workspace}`."
    )


def deletion_html(name: str, contents: Contents) -> str:
    """What deleting a workspace takes away, to confirm."""
    going = ", ".join(
        (
            counted(contents.documents, "indexed document"),
            counted(contents.uploads, "uploaded file"),
            counted(contents.conversations, "conversation"),
        )
    )
    return (
        f"<p>Delete <b>{html.escape(name)}</b> for good? Going with it: {going}. "
        "Folders it watches elsewhere stay as they are.</p>"
    )


def signed_in_html(user: User, *, signs_out: bool) -> str:
    """Who is signed in, with a button to sign out (a plain form) for those who signed in with
    the form; nothing for the local user of an installation without sign-in."""
    if user.grants is None:
        return ""
    sign_out = (
        f"<form method='post' action='{SIGN_OUT}'>"
        "<button type='submit' id='sign-out'>Sign out</button></form>"
        if signs_out
        else ""
    )
    return f"<div class='signed-in'>Signed in as <b>{html.escape(user.name)}</b> {sign_out}</div>"
