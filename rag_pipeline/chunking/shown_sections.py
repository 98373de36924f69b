"""The section a passage is shown under: the headings that enclose its first line, for display
only. What a chunk is embedded and matched with keeps its section as the parser made it.

The two differ where the parser's path is right for search but not for a reader:

- a chunk's section is that of its first text, so a chunk that starts at a heading and goes on
  into a subsection has the subsection's path: shown, it stops at the heading it starts at;
- a table's caption that opens its page ranks as the top heading (a filing's statement title),
  so every later heading is taken under it ("Consolidated Statements of Cash Flows > Note 1",
  "Output by quarter > Safety"). For search that context finds the chunks after it (giving it
  up lowered financebench-dev, bench/README.md); shown, a caption heads its table only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def table_captions(rows: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The captions of the tables in a paged document's chunk ``rows`` (catalog rows: text,
    kinds, page): the line above each table (its rows written "label | value", as the parsers
    write them), over notes such as "($ in millions)", as the PDF parser finds a caption. Only
    paged documents: their parsers take a caption for a heading; a Markdown heading over a
    table is a heading."""
    captions: set[str] = set()
    for row in rows:
        if "table" not in (row.get("kinds") or ()) or not row.get("page_start"):
            continue
        above = ""
        for line in (" ".join(line.split()) for line in row["text"].splitlines()):
            if _TABLE_ROW in line:
                if above:
                    captions.add(above)
                above = ""
            elif line and not line.startswith(_NOTE):
                above = line
    return frozenset(captions)


_TABLE_ROW = " | "
_NOTE = ("(", "$", "[")  # "($ in millions)": a note between a caption and its table


def shown_section(
    section: Sequence[str], first_line: str, captions: frozenset[str]
) -> tuple[str, ...]:
    """The headings shown as enclosing a chunk of ``section`` whose text (as the document has
    it) starts with ``first_line``: the path up to the heading it starts at, if it starts at
    one; without a table's caption (``captions``) that another heading follows."""
    path = tuple(section)
    line = " ".join(first_line.split())
    starts_at = next(
        (i for i, heading in enumerate(path) if " ".join(heading.split()) == line), None
    )
    if starts_at is not None:
        path = path[: starts_at + 1]
    return tuple(
        heading
        for position, heading in enumerate(path)
        if position == len(path) - 1 or heading not in captions
    )
