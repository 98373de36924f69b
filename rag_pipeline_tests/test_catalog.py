from pathlib import Path

from rag_pipeline.catalog import Catalog, DocumentRecord


def _record(doc_id: str, state: str = "indexed", chunks: int = 2) -> DocumentRecord:
    return DocumentRecord(
        doc_id=doc_id,
        source="/docs",
        relative_path=doc_id,
        file_type="text",
        size=10,
        mtime_ns=1,
        sha256="abc",
        version="v1",
        state=state,  # type: ignore[arg-type]
        indexed_version="v1" if state == "indexed" else None,
        error=None if state == "indexed" else "broken",
        chunks=chunks,
    )


def test_documents_round_trip_and_are_queryable_with_sql(home: Path) -> None:
    catalog = Catalog(home)
    catalog.write_documents([_record("a.txt"), _record("b.txt", state="failed", chunks=0)])
    assert catalog.documents()["b.txt"].error == "broken"
    catalog.write_chunks(
        "a.txt",
        [
            {
                "chunk_id": "a.txt@v1#0",
                "doc_id": "a.txt",
                "version": "v1",
                "chunk_index": 0,
                "text": "hello",
                "text_hash": "h",
                "page_start": 1,
                "page_end": 1,
                "bboxes": [{"page": 1, "x0": 1.0, "y0": 2.0, "x1": 3.0, "y1": 4.0}],
                "section": ["Intro"],
                "token_count": 1,
                "lang": "en",
                "kinds": ["paragraph"],
            }
        ],
    )
    connection = catalog.connect()
    assert connection.sql(
        "select state, count(*) from documents group by state order by state"
    ).fetchall() == [
        ("failed", 1),
        ("indexed", 1),
    ]
    assert connection.sql("select text, bboxes[1].x0 from chunks").fetchall() == [("hello", 1.0)]


def test_an_empty_catalog_has_empty_tables(home: Path) -> None:
    connection = Catalog(home).connect()
    assert connection.execute("select count(*) from documents").fetchone() == (0,)
    assert connection.execute("select count(*) from chunks").fetchone() == (0,)
