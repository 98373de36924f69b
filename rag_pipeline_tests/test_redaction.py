"""Redaction: sensitive values replaced between parsing and chunking, so that nothing after it
(chunks, vectors, keyword index, catalog, answers, previews) ever holds them."""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pymupdf
import pytest
from dagster import AssetKey, AssetRecordsFilter
from PIL import Image
from pydantic import ValidationError

from rag_pipeline.config import RedactionSettings, Settings, load_settings
from rag_pipeline.embedding import SparseEncoder
from rag_pipeline.manifest import diff_manifest, pipeline_version, scan_sources
from rag_pipeline.parsing import Element, TextBox
from rag_pipeline.redaction import Redactor, detectors
from rag_pipeline.store import open_vector_store
from rag_pipeline_tests.conftest import Cli, dagster_view
from rag_pipeline_tests.documents import docx_file, text_pdf
from rag_pipeline_tests.index_state import live_chunks, live_name, live_records, record_of
from serving.preview import render_page
from serving.server import BackgroundServer

# kind: (valid values, near-misses that must stay)
VALUES = {
    "email": (["wang.li@zyxqvw.org"], ["wang.li@localhost"]),
    "phone": (
        [
            "+44 20 7946 0958",
            "0086 10 6552 9988",
            "+86 10 6552 9988",
            "138 0013 8000",
            "010-65529988",
            "010 6552 9988",
            "(021) 6432 1234",
            "0755 8888 6666",
        ],
        [
            "+44 12",
            "12800138000",
            "+86 12 3456 7890",  # neither a mobile nor an area code
            "010 6552 998",  # Beijing's numbers have eight digits
            "(011) 6432 1234",  # no such area code
            "010 0552 9988",  # no local number starts with 0
            "021 6432 1234 5678",  # a run of figures longer than any number
            "0106 55 29 988",  # the digits of one, grouped as no number is
            "1 234 567",  # an amount
            "2024 03 15",  # a date
        ],
    ),
    "cn_id": (["11010519491231002X"], ["110105194912310021"]),
    "card": (["4111 1111 1111 1111"], ["4111 1111 1111 1112", "2020 2019 2018 2017"]),
    "iban": (["GB82 WEST 1234 5698 7654 32"], ["GB82 WEST 1234 5698 7654 33"]),
    "ip": (["192.168.10.77", "2001:db8::8a2e:370:7334"], ["192.168.300.1", "2001:db8::8a2e::7334"]),
}
VALID = [value for valid, _ in VALUES.values() for value in valid]
NEAR_MISSES = [value for _, near in VALUES.values() for value in near]


@pytest.mark.parametrize("kind", VALUES)
def test_each_detector_replaces_real_values_and_keeps_near_misses(kind: str) -> None:
    redactor = Redactor(RedactionSettings(enabled=True))
    valid, near_misses = VALUES[kind]
    for value in valid:
        counts: Counter[str] = Counter()
        assert redactor.text(f"Contact: {value}, today.", counts) == (
            f"Contact: [{kind.upper()}], today."
        )
        assert counts == {kind: 1}
    for value in near_misses:
        assert redactor.text(f"Contact: {value}, today.") == f"Contact: {value}, today."


# Values a line end splits: a text file's line break, or the space a PDF's lines are joined with.
WRAPPED = {
    "email": [
        "wang.li@\nzyxqvw.org",
        "wang.li@ zyxqvw.org",
        "wang.li@zyxqvw.\norg",
        "wang.li@zyxqvw\n.org",
        "wang.li@mail.\r\nzyxqvw.org",
    ],
    "card": [
        "4111 1111\n1111 1111",
        "4111-1111-\n1111-1111",
        "4111-1111- 1111-1111",
        "3782 822463\n10005",
    ],
    "iban": ["GB82 WEST 1234\n5698 7654 32", "GB82 WEST\n1234 5698 7654 32"],
}


