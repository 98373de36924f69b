"""Each asset's per-document output, kept under ``<stage root>/stages/<asset>/`` between assets.

The stage root is the home, or where ``indexing.stage_url`` says: a folder or an object store
that several workers share (through fsspec). One file per document, replaced atomically, so any
asset can run alone (from the Dagster UI) on what the previous one left, and a crashed run
leaves nothing half-written. Each file records the document version it was made for; a later
stage refuses a file made for another version. The files are Arrow IPC, written and read a
batch of rows at a time: a document's elements and chunks never need to be in memory at once,
however large the file (the parser workers write the parsed stage themselves, so a document's
text never crosses a pipe either).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import pyarrow as pa
from upath import UPath

from rag_pipeline import ids
from rag_pipeline.batching import batched
from rag_pipeline.catalog import CHUNK_SCHEMA
from rag_pipeline.files import write_atomically
from rag_pipeline.manifest import SourceFile
from rag_pipeline.parsing import Element, ParsedDocument, ParseError, TextBox
from rag_pipeline.redaction import Redactor

Action = Literal["index", "unchanged", "delete"]

_ELEMENT_SCHEMA = pa.schema(
    [
        ("text", pa.string()),
        ("kind", pa.string()),
        ("page", pa.int64()),
        ("bbox", pa.list_(pa.float64())),
        ("section", pa.list_(pa.string())),
        ("boxes", pa.list_(pa.list_(pa.float64()))),  # [start, end, x0, y0, x1, y1]
    ]
)
_META_KEY = b"rag_pipeline"
_PICTURES_FOLDER = "images"
_TABLE_SUFFIX = ".arrow"
_ROWS_PER_BATCH = 2000


@dataclass(frozen=True, slots=True)
class DocumentTask:
    """What a run does with one document (the output of ``file_manifest``)."""

    doc_id: str
    action: Action
    file: SourceFile | None

    @property
    def version(self) -> str | None:
        return self.file.version if self.file else None


@dataclass(frozen=True, slots=True)
class StageMeta:
    """What a stage file says of itself: the version it was made for, and the reason when it
    holds no rows."""

    version: str
    meta: dict[str, Any]

    @property
    def error(self) -> str | None:
        return self.meta.get("error")


class StageFiles:
    def __init__(self, root: UPath) -> None:
        self.root = root
        self.folder = root / "stages"

    def pictures_folder(self, doc_id: str) -> UPath:
        """Where a document's pictures are kept (PNG by content hash), for embedding and display.

        Outside ``stages/``: the chat page shows them as long as the document is indexed.
        """
        return self.root / _PICTURES_FOLDER / ids.storage_key(doc_id)

    def stored_picture(self, image_file: str) -> UPath | None:
        """The picture a chunk's ``image_file`` names (as ``_write_pictures`` records it), or
        None when that name points anywhere but into the stored pictures."""
        name = PurePosixPath(image_file)
        if name.parts[:1] != (_PICTURES_FOLDER,) or ".." in name.parts:
            return None
        return self.root / name.as_posix()

    def _write_pictures(self, doc_id: str, parsed: ParsedDocument) -> list[dict[str, Any]]:
        folder = self.pictures_folder(doc_id)
        records = []
        for picture in parsed.images:
            path = folder / f"{picture.sha256}.png"
            if not path.exists():
                _write_whole(path, lambda sink, data=picture.data: sink.write(data))
            records.append(
                {
                    "sha256": picture.sha256,
                    "phash": picture.phash,
                    "width": picture.width,
                    "height": picture.height,
                    "page": picture.page,
                    "bbox": list(picture.bbox) if picture.bbox else None,
                    "file": path.relative_to(self.root).as_posix(),
                }
            )
        return records

    def keep_pictures(self, doc_id: str, files: set[str]) -> None:
        """Delete the document's picture files that ``files`` (relative to the root) omits."""
        folder = self.pictures_folder(doc_id)
        if folder.is_dir():
            for path in folder.iterdir():
                if path.relative_to(self.root).as_posix() not in files:
                    _remove(path)

    def _path(self, stage: str, doc_id: str, suffix: str) -> UPath:
        return self.folder / stage / f"{ids.storage_key(doc_id)}{suffix}"

    def write_task(self, task: DocumentTask) -> None:
        payload = {
            "doc_id": task.doc_id,
            "action": task.action,
            "file": asdict(task.file) if task.file else None,
        }
        text = json.dumps(payload, ensure_ascii=False).encode()
        _write_whole(self._path("file_manifest", task.doc_id, ".json"), lambda s: s.write(text))

    def read_task(self, doc_id: str) -> DocumentTask | None:
        path = self._path("file_manifest", doc_id, ".json")
        if not path.exists():
            return None
        payload = json.loads(path.read_text())
        file = SourceFile(**payload["file"]) if payload["file"] else None
        return DocumentTask(doc_id=payload["doc_id"], action=payload["action"], file=file)

    def write_parsed(
        self, doc_id: str, version: str, parsed: ParsedDocument | None, error: str | None
    ) -> dict[str, Any]:
        """Write a parse (its elements streamed) or the reason there is none; returns what it
        wrote of the document: pages, elements, pictures, title. Raises ParseError when the
        elements run out on one (nothing is written then)."""
        meta: dict[str, Any] = {"version": version, "error": error}
        if parsed is None:
            self._write("parsed_pages", doc_id, _ELEMENT_SCHEMA, meta, [])
            return meta
        meta |= {
            "title": parsed.title,
            "pages": parsed.page_count,
            "page_sizes": parsed.page_sizes,
            "images": self._write_pictures(doc_id, parsed),
        }
        rows = (_element_row(element) for element in parsed.elements)
        written = self._write("parsed_pages", doc_id, _ELEMENT_SCHEMA, meta, rows)
        return {
            "pages": parsed.page_count or 0,
            "elements": written,
            "pictures": len(parsed.images),
            "title": parsed.title or "",
        }

    def parsed_meta(self, doc_id: str) -> StageMeta | None:
        return self._meta("parsed_pages", doc_id)

    def parsed_elements(self, doc_id: str) -> Iterator[Element]:
        for batch in self._batches("parsed_pages", doc_id):
            yield from (element_from_row(row) for row in batch)

    def write_chunks(
        self,
        doc_id: str,
        version: str,
        rows: Iterable[dict[str, Any]],
        meta: dict[str, Any],
    ) -> int:
        """Write a document's chunk rows as they come; returns how many."""
        return self._write("chunks", doc_id, CHUNK_SCHEMA, {"version": version, **meta}, rows)

    def chunks_meta(self, doc_id: str) -> StageMeta | None:
        return self._meta("chunks", doc_id)

    def chunk_count(self, doc_id: str) -> int:
        """How many chunk rows the document's chunk file holds (read from its batches' sizes)."""
        path = self._path("chunks", doc_id, _TABLE_SUFFIX)
        if not path.exists():
            return 0
        with _open_input(path) as source:
            reader = pa.ipc.open_file(source)
            return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))

    def chunk_batches(self, doc_id: str) -> Iterator[list[dict[str, Any]]]:
        """A document's chunk rows, a batch at a time."""
        return self._batches("chunks", doc_id)

    def remove(self, doc_id: str) -> None:
        for stage, suffix in (
            ("file_manifest", ".json"),
            ("parsed_pages", _TABLE_SUFFIX),
            ("chunks", _TABLE_SUFFIX),
        ):
            _remove(self._path(stage, doc_id, suffix))
        pictures = self.pictures_folder(doc_id)
        if pictures.is_dir():
            for path in pictures.iterdir():
                _remove(path)
            with suppress(OSError):
                pictures.rmdir()

    def _write(
        self,
        stage: str,
        doc_id: str,
        schema: pa.Schema,
        meta: dict[str, Any],
        rows: Iterable[dict[str, Any]],
    ) -> int:
        schema = schema.with_metadata({_META_KEY: json.dumps(meta, ensure_ascii=False)})
        written = 0

        def write(sink: pa.NativeFile) -> None:
            nonlocal written
            with pa.ipc.new_file(sink, schema) as writer:
                for batch in batched(rows, _ROWS_PER_BATCH):
                    writer.write_batch(pa.RecordBatch.from_pylist(batch, schema=schema))
                    written += len(batch)

        _write_whole(self._path(stage, doc_id, _TABLE_SUFFIX), write)
        return written

    def _meta(self, stage: str, doc_id: str) -> StageMeta | None:
        path = self._path(stage, doc_id, _TABLE_SUFFIX)
        if not path.exists():
            return None
        with _open_input(path) as source:
            meta = json.loads(pa.ipc.open_file(source).schema.metadata[_META_KEY])
        return StageMeta(meta["version"], meta)

    def _batches(self, stage: str, doc_id: str) -> Iterator[list[dict[str, Any]]]:
        path = self._path(stage, doc_id, _TABLE_SUFFIX)
        if not path.exists():
            return
        # Read (not mapped, which would keep the pages read resident) a batch at a time; a file
        # replaced meanwhile stays readable through the open handle.
        with _open_input(path) as source:
            reader = pa.ipc.open_file(source)
            for index in range(reader.num_record_batches):
                yield reader.get_batch(index).to_pylist()


