"""Governing what search may find in a workspace, from a cited chunk (its document, or the chunk
alone) or from a document listed in the sources: taken out of search or put back, and where they
stand. Who may govern is
:class:`~serving.workspaces.ServedWorkspaces`' to check; here, only whether the chunk is still of
its document's live version.
"""

from __future__ import annotations

from dataclasses import dataclass

from rag_pipeline import ids
from rag_pipeline.availability import AvailabilityError, AvailabilityObserver, set_availability
from rag_pipeline.catalog import Availability, AvailabilityRecord, Catalog
from rag_pipeline.workspaces import Workspace


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a cited passage stands: its document's availability, and whether the passage itself
    is out of search."""

    document: Availability
    passage_offline: bool

    def offline(self, whole: bool) -> bool:
        """Whether the document (``whole``), or the passage itself, is out of search."""
        return self.document != "active" if whole else self.passage_offline

    @property
    def in_search(self) -> bool:
        """Neither the document nor the passage is out of search."""
        return not self.offline(whole=True) and not self.offline(whole=False)

    def refusal(self, state: Availability, whole: bool) -> str | None:
        """Why setting the document (``whole``) or the passage to ``state`` would change
        nothing, or None when it would. Putting back brings back whichever is out of search."""
        if state == "active":
            return "It is in search already." if self.in_search else None
        if whole:
            return f"The document is {state} already." if self.document == state else None
        if self.document != "active":
            return f"The whole document is {self.document}: put it back first."
        return "The passage is out of search already." if self.passage_offline else None


def set_cited_availability(
    workspace: Workspace,
    chunk_id: str,
    state: Availability,
    by: str,
    *,
    whole: bool,
    observe: AvailabilityObserver | None,
) -> AvailabilityRecord:
    """Take the document of a cited chunk (``whole``) or the chunk itself out of search, or put
    it back, in the name of ``by``."""
    doc_id, index = _cited_document(workspace, chunk_id)
    chunk = None if whole else index
    return set_availability(workspace.settings, doc_id, state, by, chunk, observe=observe)


def set_document_availability(
    workspace: Workspace,
    doc_id: str,
    state: Availability,
    by: str,
    *,
    observe: AvailabilityObserver | None,
) -> AvailabilityRecord:
    """Take a document out of search, or put it back, in the name of ``by``."""
    return set_availability(workspace.settings, doc_id, state, by, observe=observe)


def cited_standing(workspace: Workspace, chunk_id: str) -> Standing:
    """Where a cited chunk and its document stand."""
    doc_id, _ = _cited_document(workspace, chunk_id)
    with Catalog(workspace.settings) as catalog:
        offline_chunks = catalog.live_offline()[1]
        document = _document_state(catalog, doc_id)
    return Standing(document, chunk_id in offline_chunks)


def document_standing(workspace: Workspace, doc_id: str) -> Standing:
    """Where a document stands (as a whole: no passage of it is asked about)."""
    with Catalog(workspace.settings) as catalog:
        return Standing(_document_state(catalog, doc_id), passage_offline=False)


def _document_state(catalog: Catalog, doc_id: str) -> Availability:
    return next(
        (r.state for r in catalog.availability() if r.doc_id == doc_id and not r.text_hash),
        "active",
    )


def _cited_document(workspace: Workspace, chunk_id: str) -> tuple[str, int]:
    """The document and index of the chunk, if it is of the document's live version."""
    try:
        doc_id, version, index = ids.parse_chunk_id(chunk_id)
    except ValueError as error:
        raise AvailabilityError(str(error)) from error
    with Catalog(workspace.settings) as catalog:
        live = catalog.live_collection()
        record = catalog.document(live.name, doc_id) if live else None
    if record is None or record.indexed_version != version:
        raise AvailabilityError(f"{doc_id} changed since this answer: search again")
    return doc_id, index
