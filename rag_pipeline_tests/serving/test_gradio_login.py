"""``gradio_client.Client(url, auth=(name, password))`` against the real server: it signs in as
the sign-in form does (its ``/login``), so a right password asks, a wrong one is refused, and
guesses through the form hold it back as they hold back the form."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AuthenticationError

from rag_pipeline.cli import main
from rag_pipeline.config import load_settings, stored_settings, write_stored_settings
from serving.access import SESSION_COOKIE, add_user
from serving.server import BackgroundServer

DELAY = 0.5  # the first wait after the free tries, short for the test


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server with readers ann and gus (passwords <name>-password)."""
    root = tmp_path_factory.mktemp("gradio-login")
    home, docs = root / "home", root / "docs"
    docs.mkdir()
    (docs / "kiwi.md").write_text("# Kiwi\n\nThe kiwi is a flightless bird.\n", encoding="utf-8")
    assert main(["index", "--home", str(home), "--source", str(docs)]) == 0
    for name in ("ann", "gus"):
        add_user(home, name, f"{name}-password", ["default"])
    stored = stored_settings(home)
    stored["access"]["sign_in_delay_seconds"] = DELAY
    write_stored_settings(home, stored)
    with BackgroundServer(load_settings(home)) as server:
        yield server.url + "/"


def test_a_right_password_signs_gradio_client_in_and_it_asks(url: str) -> None:
    client = Client(url, auth=("ann", "ann-password"), verbose=False)
    try:
        chat, *_ = client.predict("What is the kiwi?", api_name="/ask")
    finally:
        client.close()
    assert chat[-1]["role"] == "assistant" and "flightless" in str(chat[-1]["content"])


def test_a_wrong_password_is_refused_as_invalid_credentials(url: str) -> None:
    with pytest.raises(AuthenticationError, match="Invalid credentials"):
        Client(url, auth=("ann", "not-her-password"), verbose=False)


def test_guesses_at_the_form_hold_gradio_clients_sign_in_back_until_the_wait_ends(
    url: str,
) -> None:
    # The guesses from an address of their own (uvicorn believes a local proxy's
    # X-Forwarded-For): what holds the client back is the name's count, the form's and its own.
    away = {"X-Forwarded-For": "10.7.0.2"}
    for n in range(5):
        guess = {"name": "gus", "password": f"guess-{n}", "next": "/"}
        assert httpx.post(f"{url}sign-in", data=guess, headers=away).status_code == 401
    with pytest.raises(ValueError, match="Could not login") as held_back:
        Client(url, auth=("gus", "gus-password"), verbose=False)
    assert not isinstance(held_back.value, AuthenticationError)  # 429, not a wrong password
    held = httpx.post(f"{url}login", data={"username": "gus", "password": "gus-password"})
    assert held.status_code == 429 and "set-cookie" not in held.headers
    time.sleep(float(held.headers["retry-after"]))
    client = Client(url, auth=("gus", "gus-password"), verbose=False)
    client.close()
    assert SESSION_COOKIE in client.cookies  # its session, as the form's
