"""Sign-in that resists guessing, the sign-in form and its sessions, and the headers and origins
every response and write obey, on the real server (and in Chromium)."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from rag_pipeline.cli import main
from rag_pipeline.config import load_settings, stored_settings, write_stored_settings
from rag_pipeline_tests.conftest import ask_on_the_page, open_workspace, workspace_card
from serving.access import (
    DEVICE_COOKIE,
    DEVICE_DAYS,
    SESSION_COOKIE,
    Authenticator,
    DeviceCookies,
    Sessions,
    Throttle,
    Throttled,
    add_user,
    remove_user,
)
from serving.server import BackgroundServer

DELAY = 0.5  # the first wait after the free tries, short for the test

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A server with users dave, erin and fay (passwords <name>-password): (url, dave's
    token). Each throttling test guesses a name no other test signs in with: a password found
    right earlier is not held back."""
    root = tmp_path_factory.mktemp("sign-in")
    home, docs = root / "home", root / "docs"
    docs.mkdir()
    (docs / "kiwi.md").write_text("# Kiwi\n\nThe kiwi is a flightless bird.\n", encoding="utf-8")
    assert main(["index", "--home", str(home), "--source", str(docs)]) == 0
    token = add_user(home, "dave", "dave-password", ["*"])
    add_user(home, "erin", "erin-password", ["*"])
    add_user(home, "fay", "fay-password", ["*"])
    stored = stored_settings(home)
    stored["access"]["sign_in_delay_seconds"] = DELAY
    write_stored_settings(home, stored)
    with BackgroundServer(load_settings(home)) as server:
        yield server.url, token


def test_a_thousand_wrong_passwords_still_wait_the_cap() -> None:
    throttle = Throttle(free=5, delay=1.0, cap=300.0, clock=lambda: 0.0)
    waits = [throttle.failed(["user:dave"]) for _ in range(2000)]
    assert waits[-1] == 300.0 and throttle.wait(["user:dave"]) == 300.0


def test_after_five_wrong_passwords_each_try_waits_a_doubling_delay() -> None:
    now = [0.0]
    throttle = Throttle(free=5, delay=1.0, cap=4.0, clock=lambda: now[0])
    keys = ["user:dave", "client:10.0.0.1"]
    assert [throttle.failed(keys) for _ in range(4)] == [0.0] * 4
    assert throttle.wait(keys) == 0.0
    assert [throttle.failed(keys) for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]  # capped
    assert throttle.wait(["client:10.0.0.1"]) == 4.0
    assert throttle.wait(["user:erin", "client:10.0.0.2"]) == 0.0  # other keys are free
    now[0] = 4.0
    assert throttle.wait(keys) == 0.0
    throttle.succeeded(keys)
    assert throttle.failed(keys) == 0.0  # a right password starts the count again


def test_an_hour_without_a_wrong_password_starts_a_keys_count_again() -> None:
    now = [0.0]
    throttle = Throttle(free=5, delay=1.0, cap=4.0, clock=lambda: now[0], forget_after=3600.0)
    keys = ["client:10.0.0.1"]
    assert [throttle.failed(keys) for _ in range(6)] == [0.0] * 4 + [1.0, 2.0]
    now[0] = 2.0 + 3000.0  # within the hour after its wait: still counted
    assert throttle.failed(keys) == 4.0
    now[0] += 4.0 + 3601.0
    assert throttle.failed(keys) == 0.0


def test_a_right_password_does_not_clear_its_addresses_count_of_guesses_at_other_names(
    tmp_path: Path,
) -> None:
    add_user(tmp_path, "gus", "gus-password", ["*"])
    authenticator = Authenticator(tmp_path)
    office = "10.0.0.3"  # a guesser with an account of their own, spraying other names
    assert authenticator.password_user("gus", "gus-password", office) is not None
    for n in range(5):
        assert authenticator.password_user(f"name-{n}", "guess", office) is None
    assert authenticator.password_user("gus", "gus-password", office) is not None
    with pytest.raises(Throttled):
        authenticator.password_user("name-5", "guess", office)


def test_a_password_found_right_earlier_is_not_held_back_by_guesses_from_its_address(
    tmp_path: Path,
) -> None:
    add_user(tmp_path, "gus", "gus-password", ["*"])
    authenticator = Authenticator(tmp_path)
    office = "10.0.0.1"  # the owner and the guesser behind one address
    assert authenticator.password_user("gus", "gus-password", office) is not None
    for n in range(5):
        assert authenticator.password_user("gus", f"guess-{n}", office) is None
    with pytest.raises(Throttled):
        authenticator.password_user("gus", "guess-5", office)
    assert authenticator.password_user("gus", "gus-password", office) is not None


