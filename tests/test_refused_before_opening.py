"""Issue 40, items 9 and 10: input at fault is refused as bad input (exit 2, or a
tasktrail error naming what was wrong), never an internal error or a raw exception,
and before anything is opened or written.

``no_store_opened`` makes opening any store fail loudly (``open_store`` parses its
location first, the one place a store is opened): a command that still exits 2 with
it refused before opening. ``folder_state`` (tests/helpers/cli.py) shows nothing
was written either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.cli import folder_state, run

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Registry,
    Scheduler,
    StoreError,
    open_store,
)
from tasktrail.domain.app.worker import Worker
from tasktrail.replay.cli import main

PAST_64_BITS = str(2**64)
"""A position no store numbers (SQLite's INTEGER and PostgreSQL's BIGINT are 64 signed bits)."""


@pytest.fixture
def no_store_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening any store from here on is an error of the test (exit 3 from a command)."""
    import tasktrail.domain.store.store as store_module

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a store was opened")

    monkeypatch.setattr(store_module, "parse_location", refuse)


def _recorded(location: str, registry: Registry) -> int:
    """A store with one finished task; returns its head."""
    s = Scheduler.open(location, clock=ManualClock(1_000), registry=registry)
    s.submit("leaf", id="one")
    s.run_until_idle()
    s.close()
    with open_store(location, read_only=True) as store:
        return store.head()


def _head(location: str) -> int:
    with open_store(location, read_only=True) as store:
        return store.head()


# ─── item 10: --until past 64 bits ──────────────────────────────────────────


def test_an_until_past_64_bits_is_bad_input_before_the_store_is_opened(
    store_url: str,
    registry: Registry,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    _recorded(store_url, registry)
    before = folder_state(tmp_path)
    request.getfixturevalue("no_store_opened")  # from here on
    for argv in (
        ["replay", store_url, "--until", PAST_64_BITS],
        ["seal", store_url, "--until", PAST_64_BITS],
        ["explain", store_url, "one", "--until", PAST_64_BITS],
        ["diff", store_url, store_url, "--until-a", PAST_64_BITS],
        ["report", store_url, "--out", str(tmp_path / "r.html"), "--until", PAST_64_BITS],
    ):
        ran = run(argv, capsys)
        assert ran.code == 2, (argv, ran.err)
        assert "--until" in ran.err and "64 signed bits" in ran.err, (argv, ran.err)
    assert folder_state(tmp_path) == before


# ─── item 10: a NUL byte in a store location ────────────────────────────────


def _with_nul(store_url: str) -> str:
    """The location with a NUL byte in it: in the file name, or (a URL) ``%00`` in the
    database name, where libpq would stop reading at it and open database ``test``."""
    if store_url.startswith("postgresql://"):
        before, _, query = store_url.partition("?")
        return f"{before}%00?{query}"
    return store_url + "\x00.db"


def test_a_nul_byte_in_a_store_location_is_a_store_error_before_anything_opens(
    store_url: str, registry: Registry, tmp_path: Path
) -> None:
    location = _with_nul(store_url)
    for attempt in (
        lambda: Scheduler.open(location, registry=registry),
        lambda: open_store(location, read_only=True),
    ):
        with pytest.raises(StoreError, match="NUL byte"):
            attempt()
    assert list(tmp_path.iterdir()) == []  # no file made, under any name
    if store_url.startswith("postgresql://"):
        # Nothing was made in the schema the location names either.
        with pytest.raises(StoreError):
            open_store(store_url, read_only=True)


def test_a_percent_encoded_nul_in_a_file_uri_is_bad_input(
    registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "trail.db"
    _recorded(str(store), registry)
    before = folder_state(tmp_path)
    for argv in (["replay", f"file:{store}%00"], ["submit", f"file:{store}%00", "leaf"]):
        ran = run([*argv, "--phase", "go"] if argv[0] == "submit" else argv, capsys)
        assert ran.code == 2 and "NUL byte" in ran.err, ran.err
    assert folder_state(tmp_path) == before


# ─── item 10: the worker's arguments ────────────────────────────────────────


@pytest.mark.parametrize(
    "options",
    [
        ["--poll", "-1"],
        ["--poll", "inf"],
        ["--stats", "{folder}/missing/stats.jsonl"],
        ["--lease", "-1"],
        ["--worker", ""],
    ],
)
def test_a_bad_worker_argument_is_refused_before_the_store_is_created(
    options: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    no_store_opened: None,
) -> None:
    # Were the store opened, the worker would stop at once: its stats are written then.
    monkeypatch.setattr(Worker, "run", lambda self: None)
    argv = [
        "worker",
        "helpers.worker_workload:registry",
        "--store",
        str(tmp_path / "trail.db"),
        *(option.format(folder=tmp_path) for option in options),
    ]
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exited:  # argparse's refusal of a flag's value: exit 2
        code = exited.code
    said = capsys.readouterr().err + caplog.text  # the worker's refusals are logged
    assert code == 2 and options[0].strip("-") in said, said
    assert list(tmp_path.iterdir()) == []  # no store, no companion, no stats file


# ─── item 10: JSON values too deep ──────────────────────────────────────────


def _deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


def test_a_5000_deep_error_is_an_invalid_argument_as_for_a_memo(
    store_url: str, registry: Registry
) -> None:
    s = Scheduler.open(store_url, clock=ManualClock(1_000), registry=registry)
    try:
        task_id = s.submit("leaf")
        s.reserve(task_id)
        head = s.store.head()
        deep = _deep(5_000)
        with pytest.raises(InvalidArgument, match="JSON data"):
            s.memo(task_id, "deep", deep)
        for error in (deep, {"message": deep}, {"message": "deep", "detail": deep}):
            with pytest.raises(InvalidArgument, match="error"):
                s.finish(task_id, "failed", error=error)
        assert s.store.head() == head and s.task(task_id).status == "running"
        # An exception whose str() cannot be made: its type is the message.
        s.finish(task_id, "failed", error=ValueError(deep))
        assert s.task(task_id).outcome.message == "ValueError"
    finally:
        s.close()


# ─── item 9: an integer past 64 bits, one rule for the API and the command line ──


def test_a_memo_past_64_bits_is_refused_by_the_command_line_as_by_the_api(
    store_url: str, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    head = _recorded(store_url, registry)
    huge = 1180591620717411303424  # 2**70: orjson would read it as 1.1805916207174113e+21
    s = Scheduler.open(store_url, registry=registry)
    try:
        with pytest.raises(InvalidArgument, match="64-bit"):
            s.submit("leaf", memos={"k": huge})
    finally:
        s.close()
    for value in (huge, -(2**63) - 1, 2**64):
        ran = run(["submit", store_url, "leaf", "--phase", "go", "--memo", f"k={value}"], capsys)
        assert ran.code == 2 and "memo 'k'" in ran.err and "64-bit" in ran.err, ran.err
    assert _head(store_url) == head  # refused: nothing appended
    # The largest integer both keep, kept exactly by both.
    largest = 2**64 - 1
    ran = run(
        ["submit", store_url, "leaf", "--phase", "go", "--id", "cli", "--memo", f"k={largest}"],
        capsys,
    )
    assert ran.code == 0, ran.err
    s = Scheduler.open(store_url, registry=registry)
    try:
        api = s.submit("leaf", id="api", memos={"k": largest})
        assert s.task("cli").memos["k"] == s.task(api).memos["k"] == largest
        assert type(s.task("cli").memos["k"]) is int
    finally:
        s.close()
