"""Every way tasktrail reads a store, run against a store this process writes, and a
watch on the files a process opens outside SQLite.

:data:`READ_PATHS` names each read path (the API's and the command line's, run in
this process): replay, history, explain, verify (with an export's heads, seals and
the snapshots), export, report, trace, diff, frames, project, snapshot and seal.
:func:`prepare` takes what some of them read besides the store (a snapshot, an
export, seals). :func:`store_file_opens` lists each ``open`` (``open()``,
``os.open``, ``Path.read_bytes``, ``shutil``: Python's ``open`` audit event) of a
store's file or the files SQLite keeps beside it: there must be none, since
closing such a descriptor drops the locks SQLite's connections of the process hold
(tests/test_own_store_reads.py).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasktrail.domain import Registry, TaskDefinition
from tasktrail.replay import export, replay
from tasktrail.replay.cli import main

KIND = "t"
PHASE = "plan"


def registry() -> Registry:
    """One kind, one phase that finishes at once."""
    return Registry([TaskDefinition(KIND, 1, {PHASE: lambda i: i.finish("completed")})])


@dataclass(frozen=True)
class Reading:
    """A store to read, a folder for what the reads write, a task of the store."""

    store: str
    folder: Path
    task: str

    @property
    def export(self) -> str:
        return str(self.folder / "log.jsonl")

    @property
    def seals(self) -> str:
        return str(self.folder / "seals.txt")

    def out(self, name: str) -> str:
        return str(self.folder / name)


def cli(*argv: str) -> str:
    """``tasktrail ARGV`` in this process: what it printed (it must exit 0)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    assert code == 0, f"tasktrail {' '.join(argv)}: exit {code}: {err.getvalue()}"
    return out.getvalue()


def prepare(r: Reading) -> None:
    """What the reads read besides the store: a snapshot, an export, seals."""
    cli("snapshot", r.store)
    cli("export", r.store, r.export)
    Path(r.seals).write_text(cli("seal", r.store))


def _frames(r: Reading) -> None:
    from tasktrail.replay import frames

    frames.events(r.store)
    frames.phase_durations(r.store, r.task)


def _projector(r: Reading) -> None:
    from tasktrail.projections import Projector

    with Projector(r.store, r.out("api-views.db")) as projector:
        projector.catch_up()


def _chain(r: Reading) -> None:
    from tasktrail.replay.tamper import check_chain

    assert not check_chain(r.store, against=r.export).problems


READ_PATHS: dict[str, Callable[[Reading], Any]] = {
    "replay(path)": lambda r: replay(r.store),
    "replay": lambda r: cli("replay", r.store),
    "history": lambda r: cli("history", r.store, r.task),
    "explain": lambda r: cli("explain", r.store, r.task),
    "tasks": lambda r: cli("tasks", r.store, "--all"),
    "runs": lambda r: cli("runs", r.store),
    "workers": lambda r: cli("workers", r.store),
    "trace": lambda r: cli("trace", r.store, "--out", r.out("trace.json")),
    "diff": lambda r: cli("diff", r.store, r.export),
    "export": lambda r: cli("export", r.store, r.out("again.jsonl")),
    "export(path)": lambda r: export(r.store, r.out("api.jsonl")),
    "seal": lambda r: cli("seal", r.store),
    "verify": lambda r: cli("verify", r.store, "--against", r.export, "--seals", r.seals),
    "verify export": lambda r: cli("verify", r.export, "--seals", r.export),
    "check_chain(path)": _chain,
    "report": lambda r: cli("report", r.store, "--out", r.out("all.html")),
    "report task": lambda r: cli("report", r.store, r.task, "--out", r.out("task.html")),
    "frames": _frames,
    "project": lambda r: cli("project", r.store, "--out", r.out("views.db")),
    "Projector(path)": _projector,
    "snapshot --list": lambda r: cli("snapshot", r.store, "--list"),
}


_WATCHES: list[tuple[frozenset[str], list[str]]] = []
_HOOKED = False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _WATCHES or not args:
        return
    target = args[0]
    if not isinstance(target, str | bytes | os.PathLike):
        return  # a descriptor: opened before, and seen then
    path = os.path.realpath(os.fsdecode(target))
    for names, found in _WATCHES:
        if path in names:
            found.append(path)


@contextmanager
def store_file_opens(store: str) -> Iterator[list[str]]:
    """The paths of ``store``'s file and its companions opened outside SQLite while the
    block runs (filled as they happen)."""
    global _HOOKED
    if not _HOOKED:  # an audit hook stays for the process's life: one, idle unwatched
        sys.addaudithook(_hook)
        _HOOKED = True
    base = os.path.realpath(store)
    names = frozenset(base + suffix for suffix in ("", "-wal", "-shm", "-journal"))
    watch: tuple[frozenset[str], list[str]] = (names, [])
    _WATCHES.append(watch)
    try:
        yield watch[1]
    finally:
        _WATCHES.remove(watch)
