"""Stage files on the local disk and on an fsspec file system (its in-memory one, whose move is
a copy and a delete, as an object store's): the same round trip, and a write cut short leaves
the previous file whole."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from upath import UPath

from rag_pipeline.manifest import SourceFile
from rag_pipeline.parsing import Element, ParsedDocument, ParsedImage, ParseError
from rag_pipeline.stages import DocumentTask, StageFiles

DOC = "docs/report.pdf"


@pytest.fixture(params=["local", "memory"])
def stages(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StageFiles]:
    if request.param == "local":
        yield StageFiles(UPath(tmp_path / "root"))
        return
    root = UPath(f"memory://stages-{uuid.uuid4().hex}")
    yield StageFiles(root)
    root.fs.rm(root.path, recursive=True)


def _parsed(text: str, elements: Iterator[Element] | None = None) -> ParsedDocument:
    picture = ParsedImage(b"\x89PNG picture", "ab" * 32, "0" * 16, 10, 10, page=1)
    return ParsedDocument(
        elements=elements if elements is not None else [Element(text, "text", page=1)],
        title="Report",
        page_count=1,
        images=[picture],
    )


def test_stage_files_round_trip_tasks_elements_and_pictures(stages: StageFiles) -> None:
    file = SourceFile(DOC, "/data", "report.pdf", "pdf", 10, 1, "sha", "v1")
    stages.write_task(DocumentTask(DOC, "index", file))
    assert stages.read_task(DOC) == DocumentTask(DOC, "index", file)
    written = stages.write_parsed(DOC, "v1", _parsed("Revenue rose."), None)
    assert written == {"pages": 1, "elements": 1, "pictures": 1, "title": "Report"}
    assert [element.text for element in stages.parsed_elements(DOC)] == ["Revenue rose."]
    meta = stages.parsed_meta(DOC)
    assert meta is not None and meta.version == "v1"
    [picture] = meta.meta["images"]
    assert (stages.root / picture["file"]).read_bytes() == b"\x89PNG picture"
    stages.keep_pictures(DOC, set())
    assert not (stages.root / picture["file"]).exists()
    stages.remove(DOC)
    assert stages.read_task(DOC) is None and stages.parsed_meta(DOC) is None


def test_a_stored_picture_is_found_by_the_name_its_chunk_records_and_nothing_outside_them(
    stages: StageFiles,
) -> None:
    stages.write_parsed(DOC, "v1", _parsed("Revenue rose."), None)
    meta = stages.parsed_meta(DOC)
    assert meta is not None
    [picture] = meta.meta["images"]
    found = stages.stored_picture(picture["file"])
    assert found is not None and found.read_bytes() == b"\x89PNG picture"
    escaping = f"{picture['file']}/../../../stages/{DOC}"
    for name in ("", "stages/docs/report.pdf", escaping, "/etc/passwd"):
        assert stages.stored_picture(name) is None, name


def test_a_parse_cut_short_leaves_the_previous_stage_file_whole(stages: StageFiles) -> None:
    stages.write_parsed(DOC, "v1", _parsed("Revenue rose."), None)

    def failing() -> Iterator[Element]:
        yield Element("Half of the new version", "text", page=1)
        raise ParseError("the file ended early")

    with pytest.raises(ParseError):
        stages.write_parsed(DOC, "v2", _parsed("", failing()), None)
    meta = stages.parsed_meta(DOC)
    assert meta is not None and meta.version == "v1"
    assert [element.text for element in stages.parsed_elements(DOC)] == ["Revenue rose."]
    [kept] = (stages.root / "stages" / "parsed_pages").iterdir()  # no half-written file beside
    assert kept.suffix == ".arrow"
