"""Bad commands, tried systematically: a clear, typed error, and the store as it was.

Every command here gets values of the wrong type, unknown task ids, values out
of range (a negative or non-finite ``until``, empty names, payloads over
MAX_VALUE_BYTES). A command either does what it says, recording only well
typed events that read back as the live state, or raises a tasktrail error
(``TasktrailError``: never a bare TypeError, KeyError or a driver's error) and
leaves every stored row as it was. Bad stores are in ``test_bad_input_stores.py``.
"""

from __future__ import annotations

import math
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.bad_input_values import TRIED, huge_text, junk, registry
from helpers.bad_input_values import _tally as _tally
from helpers.checks import fold, stored_rows
from hypothesis import given
from hypothesis import strategies as st

from tasktrail.domain import InvalidArgument, ManualClock, Scheduler, TasktrailError
from tasktrail.domain.tasks.events import (
    OUTCOME_STATUSES,
    CheckpointCommitted,
    MemoRecorded,
    OutcomeHeld,
    SleepStarted,
    TaskEnded,
    TaskEvent,
    TaskSubmitted,
    WaitStarted,
)
from tasktrail.domain.tasks.validation import MAX_VALUE_BYTES
from tasktrail.replay.harness import crash

# ─── values ─────────────────────────────────────────────────────────────────


json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
value = st.one_of(json_like, junk, huge_text.map(lambda text: {"blob": text}))

SLOTS = ("pending", "running", "owner", "child", "terminal")
task_ref = st.one_of(st.sampled_from(SLOTS).map(lambda slot: ("slot", slot)), junk)
until = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.sampled_from([-1, -0.0, math.nan, math.inf, -math.inf, "10", None, True]),
)

commands = st.one_of(
    st.tuples(
        st.just("submit"),
        st.fixed_dictionaries(
            {},
            optional={
                "kind": st.one_of(junk, st.just("job")),
                "version": st.one_of(junk, st.integers(-2, 3)),
                "owner": task_ref,
                "phase": st.one_of(junk, st.just("start")),
                "id": st.one_of(junk, task_ref),
                "conversation_id": junk,
                "project_ids": st.one_of(junk, st.lists(junk, max_size=3)),
                "trace": st.one_of(
                    junk, st.dictionaries(st.one_of(st.none(), st.integers(), st.text()), junk)
                ),
                "abandon_on_restart": junk,
            },
        ),
    ),
    st.tuples(st.just("reserve"), task_ref),
    st.tuples(st.just("checkpoint"), task_ref, junk, st.one_of(st.none(), junk)),
    st.tuples(st.just("memo"), task_ref, st.one_of(junk, st.just("m")), value),
    st.tuples(st.just("read_memo"), task_ref, junk),
    st.tuples(
        st.just("wait"),
        task_ref,
        st.one_of(junk, st.lists(st.one_of(task_ref, junk), max_size=3)),
        st.one_of(junk, st.sampled_from(["all", "failFast"])),
        st.one_of(st.none(), junk),
    ),
    st.tuples(st.just("sleep"), task_ref, until, st.one_of(st.none(), junk)),
    st.tuples(
        st.just("finish"),
        task_ref,
        st.one_of(junk, st.sampled_from(OUTCOME_STATUSES)),
        st.one_of(junk, value, st.fixed_dictionaries({"message": junk, "detail": value})),
        st.one_of(st.none(), junk),
    ),
    st.tuples(st.just("abort"), task_ref),
    st.tuples(st.just("retry"), task_ref),
    st.tuples(st.just("task"), task_ref),
    st.tuples(st.just("history"), task_ref),
    st.tuples(st.just("blocked_reason"), task_ref),
)


# ─── applying a command ─────────────────────────────────────────────────────


def _resolve(ref: Any, ids: dict[str, str]) -> Any:
    if isinstance(ref, tuple) and len(ref) == 2 and ref[0] == "slot":
        return ids[ref[1]]
    return ref


def _apply(s: Scheduler, ids: dict[str, str], step: tuple[Any, ...]) -> Any:
    name, *args = step
    if name == "submit":
        options = {k: _resolve(v, ids) for k, v in args[0].items()}
        kind = options.pop("kind", "job")
        return s.submit(kind, **options)
    task_id = _resolve(args[0], ids)
    match name:
        case "checkpoint":
            return s.checkpoint(task_id, args[1], args[2])
        case "memo":
            return s.memo(task_id, args[1], args[2])
        case "read_memo":
            return s.memo(task_id, args[1])
        case "wait":
            on = [_resolve(r, ids) for r in args[1]] if isinstance(args[1], list) else args[1]
            return s.wait(task_id, on, args[2], args[3])
        case "sleep":
            return s.sleep(task_id, args[1], args[2])
        case "finish":
            return s.finish(task_id, args[1], args[2], reason=args[3])
        case _:
            return getattr(s, name)(task_id)