def test_a_wrong_password_is_delayed_after_five_and_the_right_one_waits_too(
    served: tuple[str, str],
) -> None:
    url, _ = served
    wrong = [httpx.get(url + "/", auth=("dave", f"guess-{n}"), timeout=30) for n in range(5)]
    assert [response.status_code for response in wrong] == [401] * 5
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


def _sign_in(
    url: str, name: str, password: str, back: str = "", headers: dict[str, str] | None = None
) -> httpx.Response:
    """The sign-in form posted, as a page of this server posts it; ``back``: its ``next``."""
    data = {"name": name, "password": password} | ({"next": back} if back else {})
    return httpx.post(url + "/sign-in", data=data, headers=headers or {}, timeout=30)


def _session_token(response: httpx.Response) -> str:
    return response.headers["set-cookie"].split(";")[0].removeprefix(f"{SESSION_COOKIE}=")


def test_a_browsers_visit_goes_to_the_form_and_an_api_request_gets_401(
    served: tuple[str, str],
) -> None:
    url, _ = served
    visit = httpx.get(url + "/?tab=1", headers={"Accept": "text/html"}, timeout=30)
    assert visit.status_code == 303 and visit.headers["location"] == "/sign-in?next=%2F%3Ftab%3D1"
    assert visit.headers["x-frame-options"] == "DENY"
    api = httpx.get(url + "/api/search", params={"q": "kiwi"}, timeout=30)
    assert api.status_code == 401 and api.headers["www-authenticate"].startswith("Basic")
    form = httpx.get(url + "/sign-in", params={"next": "/?tab=1"}, timeout=30)
    assert form.status_code == 200
    assert '<form method="post" action="/sign-in">' in form.text
    assert '<input type="hidden" name="next" value="/?tab=1">' in form.text
    assert "form-action 'self'" in form.headers["content-security-policy"]
    foreign = _sign_in(url, "erin", "erin-password", headers={"Origin": "http://attacker.example"})
    assert foreign.status_code == 403 and "set-cookie" not in foreign.headers


def test_the_session_cookie_is_http_only_strict_expiring_and_secure_behind_tls(
    served: tuple[str, str],
) -> None:
    url, _ = served
    for headers, secure in (({}, False), ({"X-Forwarded-Proto": "https"}, True)):
        signed = _sign_in(url, "erin", "erin-password", "/?a=1", headers)
        assert signed.status_code == 303 and signed.headers["location"] == "/?a=1"
        set_cookies = {
            cookie.partition("=")[0]: {
                part.strip().partition("=")[0].lower(): part.strip().partition("=")[2]
                for part in cookie.split(";")[1:]
            }
            for cookie in signed.headers.get_list("set-cookie")
        }
        # The session's, for every page; the device's, for the form alone (see DeviceCookies).
        for cookie, age, path in (
            (SESSION_COOKIE, 12 * 3600, "/"),
            (DEVICE_COOKIE, DEVICE_DAYS * 86_400, "/sign-in"),
        ):
            attributes = set_cookies[cookie]
            assert attributes["max-age"] == str(age) and attributes["path"] == path
            assert attributes["samesite"].lower() == "strict" and "httponly" in attributes
            assert ("secure" in attributes) is secure
        cookies = {SESSION_COOKIE: _session_token(signed)}
        search = httpx.get(url + "/api/search", params={"q": "kiwi"}, cookies=cookies, timeout=30)
        assert search.status_code == 200
    # The form sends a browser back to a page of this server only.
    elsewhere = _sign_in(url, "erin", "erin-password", "//attacker.example/")
    assert elsewhere.headers["location"] == "/"


def test_the_form_with_a_valid_session_sends_the_browser_straight_on_to_a_local_page(
    served: tuple[str, str],
) -> None:
    # Back after signing in lands on the form, which showed itself though signed in.
    url, _ = served
    session = {SESSION_COOKIE: _session_token(_sign_in(url, "erin", "erin-password"))}
    for back, location in (("/", "/"), ("/?tab=1", "/?tab=1"), ("//attacker.example/", "/")):
        form = httpx.get(url + "/sign-in", params={"next": back}, cookies=session, timeout=30)
        assert form.status_code == 303 and form.headers["location"] == location
    for cookies in ({}, {SESSION_COOKIE: "no-such-session"}):
        form = httpx.get(url + "/sign-in", params={"next": "/"}, cookies=cookies, timeout=30)
        assert form.status_code == 200 and '<form method="post"' in form.text


