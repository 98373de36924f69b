"""Elements → chunks: structure first, then size in tokens of the dense model's own tokenizer.

1. Every element becomes one or more pieces that fit the budget: a long paragraph is split at
   sentence ends (English and Chinese), a long sentence at token boundaries, both with overlap;
   a long table or list is split between rows, a table repeating its header row.
2. Consecutive pieces are packed into chunks while they fit; a heading starts a new chunk, and a
   new section does too unless the chunk so far is short, so headings stay with their text.

Sizes are counted with the model's tokenizer because the model silently drops whatever lies
beyond its sequence length: a chunk that does not fit is a chunk that is partly not searchable.

Step 1 is ``pieces.py``, step 2 ``text.py``; the context line a chunk starts with (and its text
without it, as shown), ``headers.py``; the section a passage is shown under,
``shown_sections.py``; a chunk per picture, ``pictures.py``; a chunk and its
catalog row, ``chunks.py``.
"""

from __future__ import annotations

from rag_pipeline.chunking.chunks import Chunk, chunk_as_record
from rag_pipeline.chunking.headers import document_name, without_header
from rag_pipeline.chunking.pictures import picture_chunks
from rag_pipeline.chunking.shown_sections import shown_section, table_captions
from rag_pipeline.chunking.text import chunk_document

# Bump when chunks come out differently for the same elements and settings: it re-indexes.
CHUNKER_VERSION = "chunks-6"

__all__ = [
    "CHUNKER_VERSION",
    "Chunk",
    "chunk_as_record",
    "chunk_document",
    "document_name",
    "picture_chunks",
    "shown_section",
    "table_captions",
    "without_header",
]
