import uuid

import pytest

from rag_pipeline import ids


def test_point_ids_are_deterministic_uuids_of_the_chunk_id() -> None:
    chunk = ids.chunk_id("docs/a.pdf", "v1", 3)
    assert ids.point_id(chunk) == ids.point_id(chunk)
    assert ids.point_id(chunk) != ids.point_id(ids.chunk_id("docs/a.pdf", "v2", 3))


@pytest.mark.parametrize(
    "chunk", [ids.chunk_id("docs/a.pdf", "v1", 3), "中文/报告.pdf@ab12#0", "", "x" * 500]
)
def test_a_point_id_is_the_chunk_ids_uuid5_in_the_point_namespace(chunk: str) -> None:
    """Every stored point is named so: the ids a census derives must be exactly these."""
    assert ids.point_id(chunk) == str(uuid.uuid5(ids.POINT_NAMESPACE, chunk))


def test_document_ids_escape_control_characters_in_file_names() -> None:
    assert ids.document_id("docs", "odd\nname.txt") == "docs/odd\\x0aname.txt"


def test_version_changes_with_content_or_pipeline() -> None:
    base = ids.document_version("abc", "p1")
    assert base == ids.document_version("abc", "p1")
    assert base != ids.document_version("abd", "p1")
    assert base != ids.document_version("abc", "p2")


def test_a_chunk_id_parses_back_even_when_the_path_holds_at_signs() -> None:
    chunk = ids.chunk_id("docs/me@home/notes#1.md", "v9", 12)
    assert ids.parse_chunk_id(chunk) == ("docs/me@home/notes#1.md", "v9", 12)


def test_a_documents_bucket_is_stable_and_never_a_documents_key() -> None:
    doc_ids = [ids.document_id("docs", f"{number}.md") for number in range(200)]
    keys = [ids.partition_key("acme", doc_id, 16) for doc_id in doc_ids]
    assert keys == [ids.partition_key("acme", doc_id, 16) for doc_id in doc_ids]
    assert len(set(keys)) == 16  # 200 documents reach every bucket
    for doc_id, key in zip(doc_ids, keys, strict=True):
        workspace, name = ids.partition_document(key)
        assert workspace == "acme" and ids.is_bucket(name)
        assert not ids.is_bucket(ids.partition_document(ids.partition_key("acme", doc_id))[1])
    assert not ids.is_bucket("bucket-00001/report.pdf")  # a folder named like a bucket