def test_the_form_refuses_five_wrong_passwords_then_answers_429(served: tuple[str, str]) -> None:
    url, _ = served
    # An address of its own (uvicorn believes a local proxy's X-Forwarded-For): the other
    # throttling test's guesses count against this machine's address.
    away = {"X-Forwarded-For": "10.7.0.1"}
    wrong = [_sign_in(url, "fay", f"guess-{n}", headers=away) for n in range(5)]
    assert [response.status_code for response in wrong] == [401] * 5
    assert all("Wrong user name or password." in response.text for response in wrong)
    assert not any("set-cookie" in response.headers for response in wrong)
    throttled = _sign_in(url, "fay", "fay-password", headers=away)
    assert throttled.status_code == 429 and "retry-after" in throttled.headers
    assert "Too many wrong passwords: try again in" in throttled.text
    assert "set-cookie" not in throttled.headers
    deadline = time.monotonic() + 60
    while (signed := _sign_in(url, "fay", "fay-password", headers=away)).status_code == 429:
        assert time.monotonic() < deadline
        time.sleep(float(signed.headers["retry-after"]))
    assert signed.status_code == 303 and signed.headers["set-cookie"].startswith(SESSION_COOKIE)


def test_a_session_ends_at_its_expiry() -> None:
    now = [0.0]
    sessions = Sessions(clock=lambda: now[0])
    token = sessions.start("erin", "scrypt$00$00", hours=12)
    now[0] = 12 * 3600 - 1
    found = sessions.find(token)
    assert found is not None and found.name == "erin"
    assert sessions.find(token + "x") is None
    now[0] = 12 * 3600
    assert sessions.find(token) is None


def test_a_session_ends_when_its_users_password_changes_or_the_user_goes(tmp_path: Path) -> None:
    add_user(tmp_path, "gus", "gus-password", ["*"])
    add_user(tmp_path, "hal", None, ["*"])  # still someone to sign in once gus goes
    authenticator = Authenticator(tmp_path)

    def session() -> dict[str, str]:
        user = authenticator.password_user("gus", "gus-password")
        assert user is not None
        return {"cookie": f"{SESSION_COOKIE}={authenticator.start_session(user)}"}

    first, second = session(), session()
    user = authenticator.user(first)
    assert user is not None and user.name == "gus" and authenticator.user(second) == user
    add_user(tmp_path, "gus", "a-new-password", ["*"])
    assert authenticator.user(first) is None
    add_user(tmp_path, "gus", "gus-password", ["*"])
    third = session()
    remove_user(tmp_path, "gus")
    assert authenticator.user(third) is None and authenticator.user(second) is None


@pytest.mark.skipif(sys.platform != "linux", reason="a nice value per thread is Linux's")
def test_passwords_are_hashed_at_a_lower_cpu_priority_than_the_server_answers_at(
    tmp_path: Path,
) -> None:
    def own_niceness() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    if own_niceness() == 19:
        pytest.skip("this process runs at the lowest priority already")
    hashing = asyncio.run(Authenticator(tmp_path).off_loop(own_niceness))
    assert hashing > own_niceness()


def test_in_a_browser_the_form_signs_in_a_reload_stays_signed_in_and_sign_out_ends_it(
    served: tuple[str, str], browser: Browser
) -> None:
    from playwright.sync_api import expect

    url, _ = served
    context = browser.new_context()
    page = context.new_page()
    page.goto(url + "/")
    assert page.url == f"{url}/sign-in?next=%2F"
    page.locator("#name").fill("erin")
    page.locator("#password").fill("erin-password")
    page.locator("#sign-in").click()
    page.wait_for_url(url + "/")
    who = page.locator("#signed-in")
    expect(who).to_contain_text("Signed in as erin", timeout=30_000)
    cookie = {c["name"]: c for c in context.cookies()}[SESSION_COOKIE]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict" and cookie["secure"] is False
    assert 11.9 * 3600 < cookie["expires"] - time.time() <= 12 * 3600

    open_workspace(page)
    ask_on_the_page(page, "Can the kiwi fly?")
    page.locator("#evidence a.citation").first.wait_for(timeout=60_000)
    expect(page).to_have_url(re.compile(r"/\?workspace=default&conversation=\w+$"))
    page.reload()
    expect(who).to_contain_text("Signed in as erin", timeout=30_000)
    # Still in the workspace, on its conversation, with its evidence and preview.
    expect(page.locator("#chat")).to_contain_text("Can the kiwi fly?", timeout=30_000)
    expect(page.locator("#evidence")).to_contain_text("kiwi.md")
    expect(page.locator("#preview-text")).to_contain_text("docs/kiwi.md")
    page.locator("#to-workspaces").click()
    expect(page).to_have_url(url + "/")
    page.reload()
    expect(workspace_card(page, "Default")).to_be_visible(timeout=30_000)
    expect(page.locator("#opened")).to_be_hidden()

    page.locator("#sign-out").click()
    page.wait_for_url(url + "/sign-in?signed-out=1")
    expect(page.get_by_role("status")).to_have_text("You are signed out.")
    # The session ends; the browser stays known to the form (its device cookie).
    assert [c["name"] for c in context.cookies()] == [DEVICE_COOKIE]
    page.goto(url + "/")
    assert page.url == f"{url}/sign-in?next=%2F"
    context.close()
    ended = httpx.get(
        url + "/api/search", params={"q": "kiwi"}, cookies={SESSION_COOKIE: cookie["value"]}
    )
    assert ended.status_code == 401


