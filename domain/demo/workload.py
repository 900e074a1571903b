"""``tasktrail demo``: a realistic workload recorded into a SQLite store.

The workload, on a simulated clock that starts at 2026-01-05 09:00 UTC:

* research trees: a ``research`` task plans, submits ``search`` tasks it owns,
  waits for all of them (``all``), then synthesizes. Searches back off with a
  sleep; one in seven fails.
* reviews: a ``review`` waits ``failFast`` on the ``check`` tasks it owns; a
  failed check fails the review, whose held failure cascades abort marks to
  the checks still live.
* a ``batch`` of ``ingest`` tasks that an operator aborts mid-run: the abort
  mark cascades down the tree and each task's abort handler ends it.
* a ``fragile`` task whose process dies twice in the middle of a phase: the
  scheduler is dropped without ``close`` (a simulated crash), recovery counts
  its restarts, the second recovery parks it at the restart limit, and an
  operator's ``retry`` runs it to completion.
* a crew of agents (a Leader and two workers) taking Turns, with a Leader
  wakeup aggregated and dispatched, and nightly jobs dispatched to an executor
  with a failure of each class (see :mod:`.demo_scenarios`).

Each phase works a while on the simulated clock, and owned work nests under the phase
that submitted it in ``tasktrail trace`` (see :mod:`.timing`). Everything is
deterministic: the same ``tasks`` gives the same log.

The store is recorded under a temporary name beside ``path`` and renamed into
place when complete, marked as the demo's (``made_by`` in its format marker): a
demo replaces only a store a demo made, and refuses any other file at ``path``;
an interrupted demo leaves ``path`` as it was.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..app.scheduler import Scheduler
from ..clock import ManualClock
from ..errors import InvalidArgument, StoreError
from ..store.files import companions
from ..store.meta import MADE_BY_KEY
from ..store.store import open_store
from ..tasks.definitions import Registry, TaskDefinition
from ..tasks.describe import describe, format_at
from ..tasks.invocation import Invocation
from ..telemetry import live as telemetry
from . import scenarios as demo_scenarios
from .timing import demo_tracer, timed, traced

DEMO_START_MS = 1_767_603_600_000  # 2026-01-05T09:00:00Z
PASS_MS = 250
RESTART_LIMIT = 2
DEMO_WORKER = "demo"
SCENARIO_TASKS = 11  # the crew and ten nightly jobs
MIN_TASKS = 30
MAX_TASKS = 50_000
"""The most tasks a demo records (a few minutes, a few hundred MB)."""
DEMO_MARK = "tasktrail demo"
"""The ``made_by`` of a demo's store: the only kind of file a demo replaces."""

Progress = Callable[[int, int], Any]
"""``progress(ended, tasks)``, called as the demo's tasks end."""


class SimulatedCrash(BaseException):
    """Raised inside a phase to drop the process mid-invocation (not an Exception,
    so the scheduler does not record it as a fault)."""


@dataclass
class DemoReport:
    """What the demo recorded."""

    path: Path
    tasks: int
    events: int
    seconds: float
    outcomes: Counter[str]
    restarts_counted: int
    parked: list[str]
    story_task: str
    story: list[str] = field(default_factory=list)
    ledger: list[str] = field(default_factory=list)

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("inf")


