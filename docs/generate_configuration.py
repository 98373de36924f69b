"""Write docs/configuration.md from the settings model: ``python docs/generate_configuration.py``.

Every field of ``rag_pipeline.config.Settings`` is walked, nested models included, so that the
reference lists exactly what the code reads: its path in ``settings.json``, its environment
variable (named as pydantic-settings names it, from the model's ``env_prefix`` and
``env_nested_delimiter``), its type and bounds, its default and its description.
``rag_pipeline_tests/test_docs.py`` fails when the file differs from what this writes.
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from rag_pipeline.config import Settings

OUTPUT = Path(__file__).resolve().parent / "configuration.md"
COMMAND = "python docs/generate_configuration.py"

_BOUNDS = {
    annotated_types.Gt: ">",
    annotated_types.Ge: "≥",
    annotated_types.Lt: "<",
    annotated_types.Le: "≤",
}

_INTRODUCTION = """\
# Configuration

<!-- Generated from rag_pipeline.config.Settings by `{command}`:
change a setting's description in the code, then run it again;
rag_pipeline_tests/test_docs.py fails while this file is stale. -->

Every setting is a field of one settings object, `rag_pipeline.config.Settings`. Where a value
comes from, the first that gives it wins:

1. the command line (`--home`, `--workspace`, `index --source`, `serve --port`…);
2. environment variables: `{prefix}` and the setting's path in capitals, its parts joined by
   `{delimiter}` (`{example}`); lists and objects as JSON
   (`{prefix}SOURCES='["/docs"]'`). Also read, as their own tools name them: `QDRANT_URL` and
   `QDRANT_API_KEY` (`store.url`, `store.api_key`), `OPENAI_BASE_URL` and `OPENAI_API_KEY`
   (`answer.base_url`, `answer.api_key`);
3. `<home>/settings.json`, the same paths as nested JSON
   (`{{"indexing": {{"sensor_seconds": 10}}}}`): where the CLI remembers the watched folders and
   `rag-pipeline user` writes the users. A workspace's own `settings.json` comes before the
   installation's, whose watched folders it does not inherit;
4. the defaults below.

The home folder itself is `--home`, else `$RAG_PIPELINE_HOME`, else `./data`.

A document's version combines its content hash with the settings that shape its chunks and
vectors (its format's parser, `chunking`, the models of `embedding` and `images`, and
`redaction` while it is on): changing one re-indexes what it affects, and nothing else. The
query-time settings (`retrieval`, `rerank`, `answer`, `serving`, `access`) re-index nothing.
Fields under `<name>` are the entries of an object given whole.
"""


def render() -> str:
    """The whole of docs/configuration.md."""
    config = Settings.model_config
    prefix, delimiter = config.get("env_prefix", ""), config.get("env_nested_delimiter") or ""
    introduction = _INTRODUCTION.format(
        command=COMMAND,
        prefix=prefix,
        delimiter=delimiter,
        example=f"{prefix}INDEXING{delimiter}SENSOR_SECONDS=10",
    )
    sections = [("Top level", None, _scalar_fields(Settings))]
    sections += [
        (name, _own_docstring(field.annotation), field.annotation.model_fields.items())
        for name, field in Settings.model_fields.items()
        if _is_model(field.annotation)
    ]
    parts = [introduction]
    for title, docstring, fields in sections:
        parts.append(f"## {title}\n")
        if docstring:
            parts.append(f"{docstring}\n")
        parent = () if title == "Top level" else (title,)
        rows = [_row(path, field, prefix, delimiter) for path, field in _leaves(parent, fields)]
        parts.append(
            "| setting | environment variable | type | default | description |\n"
            "| --- | --- | --- | --- | --- |\n" + "".join(rows)
        )
    return "\n".join(parts)


def _scalar_fields(model: type[BaseModel]) -> list[tuple[str, FieldInfo]]:
    return [(name, f) for name, f in model.model_fields.items() if not _is_model(f.annotation)]


def _leaves(
    parent: tuple[str, ...], fields: typing.Iterable[tuple[str, FieldInfo]]
) -> Iterator[tuple[tuple[str, ...], FieldInfo]]:
    """Every field that holds a value, by its path; a mapping of models (the users) gives its
    value model's fields under ``<name>``."""
    for name, field in fields:
        path = (*parent, name)
        annotation = field.annotation
        if _is_model(annotation):
            yield from _leaves(path, annotation.model_fields.items())
            continue
        yield path, field
        value_model = _mapped_model(annotation)
        if value_model is not None:
            yield from _leaves((*path, "<name>"), value_model.model_fields.items())


def _row(path: tuple[str, ...], field: FieldInfo, prefix: str, delimiter: str) -> str:
    variable = "–" if "<name>" in path else f"`{prefix}{delimiter.join(path).upper()}`"
    cells = [
        f"`{'.'.join(path)}`",
        variable,
        f"`{_type_name(field.annotation)}`{_bounds(field)}",
        _default(field),
        _plain_text(field.description or "–"),
    ]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |\n"


def _plain_text(text: str) -> str:
    """A description as Markdown shows it verbatim: ``<home>`` is not a tag, ``'*'`` no
    emphasis."""
    return text.replace("<", "&lt;").replace("*", "\\*")


def _type_name(annotation: Any) -> str:
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is Literal:
        return " | ".join(json.dumps(value) for value in arguments)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(argument) for argument in arguments)
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in arguments)}]"
    if _is_model(annotation):
        return "object"
    return "path" if annotation is Path else annotation.__name__


def _bounds(field: FieldInfo) -> str:
    limits = [
        f"{sign} {getattr(constraint, kind.__name__.lower())}"
        for constraint in field.metadata
        for kind, sign in _BOUNDS.items()
        if isinstance(constraint, kind)
    ]
    return f", {', '.join(limits)}" if limits else ""


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, str | Path):
        return f"`{value}`"
    return f"`{json.dumps(value)}`"


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _mapped_model(annotation: Any) -> type[BaseModel] | None:
    """The value model of ``dict[str, Model]``, else None."""
    if typing.get_origin(annotation) is dict:
        value = typing.get_args(annotation)[1]
        return value if _is_model(value) else None
    return None


def _own_docstring(model: type[BaseModel]) -> str | None:
    """A model's docstring, unless it has none of its own (pydantic's would be inherited)."""
    docstring = model.__dict__.get("__doc__")
    return inspect.cleandoc(docstring) if docstring else None


if __name__ == "__main__":
    OUTPUT.write_text(render())
    print(f"wrote {OUTPUT}")
