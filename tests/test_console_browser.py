"""``tasktrail serve`` in a real browser (issue 46): headless Chromium (the report tests'
harness) on the console served by a process of its own.

The list's filters and search; a task's page (the report's timeline of its tree, its
history, its children and owner as links); a task submitted by another process showing
on an open page without a reload, the filters and the scroll kept; an abort from the
page recorded with the token's actor and the reason typed; no act buttons without a
token file, and a forged cross-site POST refused with nothing appended; a memo of
``<img src=x onerror=alert(1)>`` shown as text with no script run. No page logs a
console error. Screenshots are saved under each test's temporary folder.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.console_browser import ConsoleBrowser, chromium
from helpers.console_server import ALICE, as_process, head, small_store, token_file

from tasktrail.domain import Scheduler
from tasktrail.replay import replay

ROWS = "[...document.querySelectorAll('#rows tr[data-task]')].map(r => r.dataset.task)"
BOUND_S = 15.0
"""How long a live page may take to show news here (a bound on a shared machine, not
the measure: benchmarks.console measures it)."""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleBrowser]:
    yield from chromium(tmp_path_factory)


@pytest.fixture
def store(tmp_path: Path) -> tuple[str, dict[str, str]]:
    location = str(tmp_path / "trail.db")
    return location, small_store(location)


def clean(browser: ConsoleBrowser) -> None:
    """A blank page first, then no events: the last test's page, its server gone, keeps
    retrying its live stream, and a refused connection it logged is not this test's."""
    seen = len(browser.events)
    browser.call("Page.navigate", {"url": "about:blank"})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(
        e.get("method") == "Page.loadEventFired" for e in browser.events[seen:]
    ):
        time.sleep(0.02)
    browser.events.clear()