class _Ids:
    """Readable, deterministic task ids: ``research-0001``."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, kind: str) -> str:
        self.count += 1
        return f"{kind}-{self.count:04d}"


def _definitions(crashes: dict[str, int], ids: _Ids, clock: ManualClock) -> Registry:
    def plan(inv: Invocation) -> None:
        width = inv.task.memos.get("width") or 4
        searches = [inv.submit("search", id=ids("search")) for _ in range(width)]
        inv.memo("searches", searches)
        inv.wait(searches, "all", then="synthesize")

    def synthesize(inv: Invocation) -> None:
        inv.finish("completed")

    def fetch(inv: Invocation) -> None:
        inv.sleep(inv.now() + 3 * PASS_MS, then="parse")  # a rate-limit backoff

    def parse(inv: Invocation) -> None:
        if int(inv.task_id.rsplit("-", 1)[-1]) % 7 == 3:
            inv.finish("failed", {"message": "source returned 503", "detail": {"status": 503}})
        else:
            inv.finish("completed")

    def review(inv: Invocation) -> None:
        checks = [inv.submit("check", id=ids("check")) for _ in range(3)]
        inv.memo("checks", checks)
        inv.wait(checks, "failFast", then="verdict")

    def verdict(inv: Invocation) -> None:
        outcomes = [inv.scheduler.task(c).outcome for c in inv.memo("checks")]
        failed = [o for o in outcomes if o is not None and o.status != "completed"]
        inv.finish("failed" if failed else "completed", "a check failed" if failed else None)

    def check(inv: Invocation) -> None:
        number = int(inv.task_id.rsplit("-", 1)[-1])
        if number % 5 == 0:
            inv.finish("failed", "lint errors")
        elif number % 5 == 1:
            inv.sleep(inv.now() + 8 * PASS_MS, then="recheck")  # still live when a sibling fails
        else:
            inv.finish("completed")

    def ingest(inv: Invocation) -> None:
        inv.sleep(inv.now() + 40 * PASS_MS, then="commit")

    def start_batch(inv: Invocation) -> None:
        parts = [inv.submit("ingest", id=ids("ingest")) for _ in range(5)]
        inv.wait(parts, "all", then="commit")

    def cleanup(inv: Invocation) -> None:
        inv.finish("aborted", reason=inv.task.abort_reason or "operator abort")

    def warm_up(inv: Invocation) -> None:
        inv.sleep(inv.now() + 12 * PASS_MS, then="step")  # so the crash lands mid-run

    def fragile_step(inv: Invocation) -> None:
        if crashes.get(inv.task_id, 0) > 0:
            crashes[inv.task_id] -= 1
            raise SimulatedCrash(inv.task_id)
        inv.finish("completed")

    def commit(inv: Invocation) -> None:
        inv.finish("completed")

    definitions = [
        TaskDefinition("research", 1, {"plan": plan, "synthesize": synthesize}),
        TaskDefinition("search", 1, {"fetch": fetch, "parse": parse}),
        TaskDefinition("review", 1, {"review": review, "verdict": verdict}),
        TaskDefinition("check", 1, {"check": check, "recheck": commit}),
        TaskDefinition("batch", 1, {"start": start_batch, "commit": commit}, abort=cleanup),
        TaskDefinition("ingest", 1, {"ingest": ingest, "commit": commit}, abort=cleanup),
        TaskDefinition("fragile", 1, {"warm_up": warm_up, "step": fragile_step}),
        *demo_scenarios.DEFINITIONS,
    ]
    # Each phase works a while on the clock before it decides (see .timing).
    return Registry([timed(clock, definition) for definition in definitions])


def check_demo_target(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds a store a demo made (to be replaced); ``False`` when
    nothing is there. Any other file, and a folder, is refused: a demo never
    replaces what it did not make."""
    target = Path(path)
    if target.is_dir():
        raise InvalidArgument(f"{target} is a directory: give the demo a file path")
    if not target.parent.is_dir():
        raise InvalidArgument(f"{target}: the folder {target.parent} does not exist")
    if not target.exists():
        return False
    refusal = (
        f"{target} exists and is not a store tasktrail demo made: refusing to replace it "
        "(give another --db, or remove it yourself)"
    )
    try:
        with open_store(target, read_only=True) as store:
            made_by = store.made_by
    except StoreError:
        raise InvalidArgument(refusal) from None
    if made_by != DEMO_MARK:
        raise InvalidArgument(refusal)
    return True


def run_demo(
    path: str | Path,
    tasks: int = 200,
    *,
    log: Callable[[str], Any] = print,
    progress: Progress | None = None,
) -> DemoReport:
    """Record the demo workload (about ``tasks`` tasks) into a SQLite file at ``path``:
    a new file, or a store an earlier demo made (any other file is refused)."""
    if isinstance(tasks, bool) or not isinstance(tasks, int) or not MIN_TASKS <= tasks <= MAX_TASKS:
        raise InvalidArgument(
            f"the demo records {MIN_TASKS} to {MAX_TASKS} tasks (enough to show each "
            f"scenario, few enough for a laptop), not {tasks!r}"
        )
    target = Path(path)
    replacing = check_demo_target(target)
    draft = target.with_name(f".{target.name}.{os.getpid()}.demo")
    try:
        try:
            report = _record(draft, tasks, log, progress)
        except StoreError as error:  # it names the draft: say which file was meant
            raise StoreError(f"cannot record the demo at {target}: {error}") from None
        if replacing:  # the old demo store's own WAL must not meet the new file
            for companion in companions(target):
                companion.unlink(missing_ok=True)
        os.replace(draft, target)
    except BaseException:
        for leftover in (draft, *companions(draft)):
            with contextlib.suppress(OSError):
                leftover.unlink()
        raise
    report.path = target
    return report


