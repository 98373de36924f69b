"""Each asset's per-document output, kept under ``<home>/stages/<asset>/`` between assets.

One file per document, replaced atomically, so any asset can run alone (from the Dagster UI) on
what the previous one left, and a crashed run leaves nothing half-written. Each file records the
document version it was made for; a later stage refuses a file made for another version. The
files are Arrow IPC: internal, read several times per run, and several times cheaper to write
and read than Parquet for the small tables of one document.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.feather as feather

from rag_pipeline import ids
from rag_pipeline.catalog import CHUNK_SCHEMA
from rag_pipeline.files import write_atomically
from rag_pipeline.manifest import SourceFile
from rag_pipeline.parsing import Element, ParsedDocument, TextBox

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
_TABLE_SUFFIX = ".arrow"


@dataclass(frozen=True, slots=True)
class DocumentTask:
    """What a run does with one document (the output of ``file_manifest``)."""

    doc_id: str
    action: Action
    file: SourceFile | None

    @property
    def version(self) -> str | None:
        return self.file.version if self.file else None


@dataclass(slots=True)
class StageResult:
    """A parsed or chunked document as a stage file holds it: rows, or the reason there are none."""

    version: str
    rows: list[dict[str, Any]]
    meta: dict[str, Any]

    @property
    def error(self) -> str | None:
        return self.meta.get("error")


class StageFiles:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.folder = home / "stages"

    def pictures_folder(self, doc_id: str) -> Path:
        """Where a document's pictures are kept (PNG by content hash), for embedding and display.

        Outside ``stages/``: the chat page shows them as long as the document is indexed.
        """
        return self.home / "images" / ids.storage_key(doc_id)

    def _write_pictures(self, doc_id: str, parsed: ParsedDocument) -> list[dict[str, Any]]:
        folder = self.pictures_folder(doc_id)
        records = []
        for picture in parsed.images:
            path = folder / f"{picture.sha256}.png"
            if not path.exists():
                write_atomically(
                    path, lambda temporary, data=picture.data: Path(temporary).write_bytes(data)
                )
            records.append(
                {
                    "sha256": picture.sha256,
                    "phash": picture.phash,
                    "width": picture.width,
                    "height": picture.height,
                    "page": picture.page,
                    "bbox": list(picture.bbox) if picture.bbox else None,
                    "file": path.relative_to(self.home).as_posix(),
                }
            )
        return records

    def keep_pictures(self, doc_id: str, files: set[str]) -> None:
        """Delete the document's picture files that ``files`` (relative to the home) omits."""
        folder = self.pictures_folder(doc_id)
        if folder.is_dir():
            for path in folder.iterdir():
                if path.relative_to(self.home).as_posix() not in files:
                    path.unlink(missing_ok=True)

    def _path(self, stage: str, doc_id: str, suffix: str) -> Path:
        return self.folder / stage / f"{ids.storage_key(doc_id)}{suffix}"

    def write_task(self, task: DocumentTask) -> None:
        path = self._path("file_manifest", task.doc_id, ".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "doc_id": task.doc_id,
            "action": task.action,
            "file": asdict(task.file) if task.file else None,
        }
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(payload, ensure_ascii=False))
        temporary.replace(path)

    def read_task(self, doc_id: str) -> DocumentTask | None:
        path = self._path("file_manifest", doc_id, ".json")
        if not path.exists():
            return None
        payload = json.loads(path.read_text())
        file = SourceFile(**payload["file"]) if payload["file"] else None
        return DocumentTask(doc_id=payload["doc_id"], action=payload["action"], file=file)

    def write_parsed(
        self, doc_id: str, version: str, parsed: ParsedDocument | None, error: str | None
    ) -> None:
        rows = [_element_row(element) for element in parsed.elements] if parsed else []
        meta = {"version": version, "error": error}
        if parsed:
            meta |= {
                "title": parsed.title,
                "pages": parsed.page_count,
                "page_sizes": parsed.page_sizes,
                "images": self._write_pictures(doc_id, parsed),
            }
        self._write(
            "parsed_pages", doc_id, pa.Table.from_pylist(rows, schema=_ELEMENT_SCHEMA), meta
        )

    def read_parsed(self, doc_id: str) -> StageResult | None:
        return self._read("parsed_pages", doc_id)

    def write_chunks(
        self, doc_id: str, version: str, rows: list[dict[str, Any]], meta: dict[str, Any]
    ) -> None:
        self._write(
            "chunks",
            doc_id,
            pa.Table.from_pylist(rows, schema=CHUNK_SCHEMA),
            {"version": version, **meta},
        )

    def read_chunks(self, doc_id: str) -> StageResult | None:
        return self._read("chunks", doc_id)

    def remove(self, doc_id: str) -> None:
        for stage, suffix in (
            ("file_manifest", ".json"),
            ("parsed_pages", _TABLE_SUFFIX),
            ("chunks", _TABLE_SUFFIX),
        ):
            self._path(stage, doc_id, suffix).unlink(missing_ok=True)
        shutil.rmtree(self.pictures_folder(doc_id), ignore_errors=True)

    def _write(self, stage: str, doc_id: str, table: pa.Table, meta: dict[str, Any]) -> None:
        table = table.replace_schema_metadata({_META_KEY: json.dumps(meta, ensure_ascii=False)})
        write_atomically(
            self._path(stage, doc_id, _TABLE_SUFFIX),
            lambda temporary: feather.write_feather(table, temporary, compression="uncompressed"),
        )

    def _read(self, stage: str, doc_id: str) -> StageResult | None:
        path = self._path(stage, doc_id, _TABLE_SUFFIX)
        if not path.exists():
            return None
        table = feather.read_table(path, memory_map=False)
        meta = json.loads(table.schema.metadata[_META_KEY])
        return StageResult(version=meta["version"], rows=table.to_pylist(), meta=meta)


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
