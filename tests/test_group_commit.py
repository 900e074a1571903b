"""Group commit (issue 28): the decisions many threads queue while one holds the
scheduler's lock are decided in queue order and appended in one transaction; each
caller returns only once its own events are recorded; a refused decision raises for
its caller alone and adds nothing; a group the store refuses is decided again, each
decision alone, on the store's state; a worker reserves its free slots together and
passes over candidates another worker took."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tasktrail.domain import (
    ManualClock,
    Refused,
    Registry,
    RuleViolation,
    Scheduler,
    TaskDefinition,
    Worker,
    open_store,
)
from tasktrail.domain.app.phases import PassReport
from tasktrail.domain.commands.group_commit import Call
from tasktrail.domain.tasks import decide
from tasktrail.projections.trace import rebuild
from tasktrail.replay import replay


class Appends:
    """Counts a scheduler's appends, and the events of each."""

    def __init__(self, s: Scheduler, before: Callable[[], None] | None = None) -> None:
        self.sizes: list[int] = []
        self.kinds: list[list[str]] = []
        original = s.store.append

        def counted(events: Any, versions: Any, **options: Any) -> list[int]:
            if before is not None and not self.sizes:
                before()
            self.sizes.append(len(events))
            self.kinds.append([type(event).__name__ for event in events])
            return original(events, versions, **options)

        s.store.append = counted  # type: ignore[method-assign]


def queued_together(s: Scheduler, commands: list[Callable[[], Any]]) -> list[Any]:
    """Run each command in a thread of its own while this thread holds the scheduler's
    lock, and let go once every one is queued: one leader takes them all. Returns what
    each returned or raised."""
    outcomes: list[Any] = [None] * len(commands)

    def run(n: int, command: Callable[[], Any]) -> None:
        try:
            outcomes[n] = command()
        except Exception as error:
            outcomes[n] = error

    threads = [
        threading.Thread(target=run, args=(n, command)) for n, command in enumerate(commands)
    ]
    with s._lock:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 10
        while len(s._decision_queue._queued) < len(commands):
            assert time.monotonic() < deadline, "the commands did not queue"
            time.sleep(0.001)
    for thread in threads:
        thread.join(10)
    return outcomes


def assert_world_is_the_fold(s: Scheduler, url: str) -> None:
    fresh = replay(url)
    assert s.world.tasks == fresh.tasks
    assert s.world.indexes["live_order"] == fresh.world.indexes["live_order"]
    assert s.world.folded == fresh.events


