"""A task's output streams (issue 44, item 1): rules 28 and 29, on both stores.

A phase emits chunks (``inv.emit``), a caller reads them while they come
(``Scheduler.read_stream``, ``read_stream_async``), resuming after the last offset it
saw; offsets stay what they were through a crash of the emitting worker (SIGKILL).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import crash, event_count
from helpers.cli import run
from helpers.worker_processes import STARTUP_S, Child, wait_for

from tasktrail.domain import (
    ChunksEmitted,
    ManualClock,
    Registry,
    RuleViolation,
    Scheduler,
    StreamClosed,
    StreamRefused,
    TaskDefinition,
    UnknownTask,
)
from tasktrail.domain.tasks.streams import MAX_CHUNK_BYTES
from tasktrail.replay import replay

HELPERS = Path(__file__).parent / "helpers"
FREE = Registry([TaskDefinition("free", 1, {"a": lambda inv: "b", "b": lambda inv: "a"})])
"""A kind whose invocations a test drives by hand (``reserve``, then its calls)."""


def invocation(s: Scheduler, task_id: str) -> Any:
    s.reserve(task_id)
    return s._invocations[task_id]


def types(s: Scheduler, task_id: str) -> list[str]:
    return [type(e).__name__ for e in s.history(task_id)]


def test_chunks_are_read_in_order_and_a_reader_resumes_after_an_offset(
    store_url: str, clock: ManualClock
) -> None:
    with Scheduler.open(store_url, clock=clock, registry=FREE) as s:
        task = s.submit("free", phase="a")
        inv = invocation(s, task)
        assert [inv.emit({"token": n}) for n in range(5)] == [0, 1, 2, 3, 4]
        assert inv.emit("log line", stream="log") == 0
        inv.checkpoint("b")  # the decision records what waited first, in its append
        assert types(s, task)[-3:] == ["ChunksEmitted", "ChunksEmitted", "CheckpointCommitted"]
        assert list(s.read_stream(task, follow=False)) == [(n, {"token": n}) for n in range(5)]
        assert list(s.read_stream(task, after=2, follow=False)) == [
            (3, {"token": 3}),
            (4, {"token": 4}),
        ]
        assert list(s.read_stream(task, stream="log", follow=False)) == [(0, "log line")]
        assert list(s.read_stream(task, stream="none", follow=False)) == []
        summary = s.task(task).streams["out"]
        assert (summary.chunks, summary.closed) == (5, False)
        assert replay(s.store).tasks == s.world.tasks


def test_rule_28_a_chunk_past_the_size_limit_is_refused_and_nothing_is_emitted(
    store_url: str, clock: ManualClock
) -> None:
    with Scheduler.open(store_url, clock=clock, registry=FREE) as s:
        task = s.submit("free", phase="a")
        inv = invocation(s, task)
        before = event_count(s.store)
        too_large = "x" * MAX_CHUNK_BYTES
        with pytest.raises(StreamRefused) as refused:
            inv.emit(too_large)
        assert refused.value.rule == 28 and refused.value.task_id == task
        assert f"the limit is {MAX_CHUNK_BYTES}" in str(refused.value)
        with pytest.raises(StreamRefused, match="JSON"):
            inv.emit(float("nan"))
        with pytest.raises(StreamRefused, match="stream"):
            inv.emit(1, stream="")
        inv.flush()
        assert event_count(s.store) == before and inv.streamed() == 0
        assert inv.emit("x" * (MAX_CHUNK_BYTES - 2)) == 0  # at the limit: taken


def test_rule_28_a_closed_stream_takes_no_chunk(store_url: str, clock: ManualClock) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=FREE, worker="w")
    task = s.submit("free", phase="a")
    inv = invocation(s, task)
    inv.emit("a")
    inv.close_stream("out")
    with pytest.raises(StreamRefused, match="closed") as refused:
        inv.emit("b")
    assert refused.value.rule == 28
    inv.close_stream("out")  # closing a closed stream does nothing
    inv.checkpoint("b")
    assert types(s, task)[-3:] == ["ChunksEmitted", "StreamClosed", "CheckpointCommitted"]
    crash(s)  # a later invocation finds it closed in the log
    with Scheduler.open(store_url, clock=clock, registry=FREE, worker="w") as s:
        head = event_count(s.store)
        with pytest.raises(StreamRefused):
            invocation(s, task).emit("c")
        assert event_count(s.store) == head + 1  # its reservation only
        assert list(s.read_stream(task)) == [(0, "a")]  # closed: it ends, no wait


def test_rule_29_offsets_are_dense_and_stable_across_a_crash(
    store_url: str, clock: ManualClock
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=FREE, worker="w")
    s.stream_linger_s = None  # no stream writer: chunks wait for a decision (or flush)
    task = s.submit("free", phase="a")
    inv = invocation(s, task)
    for n in range(3):
        inv.emit(n)
    inv.flush()
    inv.emit("lost: never recorded")  # waits, and the crash comes first
    crash(s)
    with Scheduler.open(store_url, clock=clock, registry=FREE, worker="w") as s:
        assert s.task(task).restarts == 1
        inv = invocation(s, task)
        assert inv.streamed() == 3  # the phase run again goes on after what was recorded
        assert inv.emit(3) == 3
        inv.finish("completed")
        assert list(s.read_stream(task)) == [(0, 0), (1, 1), (2, 2), (3, 3)]
        first = [e.first for e in s.history(task) if isinstance(e, ChunksEmitted)]
        assert first == [0, 3]
        assert replay(s.store).tasks == s.world.tasks


def test_rule_29_a_tasks_end_closes_its_streams_and_a_following_reader_ends(
    store_url: str, clock: ManualClock
) -> None:
    with Scheduler.open(store_url, clock=clock, registry=FREE) as s:
        task = s.submit("free", phase="a")
        inv = invocation(s, task)
        inv.emit("first")
        inv.flush()
        seen: list[Any] = []
        reading = s.read_stream(task, timeout=60)  # its first look is made here
        reader = threading.Thread(target=lambda: seen.extend(reading))
        reader.start()
        inv.emit("last")
        inv.finish("completed")  # no close_stream: the end closes it
        reader.join(timeout=60)
        assert not reader.is_alive() and seen == [(0, "first"), (1, "last")]
        assert s.task(task).to_dict()["streams"] == {
            "out": {"chunks": 2, "bytes": 13, "closed": True}
        }
        with pytest.raises(RuleViolation) as refused:
            inv.emit("after the end")
        assert refused.value.rule == 1


def test_a_reader_times_out_without_a_new_chunk(store_url: str, clock: ManualClock) -> None:
    with Scheduler.open(store_url, clock=clock, registry=FREE) as s:
        task = s.submit("free", phase="a")
        inv = invocation(s, task)
        inv.emit("only")
        inv.flush()
        seen: list[Any] = []
        with pytest.raises(TimeoutError, match="after offset 0"):
            for chunk in s.read_stream(task, timeout=0.05):
                seen.append(chunk)
        assert seen == [(0, "only")]
        with pytest.raises(UnknownTask):
            s.read_stream("no-such-task")


def test_an_async_reader_sees_every_chunk(store_url: str, clock: ManualClock) -> None:
    with Scheduler.open(store_url, clock=clock, registry=FREE) as s:
        task = s.submit("free", phase="a")
        inv = invocation(s, task)

        async def main() -> list[Any]:
            async def read() -> list[Any]:
                return [chunk async for chunk in s.read_stream_async(task, timeout=60)]

            reader = asyncio.create_task(read())
            await asyncio.sleep(0)
            for n in range(20):
                inv.emit(n)
                await inv.flush_async()
            inv.finish("completed")
            return await reader

        assert asyncio.run(main()) == [(n, n) for n in range(20)]


def test_a_phase_that_only_emits_decided_nothing_and_one_that_raises_keeps_its_chunks(
    store_url: str, clock: ManualClock
) -> None:
    def chatty(inv: Any) -> None:
        inv.emit("thinking")

    def failing(inv: Any) -> None:
        for n in range(3):
            inv.emit(n)
        raise ConnectionError("the model went away")

    registry = Registry(
        [TaskDefinition("chatty", 1, {"go": chatty}), TaskDefinition("failing", 1, {"go": failing})]
    )
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        quiet, loud = s.submit("chatty", phase="go"), s.submit("failing", phase="go")
        report = s.run_pass()
        assert report.faulted == {quiet: "no_decision", loud: "threw"}
        assert list(s.read_stream(quiet)) == [(0, "thinking")]
        assert list(s.read_stream(loud)) == [(0, 0), (1, 1), (2, 2)]


def test_a_worker_coalesces_a_fast_phases_chunks_and_a_reader_sees_each(
    store_url: str, clock: ManualClock
) -> None:
    def talk(inv: Any) -> None:
        for n in range(300):
            inv.emit(n)
        inv.close_stream()
        inv.finish("completed")

    with Scheduler.open(
        store_url, clock=clock, registry=Registry([TaskDefinition("talk", 1, {"go": talk})])
    ) as s:
        task = s.submit("talk", phase="go")
        reading = s.read_stream(task, timeout=60)
        s.run_until_idle()
        assert list(reading) == [(n, n) for n in range(300)]
        emitted = [e for e in s.history(task) if isinstance(e, ChunksEmitted)]
        assert sum(len(e.values) for e in emitted) == 300 and len(emitted) <= 300
        assert [type(e) for e in s.history(task)][-2] is StreamClosed


# ─── processes: a reader that is no worker, a worker killed mid-stream ──────


def _env(folder: Path, **values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TASKTRAIL_WORKER"}
    env["PYTHONPATH"] = os.pathsep.join([str(HELPERS), env.get("PYTHONPATH", "")])
    env["PYTHONFAULTHANDLER"] = "1"
    env["TASKTRAIL_TEST_STOPPED"] = str(folder / "stopped")
    env.update(values)
    return env


def _start(command: list[str], folder: Path, name: str, env: dict[str, str]) -> Child:
    stderr = folder / f"{name}.stderr"
    with stderr.open("wb") as err:
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=err)
    return Child(process, stderr)


def _worker(url: str, folder: Path, name: str, **env: str) -> Child:
    command = [sys.executable, "-m", "tasktrail.replay.cli", "worker", "stream_workload:registry"]
    child = _start(
        [*command, "--store", url, "--worker", name, "--poll", "50"],
        folder,
        name,
        _env(folder, **env),
    )
    wait_for(lambda: f"worker {name} started" in child.output(), STARTUP_S, child)
    return child


def _reader(url: str, folder: Path, task: str, after: int) -> Child:
    command = [sys.executable, str(HELPERS / "stream_workload.py"), "read", url, task, str(after)]
    child = _start(command, folder, f"reader-{after}", _env(folder))
    assert child.process.stdout is not None
    line = child.process.stdout.readline().decode()
    assert line.strip() == "reading", (line, child.output())
    return child


def _chunks_read(child: Child) -> list[tuple[int, Any]]:
    """What a reader process printed, to its end (it ends when the stream closes)."""
    assert child.process.stdout is not None
    out, _ = child.process.communicate(timeout=120)
    lines = out.decode().splitlines()
    assert lines and lines[-1] == "closed", child.output()
    return [tuple(json.loads(line)) for line in lines[:-1]]  # type: ignore[misc]


@pytest.mark.parametrize("after", [-1, 4])
def test_read_stream_from_a_process_that_is_not_a_worker(
    store_url: str, tmp_path: Path, after: int
) -> None:
    from helpers.stream_workload import registry

    with Scheduler.open(store_url, registry=registry, worker="submitter") as s:
        task = s.submit("talk", phase="say")
    reader = _reader(store_url, tmp_path, task, after)  # waiting before anything is emitted
    worker = _worker(store_url, tmp_path, "talker", TASKTRAIL_TEST_CHUNKS="12")
    try:
        assert _chunks_read(reader) == [(n, {"i": n}) for n in range(after + 1, 12)]
    finally:
        for child in (reader, worker):
            child.process.kill()
            child.process.wait()


def test_a_reader_that_reconnects_after_offset_n_sees_the_rest_once_through_a_sigkill(
    store_url: str, tmp_path: Path
) -> None:
    from helpers.stream_workload import registry

    total, stop_at, seen_before = 40, 25, 17
    with Scheduler.open(store_url, registry=registry, worker="submitter") as s:
        task = s.submit("talk", phase="say")
    first = _worker(
        store_url,
        tmp_path,
        "first",
        TASKTRAIL_TEST_CHUNKS=str(total),
        TASKTRAIL_TEST_STOP_AT=str(stop_at),
    )
    second: Child | None = None
    try:
        with Scheduler.open(store_url, worker="reader") as s:  # no registry: no worker
            seen = []
            for offset, value in s.read_stream(task, timeout=120):
                seen.append((offset, value))
                if offset == seen_before:
                    break  # the caller goes away (a browser closed) at offset N
            assert seen == [(n, {"i": n}) for n in range(seen_before + 1)]
            wait_for((tmp_path / "stopped").exists, 120, first)
            first.process.send_signal(signal.SIGKILL)  # mid-stream, mid-phase
            first.process.wait()
            second = _worker(store_url, tmp_path, "second", TASKTRAIL_TEST_CHUNKS=str(total))
            rest = list(s.read_stream(task, after=seen_before, timeout=120))
            assert rest == [(n, {"i": n}) for n in range(seen_before + 1, total)]  # each once
            assert s.result(task, timeout=120).result == {"chunks": total}
            assert types(s, task).count("TaskRecovered") == 1  # the first worker's
    finally:
        for child in (first, second):
            if child is not None:
                child.process.kill()
                child.process.wait()


# ─── the command line ───────────────────────────────────────────────────────


def test_tasktrail_stream_prints_the_chunks_after_an_offset(
    store_url: str, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    with Scheduler.open(store_url, clock=clock, registry=FREE) as s:
        task = s.submit("free", phase="a")
        inv = invocation(s, task)
        for n in range(4):
            inv.emit({"n": n})
            inv.flush()  # an event each: history shows them as one run
        inv.emit("note", stream="log")
        inv.close_stream()
        inv.checkpoint("b")
    done = run(["stream", store_url, task, "--json"], capsys)
    assert done.code == 0, done.err
    assert [json.loads(line) for line in done.out.splitlines()] == [
        {"offset": n, "value": {"n": n}} for n in range(4)
    ]
    done = run(["stream", store_url, task, "--after", "2", "--follow"], capsys)
    assert done.code == 0 and done.out.splitlines() == ['3  {"n":3}']
    assert run(["stream", store_url, task, "--stream", "log"], capsys).out.splitlines() == [
        '0  "note"'
    ]
    assert run(["stream", store_url, "nope"], capsys).code == 2
    history = run(["history", store_url, task], capsys).out
    assert "ChunksEmitted x4(stream=out, offsets=0-3, bytes=28)" in history
    assert "stream 'out': 4 chunks, 28 bytes, closed" in history
    assert "stream 'log': 1 chunk, 6 bytes, open" in history
    assert '"n"' not in history
    explained = run(["explain", store_url, task], capsys).out
    assert "emit to stream 'out': 4 chunks at offsets 0-3, 28 bytes in 4 events" in explained
    assert "emit to stream 'log': 1 chunk at offsets 0-0, 6 bytes" in explained
    assert '"n"' not in explained
    as_json = [
        json.loads(line)
        for line in run(["history", store_url, task, "--json"], capsys).out.splitlines()
    ]
    assert {"chunks": 1, "first": 3}.items() <= as_json[5].items() and "values" not in as_json[5]