@pytest.mark.parametrize(
    ("kind", "value"), [(kind, value) for kind, values in WRAPPED.items() for value in values]
)
def test_a_value_split_by_a_line_end_is_replaced_whole(kind: str, value: str) -> None:
    redactor = Redactor(RedactionSettings(enabled=True))
    counts: Counter[str] = Counter()
    assert redactor.text(f"Contact: {value}, today.", counts) == (
        f"Contact: [{kind.upper()}], today."
    )
    assert counts == {kind: 1}


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        # A sentence ending on an address-like word: the next one starts with a capital.
        ("Write to wang.li@localhost. Then we met.", "Write to wang.li@localhost. Then we met."),
        ("Write to wang.li@\nlocalhost today.", "Write to wang.li@\nlocalhost today."),
        # Complete before the line end: the next line is not taken in.
        ("Write to wang.li@zyxqvw.org.\nthen we met.", "Write to [EMAIL].\nthen we met."),
        ("Keep 4111 1111\n1111 1112.", "Keep 4111 1111\n1111 1112."),  # Luhn-invalid joined
        ("Years 2020 2019\n2018 2017.", "Years 2020 2019\n2018 2017."),
        ("A column 4111\n1111\n1111\n1111.", "A column 4111\n1111\n1111\n1111."),
        # The next line's figures make the joined run invalid; the value before stays found.
        ("Card 4111 1111 1111 1111\n20 apples.", "Card [CARD]\n20 apples."),
        ("IBAN BE68 5390 0754 7034\nTOTAL 12.", "IBAN [IBAN]\nTOTAL 12."),
        (
            "BE68 5390 0754 7034\nGB82 WEST 1234 5698 7654 32 paid.",
            "[IBAN]\n[IBAN] paid.",
        ),
    ],
)
def test_a_line_end_joins_no_prose_or_figures_into_a_value(text: str, redacted: str) -> None:
    assert Redactor(RedactionSettings(enabled=True)).text(text) == redacted


def test_only_the_detectors_chosen_run_and_custom_patterns_mask_under_their_name() -> None:
    settings = RedactionSettings(
        enabled=True, detectors=["email"], patterns={"salary": r"\$\d{2,3},\d{3}"}
    )
    redactor = Redactor(settings)
    text = "Ann (ann@zyxqvw.org, 4111 1111 1111 1111) earns $120,000."
    assert redactor.text(text) == "Ann ([EMAIL], 4111 1111 1111 1111) earns [SALARY]."
    with pytest.raises(ValidationError, match="redaction pattern 'bad'"):
        RedactionSettings(patterns={"bad": "(unclosed"})


def test_hashed_masks_are_equal_for_equal_values_and_keyed_by_the_installation(
    tmp_path: Path,
) -> None:
    first = Redactor.of(load_settings(tmp_path / "a", redaction={"enabled": True, "mode": "hash"}))
    other = Redactor.of(load_settings(tmp_path / "b", redaction={"enabled": True, "mode": "hash"}))
    assert first is not None and other is not None
    text = "ann@zyxqvw.org wrote to bob@zyxqvw.org, then ann@zyxqvw.org again"
    masked = first.text(text).split()
    assert masked[0] == masked[5] != masked[3].rstrip(",")
    assert masked[0].startswith("[EMAIL:") and "ann" not in masked[0]
    assert other.text("ann@zyxqvw.org") != masked[0]  # another installation, another key
    assert (tmp_path / "a" / "redaction.key").stat().st_mode & 0o077 == 0


def test_hashed_masks_ignore_line_ends_and_group_separators(tmp_path: Path) -> None:
    redactor = Redactor.of(load_settings(tmp_path, redaction={"enabled": True, "mode": "hash"}))
    assert redactor is not None
    for kind, printed in {
        "email": ["wang.li@zyxqvw.org", "wang.li@\nzyxqvw.org", "wang.li@zyxqvw.\norg"],
        "card": ["4111 1111 1111 1111", "4111-1111-\n1111-1111", "4111111111111111"],
        "iban": ["GB82 WEST 1234 5698 7654 32", "GB82WEST12345698765432"],
    }.items():
        masks = {redactor.text(f"Paid by {value}.") for value in printed}
        assert len(masks) == 1 and f"[{kind.upper()}:" in masks.pop(), kind
    assert redactor.mask("card", "4111 1111 1111 1111") != redactor.mask(
        "card", "5555 5555 5555 4444"
    )


