"""How a table is written as text, whatever it was read from: a header line, then one line a
row, each row keeping its label with its values and, when the column headers are short (years,
quarters), each value with its header: ``Net sales | 2023: 1,419 | 2022: 2,454``. The chunker
repeats the header line in every chunk of a table split over several.
"""

from __future__ import annotations

from html.parser import HTMLParser

_INLINE_HEADER_CHARS = 10  # longer column headers are given once, in the header line


def header_line(corner: str, headers: list[str]) -> str:
    """The header line: what stands over the labels, then each value column's header."""
    return " | ".join([corner, *headers])


def row_line(label: str, values: list[tuple[str, str]], *, with_headers: bool) -> str:
    """One row: its label, then its (header, value) pairs, each value after its header when
    ``with_headers``."""
    cells = [f"{header}: {value}" if header and with_headers else value for header, value in values]
    return " | ".join([label, *cells]) if cells else label


def inline_headers(headers: list[str]) -> bool:
    """Whether headers are short enough to repeat before every value."""
    return all(len(header) <= _INLINE_HEADER_CHARS for header in headers)


def html_table_text(html: str) -> str | None:
    """A table given as HTML (what unstructured returns for DOCX, PPTX, XLSX, HTML, ODT, EPUB
    tables) as text: its first row is the header. None when it has fewer than two rows."""
    reader = _HTMLRows()
    reader.feed(html)
    rows = [row for row in reader.rows if any(row)]
    if len(rows) < 2:
        return None
    header, body = rows[0], rows[1:]
    headers = header[1:]
    inline = inline_headers(headers)
    lines = [header_line(header[0], headers)]
    for row in body:
        # Inlined headers say which column a value is in; otherwise its place does.
        values = [
            (headers[i] if i < len(headers) else "", value)
            for i, value in enumerate(row[1:])
            if value or not inline
        ]
        lines.append(row_line(row[0], values, with_headers=inline))
    return "\n".join(lines)


class _HTMLRows(HTMLParser):
    """Rows of cells; a cell spanning columns fills them all in the first row (a header over
    them), the first of them elsewhere; a line break in a cell is a space."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._span = 1

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
            span = dict(attrs).get("colspan") or "1"
            self._span = max(int(span), 1) if span.isdigit() else 1
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            if not self.rows:
                self.rows.append([])
            text = " ".join("".join(self._cell).split())
            filler = text if len(self.rows) == 1 else ""
            self.rows[-1].extend([text] + [filler] * (self._span - 1))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
