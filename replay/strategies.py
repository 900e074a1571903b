"""Hypothesis strategies that build valid command sequences, for property tests.

Strategies compose: :func:`commands` builds on :func:`lifecycle_commands` and
:func:`run_commands`, which build on :func:`task_slots` and :func:`phases`. A
command names tasks by *slot* (the n-th task submitted so far), so a generated
sequence stays meaningful as it shrinks. :class:`~.harness.Harness` applies commands to a
real scheduler on a moving :class:`~tasktrail.domain.ManualClock`; a command
the rules refuse appends nothing and is simply not counted.

>>> from hypothesis import given
>>> from tasktrail.replay.harness import Harness
>>> from tasktrail.replay.strategies import command_sequences
>>> @given(command_sequences())                                   # doctest: +SKIP
... def test_replay_equals_live(steps):
...     with Harness.temporary() as h:
...         h.run(steps)
...         assert replay(h.store) == h.replayable_state()
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

DEFAULT_SLOTS = 5
START_MS = 1_767_603_600_000  # 2026-01-05T09:00:00Z


@dataclass(frozen=True)
class Command:
    """One generated command: its name and arguments (task slots, values)."""

    name: str
    args: tuple[Any, ...] = ()

    def __repr__(self) -> str:
        return f"{self.name}{self.args!r}"


def task_slots(slots: int = DEFAULT_SLOTS) -> st.SearchStrategy[int]:
    """Which task a command names: the slot of a task submitted so far."""
    return st.integers(0, slots - 1)


def phases() -> st.SearchStrategy[str]:
    """Phase names the harness's definitions know."""
    return st.sampled_from(["a", "b"])


def topics() -> st.SearchStrategy[str]:
    """Message topics (rules 20-22)."""
    return st.sampled_from(["x", "y"])


def message_commands(slots: int = DEFAULT_SLOTS) -> st.SearchStrategy[Command]:
    """Messages: a send, a wait for one (with or without a timeout, in seconds), and a
    read by the invocation running the task (marked read with its next decision); asks
    (of ``ana`` or of anyone, rules 30-32) and answers by ``ana`` or ``bob``."""
    slot = task_slots(slots)
    return st.one_of(
        st.builds(
            lambda t, topic, v: Command("send", (t, topic, v)), slot, topics(), st.integers(0, 9)
        ),
        st.builds(
            lambda t, topic, timeout: Command("wait_message", (t, topic, timeout)),
            slot,
            topics(),
            st.none() | st.integers(0, 60),
        ),
        st.builds(lambda t, topic: Command("read", (t, topic)), slot, topics()),
        st.builds(
            lambda t, topic, timeout, assigned: Command("ask", (t, topic, timeout, assigned)),
            slot,
            topics(),
            st.none() | st.integers(0, 60),
            st.booleans(),
        ),
        st.builds(
            lambda t, topic, v, actor: Command("answer", (t, topic, v, actor)),
            slot,
            topics(),
            st.integers(0, 9),
            st.sampled_from(["ana", "bob"]),
        ),
    )


def stream_commands(slots: int = DEFAULT_SLOTS) -> st.SearchStrategy[Command]:
    """Streams (rules 28, 29): a chunk emitted to one of two streams by the invocation
    running the task, or a stream closed, each recorded at once (``inv.flush``)."""
    slot, stream = task_slots(slots), st.sampled_from(["out", "log"])
    return st.one_of(
        st.builds(
            lambda t, name, v: Command("emit", (t, name, v)), slot, stream, st.integers(0, 9)
        ),
        st.builds(lambda t, name: Command("close_stream", (t, name)), slot, stream),
    )


def clock_moves() -> st.SearchStrategy[Command]:
    """The clock moving forward, from a millisecond to a minute."""
    return st.builds(lambda ms: Command("advance", (ms,)), st.integers(1, 60_000))


def results() -> st.SearchStrategy[Any]:
    """What a finish answers, sometimes: nothing, a number, text, or a small JSON object."""
    return (
        st.none()
        | st.integers(-1000, 1000)
        | st.text(max_size=8)
        | st.fixed_dictionaries(
            {"n": st.integers(0, 9), "tags": st.lists(st.sampled_from(["a", "b"]), max_size=2)}
        )
    )


def lifecycle_commands(slots: int = DEFAULT_SLOTS) -> st.SearchStrategy[Command]:
    """Commands of SPEC.md section 1: submit, reserve, checkpoint, wait, sleep, finish, ...
    an operator's fork (as of now, or some positions back), a running phase that
    fails under a retry policy (rule 23), and submissions under flow control (33-35)."""
    slot = task_slots(slots)
    return st.one_of(
        st.builds(lambda owner: Command("submit", (owner,)), st.none() | slot),
        keyed_submits(slots),
        flow_submits(),
        st.builds(lambda t: Command("reserve", (t,)), slot),
        st.builds(lambda t, p: Command("checkpoint", (t, p)), slot, phases()),
        st.builds(lambda t, v: Command("memo", (t, v)), slot, st.integers(-1000, 1000)),
        st.builds(
            lambda t, on, policy: Command("wait", (t, tuple(on), policy)),
            slot,
            st.lists(slot, min_size=1, max_size=3),
            st.sampled_from(["all", "failFast"]),
        ),
        st.builds(lambda t, ms: Command("sleep", (t, ms)), slot, st.integers(0, 120_000)),
        st.builds(
            lambda t, status, result: Command("finish", (t, status, result)),
            slot,
            st.sampled_from(["completed", "failed", "aborted"]),
            results(),
        ),
        st.builds(lambda t: Command("abort", (t,)), slot),
        st.builds(lambda t: Command("retry", (t,)), slot),
        st.builds(lambda t: Command("phase_fails", (t,)), slot),
        st.builds(lambda t, back: Command("fork", (t, back)), slot, st.none() | st.integers(0, 30)),
        st.just(Command("run_pass")),
        st.just(Command("crash")),
    )


