"""The page beyond localhost: files anyone may have written, served so that none can act as the
page; questions, result counts and uploads bounded; no server path shown. Over HTTP and in
headless Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx
import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import Settings, load_settings
from rag_pipeline_tests.conftest import ask_on_the_page, open_workspace
from rag_pipeline_tests.documents import text_picture, two_column_pdf
from rag_pipeline_tests.index_state import live_chunks
from serving.server import UPLOAD_HARD_CAP, BackgroundServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser


def hostile(text: str) -> str:
    """An HTML page that, rendered as a page of the server, alerts and calls the search API."""
    return f"""<!doctype html><html><head><title>{text}</title>
<script>alert('a script ran'); fetch('/api/search?q=x');</script></head>
<body><h1>{text}</h1><p>{text}</p>
<img src="nowhere.png" onerror="alert('a handler ran'); fetch('/api/search?q=y')">
</body></html>
"""


KINGFISHERS = "Kingfishers dive for fish from low branches over clear streams."
MAX_QUERY_CHARS = 200
MAX_K = 5
MAX_UPLOAD_MB = 0.05  # 52 KB


@pytest.fixture(scope="module")
def untrusted(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A watched folder of files as anyone may write them: scripts, and names that lie."""
    root = tmp_path_factory.mktemp("untrusted")
    source = root / "docs"
    source.mkdir()
    (source / "kingfishers.html").write_text(hostile(KINGFISHERS), encoding="utf-8")
    # HTML named as a PDF (indexed as the HTML it is) and as a picture (fails to index)
    (source / "notes.pdf").write_text(hostile("Herons nest in colonies."), encoding="utf-8")
    (source / "pretend.png").write_text(hostile("Storks nest on roofs."), encoding="utf-8")
    two_column_pdf(source / "résumé.pdf")
    text_picture(source / "notice.png", ["Library closed on Monday"])
    (source / "guide.md").write_text("# Owls\n\nOwls hunt at night.", encoding="utf-8")
    # pretend.png fails to index, and stays in the catalog: its file is not served at all
    assert main(["index", "--home", str(root / "home"), "--source", str(source)]) == 0
    limits = {"max_query_chars": MAX_QUERY_CHARS, "max_k": MAX_K, "max_upload_mb": MAX_UPLOAD_MB}
    return load_settings(root / "home", serving=limits)


@pytest.fixture(scope="module")
def served(untrusted: Settings) -> Iterator[str]:
    with BackgroundServer(untrusted) as server:
        yield server.url


def _original(served: str, doc_id: str) -> httpx.Response:
    return httpx.get(f"{served}/api/file", params={"doc_id": doc_id})


def _assert_guarded(response: httpx.Response) -> None:
    """Not sniffed, and no script, request or same-origin access if a browser renders it."""
    assert response.headers["x-content-type-options"] == "nosniff"
    policy = [part.strip() for part in response.headers["content-security-policy"].split(";")]
    assert "sandbox" in policy and "default-src 'none'" in policy
    assert not any("script" in part for part in policy)


@pytest.mark.parametrize(
    "doc_id",
    ["docs/kingfishers.html", "docs/notes.pdf", "docs/guide.md"],
)
def test_anything_but_a_true_pdf_or_picture_is_only_downloaded(served: str, doc_id: str) -> None:
    assert _original(served, "docs/pretend.png").status_code == 404  # its indexing failed
    response = _original(served, doc_id)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/octet-stream"
    name = doc_id.rpartition("/")[2]
    assert response.headers["content-disposition"] == f'attachment; filename="{name}"'
    _assert_guarded(response)


@pytest.mark.parametrize(
    ("doc_id", "media_type", "disposition"),
    [
        ("docs/résumé.pdf", "application/pdf", "inline; filename*=utf-8''r%C3%A9sum%C3%A9.pdf"),
        ("docs/notice.png", "image/png", 'inline; filename="notice.png"'),
    ],
)
def test_a_pdf_or_a_picture_is_shown_as_what_it_is(
    served: str, doc_id: str, media_type: str, disposition: str
) -> None:
    response = _original(served, doc_id)
    assert response.status_code == 200 and response.headers["content-type"] == media_type
    assert response.headers["content-disposition"] == disposition
    _assert_guarded(response)


def test_previews_search_results_and_refusals_are_guarded_too(
    served: str, untrusted: Settings
) -> None:
    chunk = live_chunks(untrusted.home, "docs/kingfishers.html")[0]["chunk_id"]
    shown = httpx.get(f"{served}/api/preview", params={"chunk_id": chunk})
    assert shown.status_code == 200 and shown.headers["content-type"].startswith("text/html")
    assert "Kingfishers dive" in shown.text and "<script" not in shown.text
    _assert_guarded(shown)
    _assert_guarded(httpx.get(f"{served}/api/search", params={"q": "kingfishers"}))
    refused = _original(served, "../../etc/passwd")
    assert refused.status_code == 404
    _assert_guarded(refused)


def test_a_symbolic_link_out_of_the_watched_folder_is_not_served(
    served: str, untrusted: Settings
) -> None:
    path = untrusted.watched_folders[0] / "guide.md"
    secret = untrusted.home / "secret.md"
    secret.write_text("the server's secret", encoding="utf-8")
    kept = path.with_suffix(".kept")
    os.rename(path, kept)
    try:
        path.symlink_to(secret)
        response = _original(served, "docs/guide.md")
        assert response.status_code == 404 and b"secret" not in response.content
    finally:
        path.unlink()
        os.rename(kept, path)


