"""Sign-in that resists guessing, and the headers and origins every response and write obey,
on the real server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import load_settings, stored_settings, write_stored_settings
from serving.access import Throttle, add_user
from serving.server import BackgroundServer

DELAY = 0.5  # the first wait after the free tries, short for the test


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A server with users dave and erin (passwords <name>-password): (url, dave's token)."""
    root = tmp_path_factory.mktemp("sign-in")
    home, docs = root / "home", root / "docs"
    docs.mkdir()
    (docs / "kiwi.md").write_text("# Kiwi\n\nThe kiwi is a flightless bird.\n", encoding="utf-8")
    assert main(["index", "--home", str(home), "--source", str(docs)]) == 0
    token = add_user(home, "dave", "dave-password", ["*"])
    add_user(home, "erin", "erin-password", ["*"])
    stored = stored_settings(home)
    stored["access"]["sign_in_delay_seconds"] = DELAY
    write_stored_settings(home, stored)
    with BackgroundServer(load_settings(home)) as server:
        yield server.url, token


def test_a_thousand_wrong_passwords_still_wait_the_cap() -> None:
    throttle = Throttle(free=5, delay=1.0, cap=300.0, clock=lambda: 0.0)
    waits = [throttle.failed(["user:dave"]) for _ in range(2000)]
    assert waits[-1] == 300.0 and throttle.wait(["user:dave"]) == 300.0


def test_wrong_passwords_are_free_five_times_then_wait_a_doubling_delay() -> None:
    now = [0.0]
    throttle = Throttle(free=5, delay=1.0, cap=4.0, clock=lambda: now[0])
    keys = ["user:dave", "client:10.0.0.1"]
    assert [throttle.failed(keys) for _ in range(5)] == [0.0] * 5
    assert throttle.wait(keys) == 0.0
    assert [throttle.failed(keys) for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]  # capped
    assert throttle.wait(["client:10.0.0.1"]) == 4.0
    assert throttle.wait(["user:erin", "client:10.0.0.2"]) == 0.0  # other keys are free
    now[0] = 4.0
    assert throttle.wait(keys) == 0.0
    throttle.succeeded(keys)
    assert throttle.failed(keys) == 0.0  # a right password starts the count again


def test_a_wrong_password_is_delayed_after_five_and_the_right_one_waits_too(
    served: tuple[str, str],
) -> None:
    url, _ = served
    wrong = [httpx.get(url + "/", auth=("dave", f"guess-{n}"), timeout=30) for n in range(6)]
    assert [response.status_code for response in wrong] == [401] * 6
    throttled = httpx.get(url + "/", auth=("dave", "dave-password"), timeout=30)
    assert throttled.status_code == 429 and "retry-after" in throttled.headers
    # Once the wait is over, the right password signs in.
    deadline = time.monotonic() + 60
    while (
        signed := httpx.get(url + "/", auth=("dave", "dave-password"), timeout=30)
    ).status_code == 429:
        assert time.monotonic() < deadline
        time.sleep(float(signed.headers["retry-after"]))
    assert signed.status_code == 200


def test_a_token_request_is_answered_promptly_while_every_guess_is_hashed(
    tmp_path: Path,
) -> None:
    home, docs = tmp_path / "home", tmp_path / "docs"
    docs.mkdir()
    (docs / "kiwi.md").write_text("# Kiwi\n\nThe kiwi is a flightless bird.\n", encoding="utf-8")
    assert main(["index", "--home", str(home), "--source", str(docs)]) == 0
    token = add_user(home, "frank", "frank-password", ["*"])
    stored = stored_settings(home)
    stored["access"]["free_sign_in_tries"] = 10**6  # as guesses from many addresses would be
    write_stored_settings(home, stored)
    search = {"params": {"q": "kiwi"}, "headers": {"Authorization": f"Bearer {token}"}}
    with BackgroundServer(load_settings(home)) as server:
        assert httpx.get(server.url + "/api/search", timeout=60, **search).status_code == 200
        stop, hashed = threading.Event(), []

        def guess() -> None:
            while not stop.is_set():
                response = httpx.get(server.url + "/", auth=("frank", "guess"), timeout=30)
                hashed.append(response.status_code)

        guessers = [threading.Thread(target=guess) for _ in range(12)]  # 12 hashes queued
        for guesser in guessers:
            guesser.start()
        try:
            time.sleep(1)  # the hashing thread busy
            started = time.perf_counter()
            answered = httpx.get(server.url + "/api/search", timeout=30, **search)
            seconds = time.perf_counter() - started
        finally:
            stop.set()
            for guesser in guessers:
                guesser.join()
    assert answered.status_code == 200 and seconds < 1.0, seconds
    assert len(hashed) >= 12 and set(hashed) == {401}  # each guess was checked, none throttled


def test_every_response_forbids_framing_and_sniffing(served: tuple[str, str]) -> None:
    url, token = served
    auth = {"Authorization": f"Bearer {token}"}
    for path in ("/", "/api/search?q=kiwi", "/config"):
        for headers in (auth, {}):  # signed in, and refused
            response = httpx.get(url + path, headers=headers, timeout=30)
            assert response.headers["x-frame-options"] == "DENY", path
            assert "frame-ancestors 'none'" in response.headers["content-security-policy"], path
            assert response.headers["x-content-type-options"] == "nosniff", path
            assert response.headers["referrer-policy"] == "same-origin", path


def test_an_upload_from_another_sites_page_is_refused(served: tuple[str, str]) -> None:
    url, token = served
    files = {"files": ("note.md", b"# Note\n", "text/markdown")}
    headers = {"Authorization": f"Bearer {token}"}
    foreign = httpx.post(
        url + "/gradio_api/upload",
        files=files,
        headers=headers | {"Origin": "http://attacker.example"},
        timeout=30,
    )
    assert foreign.status_code == 403
    host = url.split("://", 1)[1]
    own = httpx.post(
        url + "/gradio_api/upload",
        files=files,
        headers=headers | {"Origin": f"http://{host}"},
        timeout=30,
    )
    assert own.status_code == 200
