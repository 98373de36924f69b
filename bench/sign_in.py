"""Sign-in under guessing: a valid request's latency idle and during 20 wrong logins a second,
and how long a wrong password takes for a known and an unknown user name, on the real server.

Two rounds, each its own server: with the default throttle (guesses from one address are refused
unchecked after 5), and with the throttle out of reach (free tries 10**6), so that every guess is
hashed, as guesses from many addresses would be. The server is `rag-pipeline serve` in a process
of its own, as users run it: in this process, the guessing client's threads would share its
interpreter lock and weigh on its figures.

    python bench/sign_in.py [--seconds 15] [--rate 20]
"""

from __future__ import annotations

import argparse
import base64
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import served

from rag_pipeline.cli import main as cli
from rag_pipeline.config import stored_settings, write_stored_settings
from serving.access import add_user


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.95 * (len(ordered) - 1))]


def timed_requests(url: str, token: str, seconds: float) -> list[float]:
    """Milliseconds of each search request with a token, one after another, for ``seconds``."""
    times: list[float] = []
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(timeout=60) as client:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.perf_counter()
            client.get(url + "/api/search", params={"q": "kiwi"}, headers=headers)
            times.append((time.perf_counter() - started) * 1000)
    return times


def wrong_login(url: str, name: str, password: str) -> int:
    """The status of ``GET /`` with HTTP Basic ``name:password``, on a connection of its own.
    Written on a bare socket: an httpx client builds an SSL context first, about 45 ms of CPU,
    which at 20 a second would take half of this machine's two cores from the server measured
    (an attacker's CPU is their own)."""
    host, port = url.removeprefix("http://").split(":")
    credentials = base64.b64encode(f"{name}:{password}".encode()).decode()
    request = (
        f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Basic {credentials}\r\n"
        "Connection: close\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=60) as connection:
        connection.sendall(request.encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def guessing(url: str, rate: float, stop: threading.Event, counts: dict[int, int]) -> None:
    """Wrong passwords at ``rate`` a second, each on a connection and in a thread of its own,
    until ``stop``."""
    number = 0

    def one(n: int) -> None:
        status = wrong_login(url, "dave", f"guess-{n}")
        counts[status] = counts.get(status, 0) + 1

    threads = []
    started = time.monotonic()
    while not stop.is_set():
        thread = threading.Thread(target=one, args=(number,))
        thread.start()
        threads.append(thread)
        number += 1
        stop.wait(max(0.0, started + number / rate - time.monotonic()))
    for thread in threads:
        thread.join()


def wrong_password_ms(url: str, names: list[str], tries: int) -> dict[str, list[float]]:
    """Milliseconds of wrong passwords for each name, the names taking turns (so that whatever
    else the machine does weighs on each alike)."""
    times: dict[str, list[float]] = {name: [] for name in names}
    for n in range(tries):
        for name in names:
            started = time.perf_counter()
            wrong_login(url, name, f"wrong-{n}")
            times[name].append((time.perf_counter() - started) * 1000)
    return times


def round_of(home: Path, token: str, free_tries: int | None, seconds: float, rate: float) -> None:
    stored = stored_settings(home)
    stored["access"]["free_sign_in_tries"] = free_tries or 5
    write_stored_settings(home, stored)
    with served(home) as (url, _):
        timed_requests(url, token, 2)  # warm: the models load on the first search
        idle = timed_requests(url, token, seconds)
        stop, counts = threading.Event(), {}
        guesser = threading.Thread(target=guessing, args=(url, rate, stop, counts))
        guesser.start()
        try:
            loaded = timed_requests(url, token, seconds)
        finally:
            stop.set()
            guesser.join()
        label = "default throttle" if free_tries is None else f"free tries {free_tries}"
        print(f"\n{label}: {sum(counts.values())} wrong logins at {rate}/s, answered {counts}")
        print(
            f"  valid search request, idle:    p50 {statistics.median(idle):.1f} ms, "
            f"p95 {p95(idle):.1f} ms ({len(idle)} requests)"
        )
        print(
            f"  valid search request, guessed: p50 {statistics.median(loaded):.1f} ms, "
            f"p95 {p95(loaded):.1f} ms ({len(loaded)} requests), "
            f"{p95(loaded) / p95(idle):.2f} × idle p95 (goal ≤ 2)"
        )
        if free_tries is not None:
            times = wrong_password_ms(url, ["alice", "nosuchuser"], 40)
            print(
                "  wrong password (40 each, taking turns), median / p95: "
                + "; ".join(
                    f"{name} {statistics.median(ms):.1f} / {p95(ms):.1f} ms"
                    for name, ms in times.items()
                )
                + " (alice is a user, nosuchuser is not)"
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--rate", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        home, docs = Path(scratch) / "home", Path(scratch) / "docs"
        docs.mkdir()
        (docs / "kiwi.md").write_text("# Kiwi\n\nThe kiwi is a flightless bird.\n", "utf-8")
        assert cli(["index", "--home", str(home), "--source", str(docs)]) == 0
        tokens = {
            name: add_user(home, name, f"{name}-password", ["*"]) for name in ("alice", "bob")
        }
        round_of(home, tokens["bob"], None, args.seconds, args.rate)
        round_of(home, tokens["bob"], 10**6, args.seconds, args.rate)


if __name__ == "__main__":
    main()