def _record(
    path: Path, tasks: int, log: Callable[[str], Any], progress: Progress | None
) -> DemoReport:
    clock = ManualClock(DEMO_START_MS)
    crashes: dict[str, int] = {}
    ids = _Ids()
    registry = _definitions(crashes, ids, clock)
    tracer_provider = demo_tracer()  # owned work nests under the phase that submitted it
    started = time.perf_counter()
    restarts_counted = 0
    parked: list[str] = []

    scheduler = traced(
        Scheduler.open(
            path, clock=clock, registry=registry, restart_limit=RESTART_LIMIT, worker=DEMO_WORKER
        ),
        tracer_provider,
    )
    scheduler.store.mark(MADE_BY_KEY, DEMO_MARK)
    fragile = scheduler.submit("fragile", id=ids("fragile"))
    crashes[fragile] = RESTART_LIMIT
    batch = scheduler.submit("batch", id=ids("batch"))
    budget = tasks - 1 - 6 - SCENARIO_TASKS
    while budget > 0:
        if budget >= 5 and ids.count % 3 != 0:
            scheduler.submit("research", id=ids("research"))
            budget -= 5
        elif budget >= 4:
            scheduler.submit("review", id=ids("review"))
            budget -= 4
        else:
            scheduler.submit("search", id=ids("search"))
            budget -= 1
    log(f"submitted {len(scheduler.world.tasks)} root tasks")

    aborted = False
    for crash_round in range(RESTART_LIMIT + 1):
        try:
            for _ in range(400):
                report = scheduler.run_pass()
                clock.advance(PASS_MS)
                if progress is not None:
                    total = len(scheduler.world.tasks)
                    progress(total - len(scheduler.world.live), total)
                if not aborted and scheduler.task(batch).status == "waiting":
                    parts = scheduler.task(batch).on
                    if all(scheduler.task(p).status == "sleeping" for p in parts):
                        scheduler.abort(batch)  # the operator cancels the batch mid-run
                        log(f"operator aborted {batch}: cascade marks {len(parts)} ingests")
                        aborted = True
                if not report.progressed and scheduler.wake() == {"active": False, "at": None}:
                    break
            break
        except SimulatedCrash:
            # The process dies mid-phase: no close(), the store is simply dropped. Its
            # metrics die with it (here they share the meter with the next "process").
            scheduler.store.close()
            telemetry.closed(scheduler)
            log(f"crash {crash_round + 1}: process dropped mid-phase at {format_at(clock.now)}")
            clock.advance(5_000)  # the process manager restarts it a few seconds later
            scheduler = traced(
                Scheduler.open(  # the same worker restarted: it recovers its tasks
                    path,
                    clock=clock,
                    registry=registry,
                    restart_limit=RESTART_LIMIT,
                    worker=DEMO_WORKER,
                ),
                tracer_provider,
            )
            recovered = [
                e for e in scheduler.history(fragile) if type(e).__name__ == "TaskRecovered"
            ]
            restarts_counted = len(recovered)
            log(
                f"recovery: {fragile} restarts={scheduler.task(fragile).restarts}"
                + (f", parked: {', '.join(scheduler.parked)}" if scheduler.parked else "")
            )
            if scheduler.parked:
                parked = list(scheduler.parked)
                clock.advance(60_000)  # an operator looks at it a minute later
                scheduler.retry(fragile)
                log(f"operator retry({fragile}): restarts cleared, it runs again")
                crashes[fragile] = 0
    scheduler.run_until_idle()
    demo_scenarios.crew_scenario(scheduler, clock, log)
    ledger = demo_scenarios.dispatch_scenario(scheduler, clock, log)
    outcomes: Counter[str] = Counter()
    for task in scheduler.tasks():
        outcomes[task.outcome.status if task.outcome is not None else task.status] += 1
    events = scheduler.store.head()
    story = [f"{format_at(e.at)}  {describe(e)}" for e in scheduler.history(fragile)]
    scheduler.close()
    seconds = time.perf_counter() - started
    return DemoReport(
        path=path,
        tasks=sum(outcomes.values()),
        events=events,
        seconds=seconds,
        outcomes=outcomes,
        restarts_counted=restarts_counted,
        parked=parked,
        story_task=fragile,
        story=story,
        ledger=ledger,
    )


def print_report(report: DemoReport, log: Callable[[str], Any] = print) -> None:
    """The demo's summary: tasks by outcome, events written, rate, and one task's story."""
    log("")
    log(f"store      {report.path}")
    log(f"tasks      {report.tasks}")
    for outcome, count in sorted(report.outcomes.items()):
        log(f"  {outcome:<10} {count}")
    log(f"events     {report.events} in {report.seconds:.2f}s ({report.events_per_second:,.0f}/s)")
    log(f"recovery   {report.restarts_counted} restarts counted, parked: {report.parked or '-'}")
    log("")
    log("run ledger (nightly jobs, a failure of each class):")
    for line in report.ledger:
        log(f"  {line}")
    log("")
    log(f"history of {report.story_task} (crashed twice, parked, retried):")
    for line in report.story:
        log(f"  {line}")
    log("")
    store, page = shlex.quote(str(report.path)), shlex.quote(str(report_page(report.path)))
    log(f"next: tasktrail report {store} --out {page}")
    log("      (every task on one page: open it in a browser), or one task's events:")
    log(f"      tasktrail history {store} {shlex.quote(report.story_task)}")


def report_page(store: str | os.PathLike[str]) -> Path:
    """The page the demo's closing line suggests ``tasktrail report`` write: beside the
    store, named after it (``tasktrail-demo.db`` -> ``tasktrail-demo-report.html``)."""
    path = Path(store)
    return path.with_name(f"{path.stem}-report.html")
