"""Invariants of SPEC.md stated over state, checked on any log.

``verify(source)`` folds a log leniently (an event that cannot follow its
stream is reported, not raised) and checks the rules that can be stated over
the resulting state. Each violation names the check, the task, what is wrong,
and the positions of the events involved. On a log (not a state already
folded) it also checks the digest chain (:mod:`.tamper`): an edited, removed,
reordered or forged event is a ``chain`` violation at its position.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from typing import Any

from tasktrail.domain import CorruptEvent, InvalidArgument, Store
from tasktrail.domain.retention.across import findings
from tasktrail.domain.tasks.ending import cancelling_ancestor
from tasktrail.domain.tasks.waits import waits_for
from tasktrail.domain.turns.state import turn_id_for
from tasktrail.domain.world import Draft

from .across_archive import ArchiveArg, across_archive
from .export_end import MissingEnd, cut_short, incomplete, missing_end
from .log import is_jsonl
from .seal_check import SealCheck, seal_check_for
from .snapshot_check import SnapshotWatch, outdated_note
from .state import SchedulerState, replay
from .tamper import ChainReport, check_chain
from .verify_report import VerifyReport as VerifyReport
from .verify_report import Violation as Violation
from .verify_report import archive_checked, chain_violations, seal_violations, unchecked_keys

Check = Callable[[SchedulerState], Iterator[Violation]]
CHECKS: dict[str, Check] = {}


def check(name: str) -> Callable[[Check], Check]:
    """Register an invariant (later modules add theirs: turns, ledgers)."""

    def register(fn: Check) -> Check:
        CHECKS[name] = fn
        return fn

    return register


def _at(state: SchedulerState, *task_ids: str | None) -> tuple[int, ...]:
    return tuple(
        sorted({state.last_position[t] for t in task_ids if t and t in state.last_position})
    )


@check("rule_01_one_invocation")
def _one_invocation(state: SchedulerState) -> Iterator[Violation]:
    for task in state.world.tasks.values():
        if (task.status == "running") != (task.mode is not None):
            yield Violation(
                "rule_01_one_invocation",
                task.id,
                f"status {task.status} with invocation mode {task.mode}",
                _at(state, task.id),
            )


@check("rule_05_held_outcomes")
def _held(state: SchedulerState) -> Iterator[Violation]:
    draft = Draft(state.world)
    for task in state.world.tasks.values():
        children = draft.live_children(task.id)
        if task.status == "completing" and not children:
            yield Violation(
                "rule_05_held_outcomes",
                task.id,
                "holds its outcome with no live owned task left (it should have ended)",
                _at(state, task.id),
            )
        if task.status == "terminal" and children:
            yield Violation(
                "rule_05_held_outcomes",
                task.id,
                f"terminal while it owns live tasks {', '.join(children)}",
                _at(state, task.id, *children),
            )


@check("rule_06_cascade")
def _cascade(state: SchedulerState) -> Iterator[Violation]:
    draft = Draft(state.world)
    for task_id in sorted(state.world.live):
        task = state.world.tasks[task_id]
        if task.request_marked:
            continue
        owner = cancelling_ancestor(draft, task_id)
        if owner is not None:
            yield Violation(
                "rule_06_cascade",
                task_id,
                f"live below cancelling owner {owner.id} without an abort mark",
                _at(state, task_id, owner.id),
            )


@check("rule_07_waits")
def _waits(state: SchedulerState) -> Iterator[Violation]:
    tasks = state.world.tasks
    for task in tasks.values():
        if task.status != "waiting":
            continue
        for awaited in task.on:
            if awaited not in tasks:
                yield Violation(
                    "rule_07_waits",
                    task.id,
                    f"waits on {awaited}, which does not exist",
                    _at(state, task.id),
                )
            elif task.policy == "failFast" and tasks[awaited].owner_id != task.id:
                yield Violation(
                    "rule_07_waits",
                    task.id,
                    f"failFast waits on {awaited}, which it does not own",
                    _at(state, task.id, awaited),
                )
    yield from _cycles(state)


def _cycles(state: SchedulerState) -> Iterator[Violation]:
    # The wait-for graph as it stands (tasks/waits.py): a waiter whose wait is still
    # on -> the live tasks it names; a holder -> its live owned tasks. The wait check
    # also counts a task that may hold later, so no wait it accepts closes one here.
    tasks = state.world.tasks
    draft = Draft(state.world)
    colour: dict[str, int] = {}  # 1 on the path, 2 done
    reported: set[frozenset[str]] = set()

    def edges(task_id: str) -> list[str]:
        task = tasks.get(task_id)
        return waits_for(draft, task) if task is not None else []

    for start in sorted(t for t in tasks if tasks[t].status in ("waiting", "completing")):
        if colour.get(start):
            continue
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(edges(start)))]
        path = [start]
        colour[start] = 1
        while stack:
            node, children = stack[-1]
            nxt = next(children, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
                path.pop()
            elif colour.get(nxt) == 1:
                cycle = path[path.index(nxt) :]
                key = frozenset(cycle)
                if key not in reported:
                    reported.add(key)
                    yield Violation(
                        "rule_07_waits",
                        nxt,
                        f"wait-for cycle: {' -> '.join([*cycle, nxt])}",
                        _at(state, *cycle),
                    )
            elif not colour.get(nxt):
                colour[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(edges(nxt))))


@check("rule_08_sleeps")
def _sleeps(state: SchedulerState) -> Iterator[Violation]:
    for task in state.world.tasks.values():
        if task.status == "sleeping" and (
            task.until is None or not math.isfinite(task.until) or task.until < 0
        ):
            yield Violation(
                "rule_08_sleeps", task.id, f"sleeps until {task.until!r}", _at(state, task.id)
            )


@check("rule_14_memos")
def _memos(state: SchedulerState) -> Iterator[Violation]:
    for task in state.world.tasks.values():
        if task.status in ("completing", "terminal") and task.memos:
            yield Violation(
                "rule_14_memos",
                task.id,
                f"keeps memos {sorted(task.memos)} after its outcome",
                _at(state, task.id),
            )


@check("ownership")
def _ownership(state: SchedulerState) -> Iterator[Violation]:
    tasks = state.world.tasks
    for task in tasks.values():
        if task.owner_id is not None and task.owner_id not in tasks:
            yield Violation(
                "ownership",
                task.id,
                f"owned by {task.owner_id}, which does not exist",
                _at(state, task.id),
            )


@check("turns_one_active")
def _turns(state: SchedulerState) -> Iterator[Violation]:
    for task in state.world.tasks.values():
        for name, role in task.roles.items():
            active = role.active
            if active is None:
                continue
            latest = turn_id_for(name, role.turns)
            if not active.active or active.turn_id != latest:
                yield Violation(
                    "turns_one_active",
                    task.id,
                    f"role {name}: active Turn {active.turn_id} ({active.status}) is not the "
                    f"latest started ({latest})",
                    _at(state, task.id),
                )
            if role.last is not None and role.last.active:
                yield Violation(
                    "turns_one_active",
                    task.id,
                    f"role {name}: two active Turns ({role.last.turn_id}, {active.turn_id})",
                    _at(state, task.id),
                )


@check("ledger")
def _ledger(state: SchedulerState) -> Iterator[Violation]:
    runs = state.table("runs")
    by_task_day: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in runs:
        by_task_day.setdefault((run["task_id"], run["day"]), []).append(run)
    for (task_id, day), rows in sorted(by_task_day.items()):
        attempts = sorted(r["attempt"] for r in rows)
        if attempts != list(range(1, len(rows) + 1)):
            yield Violation(
                "ledger", task_id, f"attempts on {day} are {attempts}, not 1..{len(rows)}"
            )
        live = [r["run_id"] for r in rows if r["status"] in ("dispatching", "running")]
        if len(live) > 1:
            yield Violation("ledger", task_id, f"{len(live)} in-flight runs on {day}: {live}")
    counted: dict[str, dict[str, int]] = {}
    for run in runs:
        tally = counted.setdefault(run["day"], {"runs": 0, "manual": 0, "scheduled": 0})
        tally["runs"] += 1
        tally[run["trigger"]] += 1
        if run["status"] not in ("dispatching", "running"):
            tally[run["status"]] = tally.get(run["status"], 0) + 1
    for row in state.table("day_counters"):
        expected = counted.get(row["day"], {})
        for column, value in row.items():
            if column != "day" and value != expected.get(column, 0):
                yield Violation(
                    "ledger",
                    None,
                    f"day {row['day']}: counter {column} is {value}, the runs say "
                    f"{expected.get(column, 0)}",
                )


def verify(
    source: SchedulerState | str | os.PathLike[str] | Store,
    *,
    against: str | os.PathLike[str] | None = None,
    skip_invalid: bool = False,
    chain_key: bytes | str | None = None,
    seals: str | os.PathLike[str] | None = None,
    archive: ArchiveArg = None,
) -> VerifyReport:
    """Check every registered invariant on a state, or on a log (folded leniently),
    and a log's digest chain; ``against`` (an export kept apart) also checks that
    every stream head it recorded is still in the log, unchanged. A keyed store's
    digests are checked under ``chain_key`` (else ``$TASKTRAIL_CHAIN_KEY``): without
    it the report says they were not checked (:attr:`VerifyReport.unchecked`), never
    ``ok``. ``seals`` (a file of seal lines, or an export) checks that the log still
    extends every seal in it (:mod:`.seal_check`). ``archive`` (the store's archive
    folder) checks every segment its acts name, then all of the above with their events
    in place: a segment that fails is an ``archive`` violation, read as a gap."""
    if archive is not None:
        with across_archive(archive, source, warn=False) as views:
            report = verify(
                source, against=against, skip_invalid=skip_invalid, chain_key=chain_key, seals=seals
            )
        return archive_checked(report, findings(views))
    violations: list[Violation] = []
    chain: ChainReport | None = None
    watch: SnapshotWatch | None = None
    cut: MissingEnd | None = None
    if seals is not None and isinstance(source, SchedulerState):
        raise InvalidArgument("seals are checked against a log, not a state already folded")
    sealed = seal_check_for(source, seals, chain_key)
    if isinstance(source, SchedulerState):
        state = source
    else:
        unreadable: CorruptEvent | None = None
        # A store's snapshots are checked against the fold (from position 0) on the way.
        keyed = isinstance(source, Store) or not is_jsonl(source)
        watch = SnapshotWatch(source, chain_key) if keyed else None
        # An export ends with its heads line and its seal: cut short, it lacks them.
        cut = None if keyed or isinstance(source, Store) else missing_end(source)
        if cut is not None and not (cut.lines_whole or skip_invalid):
            return cut_short(cut)  # its last line cut mid-way: the fold could not read it
        try:
            # No invariant reads the audit trail: leave out its row per event.
            state = replay(
                source,
                strict=False,
                skip_invalid=skip_invalid,
                snapshots=False,
                watch=watch,
                audit=False,
            )
        except CorruptEvent as error:
            unreadable = error
        # The chain reads rows undecoded: it still points at an edit that left an
        # event unreadable (a store's rows; an export's lines up to that event).
        chain = _chain(source, against, skip_invalid, chain_key, sealed)
        if unreadable is not None:
            # An unreadable event ends the log here: nothing after it can be trusted.
            return VerifyReport(
                position=unreadable.position or 0,
                events=0,
                checks=["readable", "chain"],
                violations=[
                    Violation("readable", None, str(unreadable), _pos(unreadable)),
                    *chain_violations(chain),
                    *seal_violations(sealed),
                ],
                chain=chain,
                unchecked=unchecked_keys(chain, sealed),
            )
    for problem in state.problems:
        violations.append(Violation("fold", None, problem.message, (problem.position,)))
    for fn in CHECKS.values():
        violations.extend(fn(state))
    violations.extend(incomplete(cut))
    if chain is not None:
        violations.extend(chain_violations(chain))
    violations.extend(seal_violations(sealed))
    snapshots = watch.problems if chain is not None and watch is not None else []
    for position, why in snapshots:
        text = f"snapshot at position {position}: {why}"
        violations.append(Violation("snapshots", None, text, (position,)))
    notes = outdated_note(watch.outdated) if chain is not None and watch is not None else []
    notes += [f"erased, not edited: {said}" for said in (chain.erased if chain else [])]
    notes += [
        f"seal at line {line}: its events {first}-{last} are archived: proven only with --archive"
        for line, (first, last) in (sealed.unproven if sealed else {}).items()
    ]
    unchecked = unchecked_keys(chain, sealed)
    if watch is not None and watch.unkeyed:
        unchecked.append(
            f"{watch.unkeyed} snapshots of a keyed store not checked: no key was given"
        )
    return VerifyReport(
        position=state.position,
        events=state.events,
        checks=[
            "fold",
            *CHECKS,
            *(["chain"] if chain is not None else []),
            *(["snapshots"] if chain is not None and watch is not None else []),
            *(["seals"] if seals is not None else []),
        ],
        violations=violations,
        chain=chain,
        notes=notes,
        unchecked=unchecked,
    )


def _chain(
    source: str | os.PathLike[str] | Store,
    against: str | os.PathLike[str] | None,
    skip_invalid: bool,
    key: bytes | str | None,
    seals: SealCheck | None,
) -> ChainReport:
    try:
        return check_chain(
            source, against=against, skip_invalid=skip_invalid, chain_key=key, seals=seals
        )
    except CorruptEvent:  # an export's unreadable line: its reader stopped there
        return ChainReport()


def _pos(error: CorruptEvent) -> tuple[int, ...]:
    return (error.position,) if error.position is not None else ()