def test_boxes_follow_the_text_around_a_replaced_value() -> None:
    redactor = Redactor(RedactionSettings(enabled=True))
    line_one, line_two = "Mail ann@zyxqvw.org now", "Call +44 20 7946 0958 later"
    element = Element(
        f"{line_one}\n{line_two}",
        "paragraph",
        page=1,
        section=("Contacts of ann@zyxqvw.org",),
        boxes=(
            TextBox(0, len(line_one), (0, 0, 100, 10)),
            TextBox(len(line_one) + 1, len(line_one) + 1 + len(line_two), (0, 12, 100, 22)),
        ),
    )
    redacted = redactor.element(element, Counter())
    assert redacted.text == "Mail [EMAIL] now\nCall [PHONE] later"
    assert redacted.section == ("Contacts of [EMAIL]",)
    lines = [redacted.text[box.start : box.end] for box in redacted.boxes]
    assert lines == ["Mail [EMAIL] now", "Call [PHONE] later"]


def test_turning_redaction_on_or_changing_it_changes_every_documents_version(
    tmp_path: Path,
) -> None:
    off = load_settings(tmp_path)
    on = load_settings(tmp_path, redaction={"enabled": True})
    hashed = load_settings(tmp_path, redaction={"enabled": True, "mode": "hash"})
    versions = {pipeline_version(s, "markdown") for s in (off, on, hashed)}
    assert len(versions) == 3
    served = load_settings(tmp_path, redaction={"enabled": True, "serve_originals": True})
    assert pipeline_version(served, "markdown") == pipeline_version(on, "markdown")


