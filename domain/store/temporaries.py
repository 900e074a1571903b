"""The hidden temporary file an output is written to before it is renamed into place,
and those a killed writer left.

An output written whole (an export, ``trace --out``, a report) goes to
``.NAME.PID-XXXXXXXX.tmp`` beside ``NAME``, and is renamed over it once complete; a
process killed before that (SIGKILL, a power cut) leaves the temporary file for
good. The next output to the same ``NAME`` removes such a file once it knows its
writer is gone: the process its name gives does not exist here, and nobody holds
the ``flock`` every writer keeps on its file for as long as it writes (that lock
goes with its process, on any host a shared folder has). A file that is not of
this pattern, a process that is alive (a concurrent output to the same name, or a
reused process id), or a lock still held: left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
from pathlib import Path


def output_temporary(target: Path) -> tuple[int, str]:
    """A new temporary file beside ``target``, open for writing and held by this
    process (its descriptor and path); a killed writer's left beside ``target`` is
    removed first (:func:`remove_output_leftovers`)."""
    remove_output_leftovers(target)
    descriptor, name = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.{os.getpid()}-", suffix=".tmp"
    )
    # No lock where the file system has none: the process id alone then tells.
    with contextlib.suppress(OSError):
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return descriptor, name


def remove_output_leftovers(target: Path) -> list[Path]:
    """Remove the temporary files beside ``target`` that a killed output to it left
    (see the module docstring); returns those removed."""
    pattern = re.compile(re.escape(f".{target.name}.") + r"([1-9][0-9]*)-\w+\.tmp")
    removed: list[Path] = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        if _alive(int(match[1])) or _held(entry.path):
            continue
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists here (ours, or another user's we may not signal)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _held(path: str) -> bool:
    """Whether a writer still holds its lock on the temporary file at ``path``."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return True  # gone meanwhile, or not ours to judge: left alone
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False  # no locks on this file system: the process id told
    finally:
        os.close(descriptor)
    return False
