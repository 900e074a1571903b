"""``tasktrail serve`` as a command (issue 46): safe by default (127.0.0.1, said at the
start), bad input is exit 2 with a clear message before anything is served (a store
that is not one, a token file that cannot be used, a port in use), SIGTERM stops it
(exit 0) and SIGINT interrupts it (130), and serving a store leaves its folder as it
was."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from helpers.cli import folder_state, run
from helpers.console_server import (
    TIMEOUT_S,
    as_process,
    serve_command,
    small_store,
    token_file,
)

from tasktrail.replay.console.server import _opening
from tasktrail.replay.console.tokens import Tokens


def test_it_listens_on_this_machine_only_and_says_so(tmp_path: Path) -> None:
    location = str(tmp_path / "trail.db")
    small_store(location)
    with as_process(location) as served:
        assert served.url.startswith("http://127.0.0.1:")
        said = "\n".join(served.lines)
        assert "listening on 127.0.0.1 only: this machine alone can reach it" in said
        assert "acts: off" in said
        assert httpx.get(served.url + "api/status").json()["ready"] is True


def test_it_says_who_can_reach_it_on_another_address(tmp_path: Path) -> None:
    console = type("C", (), {"store_name": "trail.db", "tokens": Tokens.load(token_file(tmp_path))})
    lines = _opening(console, "0.0.0.0", "http://0.0.0.0:8765/")  # type: ignore[arg-type]
    assert "anyone who reaches this machine can read the store" in lines[1]
    assert "tokens cross the network in clear" in lines[1]
    assert "acts: on for 2 actors (alice, bob)" in lines[2]


def test_a_store_that_is_not_one_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = run(["serve", str(tmp_path / "missing.db"), "--port", "0"], capsys)
    assert missing.code == 2 and "missing.db" in missing.err
    other = tmp_path / "notes.txt"
    other.write_text("not a store")
    foreign = run(["serve", str(other), "--port", "0"], capsys)
    assert foreign.code == 2 and "notes.txt" in foreign.err
    assert not (tmp_path / "missing.db").exists()  # nothing created


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("alice short\n", "give at least 16"),
        ("alice\n", "give ACTOR TOKEN"),
        ("alice 0123456789abcdefgh\nbob 0123456789abcdefgh\n", "line 2: this token is alice's"),
        ("# nobody\n", "no ACTOR TOKEN line"),
    ],
)
def test_a_token_file_that_cannot_be_used_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, said: str
) -> None:
    location = str(tmp_path / "trail.db")
    small_store(location)
    tokens = tmp_path / "tokens"
    tokens.write_text(content)
    ran = run(["serve", location, "--port", "0", "--token-file", str(tokens)], capsys)
    assert ran.code == 2 and said in ran.err
    gone = run(["serve", location, "--token-file", str(tmp_path / "nope")], capsys)
    assert gone.code == 2 and "no such file" in gone.err


def test_a_port_in_use_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = str(tmp_path / "trail.db")
    small_store(location)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        ran = run(["serve", location, "--port", str(port)], capsys)
    assert ran.code == 2 and f"--port {port}: in use on 127.0.0.1" in ran.err
    bad = run(["serve", location, "--port", "70000"], capsys)
    assert bad.code == 2 and "give 0 to 65535" in bad.err


def test_sigterm_stops_it_and_sigint_interrupts_it(tmp_path: Path) -> None:
    location = str(tmp_path / "trail.db")
    small_store(location)
    with as_process(location) as served:
        streaming = httpx.stream("GET", served.url + "api/stream", timeout=TIMEOUT_S)
        with streaming as events:  # an open live page's stream does not hold the stop up
            assert events.status_code == 200
            asked = time.monotonic()
            served.process.send_signal(signal.SIGTERM)
            assert served.process.wait(TIMEOUT_S) == 0
            print(f"stopped {time.monotonic() - asked:.2f} s after SIGTERM")
    with as_process(location) as served:
        served.process.send_signal(signal.SIGINT)
        assert served.process.wait(TIMEOUT_S) == 130


def test_serving_a_store_leaves_its_folder_as_it_was(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    location = str(folder / "trail.db")
    known = small_store(location)
    before = folder_state(folder)
    with as_process(location) as served, httpx.Client(base_url=served.url) as http:
        for path in ("/", f"/tasks/{known['tree']}", "/workers", "/runs", "/schedules"):
            assert http.get(path).status_code == 200
    assert folder_state(folder) == before


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_a_signal_as_it_starts_stops_it_with_that_signals_code(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    # The moment uvicorn takes the signals, or gives them back, must not matter: a
    # signal at the first line (before the server runs) stops it with its own code, as
    # one sent later does (SIGINT once came back 0 there, taken by asyncio's handler).
    location = str(tmp_path / "trail.db")
    small_store(location)
    process = subprocess.Popen(
        serve_command(location, "--port", "0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    assert first.startswith("tasktrail console: http"), first
    process.send_signal(sig)
    try:
        assert process.wait(TIMEOUT_S) == code, process.stdout.read()
    finally:
        process.kill()