def _write_whole(path: UPath, write: Callable[[pa.NativeFile], object]) -> None:
    """``write(sink)`` into a temporary file, then moved onto ``path`` in one step: a file
    appears whole or not at all, on the local disk or through fsspec (where an object store's
    move is a copy, which also appears whole)."""
    if isinstance(path, Path):

        def local(temporary: str) -> None:
            with pa.OSFile(temporary, "wb") as sink:
                write(sink)

        write_atomically(path, local)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with temporary.open("wb") as file:
            write(pa.PythonFile(file, mode="w"))
        temporary.rename(path)
    except BaseException:
        _remove(temporary)
        raise


def _open_input(path: UPath) -> pa.NativeFile:
    """A stage file to read: through the OS on a local disk, else through fsspec."""
    if isinstance(path, Path):
        return pa.OSFile(str(path))
    return pa.PythonFile(path.open("rb"), mode="r")


def _remove(path: UPath) -> None:
    with suppress(FileNotFoundError):
        path.unlink()


def _element_row(element: Element) -> dict[str, Any]:
    return {
        "text": element.text,
        "kind": element.kind,
        "page": element.page,
        "bbox": list(element.bbox) if element.bbox else None,
        "section": list(element.section),
        "boxes": [[box.start, box.end, *box.bbox] for box in element.boxes],
    }


def element_from_row(row: dict[str, Any]) -> Element:
    return Element(
        text=row["text"],
        kind=row["kind"],
        page=row["page"],
        bbox=tuple(row["bbox"]) if row["bbox"] else None,
        section=tuple(row["section"]),
        boxes=tuple(TextBox(int(b[0]), int(b[1]), (b[2], b[3], b[4], b[5])) for b in row["boxes"]),
    )


def write_parsed_stage(
    root: UPath, redactor: Redactor | None, doc_id: str, parsed: ParsedDocument
) -> dict[str, Any]:
    """A parser worker's handler (``parsing.pool``): write the parsed stage file of ``doc_id``,
    for the version its task names, there in the worker, its sensitive values replaced first
    when ``redactor`` is given; return what it wrote (and how many values of each kind)."""
    stages = StageFiles(root)
    task = stages.read_task(doc_id)
    if task is None or task.version is None:
        raise ParseError("not planned: materialize file_manifest first")
    if redactor is None:
        return stages.write_parsed(doc_id, task.version, parsed, None)
    redacted: Counter[str] = Counter()
    written = stages.write_parsed(doc_id, task.version, redactor.document(parsed, redacted), None)
    return written | {"redacted": dict(sorted(redacted.items()))}
