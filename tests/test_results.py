"""Results (issue 42 item 1): ``finish(result=...)`` carried on the event that ends the
task, ``Scheduler.result`` / ``result_async`` waiting on the store's news, ``inv.outcome``
of a waited-on child, ``tasktrail result``, and results in ``history`` and ``explain``."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import event_count
from helpers.cli import run

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Registry,
    Scheduler,
    TaskDefinition,
    UnknownTask,
)
from tasktrail.domain.tasks.events import TaskEnded
from tasktrail.domain.tasks.validation import MAX_VALUE_BYTES


def _answering(value: Any) -> Any:
    def phase(inv: Any) -> None:
        inv.finish("completed", result=value)

    return phase


def _failing(inv: Any) -> None:
    inv.finish("failed", {"message": "the model refused", "detail": {"code": 7}})


def _owner_start(inv: Any) -> str | None:
    children = [inv.submit("answer", phase="go") for _ in range(2)]
    inv.memo("children", children)
    inv.wait(children, then="collect")
    return None


def _owner_collect(inv: Any) -> None:
    children = inv.memo("children")
    answers = [inv.outcome(child).result for child in children]
    inv.finish("completed", result={"sum": sum(a["n"] for a in answers)})


def _registry() -> Registry:
    return Registry(
        [
            TaskDefinition("answer", 1, {"go": _answering({"n": 21, "words": ["a", "b"]})}),
            TaskDefinition("fail", 1, {"go": _failing}),
            TaskDefinition("big", 1, {"go": _answering("x" * (MAX_VALUE_BYTES + 1))}),
            TaskDefinition("owner", 1, {"start": _owner_start, "collect": _owner_collect}),
        ]
    )


@pytest.fixture
def s(store_url: str, clock: ManualClock) -> Any:
    scheduler = Scheduler.open(store_url, clock=clock, registry=_registry())
    yield scheduler
    scheduler.close()


def test_result_of_a_completed_task(s: Scheduler) -> None:
    task_id = s.submit("answer", phase="go")
    s.run_until_idle()
    outcome = s.result(task_id, timeout=5)
    assert (outcome.status, outcome.result, outcome.error) == (
        "completed",
        {"n": 21, "words": ["a", "b"]},
        None,
    )
    ended = s.history(task_id)[-1]
    assert isinstance(ended, TaskEnded) and ended.result == {"n": 21, "words": ["a", "b"]}


def test_result_of_a_failed_task_carries_its_error(s: Scheduler) -> None:
    task_id = s.submit("fail", phase="go")
    s.run_until_idle()
    outcome = s.result(task_id)
    assert outcome.status == "failed" and outcome.result is None
    assert outcome.error == {"message": "the model refused", "detail": {"code": 7}}


def test_result_of_an_aborted_task(s: Scheduler) -> None:
    task_id = s.submit("answer", phase="go")
    s.abort(task_id, actor="alice", reason="not needed")
    s.run_until_idle()
    outcome = s.result(task_id, timeout=5)
    assert outcome.status == "aborted" and outcome.result is None


def test_result_times_out_while_the_task_is_not_terminal(s: Scheduler) -> None:
    task_id = s.submit("answer", phase="go")
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=f"task {task_id} is not terminal after 0.2 s"):
        s.result(task_id, timeout=0.2)
    assert 0.2 <= time.monotonic() - started < 2


def test_result_of_an_unknown_task_raises(s: Scheduler) -> None:
    with pytest.raises(UnknownTask):
        s.result("never-submitted", timeout=1)
    with pytest.raises(InvalidArgument, match="timeout"):
        s.result("never-submitted", timeout=-1)


def test_result_wakes_at_once_on_this_process_news(s: Scheduler) -> None:
    """A waiter in the process that finishes the task wakes on the append itself: far
    sooner than the fallback poll (1 s)."""
    task_id = s.submit("answer", phase="go")
    returned: list[float] = []

    def wait() -> None:
        s.result(task_id, timeout=10)
        returned.append(time.monotonic())

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.1)  # the waiter is waiting (a wait of news, not of the clock)
    s.run_until_idle()
    finished = time.monotonic()
    waiter.join(10)
    assert returned and returned[0] - finished < 0.3


def test_result_async_waits_without_blocking_the_loop(s: Scheduler) -> None:
    task_id = s.submit("answer", phase="go")

    async def main() -> tuple[Any, int]:
        ticks = 0

        async def ticking() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(ticking())
        waiting = asyncio.create_task(s.result_async(task_id, timeout=10))
        await asyncio.sleep(0.2)
        await asyncio.to_thread(s.run_until_idle)
        outcome = await waiting
        ticker.cancel()
        with pytest.raises(TimeoutError):
            await s.result_async(s.submit("answer", phase="go"), timeout=0.1)
        with pytest.raises(UnknownTask):
            await s.result_async("never-submitted")
        return outcome, ticks

    outcome, ticks = asyncio.run(main())
    assert outcome.result == {"n": 21, "words": ["a", "b"]}
    assert ticks >= 10  # the loop ran on while the result was awaited


def test_a_phase_reads_the_outcomes_of_the_children_it_waited_on(s: Scheduler) -> None:
    owner = s.submit("owner", phase="start")
    s.run_until_idle()
    assert s.result(owner, timeout=5).result == {"sum": 42}
    assert s.outcome(owner) is not None


def test_a_result_past_the_size_limit_is_refused_with_nothing_appended(
    s: Scheduler, store_url: str
) -> None:
    task_id = s.submit("big", phase="go")
    s.reserve(task_id)
    before = event_count(s.store)
    with pytest.raises(InvalidArgument, match=r"result is \d+ bytes as JSON; the limit is"):
        s.finish(task_id, "completed", result="x" * (MAX_VALUE_BYTES + 1))
    with pytest.raises(InvalidArgument, match="result must be JSON data"):
        s.finish(task_id, "completed", result={1, 2})
    assert event_count(s.store) == before
    assert s.task(task_id).status == "running"


def test_the_result_command_prints_and_waits(
    s: Scheduler, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    task_id = s.submit("answer", phase="go")
    pending = run(["result", store_url, task_id, "--wait", "0.1"], capsys)
    assert pending.code == 1 and f"task {task_id} has not ended after 0.1 s" in pending.err
    threading.Timer(0.3, s.run_until_idle).start()
    waited = run(["result", store_url, task_id, "--wait", "20", "--json"], capsys)
    assert waited.code == 0, waited.err
    assert json.loads(waited.out) == {
        "task": task_id,
        "status": "completed",
        "terminal": True,
        "result": {"n": 21, "words": ["a", "b"]},
        "error": None,
        "reason": None,
    }
    plain = run(["result", store_url, task_id], capsys)
    assert plain.out.splitlines() == [
        f"task {task_id}: completed",
        'result: {"n": 21, "words": ["a", "b"]}',
    ]
    assert run(["result", store_url, "never-submitted"], capsys).code == 2


def test_history_and_explain_show_the_result(
    s: Scheduler, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    task_id = s.submit("answer", phase="go")
    s.run_until_idle()
    history = run(["history", store_url, task_id], capsys)
    assert "TaskEnded(status=completed, result={'n': 21" in history.out
    explained = run(["explain", store_url, task_id], capsys)
    assert "result={'n': 21" in explained.out


def test_an_old_log_without_results_folds_the_same(tmp_path: Path) -> None:
    """An ending event recorded before results (no ``result`` field) reads as ``None``."""
    from tasktrail.domain.tasks.events import event_from_payload

    old = event_from_payload(TaskEnded, "t1", {"at": 1.0, "rule": None, "status": "completed"})
    assert isinstance(old, TaskEnded) and old.result is None


def test_result_from_a_process_that_is_not_a_worker(store_url: str, tmp_path: Path) -> None:
    """Three processes: this one submits, a caller that is not a worker waits for the
    result, a ``tasktrail worker`` runs the task. The caller returns once the worker
    finished, on the news: well within the fallback poll (news.FALLBACK_S, 1 s)."""
    from helpers.worker_processes import processes, submit, wait_for

    with processes(store_url, tmp_path) as started:
        [task_id] = submit(store_url, "answer", 1)
        waiter = started.result_waiter(task_id)
        worker = started.worker("w1", phase_s=30, gated=True)
        wait_for(lambda: started.starts("w1"), 30, worker)
        time.sleep(0.3)  # the caller waits on the news meanwhile, not on a period
        started.open_gate("w1")
        assert waiter.process.stdout is not None
        line = waiter.process.stdout.readline().decode().strip().split(maxsplit=2)
        assert line[1:] == ["completed", '{"by": "w1"}'], waiter.output()
        # The phase logs its end after its decision, which the caller may see first.
        wait_for(lambda: started.ends("w1"), 30, worker)
        [end] = started.ends("w1")
        late_ms = float(line[0]) - float(end[4])
        print(f"the caller returned {late_ms:.1f} ms after the finish")
        assert late_ms < 250, f"the caller returned {late_ms:.0f} ms after the finish"
        assert waiter.process.wait(30) == 0, waiter.output()


def test_the_report_and_the_frames_show_results(
    s: Scheduler, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task_id = s.submit("answer", phase="go")
    s.run_until_idle()
    out = tmp_path / "r.html"
    ran = run(["report", store_url, task_id, "--out", str(out)], capsys)
    assert ran.code == 0, ran.err
    shown = '{"n":21,"words":["a","b"]}'.replace('"', "&quot;")
    assert f'<span class="result">{shown}</span>' in out.read_text()
    pytest.importorskip("pandas")
    from tasktrail.replay import frames

    tasks = frames.tasks(store_url)
    row = tasks[tasks["task_id"] == task_id].iloc[0]
    assert row["result"] == {"n": 21, "words": ["a", "b"]}


def test_a_held_outcome_keeps_its_result_until_the_holder_ends(s: Scheduler) -> None:
    """Rule 5: the result rides on OutcomeHeld, then on the TaskEnded the last owned
    task's end makes; ``result`` waits for that end (a held outcome is not terminal)."""
    owner = s.submit("answer", phase="go")
    s.reserve(owner)
    child = s.submit_owned(owner, "answer", phase="go")
    s.finish(owner, "completed", result=["held"])
    assert s.task(owner).status == "completing"
    assert s.outcome(owner) is not None and s.outcome(owner).result == ["held"]  # type: ignore[union-attr]
    with pytest.raises(TimeoutError):
        s.result(owner, timeout=0.1)
    s.run_until_idle()  # the child ends: the holder with it
    assert s.result(child, timeout=5).result == {"n": 21, "words": ["a", "b"]}
    ended = s.history(owner)[-1]
    assert isinstance(ended, TaskEnded) and (ended.rule, ended.result) == (5, ["held"])
    assert s.result(owner, timeout=5).result == ["held"]
