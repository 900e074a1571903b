"""Issue 17, item 5: human output escapes what a log holds; ``--json`` stays exact.

Ids, kinds, phases, memo names and reasons may hold ESC sequences (colours, window
titles, a cleared screen), CR/LF that would forge whole lines, DEL, C1 controls and
bidirectional overrides. None reaches the terminal raw from ``history``, ``tasks``,
``explain``, ``replay``, ``verify`` or ``diff``; the JSON of each carries them exactly.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from helpers.cli import folder_state, run

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition
from tasktrail.domain.tasks.describe import printable

EVIL_ID = "evil\x1b]0;pwned\x07\r\nFORGED 1 line\x1b[2J"
EVIL_KIND = "kind\x1b[31m\x9b1m"
EVIL_PHASE = "phase\u202egnp.exe"
EVIL_MEMO = "memo\x7f\rFORGED 2"
EVIL_REASON = "why\n\nFORGED 3 verify: ok\u2028"
EVIL = (EVIL_ID, EVIL_KIND, EVIL_PHASE, EVIL_MEMO, EVIL_REASON)
UNSAFE = {chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))} | {
    "\u202e",
    "\u2028",
    "\u2029",
}


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.db"
    registry = Registry([TaskDefinition(EVIL_KIND, 1, {EVIL_PHASE: lambda inv: None})])
    s = Scheduler.open(path, clock=ManualClock(1_767_603_600_000), registry=registry)
    task = s.submit(EVIL_KIND, id=EVIL_ID)
    child = s.submit(EVIL_KIND, id=EVIL_ID + "-child", owner=task)
    s.reserve(task)
    s.memo(task, EVIL_MEMO, {"text": EVIL_REASON})
    s.abort(child)
    s.finish(task, "failed", error={"message": EVIL_REASON}, reason=EVIL_REASON)
    s.request_wakeup(task, EVIL_REASON)
    s.close()
    return path


def _human_lines_are_safe(text: str) -> None:
    for line in text.split("\n"):
        assert not UNSAFE & set(line), repr(line)
        assert not line.lstrip().startswith("FORGED"), repr(line)


def test_human_output_escapes_every_control_character(
    hostile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(hostile)
    before = folder_state(hostile.parent)
    for argv in (
        ["history", store, EVIL_ID],
        ["tasks", store],
        ["explain", store, EVIL_ID],
        ["replay", store, "--until", "2"],
        ["replay", store],
        ["verify", store],
        ["diff", store, store, "--until-a", "1"],
        ["history", store, EVIL_ID + "-missing"],
    ):
        ran = run(argv, capsys)
        assert ran.code in (0, 1, 2), (argv, ran)
        _human_lines_are_safe(ran.out)
        _human_lines_are_safe(ran.err)
    shown = run(["history", store, EVIL_ID], capsys).out
    assert printable(EVIL_REASON) in shown and "\\x1b]0;pwned\\x07\\r\\n" in printable(EVIL_ID)
    assert folder_state(hostile.parent) == before


def _rows(text: str) -> list[dict[str, object]]:
    # JSON lines end at "\n" only: U+2028 is a character inside a JSON string.
    return [orjson.loads(line) for line in text.split("\n") if line]


def test_json_output_stays_exact(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(hostile)
    history = _rows(run(["history", store, EVIL_ID, "--json"], capsys).out)
    assert history[0]["kind"] == EVIL_KIND and history[0]["phase"] == EVIL_PHASE
    assert any(row.get("name") == EVIL_MEMO for row in history)
    assert history[-1]["reason"] == EVIL_REASON
    tasks = _rows(run(["tasks", store, "--json"], capsys).out)
    assert {t["id"] for t in tasks} == {EVIL_ID, EVIL_ID + "-child"}
    steps = _rows(run(["explain", store, EVIL_ID, "--json"], capsys).out)
    assert EVIL_MEMO in steps[2]["why"]
    replayed = orjson.loads(run(["replay", store, "--until", "2", "--json"], capsys).out)
    assert {t["id"] for t in replayed["live"]} == {EVIL_ID, EVIL_ID + "-child"}
    for text in EVIL:
        assert printable(text) != text  # each really holds something to escape


def test_printable_escapes_and_is_idempotent() -> None:
    for text in (*EVIL, "a\x00b", "lone \udcff", "\t", "ok / plain é ü 漢字"):
        shown = printable(text)
        assert not UNSAFE & set(shown)
        assert printable(shown) == shown
    assert printable("ok / plain é ü 漢字") == "ok / plain é ü 漢字"
