"""``tasktrail report`` pages in a real browser: headless Chromium (Debian's package,
installed by the set-up where missing), driven over its DevTools protocol.

The page must load with no console error, uncaught exception or refused resource,
ask for nothing but its own file, draw the rows of a known task tree with its wait
arrows, answer hover, zoom and the filter, read without JavaScript, and never run
what a task recorded. Screenshots are saved under each test's temporary folder.
Skipped (saying why) only where Chromium cannot be installed; under CI=true that
fails instead.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.browser import Browser, chromium_or_skip
from helpers.report_stores import CHILD, HOSTILE, ROOT, demo_store, hostile_store

from tasktrail.replay import replay
from tasktrail.replay.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    opened = Browser(chromium_or_skip("report"), tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_store(tmp_path_factory.mktemp("report-browser"))


def known_tree(demo: Path, kind: str) -> tuple[str, list[str]]:
    """The first root of ``kind`` and the tasks it owns, in the order submitted."""
    tasks = replay(demo).world.tasks
    root = next(t for t in tasks.values() if t.kind == kind and t.owner_id is None)
    return root.id, sorted(t.id for t in tasks.values() if t.owner_id == root.id)


def load(browser: Browser, page: Path, *, scripts: bool = True) -> None:
    browser.events.clear()
    browser.open(page, scripts=scripts)
    time.sleep(0.05)  # let late console messages arrive


def test_the_demo_report_loads_in_chromium_and_draws_the_tree(
    browser: Browser, demo: Path, tmp_path: Path
) -> None:
    root, owned = known_tree(demo, "research")
    page = tmp_path / "research.html"
    assert main(["report", str(demo), root, "--out", str(page)]) == 0
    load(browser, page)
    assert browser.errors() == []
    assert browser.requests() == [page.resolve().as_uri()]  # nothing from anywhere else
    rows = browser.evaluate(
        "[...document.querySelectorAll('.tl-name:not(.sub) a')].map(a => a.textContent)"
    )
    assert rows == [root, *owned]
    waits = browser.evaluate(
        "[...document.querySelectorAll('.tl-arrows line')].map(l => l.dataset.to)"
    )
    assert len(waits) == len(owned)  # the research task waits (all) on every search
    assert browser.evaluate("document.querySelectorAll('.explain tbody tr').length") >= 5
    assert browser.evaluate("document.querySelector('#verify .badge').textContent") == "ok"
    shot = browser.screenshot(tmp_path / "research.png")
    assert shot.read_bytes().startswith(PNG) and shot.stat().st_size > 20_000

    # hover: the bar's details in the page's own tooltip
    x, y = browser.evaluate(
        "(() => { const r = document.querySelector('#tl .s-waiting').getBoundingClientRect();"
        " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
    )
    browser.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
    tip = browser.evaluate("[document.getElementById('tip').hidden, tip.textContent]")
    assert tip[0] is False and "waits all on" in tip[1] and owned[0] in tip[1]

    # zoom: twice as wide, with the axis redrawn for the part in view
    browser.evaluate("document.querySelector('[data-zoom=in]').click()")
    assert browser.evaluate("document.getElementById('tl-canvas').style.width") == "200%"
    assert browser.evaluate("document.querySelectorAll('#tl-axis .tick').length") >= 3
    browser.evaluate("document.querySelector('[data-zoom=fit]').click()")

    # the filter keeps the rows that match (and their arrows)
    browser.evaluate(
        f"(() => {{ const f = document.getElementById('filter'); f.value = {owned[0]!r};"
        " f.dispatchEvent(new Event('input')); })()"
    )
    shown = browser.evaluate(
        "[...document.querySelectorAll('.tl-name:not(.sub)')]"
        ".filter(e => !e.classList.contains('hide')).map(e => e.dataset.row)"
    )
    assert len(shown) == 1
    assert browser.errors() == []


def test_the_whole_store_report_loads_with_runs_and_turns(
    browser: Browser, demo: Path, tmp_path: Path
) -> None:
    page = tmp_path / "store.html"
    assert main(["report", str(demo), "--out", str(page), "--restart-limit", "2"]) == 0
    load(browser, page)
    assert browser.errors() == []
    lanes = browser.evaluate(
        "[...new Set([...document.querySelectorAll('.tl-lane')].map(l => l.dataset.lane))]"
    )
    assert {"task", "runs", "role:leader"} <= set(lanes)
    marks = browser.evaluate(
        "[...new Set([...document.querySelectorAll('#tl .mark')].map(m => m.classList[1]))]"
    )
    assert {"m-crash", "m-parked", "m-retry", "m-abort", "m-refusal", "m-end"} <= set(marks)
    browser.screenshot(tmp_path / "store.png", full=False)


def test_the_report_reads_without_javascript(browser: Browser, demo: Path, tmp_path: Path) -> None:
    root, owned = known_tree(demo, "batch")
    page = tmp_path / "batch.html"
    assert main(["report", str(demo), root, "--out", str(page)]) == 0
    load(browser, page, scripts=False)
    assert browser.evaluate("document.getElementById('tools').hidden") is True
    assert browser.evaluate("document.getElementById('tip')") is None  # no script ran
    tree = browser.evaluate(
        "[...document.querySelectorAll('table.tree tbody tr td.name')].map(td => td.textContent)"
    )
    assert tree == [root, *owned]
    bars = browser.evaluate("document.querySelectorAll('#tl .bar').length")
    assert bars >= 4 * (1 + len(owned))  # the timeline is drawn by the HTML alone
    assert browser.evaluate("document.querySelectorAll('.tl-arrows line').length") == len(owned)
    browser.screenshot(tmp_path / "batch-no-js.png")
    assert browser.errors() == []


def test_strings_a_task_recorded_never_run_in_the_browser(browser: Browser, tmp_path: Path) -> None:
    store = hostile_store(tmp_path / "hostile.db")
    page = tmp_path / "hostile.html"
    assert main(["report", str(store), ROOT, "--out", str(page)]) == 0
    load(browser, page)
    assert browser.errors() == []  # not even a script the page's policy had to refuse
    assert browser.evaluate("document.title") == f"tasktrail report: {ROOT}"
    assert browser.evaluate("document.scripts.length") == 1
    assert browser.evaluate("document.images.length") == 0
    handlers = browser.evaluate(
        "[...document.querySelectorAll('*')].flatMap(e => [...e.attributes])"
        ".filter(a => a.name.startsWith('on')).length"
    )
    assert handlers == 0
    cells = browser.evaluate(
        "[...document.querySelectorAll('table.tree tbody tr')].map(tr => "
        "[tr.cells[0].textContent, tr.cells[1].textContent])"
    )
    assert cells == [[ROOT, HOSTILE], [CHILD, HOSTILE]]  # shown as the text it is
    hover = browser.evaluate(
        "[...document.querySelectorAll('#tl [data-tip]')].map(e => e.dataset.tip).join()"
    )
    assert HOSTILE in hover
    browser.screenshot(tmp_path / "hostile.png")


COUNT = "document.getElementById('filter-count').textContent"
LABELS = """(() => {
  const boxes = [...document.querySelectorAll('#tl-axis .tick, #tl-axis .fold > span')]
    .map(e => e.getBoundingClientRect()).filter(r => r.width > 0)
    .map(r => [r.left, r.right]).sort((a, b) => a[0] - b[0]);
  return boxes.filter((b, i) => i > 0 && b[0] < boxes[i - 1][1] - 0.5).length;
})()"""


def find(browser: Browser, words: str) -> None:
    browser.evaluate(
        f"(() => {{ const f = document.getElementById('filter'); f.value = {words!r};"
        " f.dispatchEvent(new Event('input')); })()"
    )


def test_the_whole_store_report_draws_and_finds_every_task(
    browser: Browser, demo: Path, tmp_path: Path
) -> None:
    tasks = replay(demo).world.tasks
    page = tmp_path / "everything.html"
    assert main(["report", str(demo), "--out", str(page)]) == 0
    load(browser, page)
    assert browser.errors() == []
    rows = browser.evaluate("document.querySelectorAll('.tl-name:not(.sub)').length")
    assert rows == len(tasks)  # every task the page lists is drawn
    assert browser.evaluate(COUNT) == f"{len(tasks)} tasks"
    assert browser.evaluate(LABELS) == 0  # the axis labels do not pile up
    for _ in range(3):
        browser.evaluate("document.querySelector('[data-zoom=in]').click()")
        assert browser.evaluate(LABELS) == 0
    browser.evaluate("document.querySelector('[data-zoom=fit]').click()")

    # Outcomes and errors are written beside their marks, not only in tooltips.
    notes = browser.evaluate(
        "[...document.querySelectorAll('.note-by')].filter(e => e.offsetWidth > 0)"
        ".map(e => e.textContent)"
    )
    assert "aborted: operator abort" in notes and "completed" in notes
    assert any(note.startswith("run failed: ") for note in notes)

    # The search box finds tasks by every word typed, in the timeline and the tree.
    failed = sorted(
        t.id for t in tasks.values() if t.kind == "nightly" and t.outcome.status != "completed"
    )
    find(browser, "nightly aborted")
    shown = browser.evaluate(
        "[...document.querySelectorAll('table.tree tbody tr:not(.hide) td.name')]"
        ".map(td => td.textContent)"
    )
    drawn = browser.evaluate(
        "[...document.querySelectorAll('.tl-name:not(.sub):not(.hide) a')].map(a => a.textContent)"
    )
    assert shown == drawn == failed and failed
    assert browser.evaluate(COUNT) == (f"{len(failed)} of {len(tasks)} tasks match")
    browser.screenshot(tmp_path / "everything.png", full=False)
    assert browser.errors() == []
