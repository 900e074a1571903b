"""Issue 15's lead, measured: what events and states as msgspec ``Struct``s would buy
a replay, beside what it costs now, side by side in one run.

    python -m benchmarks.structs_probe                 # 100,000 events x 5 rounds
    python -m benchmarks.structs_probe --events 20000 --rounds 3

Not part of ``python -m benchmarks``: it measures a design not taken (see
``benchmarks/README.md``, "The msgspec Struct lead"). The two parts a Struct would
change are measured alone, on the workload's own rows and states:

* **reading**: each stored row to its event (``Store.read``: msgspec decodes the row
  into a mirror, then the frozen dataclass is filled from it) against each row decoded
  straight into a frozen ``Struct`` of the same fields and types (all a Struct event
  would cost);
* **copying**: every state a fold makes (each copy and each new state, counted in a
  fold of the log and replayed on samples of the fold's own arguments) against
  ``msgspec.structs.replace`` of, and the constructor of, a frozen ``Struct`` with the
  same fields.

A replay (``audit=False``) is timed in the same round, and the projection is that
replay less both savings: the ratio Struct events and states would give, all else
equal. What else a Struct would change (attribute reads, equality, the indexes) is
not projected; the fold's attribute reads cost about the same on either.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from tasktrail.domain import open_store
from tasktrail.domain.store import wire
from tasktrail.replay import fold, replay

from . import raw
from .workload import build_store, closing_sqlite, cycles_for

SAMPLES = 400
"""Arguments kept per copy function: each is timed on these, cycled."""


class _Calls:
    """A fold's calls of one copy or maker function: how many, and samples of them."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.count = 0
        self.samples: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        if len(self.samples) < SAMPLES:
            self.samples.append((args, kwargs))
        return self.function(*args, **kwargs)


def _copy_functions() -> dict[int, tuple[Callable[..., Any], list[tuple[types.ModuleType, str]]]]:
    """Every module global of the domain that :func:`copier` or :func:`maker` made: by
    the function's id, the function and where it is bound."""
    found: dict[int, tuple[Callable[..., Any], list[tuple[types.ModuleType, str]]]] = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("tasktrail.domain") or module is None:
            continue
        for attribute, value in vars(module).items():
            qualname = getattr(value, "__qualname__", "")
            if isinstance(value, types.FunctionType) and qualname.startswith(("copier(", "maker(")):
                found.setdefault(id(value), (value, []))[1].append((module, attribute))
    return found


def count_copies(store: Path) -> list[_Calls]:
    """Fold the store once with every copy function counted (and restored after)."""
    functions = _copy_functions()
    calls = {key: _Calls(function) for key, (function, _) in functions.items()}
    try:
        for key, (_, places) in functions.items():
            for module, attribute in places:
                setattr(module, attribute, calls[key])
        with open_store(store) as opened:
            fold(opened.read(), projections=[])
    finally:
        for _key, (function, places) in functions.items():
            for module, attribute in places:
                setattr(module, attribute, function)
    return [c for c in calls.values() if c.count]


_STRUCTS: dict[type, type[msgspec.Struct]] = {}


def struct_of(cls: type) -> type[msgspec.Struct]:
    """A frozen ``Struct`` with ``cls``'s fields, in order (the state or event as a Struct)."""
    made = _STRUCTS.get(cls)
    if made is None:
        fields = [(f.name, Any) for f in dataclasses.fields(cls)]
        made = _STRUCTS[cls] = msgspec.defstruct(f"{cls.__name__}Struct", fields, frozen=True)
    return made


def as_struct(value: Any) -> Any:
    """``value`` (a dataclass) as its :func:`struct_of`, field for field."""
    names = [f.name for f in dataclasses.fields(value)]
    return struct_of(type(value))(**{n: getattr(value, n) for n in names})