def test_the_list_filters_and_searches(
    browser: ConsoleBrowser, store: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    location, known = store
    with as_process(location) as served:
        clean(browser)
        browser.goto(served.url)
        assert len(browser.evaluate(ROWS)) == 35
        browser.fill("[name=q]", "503")
        browser.click("#filters button[type=submit]")
        browser.wait_for(f"location.search.includes('q=503') && {ROWS}.length === 1")
        assert browser.evaluate(ROWS) == [known["bad"]]
        assert browser.evaluate("document.querySelector('[name=q]').value") == "503"
        browser.goto(served.url + "?status=terminal&order=oldest")
        assert browser.evaluate(ROWS) == [known["ok"], known["bad"]]
        browser.goto(served.url + "?kind=job&per_page=10")
        first = browser.evaluate(ROWS)
        browser.click(".pager a[rel=next]")
        browser.wait_for("location.search.includes('page=2')")
        browser.wait_ready()
        assert len(browser.evaluate(ROWS)) == 10 and not set(first) & set(browser.evaluate(ROWS))
        browser.screenshot(tmp_path / "list.png", full=False)
        assert browser.errors() == []


def test_a_task_page_draws_its_tree_history_and_links(
    browser: ConsoleBrowser, store: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    location, known = store
    with as_process(location) as served:
        clean(browser)
        browser.goto(f"{served.url}tasks/{known['tree']}")
        names = browser.evaluate(
            "[...document.querySelectorAll('.tl-name:not(.sub) a')].map(a => a.textContent)"
        )
        assert names == [known["tree"], known["ok"], known["bad"]]
        assert browser.evaluate("document.querySelectorAll('.tl-arrows line').length") == 2
        events = browser.evaluate(
            "[...document.querySelectorAll('#history tbody tr')].map(r => r.cells[2].textContent)"
        )
        assert events[:3] == ["TaskSubmitted", "TaskReserved", "WaitStarted"]
        actor = browser.evaluate("document.querySelector('#history tbody tr').cells[5].textContent")
        assert actor == "carol"
        browser.screenshot(tmp_path / "tree.png")
        browser.click(f"#children a[href='/tasks/{known['bad']}']")
        browser.wait_for(f"location.pathname === '/tasks/{known['bad']}'")
        browser.wait_ready()
        said = browser.evaluate("document.querySelector('dl.facts').textContent")
        assert "source returned 503" in said and known["tree"] in said  # error, owner link
        assert browser.errors() == []


def test_news_from_another_process_shows_on_an_open_page_without_a_reload(
    browser: ConsoleBrowser, store: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    location, known = store
    with as_process(location) as served:
        clean(browser)
        browser.goto(served.url + "?kind=job")
        browser.wait_for("document.getElementById('conn').classList.contains('on')")
        browser.evaluate("window.scrollTo(0, 300); window.loadedOnce = 'yes'")
        browser.fill("[name=q]", "typed, not sent")
        scrolled = browser.evaluate("window.scrollY")
        submitted = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "tasktrail",
                "submit",
                location,
                "job",
                "--phase",
                "run",
                "--id",
                "from-another-process",
                "--reason",
                "a test",
            ],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        browser.wait_for(f"{ROWS}[0] === 'from-another-process'", BOUND_S)
        shown = time.monotonic() - submitted
        assert browser.evaluate("window.loadedOnce") == "yes"  # the same page: no reload
        assert browser.evaluate("document.querySelector('[name=q]').value") == "typed, not sent"
        assert browser.evaluate("window.scrollY") == scrolled
        print(f"a submission from another process showed {shown:.2f} s after it was asked")

        browser.goto(f"{served.url}tasks/{known['memo']}")
        browser.wait_for("document.getElementById('conn').classList.contains('on')")
        browser.evaluate("window.loadedOnce = 'yes'")
        with Scheduler.open(location, worker="elsewhere") as other:
            other.abort(known["memo"], actor="erin", reason="from elsewhere")
        browser.wait_for(
            "[...document.querySelectorAll('#history td')].some(td => td.textContent === 'erin')",
            BOUND_S,
        )
        assert browser.evaluate("window.loadedOnce") == "yes"
        browser.screenshot(tmp_path / "live.png")
        assert browser.errors() == []


def test_an_abort_from_the_page_is_recorded_with_the_tokens_actor_and_reason(
    browser: ConsoleBrowser, store: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    location, known = store
    with as_process(location, "--token-file", str(token_file(tmp_path))) as served:
        clean(browser)
        browser.goto(f"{served.url}tasks/{known['memo']}")
        assert browser.evaluate("document.querySelectorAll('form.act').length") == 0
        browser.click("a.who")  # sign in to act
        browser.wait_for("location.pathname === '/login'")
        browser.wait_ready()
        browser.fill("[name=token]", ALICE)
        browser.click(".login button")
        browser.wait_for(f"location.pathname === '/tasks/{known['memo']}'")
        browser.wait_ready()
        assert browser.evaluate("document.querySelectorAll('form.act').length") == 4
        browser.fill("form[data-act=abort] [name=reason]", "stuck since the 9:00 deploy")
        browser.click("form[data-act=abort] button[type=submit]")
        said = browser.wait_for(
            "!document.getElementById('said').hidden && document.getElementById('said').textContent"
        )
        assert said.startswith(f"abort-marked {known['memo']} by alice")
        browser.wait_for(
            "[...document.querySelectorAll('#history td')].some(td => td.textContent === 'alice')",
            BOUND_S,
        )
        # Fork as of a position picked in the history (the timeline's bars pick it too).
        first = browser.evaluate("document.querySelector('#history tbody tr').dataset.pos")
        browser.click("#history tbody tr td")
        assert browser.evaluate("document.getElementById('fork-at').value") == first
        browser.fill("form[data-act=fork] [name=reason]", "again from the start")
        browser.click("form[data-act=fork] button[type=submit]")
        browser.wait_for("document.getElementById('said').textContent.startsWith('forked')")
        said = browser.evaluate("document.getElementById('said').textContent")
        assert said.startswith(f"forked {known['memo']} as of position {first} as ")
        browser.screenshot(tmp_path / "acted.png")
        assert browser.errors() == []
    marks = [
        r
        for r in replay(location).audit
        if r["task_id"] == known["memo"] and r["event_type"] == "AbortMarked"
    ]
    assert [(r["actor"], r["reason"]) for r in marks] == [("alice", "stuck since the 9:00 deploy")]


def test_no_buttons_without_a_token_file_and_a_forged_post_is_refused(
    browser: ConsoleBrowser, store: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    location, known = store
    with as_process(location) as served:
        clean(browser)
        browser.goto(f"{served.url}tasks/{known['memo']}")
        assert browser.evaluate("document.querySelectorAll('form.act, a.who').length") == 0
        assert browser.errors() == []
    before = head(location)
    with as_process(location, "--token-file", str(token_file(tmp_path))) as served:
        browser.goto(f"{served.url}login")
        browser.fill("[name=token]", ALICE)
        browser.click(".login button")
        browser.wait_for("location.pathname === '/'")  # signed in: the cookie is set
        browser.wait_ready()
        forged = tmp_path / "forged.html"
        forged.write_text(
            f'<form id="f" method="post" action="{served.url}tasks/{known["memo"]}/abort">'
            '<input name="reason" value="forged"></form>'
        )
        clean(browser)
        browser.open_file(forged)
        browser.evaluate("document.getElementById('f').submit()")
        browser.wait_for(f"location.href.startsWith('{served.url}')")
        browser.wait_ready()
        assert browser.evaluate("document.querySelector('h1').textContent") == "Refused"
    assert head(location) == before  # nothing appended


def test_a_hostile_memo_shows_as_text_and_runs_nothing(
    browser: ConsoleBrowser, tmp_path: Path
) -> None:
    hostile = "<img src=x onerror=alert(1)>"
    location = str(tmp_path / "trail.db")
    with Scheduler.open(location) as s:
        task = s.submit("job", id="hostile", phase="run", memos={"note": hostile, hostile: 1})
        s.abort(task, actor="ops", reason=hostile)
    with as_process(location) as served:
        clean(browser)
        browser.goto(f"{served.url}tasks/{task}")
        cells = browser.evaluate(
            "[...document.querySelectorAll('#memos td')].map(td => td.textContent)"
        )
        assert hostile in cells and f'"{hostile}"' in cells
        assert hostile in browser.evaluate("document.getElementById('history').textContent")
        assert browser.evaluate("document.images.length") == 0
        assert browser.evaluate("document.scripts.length") == 1  # the console's own
        browser.goto(f"{served.url}?q=hostile")
        assert browser.evaluate(ROWS) == [task]
        time.sleep(0.2)  # a script, had one run, would have opened its dialog by now
        assert browser.dialogs() == []
        assert browser.errors() == []
