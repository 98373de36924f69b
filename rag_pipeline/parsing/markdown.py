"""Markdown → elements (markdown-it): headings make the section path; lists and tables stay whole.

A direct parser rather than unstructured's: Markdown states its structure explicitly, and going
through HTML and unstructured's text classification costs far more per file.
"""

from __future__ import annotations

import re
from pathlib import Path

from rag_pipeline.parsing.elements import Element, ElementKind, ParsedDocument, ParseError
from rag_pipeline.parsing.text import read_text

PARSER_VERSION = "markdown-1"

_FRONT_MATTER = re.compile(r"\A---\s*\n.*?\n(---|\.\.\.)\s*\n", re.DOTALL)
_HTML_TAG = re.compile(r"<[^>]+>")


def parse_markdown(path: Path) -> ParsedDocument:
    from markdown_it import MarkdownIt

    text = _FRONT_MATTER.sub("", read_text(path), count=1)
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    elements: list[Element] = []
    headings: list[tuple[int, str]] = []

    def add(kind: ElementKind, content: str) -> None:
        if content.strip():
            section = tuple(title for _, title in headings)
            elements.append(Element(text=content.strip(), kind=kind, section=section))

    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token.type == "heading_open":
            level = int(token.tag[1])
            title = _inline_text(tokens[index + 1])
            while headings and headings[-1][0] >= level:
                headings.pop()
            if title:
                headings.append((level, title))
                add("title", title)
            index += 3
        elif token.type in ("bullet_list_open", "ordered_list_open"):
            end = _closing(tokens, index)
            add("list", _list_text(tokens[index:end]))
            index = end + 1
        elif token.type == "table_open":
            end = _closing(tokens, index)
            add("table", _table_text(tokens[index:end]))
            index = end + 1
        elif token.type == "inline" and token.level <= 2:  # paragraphs, also inside blockquotes
            add("paragraph", _inline_text(token))
            index += 1
        elif token.type in ("fence", "code_block"):
            add("paragraph", token.content)
            index += 1
        elif token.type == "html_block":
            add("paragraph", _HTML_TAG.sub(" ", token.content))
            index += 1
        else:
            index += 1
    if not elements:
        raise ParseError("the Markdown file has no text")
    title = next((e.text for e in elements if e.kind == "title"), None)
    return ParsedDocument(elements=elements, title=title)


def _closing(tokens: list, start: int) -> int:
    """Index of the token that closes ``tokens[start]``."""
    depth = 0
    for index in range(start, len(tokens)):
        depth += tokens[index].nesting
        if depth == 0:
            return index
    return len(tokens) - 1


def _inline_text(token: object) -> str:
    parts: list[str] = []
    for child in getattr(token, "children", None) or ():
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type == "softbreak":
            parts.append(" ")
        elif child.type == "hardbreak":
            parts.append("\n")
        elif child.type == "image":
            parts.append(child.content)  # the alt text
        elif child.type == "html_inline":
            continue
    return "".join(parts).strip()


def _list_text(tokens: list) -> str:
    lines: list[str] = []
    depth = 0
    numbers: list[int] = []
    for token in tokens:
        if token.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
            numbers.append(0 if token.type == "ordered_list_open" else -1)
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
            numbers.pop()
        elif token.type == "list_item_open" and numbers[-1] >= 0:
            numbers[-1] += 1
        elif token.type == "inline":
            marker = f"{numbers[-1]}." if numbers and numbers[-1] >= 0 else "-"
            lines.append(f"{'  ' * (depth - 1)}{marker} {_inline_text(token)}")
    return "\n".join(lines)


def _table_text(tokens: list) -> str:
    rows: list[list[str]] = []
    for token in tokens:
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and rows:
            rows[-1].append(_inline_text(token))
    return "\n".join(" | ".join(row) for row in rows)