def _struct_call(calls: _Calls) -> tuple[Callable[..., Any], list[tuple[tuple[Any, ...], dict]]]:
    """The Struct equivalent of one copy function, and its samples' arguments."""
    qualname = calls.function.__qualname__
    if qualname.startswith("maker("):
        cls = type(calls.function(*calls.samples[0][0], **calls.samples[0][1]))
        struct = struct_of(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        samples = []
        for args, kwargs in calls.samples:
            made = calls.function(*args, **kwargs)  # every field, defaults filled in
            samples.append(((), {n: getattr(made, n) for n in names}))
        return struct, samples
    replace = msgspec.structs.replace
    samples = []
    for args, kwargs in calls.samples:
        state = as_struct(args[0])
        changes = dict(kwargs)
        if len(args) == 2:  # a stamped copy: copy(state, event, **changes)
            changes = {"updated_at": args[1].at, "events": args[0].events + 1, **changes}
        samples.append(((state,), changes))
    return replace, samples


def _per_call(function: Callable[..., Any], samples: list[tuple[tuple[Any, ...], dict]]) -> float:
    """Seconds a call of ``function``, over its samples (each called 20 times)."""
    started = time.process_time()
    for _ in range(20):
        for args, kwargs in samples:
            function(*args, **kwargs)
    return (time.process_time() - started) / (20 * len(samples))


def _struct_decoders() -> dict[str, Callable[[bytes], Any]]:
    """Each event topic's decoder straight into a frozen Struct of its stored fields,
    typed as ``wire`` types them (the same checks the fast readers make)."""
    decoders = {}
    for topic, cls in wire.EVENT_TYPES.items():
        hints = typing.get_type_hints(cls)
        stored: list[Any] = []
        for f in dataclasses.fields(cls):
            if f.name == "task_id" and cls.task_stream:
                continue
            kind = Any if hints[f.name] is Any else wire._wire_type(hints[f.name])
            if f.default is dataclasses.MISSING:
                stored.append((f.name, kind))
            else:
                stored.append((f.name, kind, f.default))
        stored += [("timestamp", Any, None), ("class_version", int, 1), ("digest", Any, None)]
        struct = msgspec.defstruct(f"{cls.__name__}Event", stored, kw_only=True, frozen=True)
        decoders[topic] = msgspec.json.Decoder(struct).decode
    return decoders


def _decode_structs(store: Path, decoders: dict[str, Callable[[bytes], Any]]) -> int:
    with closing_sqlite(store) as conn:
        rows = conn.execute(
            "SELECT rowid, originator_id, originator_version, topic, state "
            "FROM stored_events ORDER BY rowid"
        ).fetchall()
        for _position, _stream, _version, topic, state in rows:
            decoders[topic](state)
    return len(rows)


def _read_events(store: Path) -> int:
    with open_store(store) as opened:
        return sum(1 for _ in opened.read())


def _timed(fn: Callable[[], Any]) -> float:
    started = time.process_time()
    fn()
    return time.process_time() - started


def probe(store: Path, rounds: int) -> dict[str, Any]:
    """The figures (seconds per event, by round) and the projection."""
    calls = count_copies(store)
    decoders = _struct_decoders()
    events = _read_events(store)
    keys = ("raw", "replay", "read", "read as Structs", "copies", "copies as Structs")
    rounds_of: dict[str, list[float]] = {key: [] for key in keys}
    for _ in range(rounds):
        rounds_of["raw"].append(_timed(lambda: raw.fetch_decode(store)))
        rounds_of["replay"].append(_timed(lambda: replay(store, audit=False, snapshots=False)))
        rounds_of["read"].append(_timed(lambda: _read_events(store)))
        rounds_of["read as Structs"].append(_timed(lambda: _decode_structs(store, decoders)))
        ours = theirs = 0.0
        for c in calls:
            ours += c.count * _per_call(c.function, c.samples)
            function, samples = _struct_call(c)
            theirs += c.count * _per_call(function, samples)
        rounds_of["copies"].append(ours)
        rounds_of["copies as Structs"].append(theirs)
    per_event = {k: [s / events * 1e6 for s in v] for k, v in rounds_of.items()}
    projected = [
        replay_us - (read - read_s) - (copies - copies_s)
        for replay_us, read, read_s, copies, copies_s in zip(
            per_event["replay"],
            per_event["read"],
            per_event["read as Structs"],
            per_event["copies"],
            per_event["copies as Structs"],
            strict=True,
        )
    ]
    per_event["replay projected with Structs"] = projected
    ratios = {
        "replay": [r / o for r, o in zip(per_event["raw"], per_event["replay"], strict=True)],
        "replay projected with Structs": [
            r / p for r, p in zip(per_event["raw"], projected, strict=True)
        ],
    }
    return {
        "events": events,
        "copies": {c.function.__qualname__: c.count for c in calls},
        "us_per_event": per_event,
        "ratios": ratios,
    }


def _line(name: str, values: list[float], unit: str) -> str:
    median = statistics.median(values)
    return f"  {name:<32} {median:7.2f} {unit}  ({min(values):.2f}-{max(values):.2f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.structs_probe",
        description="What events and states as msgspec Structs would buy a replay "
        "(CPU time; medians and min-max over the rounds).",
    )
    parser.add_argument("--events", type=int, default=100_000, help="log size (default 100,000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--dir", type=Path, help="folder for the store (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        store = Path(folder) / "workload.db"
        print(f"building {args.events:,} events of the mixed workload...", file=sys.stderr)
        build_store(store, cycles_for(args.events))
        figures = probe(store, args.rounds)
    print(
        f"{figures['events']:,} events; CPU time per event, median (min-max) over "
        f"{args.rounds} rounds:"
    )
    for name, values in figures["us_per_event"].items():
        print(_line(name, values, "us/ev"))
    for name, values in figures["ratios"].items():
        print(_line(f"ratio: {name}", values, "x    "))
    print("copies and new states a fold makes:", sum(figures["copies"].values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
