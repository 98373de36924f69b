"""Tables on a PDF page, ruled or borderless, found from where the words sit.

Financial statements, the tables users ask about most, are usually borderless: a label on the
left, numbers in right-aligned columns, column headers (years, dates) above. PyMuPDF reads such
a page as separate blocks (labels, then each number column), so a label and its values end up
far apart. Here the page's cells (runs of text separated by wide gaps) are grouped into rows by
their vertical position, and a run of rows that hold a label and numbers in shared columns is a
table. Each of its rows is written as one line, ``label | header: value | header: value``, so a
row keeps its label, its values and what each value is; its header line comes first.

``Page.find_tables`` was measured as the alternative: about a second a page (this costs
milliseconds), and on borderless statements it splits or duplicates number columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag_pipeline.parsing.elements import BBox, TextBox, enclosing
from rag_pipeline.parsing.tables import header_line, inline_headers, row_line

# A number cell: amounts, percentages, (negatives), dashes standing for zero, "n/a"; "$" alone is
# the currency column printed left of an amount.
_NUMBER = re.compile(
    r"^[$€£¥]?\s*\(?[-+−]?[$€£¥]?\s*\d[\d,.\s]*\)?\s*%?\)?$|^[-—–]+$|^(n/?a|nm)$", re.IGNORECASE
)
_CURRENCY = re.compile(r"^[$€£¥]$")
_YEAR = re.compile(r"^(19|20)\d\d$")
_MIN_VALUE_ROWS = 3
_COLUMN_SLACK = 12.0  # points: right edges of one column's numbers differ by less


@dataclass(frozen=True, slots=True)
class Cell:
    text: str
    bbox: BBox

    @property
    def is_number(self) -> bool:
        return bool(_NUMBER.match(self.text))


@dataclass(frozen=True, slots=True)
class Table:
    """A table found on a page: its text (header line, then one line a row) and boxes."""

    text: str
    bbox: BBox
    boxes: tuple[TextBox, ...]  # one per line of text (the header, each row)
    headers: tuple[str, ...]  # of its number columns ("" where none was found)
    corner: str  # header text over its labels ("Fiscal Years Ended")


def page_cells(text_dict: dict) -> list[Cell]:
    """The page's cells: each line's spans, cut where a gap wider than its font size falls."""
    cells: list[Cell] = []
    for block in text_dict["blocks"]:
        for line in block.get("lines", ()):
            if abs(line["dir"][1]) >= 0.1:  # vertical text is never part of a table row
                continue
            run: list[dict] = []
            for span in line["spans"]:
                if run and span["bbox"][0] - run[-1]["bbox"][2] > span["size"]:
                    cells.extend(_cell(run))
                    run = []
                run.append(span)
            cells.extend(_cell(run))
    return cells


def _cell(spans: list[dict]) -> list[Cell]:
    text = " ".join("".join(span["text"] for span in spans).split())
    if not text:
        return []
    box = enclosing(tuple(span["bbox"]) for span in spans if span["text"].strip())
    assert box is not None
    return [Cell(text, box)]


def find_tables(cells: list[Cell], continued: Table | None = None) -> list[Table]:
    """Runs of rows that hold a label and numbers in shared columns, as tables.

    ``continued`` is the last table of the previous page: a first table without headers, with
    as many columns, continues it and is given its headers.
    """
    rows = _rows(cells)
    tables: list[Table] = []
    index = 0
    while index < len(rows):
        end = _table_end(rows, index)
        if end is None:
            index += 1
            continue
        start, body = _header_start(rows, index)
        table = _table(rows[start:body], rows[body:end], None if tables else continued)
        if table is not None:
            tables.append(table)
        index = end
    return tables


def _rows(cells: list[Cell]) -> list[list[Cell]]:
    """Cells grouped by vertical overlap, top to bottom, each row left to right."""
    rows: list[tuple[float, float, list[Cell]]] = []
    for cell in sorted(cells, key=lambda c: ((c.bbox[1] + c.bbox[3]) / 2, c.bbox[0])):
        top, bottom = cell.bbox[1], cell.bbox[3]
        if rows:
            row_top, row_bottom, members = rows[-1]
            overlap = min(bottom, row_bottom) - max(top, row_top)
            if overlap >= 0.5 * min(bottom - top, row_bottom - row_top):
                members.append(cell)
                rows[-1] = (min(top, row_top), max(bottom, row_bottom), members)
                continue
        rows.append((top, bottom, [cell]))
    merged = (_merged_label(sorted(members, key=lambda c: c.bbox[0])) for _, _, members in rows)
    return [row for row in merged if row]  # a row of currency signs alone is no row


def _merged_label(row: list[Cell]) -> list[Cell]:
    """A label wrapped over two lines beside its values (both overlap them) becomes one cell;
    a lone currency sign is dropped."""
    row = [cell for cell in row if not _CURRENCY.match(cell.text)]
    merged: list[Cell] = []
    for cell in row:
        if merged and not cell.is_number and not merged[-1].is_number:
            previous = merged[-1]
            stacked = cell.bbox[0] < previous.bbox[2] and cell.bbox[1] > previous.bbox[1]
            if stacked:
                box = enclosing((previous.bbox, cell.bbox))
                assert box is not None
                merged[-1] = Cell(f"{previous.text} {cell.text}", box)
                continue
        merged.append(cell)
    return merged


def _is_value_row(row: list[Cell], *, years_are_values: bool = True) -> bool:
    """A label then numbers, or two numbers or more. A table cannot start at a row of years
    (that is a header), though one inside a table is a row like any other."""
    numbers = [cell for cell in row if cell.is_number]
    if not numbers:
        return False
    if not years_are_values and all(_YEAR.match(cell.text) for cell in numbers):
        return False
    labelled = not row[0].is_number and len(numbers) == len(row) - 1
    return labelled or (len(numbers) >= 2 and len(numbers) == len(row))


def _is_header_row(row: list[Cell], columns: list[tuple[float, float]]) -> bool:
    """Text over the number columns, at most one cell beside them, and no numbers but years."""
    over_columns = [cell for cell in row if _column_of(cell, columns) is not None]
    numbers_are_years = all(_YEAR.match(cell.text) for cell in row if cell.is_number)
    return bool(over_columns) and len(row) - len(over_columns) <= 1 and numbers_are_years


def _is_label_row(row: list[Cell]) -> bool:
    """A row holding only a short label ("Investing activities"): part of a table it is in."""
    return len(row) == 1 and not row[0].is_number and len(row[0].text) <= 120


def _table_end(rows: list[list[Cell]], start: int) -> int | None:
    """The end of the table whose first value row is ``rows[start]``, or None when fewer than
    three value rows follow (label rows between them belong to the table)."""
    if not _is_value_row(rows[start], years_are_values=False):
        return None
    end, values, index = start + 1, 1, start + 1
    while index < len(rows):
        if _is_value_row(rows[index]):
            values += 1
            index += 1
            end = index
        elif _is_label_row(rows[index]) and index + 1 < len(rows):
            index += 1
        else:
            break
    return end if values >= _MIN_VALUE_ROWS else None


def _header_start(rows: list[list[Cell]], first_value_row: int) -> tuple[int, int]:
    """(first header row, first body row) above a table's first value row: label rows just
    above it ("Operating activities") open its body; above them, rows that put text over its
    number columns are its column headers. Both sit as close as rows do."""
    columns = _columns([cell for cell in rows[first_value_row] if cell.is_number])
    body = first_value_row
    while (
        body > 0
        and first_value_row - body < 3
        and _adjacent(rows[body - 1], rows[body])
        and _is_label_row(rows[body - 1])
        and _column_of(rows[body - 1][0], columns) is None
    ):
        body -= 1
    start = body
    while (
        start > 0
        and body - start < 3
        and _adjacent(rows[start - 1], rows[start])
        and _is_header_row(rows[start - 1], columns)
    ):
        start -= 1
    return start, body


def _adjacent(upper: list[Cell], lower: list[Cell]) -> bool:
    """Whether two rows are no further apart than a row is high (as a table's rows are)."""
    top = min(cell.bbox[1] for cell in lower)
    bottom = max(cell.bbox[3] for cell in upper)
    height = max(cell.bbox[3] - cell.bbox[1] for cell in [*upper, *lower])
    return top - bottom <= height


def _columns(numbers: list[Cell]) -> list[tuple[float, float]]:
    """x-ranges of the number columns: numbers are right-aligned, so their right edges agree."""
    columns: list[tuple[float, float]] = []
    for cell in sorted(numbers, key=lambda c: c.bbox[2]):
        if columns and cell.bbox[2] - columns[-1][1] <= _COLUMN_SLACK:
            left, right = columns[-1]
            columns[-1] = (min(left, cell.bbox[0]), max(right, cell.bbox[2]))
        else:
            columns.append((cell.bbox[0], cell.bbox[2]))
    return columns


def _column_of(cell: Cell, columns: list[tuple[float, float]]) -> int | None:
    """The one column a cell stands over (with a little slack); None for a cell over none, or
    over several (a header spanning columns, a label running into them)."""
    over = [
        index
        for index, (left, right) in enumerate(columns)
        if min(cell.bbox[2], right + _COLUMN_SLACK) > max(cell.bbox[0], left - _COLUMN_SLACK)
    ]
    return over[0] if len(over) == 1 else None


def _table(
    header_rows: list[list[Cell]], body: list[list[Cell]], continued: Table | None
) -> Table | None:
    columns = _columns([cell for row in body for cell in row if cell.is_number])
    if not columns:
        return None
    headers = [""] * len(columns)
    corner_cells: list[str] = []
    for row in header_rows:
        for cell in row:
            column = _column_of(cell, columns)
            if column is None:
                corner_cells.append(cell.text)
            else:
                headers[column] = f"{headers[column]} {cell.text}".strip()
    corner = " ".join(corner_cells)
    header_box = enclosing(cell.bbox for row in header_rows for cell in row)
    if not any(headers) and continued and len(continued.headers) == len(columns):
        headers, corner = list(continued.headers), continued.corner
        header_box = enclosing(cell.bbox for cell in body[0])  # the header is not on this page
    lines: list[tuple[str, BBox]] = []
    if any(headers):
        assert header_box is not None
        lines.append((header_line(corner, headers), header_box))
    inline = inline_headers(headers)
    for row in _with_wrapped_labels(body):
        label = " ".join(cell.text for cell in row if not cell.is_number)
        values = [
            (_header_over(cell, columns, headers), cell.text) for cell in row if cell.is_number
        ]
        box = enclosing(cell.bbox for cell in row)
        assert box is not None
        lines.append((row_line(label, values, with_headers=inline), box))
    text, boxes, offset = [], [], 0
    for line, box in lines:
        text.append(line)
        boxes.append(TextBox(offset, offset + len(line), box))
        offset += len(line) + 1
    bbox = enclosing(box for _, box in lines)
    assert bbox is not None
    return Table("\n".join(text), bbox, tuple(boxes), tuple(headers), corner)


def _header_over(cell: Cell, columns: list[tuple[float, float]], headers: list[str]) -> str:
    column = _column_of(cell, columns)
    return headers[column] if column is not None else ""


def _with_wrapped_labels(body: list[list[Cell]]) -> list[list[Cell]]:
    """A label row followed by a row whose label goes on in lower case is one wrapped label:
    the two become one row ("Additions to property … of non-cash" + "capital expenditures")."""
    rows: list[list[Cell]] = []
    for row in body:
        previous = rows[-1] if rows else None
        if (
            previous is not None
            and _is_label_row(previous)
            and not row[0].is_number
            and row[0].text[:1].islower()
        ):
            box = enclosing((previous[0].bbox, row[0].bbox))
            assert box is not None
            rows[-1] = [Cell(f"{previous[0].text} {row[0].text}", box), *row[1:]]
        else:
            rows.append(row)
    return rows