def flow_submits() -> st.SearchStrategy[Command]:
    """Submissions under flow control: a task of kind ``c`` (one at a time per tenant,
    rule 33; a start every two seconds, rule 34) for one of two tenants, and a debounced
    one (rule 35) under one of two keys, waiting 1 or 30 s, with a memo."""
    return st.one_of(
        st.builds(lambda tenant: Command("submit_flow", (tenant,)), st.integers(0, 1)),
        st.builds(
            lambda key, wait, n: Command("submit_debounced", (key, wait, n)),
            st.integers(0, 1),
            st.sampled_from([1, 30]),
            st.integers(0, 9),
        ),
    )


def keyed_submits(slots: int = DEFAULT_SLOTS) -> st.SearchStrategy[Command]:
    """A submission with one of three idempotency keys (rule 18; a key used before names
    its task, and nothing is recorded) and a priority (rule 19), owned or not."""
    return st.builds(
        lambda key, owner, priority: Command("submit_keyed", (key, owner, priority)),
        st.integers(0, 2),
        st.none() | task_slots(slots),
        st.sampled_from([0, 0, 1, -1, 1000]),
    )


def run_commands(slots: int = DEFAULT_SLOTS) -> st.SearchStrategy[Command]:
    """Commands of SPEC.md section 3: mint runs, jobs ending, reconcile."""
    slot = task_slots(slots)
    return st.one_of(
        st.builds(lambda t: Command("mint_run", (t,)), slot),
        st.builds(
            lambda t, outcome: Command("job_ends", (t, outcome)),
            slot,
            st.sampled_from(["completed", "failed", "canceled", "interrupted"]),
        ),
        st.just(Command("reconcile")),
    )


def schedule_commands() -> st.SearchStrategy[Command]:
    """Schedules (rules 26, 27): one of two per-minute schedules recorded (with or without
    catch-up), removed, or ticked after the clock moved some minutes."""
    name = st.sampled_from(["s0", "s1"])
    return st.one_of(
        st.builds(lambda n, c: Command("schedule", (n, c)), name, st.booleans()),
        st.builds(lambda n: Command("unschedule", (n,)), name),
        st.builds(lambda m: Command("tick_schedules", (m,)), st.integers(0, 3)),
    )


def roles() -> st.SearchStrategy[str]:
    """Agent roles: the Leader and one worker."""
    return st.sampled_from(["leader", "worker"])


def turn_commands(slots: int = DEFAULT_SLOTS) -> st.SearchStrategy[Command]:
    """Commands of SPEC.md section 2: Turns, their completions and exits, wakeups, passes."""
    slot = task_slots(slots)
    return st.one_of(
        st.builds(lambda t, r: Command("start_turn", (t, r)), slot, roles()),
        st.builds(
            lambda t, r, stale, delay: Command("complete_turn", (t, r, stale, delay)),
            slot,
            roles(),
            st.booleans(),
            st.sampled_from([0, 0, 500]),
        ),
        st.builds(lambda t, r: Command("observe_exit", (t, r)), slot, roles()),
        st.builds(
            lambda t, reason: Command("request_wakeup", (t, reason)),
            slot,
            st.sampled_from(["mail", "review", "ping"]),
        ),
        st.just(Command("controller_pass")),
    )


def commands(
    slots: int = DEFAULT_SLOTS, *, runs: bool = True, turns: bool = True, schedules: bool = True
) -> st.SearchStrategy[Command]:
    """Any command, the clock moving in between."""
    options = [lifecycle_commands(slots), message_commands(slots), clock_moves()]
    options.append(stream_commands(slots))
    if schedules:
        options.append(schedule_commands())
    if runs:
        options.append(run_commands(slots))
    if turns:
        options.append(turn_commands(slots))
    return st.one_of(*options)


def command_sequences(
    slots: int = DEFAULT_SLOTS,
    *,
    min_size: int = 1,
    max_size: int = 40,
    runs: bool = True,
    turns: bool = True,
) -> st.SearchStrategy[list[Command]]:
    """Sequences that start with a few submitted tasks, then any commands."""
    opening = [
        Command("submit", (None,)),
        Command("submit", (None,)),
        Command("submit", (0,)),
        Command("reserve", (0,)),
        Command("reserve", (1,)),
    ]
    steps = commands(slots, runs=runs, turns=turns)
    return st.lists(steps, min_size=min_size, max_size=max_size).map(lambda rest: opening + rest)
