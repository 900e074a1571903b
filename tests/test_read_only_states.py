"""What a read hands out cannot change the scheduler's state (domain/frozen.py): a
state's dicts and lists are read-only, so a caller's change raises instead of
changing the live state (and, for the one empty memos every task without memos shares,
every such task) with no event: a state the log, a replay and a restarted process
would not have. ``to_dict``, ``memo`` reads and the ledger are plain copies."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from conftest import crash, reopen
from helpers.probes import running

from tasktrail.domain import (
    FrozenDict,
    FrozenList,
    InMemoryExecutor,
    ManualClock,
    Registry,
    RunSettings,
    Scheduler,
)
from tasktrail.domain.history.codec import decode_world, encode_world
from tasktrail.domain.tasks.evolve import evolve_stream
from tasktrail.domain.turns.pass_events import PassStarted, PassTaskBlocked, PassTaskDeferred
from tasktrail.replay import replay

Change = Callable[[], Any]


def refused(*changes: Change) -> None:
    """Each change raises (read-only): none changes anything."""
    for change in changes:
        with pytest.raises(TypeError, match="read-only"):
            change()


def test_a_tasks_memos_and_roles_refuse_every_change(scheduler: Scheduler) -> None:
    task = running(scheduler)
    scheduler.memo(task, "pages", {"done": [1]})
    turn = scheduler.start_turn(task, "worker")
    state = scheduler.task(task)
    memos, roles, value = state.memos, state.roles, state.memos["pages"]
    refused(
        lambda: memos.__setitem__("k", 1),
        lambda: memos.update(k=1),
        lambda: memos.pop("pages"),
        lambda: memos.setdefault("k", 1),
        lambda: memos.clear(),
        lambda: roles.__setitem__("leader", roles["worker"]),
        lambda: roles.pop("worker"),
        lambda: value.__setitem__("done", []),
        lambda: value["done"].append(2),
        lambda: value["done"].extend([2]),
        lambda: value["done"].__setitem__(0, 9),
        lambda: value["done"].sort(),
    )
    assert scheduler.task(task).memos == {"pages": {"done": [1]}}
    assert list(scheduler.task(task).roles) == ["worker"]
    assert scheduler.task(task).roles["worker"].active.turn_id == turn  # type: ignore[union-attr]
    # What a phase reads through its invocation is the same read-only state.
    invocation = scheduler._invocations[task]
    refused(lambda: invocation.task.memos.__setitem__("k", 1))


def test_a_task_without_memos_shares_nothing_a_caller_can_change(scheduler: Scheduler) -> None:
    """Every task without memos (or roles) holds the one empty mapping: a change through
    one would have been a change to all of them, and to the ones submitted later."""
    plain, other = running(scheduler), running(scheduler)
    with_memos = running(scheduler)
    scheduler.memo(with_memos, "k", 1)
    refused(
        lambda: scheduler.task(plain).memos.__setitem__("leak", 1),
        lambda: scheduler.task(plain).roles.__setitem__("leak", None),
        lambda: scheduler.task(with_memos).memos.__setitem__("leak", 1),
    )
    later = scheduler.submit("job")
    for task in (plain, other, later):
        assert scheduler.task(task).memos == {} and scheduler.task(task).roles == {}
    assert scheduler.task(with_memos).memos == {"k": 1}
    # Memos of one task are not another's: recording one leaves the empty one empty.
    scheduler.memo(plain, "mine", [1])
    assert scheduler.task(other).memos == {} and scheduler.task(plain).memos == {"mine": [1]}


def test_replay_and_a_restart_equal_the_live_world_after_attempted_changes(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(store_url, clock, registry, limit=3)
    task, plain = running(s), running(s)
    s.memo(task, "pages", {"done": [1], "by": {"a": "x"}})
    s.start_turn(task, "worker")
    for change in (
        lambda: s.task(plain).memos.__setitem__("leak", 1),
        lambda: s.task(task).memos["pages"]["done"].append(2),
        lambda: s.task(task).memos["pages"]["by"].update(b="y"),
        lambda: s.task(task).roles.clear(),
    ):
        with pytest.raises(TypeError):
            change()
    d = s.task(task).to_dict()
    d["memos"]["pages"]["done"].append(2)  # to_dict is a plain copy: the caller's
    d["memos"]["pages"]["by"]["b"] = "y"
    s.memo(task, "pages")["done"].append(3)  # so is a memo read
    live = {t: s.task(t) for t in (task, plain)}
    assert live[task].memos == {"pages": {"done": [1], "by": {"a": "x"}}}
    assert live[plain].memos == {}
    replayed = replay(store_url, snapshots=False)
    assert {t: replayed.tasks[t] for t in live} == live
    for t, state in live.items():
        assert orjson.dumps(replayed.tasks[t].to_dict()) == orjson.dumps(state.to_dict())
    crash(s)
    s = reopen(store_url, clock, registry, limit=3)
    assert s.task(task).memos == live[task].memos and s.task(plain).memos == {}
    s.close()


def test_to_dict_and_json_outputs_are_plain_and_unchanged(scheduler: Scheduler) -> None:
    task = running(scheduler)
    scheduler.memo(task, "pages", {"done": [1, 2], "n": None})
    scheduler.memo(task, "flag", True)
    data = scheduler.task(task).to_dict()
    memos = data["memos"]
    assert type(memos) is dict and type(memos["pages"]) is dict
    assert type(memos["pages"]["done"]) is list
    expected = b'{"pages":{"done":[1,2],"n":null},"flag":true}'
    assert orjson.dumps(memos) == expected
    # The state's own read-only mappings write the same bytes as plain ones.
    state = scheduler.task(task)
    assert orjson.dumps(state.memos) == expected
    assert json.dumps(state.memos) == json.dumps(memos)
    assert state.memos == memos and isinstance(state.memos, dict)
    scheduler.finish(task, "failed", error={"message": "503", "detail": {"codes": [503]}})
    ended = scheduler.task(task)
    assert ended.to_dict()["outcome"] == {
        "status": "failed",
        "error": {"message": "503", "detail": {"codes": [503]}},
    }
    assert type(ended.to_dict()["outcome"]["error"]["detail"]["codes"]) is list
    detail = ended.outcome.detail  # type: ignore[union-attr]
    refused(lambda: detail.__setitem__("codes", []), lambda: detail["codes"].append(1))


def test_a_trace_carrier_refuses_a_change(scheduler: Scheduler) -> None:
    carrier = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    task = scheduler.submit("job", trace=carrier)
    carrier["traceparent"] = "changed"  # the caller's dict is not the state's
    trace = scheduler.task(task).trace
    assert trace is not None and trace["traceparent"].startswith("00-1111")
    refused(lambda: trace.__setitem__("traceparent", "x"))


def test_cleanup_obligations_refuse_a_change(scheduler: Scheduler) -> None:
    task = running(scheduler)
    turn = scheduler.start_turn(task, "worker")
    scheduler.complete_turn(task, "worker", turn)
    assert scheduler.stop_roles(task, ["worker"]) == ["worker"]
    cleanup = scheduler.cleanup_obligations(task)
    assert cleanup is not None
    obligations = cleanup.obligations
    refused(lambda: obligations.pop("worker"), lambda: obligations.clear())
    assert scheduler.cleanup_obligations(task).open_roles() == ["worker"]  # type: ignore[union-attr]


def test_a_pass_states_mappings_refuse_a_change() -> None:
    started = PassStarted(
        task_id="", at=1.0, pass_id="p1", scope="full", keys=(), task_ids=("a", "b"), concurrency=1
    )
    state = evolve_stream(None, started)
    empty = state.blocked
    state = evolve_stream(state, PassTaskBlocked(task_id="a", at=2.0, pass_id="p1", error="boom"))
    state = evolve_stream(
        state, PassTaskDeferred(task_id="b", at=2.0, pass_id="p1", project_ids=("x",))
    )
    assert state.blocked == {"a": "boom"} and state.deferred == {"b": ("x",)}
    refused(
        lambda: empty.__setitem__("z", "y"),
        lambda: state.blocked.__setitem__("z", "y"),
        lambda: state.deferred.pop("b"),
        lambda: state.failed.__setitem__("z", "y"),
    )


def test_a_runs_payload_and_the_ledger_hand_out_nothing_live(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    s.configure_runs(executor=InMemoryExecutor(), settings=RunSettings(tz="UTC"))
    task = s.submit("job")
    run_id = s.mint_run(task, payload={"era": "e7", "tags": ["a"]})
    payload = s.run(run_id).payload
    refused(lambda: payload.__setitem__("era", "e8"), lambda: payload["tags"].append("b"))
    assert s.live_runs(where={"era": "e7"}) == [s.run(run_id)]
    assert s.run(run_id).to_dict()["payload"] == {"era": "e7", "tags": ["a"]}
    # The ledger is a copy: clearing it clears the caller's, not the world's.
    ledger = s.ledger
    ledger.runs.clear()
    ledger.live.clear()
    ledger.per_day.clear()
    s.ledger.by_task_day.clear()
    assert list(s.ledger.runs) == [run_id] and s.runs(task) == [s.run(run_id)]
    assert s.ledger.runs_on(s.run(run_id).day) == 1
    assert [r.run_id for r in s.live_runs()] == [run_id]
    s.close()


def test_a_snapshot_and_a_replay_give_back_read_only_states(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=3)
    task = running(s)
    s.memo(task, "pages", {"done": [1]})
    s.start_turn(task, "worker")
    world = decode_world(encode_world(s.world))
    assert world.tasks == s.world.tasks
    restored = world.tasks[task]
    assert type(restored.memos) is FrozenDict and type(restored.roles) is FrozenDict
    assert type(restored.memos["pages"]["done"]) is FrozenList
    s.close()  # snapshots at close: the next open starts from it
    s = reopen(sqlite_url, clock, registry, limit=3)
    assert s.snapshot_at > 0
    for state in (s.task(task), replay(sqlite_url).tasks[task]):
        refused(
            lambda state=state: state.memos.__setitem__("k", 1),
            lambda state=state: state.memos["pages"]["done"].append(2),
            lambda state=state: state.roles.clear(),
        )
    s.close()


def test_read_only_values_copy_and_pickle_as_plain_ones() -> None:
    from tasktrail.domain.frozen import frozen, thawed

    value = frozen({"a": [1, {"b": [2]}]})
    assert copy.deepcopy(value) == value and copy.copy(value) is value
    again = pickle.loads(pickle.dumps(value))
    assert again == value and type(again) is FrozenDict and type(again["a"]) is FrozenList
    plain = thawed(value)
    plain["a"][1]["b"].append(3)  # a plain copy: the caller's
    assert value == {"a": [1, {"b": [2]}]} and type(plain["a"]) is list
    assert dict(value) | {"c": 1} == {"a": [1, {"b": [2]}], "c": 1}