def test_a_new_detector_version_reindexes_redacted_documents_and_no_others(
    home: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (source / "mail.md").write_text("# Mail\n\nWrite to ann@zyxqvw.org.\n", "utf-8")
    redacted = load_settings(home, sources=[source], redaction={"enabled": True})
    plain = load_settings(home, sources=[source])
    indexed = {
        "redacted": {file.doc_id: record_of(file) for file in scan_sources(redacted, {})[0]},
        "plain": {file.doc_id: record_of(file) for file in scan_sources(plain, {})[0]},
    }
    monkeypatch.setattr(detectors, "DETECTOR_VERSION", detectors.DETECTOR_VERSION + 1)
    diffs = {
        name: diff_manifest(*scan_sources(settings, indexed[name]), indexed[name], {})
        for name, settings in (("redacted", redacted), ("plain", plain))
    }
    assert (diffs["redacted"].changed, diffs["redacted"].unchanged) == (["docs/mail.md"], [])
    assert (diffs["plain"].changed, diffs["plain"].unchanged) == ([], ["docs/mail.md"])


def _paragraphs() -> list[str]:
    return [
        f"Record {number}: the customer file lists {value} for the account."
        for number, value in enumerate(VALID + NEAR_MISSES, 1)
    ]


@pytest.fixture(scope="module")
def redacted_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A home with redaction on, holding a PDF, a DOCX and a Markdown file full of values."""
    root = tmp_path_factory.mktemp("redacted")
    source, home = root / "docs", root / "home"
    source.mkdir()
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"redaction": {"enabled": True}}), "utf-8")
    text_pdf(source / "customers.pdf", _paragraphs())
    docx_file(source / "customers.docx", {"Customers": _paragraphs()})
    (source / "customers.md").write_text(
        "# Customers\n\n" + "\n\n".join(_paragraphs()) + "\n", "utf-8"
    )
    from rag_pipeline.cli import main

    assert main(["index", "--home", str(home), "--source", str(source)]) == 0
    yield home


DOCUMENTS = ["docs/customers.pdf", "docs/customers.docx", "docs/customers.md"]


def test_no_value_reaches_the_catalog_and_near_misses_stay(redacted_home: Path) -> None:
    assert {doc: live_records(redacted_home)[doc].state for doc in DOCUMENTS} == dict.fromkeys(
        DOCUMENTS, "indexed"
    )
    for doc_id in DOCUMENTS:
        text = " ".join(row["text"] for row in live_chunks(redacted_home, doc_id))
        flat = " ".join(text.split())  # a PDF may wrap a line inside a value
        assert not [value for value in VALID if value in flat], doc_id
        assert all(value in flat for value in NEAR_MISSES), doc_id
        assert flat.count("[EMAIL]") == len(VALUES["email"][0]), doc_id
        assert flat.count("[PHONE]") == len(VALUES["phone"][0]), doc_id


def test_the_materialization_counts_what_was_redacted_never_the_values(
    redacted_home: Path,
) -> None:
    with dagster_view(redacted_home) as instance:
        [record] = instance.fetch_materializations(
            AssetRecordsFilter(
                asset_key=AssetKey("parsed_pages"), asset_partitions=["docs/customers.md"]
            ),
            limit=1,
        ).records
    metadata = record.asset_materialization.metadata
    counts = {kind: len(valid) for kind, (valid, _) in VALUES.items()}
    assert metadata["redacted"].value == counts
    assert not [value for value in VALID if value in str(metadata)]


def test_the_keyword_index_and_every_file_of_the_home_lack_the_values(
    redacted_home: Path,
) -> None:
    settings = load_settings(redacted_home)
    sparse = SparseEncoder(settings.embedding, settings.root).embed_query("zyxqvw")
    assert len(sparse.indices) == 1
    store = open_vector_store(settings, live_name(redacted_home), wait_seconds=60)
    try:
        found = store.nearest(
            _unit_vector(store.dense_size() or 0),
            (sparse.indices, sparse.values),
            limit=100,  # every point of this small index
        )
    finally:
        store.close()
    assert found.sparse == []  # no point holds the e-mail's domain as a keyword
    payloads = " ".join(" ".join(hit.payload["text"].split()) for hit in found.dense)
    assert "[EMAIL]" in payloads and not [value for value in VALID if value in payloads]
    assert _files_holding(redacted_home, [*VALID, "zyxqvw"]) == []


def _files_holding(home: Path, needles: list[str]) -> list[Path]:
    """The files of ``home`` (but its settings) holding any of ``needles``."""
    return [
        path
        for path in home.rglob("*")
        if path.is_file()
        and path.name != "settings.json"
        and any(needle.encode() in path.read_bytes() for needle in needles)
    ]


def test_hash_mode_gives_equal_values_equal_masks_through_a_whole_index(
    cli: Cli, home: Path, source: Path
) -> None:
    home.mkdir()
    (home / "settings.json").write_text(
        json.dumps({"redaction": {"enabled": True, "mode": "hash"}}), "utf-8"
    )
    (source / "mail.md").write_text(
        "# Mail\n\nAnn writes from ann@zyxqvw.org.\n\nBob writes from bob@zyxqvw.org.\n\n"
        "Ann answers from ann@zyxqvw.org again.\n",
        "utf-8",
    )
    assert cli("index", "--home", home, "--source", source).code == 0
    text = " ".join(row["text"] for row in live_chunks(home, "docs/mail.md"))
    ann, bob, ann_again = re.findall(r"\[EMAIL:[0-9a-f]{8}\]", text)
    assert ann == ann_again != bob
    redactor = Redactor.of(load_settings(home))
    assert redactor is not None and ann == redactor.mask("email", "ann@zyxqvw.org")
    assert _files_holding(home, ["ann@", "bob@", "zyxqvw"]) == []


def _unit_vector(size: int) -> Any:
    import numpy as np

    vector = np.ones(size, dtype=np.float32)
    return vector / np.linalg.norm(vector)


@pytest.fixture(scope="module")
def redacted_server(redacted_home: Path) -> Iterator[str]:
    with BackgroundServer(load_settings(redacted_home)) as server:
        yield server.url


def test_search_answers_and_previews_hide_the_values_and_originals_are_not_served(
    redacted_server: str, redacted_home: Path
) -> None:
    found = httpx.get(
        f"{redacted_server}/api/search",
        params={"q": "customer file account", "k": 20},
        timeout=60,  # the server's first search loads the models
    )
    assert found.status_code == 200 and "[EMAIL]" in found.text
    assert not [value for value in VALID if value in found.text]
    original = httpx.get(
        f"{redacted_server}/api/file", params={"doc_id": "docs/customers.pdf"}, timeout=60
    )
    assert original.status_code == 403 and "redaction" in original.text

    rows = live_chunks(redacted_home, "docs/customers.pdf")
    email_chunk = next(row for row in rows if "[EMAIL]" in row["text"])
    preview = httpx.get(
        f"{redacted_server}/api/preview", params={"chunk_id": email_chunk["chunk_id"]}, timeout=60
    )
    assert preview.status_code == 200 and preview.headers["content-type"] == "image/png"
    shown = Image.open(io.BytesIO(preview.content)).convert("L")
    with pymupdf.open(_source(redacted_home) / "customers.pdf") as document:
        page = document[email_chunk["page_start"] - 1]
        [where] = page.search_for("wang.li@zyxqvw.org")
        [kept] = page.search_for("wang.li@localhost")
    assert _mean_inside(shown, where) < 70  # blacked out (under the passage's amber tint)
    assert _mean_inside(shown, kept) > 120  # text on white paper


def _source(home: Path) -> Path:
    return Path(load_settings(home).sources[0])


def _mean_inside(picture: Image.Image, rect: pymupdf.Rect, dpi: int = 110) -> float:
    scale = dpi / 72
    box = (rect.x0 * scale, rect.y0 * scale, rect.x1 * scale, rect.y1 * scale)
    pixels = list(picture.crop(tuple(round(v) for v in box)).getdata())
    return sum(pixels) / len(pixels)


@pytest.mark.parametrize(
    ("line_one", "line_two", "parts", "kept_line", "kept"),
    [
        (
            "Pay with the card 4111 1111",
            "1111 1111 today.",
            ("4111 1111", "1111 1111"),
            "Keep the order 4111 1111 1111 1112.",
            "4111 1111 1111 1112",
        ),
        (
            "Write to wang.li@",
            "zyxqvw.org today.",
            ("wang.li@", "zyxqvw.org"),
            "Keep wang.li@localhost. Then we met.",
            "wang.li@localhost",
        ),
        (
            "Write to wang.li@zyxqvw.",
            "org today.",
            ("wang.li@zyxqvw.", "org"),
            "Keep wang.li@localhost. Then we met.",
            "wang.li@localhost",
        ),
    ],
    ids=["card", "email-at", "email-dot"],
)
def test_a_value_the_pdf_wraps_over_two_lines_is_blacked_out_on_both(
    tmp_path: Path,
    line_one: str,
    line_two: str,
    parts: tuple[str, str],
    kept_line: str,
    kept: str,
) -> None:
    with pymupdf.open() as document:
        page = document.new_page(width=595, height=842)
        page.insert_text((72, 100), line_one, fontsize=10)
        page.insert_text((72, 112.5), line_two, fontsize=10)
        page.insert_text((72, 150), kept_line, fontsize=10)
        document.save(tmp_path / "wrapped.pdf")
        [first] = page.search_for(parts[0], clip=pymupdf.Rect(0, 90, 595, 100))
        [second] = page.search_for(parts[1], clip=pymupdf.Rect(0, 105, 595, 112))
        [near_miss] = page.search_for(kept)
    png = render_page(
        tmp_path / "wrapped.pdf", 1, [], dpi=110, redactor=Redactor(RedactionSettings(enabled=True))
    )
    shown = Image.open(io.BytesIO(png)).convert("L")
    assert _mean_inside(shown, first) < 20 and _mean_inside(shown, second) < 20
    assert _mean_inside(shown, near_miss) > 120


def test_settings_turn_redaction_off_by_default(tmp_path: Path) -> None:
    settings: Settings = load_settings(tmp_path)
    assert settings.redaction.enabled is False and Redactor.of(settings) is None