def _seeded(path: Path) -> tuple[Scheduler, dict[str, str]]:
    """A store with a task in each state the commands may meet."""
    s = Scheduler.open(path, clock=ManualClock(1_000), registry=registry())
    ids = {slot: s.submit("job", id=f"t-{slot}") for slot in SLOTS if slot != "child"}
    ids["child"] = s.submit("job", id="t-child", owner=ids["owner"])
    s.reserve(ids["running"])
    s.reserve(ids["owner"])
    s.reserve(ids["terminal"])
    s.finish(ids["terminal"], "completed")
    return s, ids


def _event_problems(event: TaskEvent) -> list[str]:
    """Fields of a recorded event that have the wrong type or are out of range."""

    def text(x: Any) -> bool:
        return isinstance(x, str) and bool(x.strip())

    problems = []
    if not (isinstance(event.at, int | float) and math.isfinite(event.at)):
        problems.append(f"at {event.at!r}")
    if isinstance(event, TaskSubmitted):
        if not (text(event.kind) and text(event.phase)):
            problems.append(f"kind/phase {event.kind!r}/{event.phase!r}")
        if type(event.version) is not int or type(event.abandon_on_restart) is not bool:
            problems.append(f"version/abandon {event.version!r}/{event.abandon_on_restart!r}")
        if not all(text(p) for p in event.project_ids):
            problems.append(f"project_ids {event.project_ids!r}")
    elif isinstance(event, CheckpointCommitted):
        if not text(event.phase) or not (event.attempt is None or type(event.attempt) is int):
            problems.append(f"checkpoint {event.phase!r}/{event.attempt!r}")
    elif isinstance(event, MemoRecorded):
        if not text(event.name) or len(orjson.dumps(event.value)) > MAX_VALUE_BYTES:
            problems.append(f"memo {event.name!r}")
    elif isinstance(event, WaitStarted):
        if not event.on or not all(isinstance(a, str) for a in event.on):
            problems.append(f"wait on {event.on!r}")
    elif isinstance(event, SleepStarted):
        finite = isinstance(event.until, int | float) and math.isfinite(event.until)
        if not finite or event.until < 0:
            problems.append(f"sleep until {event.until!r}")
    elif isinstance(event, OutcomeHeld | TaskEnded):
        if event.status not in OUTCOME_STATUSES:
            problems.append(f"status {event.status!r}")
        if not (event.message is None or isinstance(event.message, str)):
            problems.append(f"message {event.message!r}")
        if len(orjson.dumps(event.message)) > MAX_VALUE_BYTES:
            problems.append("message over the limit")
    return problems


@given(st.lists(commands, min_size=1, max_size=12))
def test_bad_commands_raise_typed_errors_and_record_nothing(steps: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trail.db"
        s, ids = _seeded(path)
        try:
            for step in steps:
                TRIED[f"command:{step[0]}"] += 1
                before = stored_rows(str(path))
                try:
                    _apply(s, ids, step)
                except TasktrailError:
                    assert stored_rows(str(path)) == before, step  # nothing appended
                except Exception as error:  # a leak: the test names the command
                    message = f"{step!r} leaked {type(error).__name__}: {error}"
                    raise AssertionError(message) from error
                else:
                    for row in stored_rows(str(path))[len(before) :]:
                        event = fold_one(row)
                        assert _event_problems(event) == [], (step, event)
                # What is stored folds to exactly what the scheduler holds: a value
                # that reads back differently (NaN, a tuple, a date) would show here.
                assert fold(s.store).world.tasks == s.world.tasks, step
        finally:
            crash(s)


def fold_one(row: tuple[Any, ...]) -> TaskEvent:
    from tasktrail.domain.store.transcoder import decode_event

    position, originator_id, _, topic, state = row
    return decode_event(topic, originator_id, state, position)


def test_invalid_argument_names_the_task_and_the_limit(scheduler: Scheduler) -> None:
    task_id = scheduler.submit("job")
    scheduler.reserve(task_id)
    with pytest.raises(InvalidArgument) as caught:
        scheduler.memo(task_id, "blob", "x" * (MAX_VALUE_BYTES + 1))
    assert task_id in str(caught.value) and str(MAX_VALUE_BYTES) in str(caught.value)
    with pytest.raises(InvalidArgument, match="NaN"):
        scheduler.memo(task_id, "ratio", [1.0, math.nan])
    with pytest.raises(InvalidArgument, match="limit"):
        scheduler.finish(task_id, "failed", error="x" * (MAX_VALUE_BYTES + 1))
    scheduler.memo(task_id, "pair", (1, 2))  # read back as a list, live as in a replay
    assert scheduler.task(task_id).memos["pair"] == [1, 2]
    assert sqlite3.sqlite_version  # the SQLite the file tests ran against