def test_in_a_browser_an_html_original_runs_nothing(
    served: str, untrusted: Settings, browser: Browser
) -> None:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import Page, Request

    dialogs: list[str] = []
    searches: list[str] = []
    downloads: list[str] = []

    def watch(page: Page) -> None:
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.on("download", lambda download: downloads.append(download.suggested_filename))

    def record(request: Request) -> None:
        if "/api/search" in request.url:
            searches.append(request.url)

    context = browser.new_context(accept_downloads=True)
    context.on("page", watch)
    context.on("request", record)
    page = context.new_page()

    # The control: served as a page of the server, the file runs, and is seen running.
    page.route(
        f"{served}/as-a-page",
        lambda route: route.fulfill(body=hostile(KINGFISHERS), content_type="text/html"),
    )
    with page.expect_request(lambda request: request.url.endswith("/api/search?q=y")):
        page.goto(f"{served}/as-a-page")  # the script's request, then the handler's
    assert len(dialogs) == 2 and len(searches) == 2
    dialogs.clear()
    searches.clear()

    # The original, opened from the link beside a cited passage (a new tab)…
    page.goto(served + "/")
    open_workspace(page)
    ask_on_the_page(page, "Where do kingfishers dive for fish?")
    link = page.locator("#evidence a[href*='kingfishers.html']").first
    link.wait_for(timeout=60_000)
    expected = f"/api/file/kingfishers.html?doc_id={quote('docs/kingfishers.html', safe='')}"
    assert (link.get_attribute("href") or "").startswith(expected)
    with context.expect_page() as opened:
        link.click()
    if not opened.value.is_closed():  # the tab closes once its download starts
        opened.value.wait_for_event("close", timeout=10_000)
    # … and navigated to, as a link on another site could; the HTML named .pdf too.
    for doc_id in ("docs/kingfishers.html", "docs/notes.pdf"):
        with page.expect_download(), pytest.raises(PlaywrightError, match="Download"):
            page.goto(f"{served}/api/file?doc_id={quote(doc_id)}")
    # The passage's own preview shows its text, escaped.
    chunk = live_chunks(untrusted.home, "docs/kingfishers.html")[0]["chunk_id"]
    page.goto(f"{served}/api/preview?chunk_id={quote(chunk, safe='')}")
    assert KINGFISHERS in page.locator("body").inner_text()
    page.wait_for_timeout(1000)  # time for anything that would run to run
    context.close()
    assert downloads == ["kingfishers.html", "kingfishers.html", "notes.pdf"]
    assert dialogs == [] and searches == []


def test_the_search_api_refuses_too_long_queries_and_too_many_results(served: str) -> None:
    long = httpx.get(f"{served}/api/search", params={"q": "owl " * MAX_QUERY_CHARS})
    assert long.status_code == 400 and f"at most {MAX_QUERY_CHARS}" in long.json()["detail"]
    many = httpx.get(f"{served}/api/search", params={"q": "owls", "k": MAX_K + 1})
    assert many.status_code == 400 and f"at most {MAX_K}" in many.json()["detail"]
    assert httpx.get(f"{served}/api/search", params={"q": "owls", "k": MAX_K}).status_code == 200
    # without k, as many as the page answers from (8), within the bound
    assert httpx.get(f"{served}/api/search", params={"q": "owls"}).status_code == 200


def test_the_page_refuses_a_too_long_question_clearly(served: str) -> None:
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    client = Client(served + "/", verbose=False)
    try:
        with pytest.raises(AppError, match=f"at most {MAX_QUERY_CHARS} are accepted"):
            client.predict(
                "owl " * MAX_QUERY_CHARS, "default", [], [], [], [], "", "", api_name="/ask"
            )
    finally:
        client.close()


def test_an_upload_over_the_hard_cap_is_refused_by_the_upload_route(served: str) -> None:
    """Over serving.max_upload_mb a file is refused on its own by the workspace (see
    test_uploads); over the hard cap Gradio's upload route refuses it before it reaches disk."""
    cap = round(MAX_UPLOAD_MB * UPLOAD_HARD_CAP * 1024 * 1024)
    over_the_limit = httpx.post(
        f"{served}/gradio_api/upload", files={"files": ("a.png", b"x" * (cap // 2))}
    )
    assert over_the_limit.status_code == 200
    over_the_cap = httpx.post(
        f"{served}/gradio_api/upload", files={"files": ("b.png", b"x" * (cap + 1))}
    )
    assert over_the_cap.status_code == 413
    assert f"maximum allowed size of {cap} bytes" in over_the_cap.text


def test_search_results_show_no_server_path(served: str, untrusted: Settings) -> None:
    documents = httpx.get(f"{served}/api/search", params={"q": "owls hunt at night"}).json()
    guide = next(document for document in documents if document["id"] == "docs/guide.md")
    assert guide["url"] == "/api/file?doc_id=docs/guide.md&workspace=default"
    assert guide["extra"]["source"]["file_path"] == "guide.md"
    home = str(untrusted.home.parent)
    assert home not in httpx.get(f"{served}/api/search", params={"q": "owls"}).text
    assert httpx.get(served + guide["url"]).status_code == 200