def test_decisions_queued_together_are_appended_in_one_transaction(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    appends = Appends(s)
    reader = open_store(store_url)
    seen: dict[str, int] = {}

    def submit_and_look() -> str:
        task_id = s.submit("job")
        # Returned: recorded, for any other reader of the store.
        seen[task_id] = len(reader.stream(task_id))
        return task_id

    ids = queued_together(s, [submit_and_look for _ in range(8)])
    assert appends.sizes == [8]  # one transaction for the eight
    assert all(seen[task_id] == 1 for task_id in ids)
    # In queue order, as they would have been one after another.
    assert list(s.world.indexes["live_order"]) == [
        recorded.event.task_id for recorded in reader.read()
    ]
    reader.close()
    assert_world_is_the_fold(s, store_url)
    s.close()


def test_a_refused_decision_raises_for_its_caller_alone_and_adds_nothing(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    idle = s.submit("job")  # pending: no invocation may decide on it (rule 3)
    appends = Appends(s)
    first, refused, last = queued_together(
        s,
        [
            lambda: s.submit("job", id="first"),
            lambda: s.finish(idle, "completed"),
            lambda: s.submit("job", id="last"),
        ],
    )
    assert (first, last) == ("first", "last")
    assert isinstance(refused, RuleViolation)
    assert appends.sizes == [2] and appends.kinds == [["TaskSubmitted", "TaskSubmitted"]]
    assert s.task(idle).status == "pending"
    assert_world_is_the_fold(s, store_url)
    s.close()


def test_a_group_the_store_refuses_is_decided_again_each_decision_alone(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=registry, worker="here")
    taken, free = s.submit("job"), s.submit("job")
    other = Scheduler.open(store_url, clock=clock, registry=registry, worker="there")
    # Another writer reserves one of the group's tasks after the group was decided and
    # before it was appended: the whole group is refused, nothing of it written.
    appends = Appends(s, before=lambda: other.reserve(taken))
    report = PassReport()
    started = s.start_invocations([taken, free], 2, report)  # both queued together
    # Alone, on the store's state: the one held there is passed over, the other runs.
    assert started.modes == {free: "run"} and started.error is None
    assert report.blocked == {}
    assert s.conflicts == 1
    assert appends.sizes == [2, 1]  # the group's, refused; then the one that went ahead
    assert s.task(taken).worker == "there" and s.task(free).worker == "here"
    assert free in s._invocations and taken not in s._invocations
    assert_world_is_the_fold(s, store_url)
    other.close()
    s.close()


def test_a_worker_reserves_its_free_slots_in_one_append(
    sqlite_url: str, clock: ManualClock
) -> None:
    gate = threading.Event()

    def hold(inv: Any) -> None:
        gate.wait(10)
        inv.finish("completed")

    s = Scheduler.open(
        sqlite_url, clock=clock, registry=Registry([TaskDefinition("slow", 1, {"go": hold})])
    )
    for _ in range(6):
        s.submit("slow")
    appends = Appends(s)
    worker = Worker(s, concurrency=4)
    ticking = threading.Thread(target=worker.tick)
    ticking.start()
    deadline = time.monotonic() + 10
    while worker.invocations.in_flight < 4:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    assert appends.kinds[0] == ["TaskReserved"] * 4  # four slots, one transaction
    gate.set()
    ticking.join(10)
    reserved = [k for kinds in appends.kinds for k in kinds if k == "TaskReserved"]
    assert len(reserved) == 6 and worker.invocations.peak == 4
    s.close()


def test_candidates_another_worker_took_are_passed_over_without_a_refusal(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    here = Scheduler.open(store_url, clock=clock, registry=registry, worker="here")
    tasks = [here.submit("leaf") for _ in range(3)]
    candidates = here.runnable()
    assert sorted(candidates) == sorted(tasks)
    took, left = candidates[:2], candidates[2]
    there = Scheduler.open(store_url, clock=clock, registry=registry, worker="there")
    for task_id in took:
        there.reserve(task_id)
    here.refresh()
    appends = Appends(here)
    report = PassReport()
    started = here.start_invocations(candidates, 2, report)
    assert list(started.modes) == [left]
    assert report.blocked == {} and started.error is None
    assert candidates == []  # every one was looked at
    assert appends.sizes == [1]  # no reservation sent only to be refused
    assert here.task(left).worker == "here"
    there.close()
    here.close()


def test_a_groups_spans_are_the_ones_history_rebuilds(
    tmp_path: Path,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
    meter_provider: MeterProvider,
) -> None:
    store = tmp_path / "trail.db"
    gate = threading.Barrier(4, timeout=10)

    def together(inv: Any) -> None:
        gate.wait()  # the four finish at once: their decisions queue together
        inv.finish("completed")

    s = Scheduler.open(
        store, clock=clock, registry=Registry([TaskDefinition("t", 1, {"go": together})])
    )
    s.configure_telemetry(tracer_provider, meter_provider)
    appends = Appends(s)
    tasks = [s.submit("t") for _ in range(4)]
    Worker(s, concurrency=4).tick()
    assert all(s.task(t).status == "terminal" for t in tasks)
    assert max(appends.sizes) > 1  # some decisions did share an append
    s.close()
    live = {
        (span.context.span_id, span.attributes["phase"])
        for span in exporter.get_finished_spans()
        if span.name == "tasktrail.phase"
    }
    rebuilt = {
        (span.context.span_id, span.attributes["phase"])
        for span in rebuild(store)
        if span.name == "tasktrail.phase"
    }
    assert len(live) == 4 and live == rebuilt


@pytest.mark.parametrize("threads", [2, 16])
def test_many_threads_submitting_at_once_lose_nothing(
    store_url: str, clock: ManualClock, registry: Registry, threads: int
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    ids: list[str] = []
    lock = threading.Lock()

    def submit_many() -> None:
        for _ in range(20):
            task_id = s.submit("job")
            with lock:
                ids.append(task_id)

    workers = [threading.Thread(target=submit_many) for _ in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(30)
    assert len(set(ids)) == 20 * threads
    assert set(s.world.live) == set(ids)
    assert_world_is_the_fold(s, store_url)
    s.close()


def test_what_queues_while_a_group_is_decided_joins_it_before_the_append(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    appends = Appends(s)
    late: list[Any] = []
    original = s._decide_on

    def deciding(world: Any, batch: Any, fn: Any, args: Any, kwargs: Any) -> Any:
        if not late:  # another thread queues a submit while the group is being decided
            thread = threading.Thread(target=lambda: late.append(s.submit("job", id="late")))
            late.append(thread)
            thread.start()
            deadline = time.monotonic() + 10
            while not s._decision_queue._queued:
                assert time.monotonic() < deadline, "the late submit did not queue"
                time.sleep(0.001)
        return original(world, batch, fn, args, kwargs)

    s._decide_on = deciding  # type: ignore[method-assign]
    queued_together(s, [lambda: s.submit("job", id="a"), lambda: s.submit("job", id="b")])
    late[0].join(10)
    assert late[1:] == ["late"]
    assert appends.sizes == [3]  # the late one shared the group's append
    assert [r.event.task_id for r in s.store.read()] == ["a", "b", "late"]
    assert_world_is_the_fold(s, store_url)
    s.close()


def test_a_refusal_that_rested_on_a_refused_groups_decision_is_decided_again(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Decided one after another, B follows A; when the group is refused and A, taken
    again, is refused (another worker took its task), B is decided again on the store's
    state, not left refused for what A had done in the group that was never written."""
    s = Scheduler.open(store_url, clock=clock, registry=registry, worker="here")
    contested, mine = s.submit("job"), s.submit("job")
    other = Scheduler.open(store_url, clock=clock, registry=registry, worker="there")

    def only_if_contested_is_not_mine(draft: Any, ctx: Any) -> Any:
        if draft.get(contested).worker == "here":
            raise Refused("the contested task is ours", task_id=mine)
        return decide.reserve(draft, ctx, mine, registry=registry)

    Appends(s, before=lambda: other.reserve(contested))
    a, b = s._decide_all(
        [
            Call(decide.reserve, (contested,), {"registry": registry}),
            Call(only_if_contested_is_not_mine, (), {}),
        ]
    )
    assert isinstance(a.error, Refused)  # held there, on the store's state
    assert b.error is None and b.result == "run"  # no longer refused
    assert s.task(mine).worker == "here" and s.task(contested).worker == "there"
    assert_world_is_the_fold(s, store_url)
    other.close()
    s.close()


def test_a_caller_of_no_decision_returns_while_a_leader_is_at_work(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    """A worker reserves the candidates it found, and may find none: that call queues
    nothing and must not wait for a leader to release it (none ever would: it has no
    decision to settle). Another thread leads a group meanwhile, held on the lock."""
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    task_id = s.submit("job")
    returned = threading.Event()
    with s._lock:  # a leader claims the lead and waits for the lock, holding it
        leader = threading.Thread(target=lambda: s.reserve(task_id), daemon=True)
        leader.start()
        deadline = time.monotonic() + 10
        while s._decision_queue._leader is None:
            assert time.monotonic() < deadline, "no thread took the lead"
            time.sleep(0.001)
        empty = threading.Thread(target=lambda: (s._reserve_all([]), returned.set()), daemon=True)
        empty.start()
        assert returned.wait(10), "a call of no decision waited for a leader"
    leader.join(10)
    assert s.task(task_id).status == "running"
    s.close()