def test_after_a_restart_a_guesser_cannot_hold_back_the_browser_that_signed_in_before(
    tmp_path: Path,
) -> None:
    home, docs = tmp_path / "home", tmp_path / "docs"
    docs.mkdir()
    (docs / "kiwi.md").write_text("# Kiwi\n\nThe kiwi is a flightless bird.\n", encoding="utf-8")
    assert main(["index", "--home", str(home), "--source", str(docs)]) == 0
    add_user(home, "owner", "owner-password", ["*"])
    with BackgroundServer(load_settings(home)) as server:
        first = _sign_in(server.url, "owner", "owner-password")
        assert first.status_code == 303
        device = first.cookies[DEVICE_COOKIE]
    with BackgroundServer(load_settings(home)) as restarted:  # nothing of the first in memory
        guesses = [_sign_in(restarted.url, "owner", f"guess-{n}") for n in range(5)]
        assert [guess.status_code for guess in guesses] == [401] * 5
        without = _sign_in(restarted.url, "owner", "owner-password")
        assert without.status_code == 429 and "retry-after" in without.headers
        forged = {"Cookie": f"{DEVICE_COOKIE}={device[:-2]}xx"}
        assert _sign_in(restarted.url, "owner", "owner-password", headers=forged).status_code == 429
        held = {"Cookie": f"{DEVICE_COOKIE}={device}"}
        signed = _sign_in(restarted.url, "owner", "owner-password", headers=held)
        assert signed.status_code == 303 and SESSION_COOKIE in signed.cookies
        # The cookie proves the browser, not the password: a wrong one is still refused.
        assert _sign_in(restarted.url, "owner", "guess-6", headers=held).status_code == 401


def test_a_device_cookie_for_another_name_or_expired_proves_nothing(tmp_path: Path) -> None:
    now = [1000.0]
    devices = DeviceCookies(b"k" * 32, clock=lambda: now[0])
    value = devices.issue("owner", days=1)
    assert devices.device(value) is not None and devices.device(value).name == "owner"
    assert DeviceCookies(b"x" * 32).device(value) is None  # another home's key
    now[0] += 86_401
    assert devices.device(value) is None


def _signed_with(key: bytes, payload: bytes) -> str:
    """A device cookie value for ``payload`` signed with ``key``, as a forger would make it."""
    import base64
    import hashlib
    import hmac

    def encoded(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    return f"{encoded(payload)}.{encoded(hmac.new(key, payload, hashlib.sha256).digest())}"


def test_an_empty_device_key_left_by_a_crash_is_replaced_and_signs_nothing(tmp_path: Path) -> None:
    key_file = tmp_path / "serving" / "device-key"
    key_file.parent.mkdir(parents=True)
    key_file.write_bytes(b"")  # what a server killed between creating and writing it left
    forged = _signed_with(b"", f"owner\nforged\n{int(time.time()) + 86_400}".encode())
    authenticator = Authenticator(tmp_path)
    assert authenticator.devices.device(forged) is None
    assert len(key_file.read_bytes()) == 32 and key_file.stat().st_mode & 0o777 == 0o600
    # The key is the home's: a second server of it proves the first one's cookies.
    issued = authenticator.devices.issue("owner")
    assert Authenticator(tmp_path).devices.device(issued) is not None
    assert list(key_file.parent.iterdir()) == [key_file]  # no key written aside left behind
    with pytest.raises(ValueError, match="at least 32 bytes"):
        DeviceCookies(b"")
