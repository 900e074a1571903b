"""Events and times in words a person reads (for the CLI, the demo and notebooks).

Text from a log reaches a terminal only through :func:`printable`: an id, a kind or
a reason may hold ESC sequences (colours, window titles, a cleared screen), NUL, or
CR/LF that would forge whole lines; each such character is shown as its escape.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .events import TaskEvent, event_payload

if TYPE_CHECKING:
    from .state import TaskState

_QUIET_FIELDS = {"at", "rule", "owner_id", "conversation_id", "project_ids", "trace"}
_UNPRINTABLE = {
    **{code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))},
    **{ord("\t"): "\\t", ord("\n"): "\\n", ord("\r"): "\\r"},
    # Bidirectional overrides and isolates reorder what follows them on screen; line
    # and paragraph separators break lines; lone surrogates are not text at all.
    **{code: f"\\u{code:04x}" for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))},
    **{code: f"\\u{code:04x}" for code in (0x2028, 0x2029, 0xFEFF)},
    **{code: f"\\u{code:04x}" for code in range(0xD800, 0xE000)},
}


def printable(text: str) -> str:
    """``text`` with every control character (C0, DEL, C1), bidirectional control,
    line separator and lone surrogate shown as its escape (``\\x1b``, ``\\n``,
    ``\\u202e``): safe to print to a terminal, one line."""
    return text.translate(_UNPRINTABLE)


def format_at(at: float) -> str:
    """A scheduler time (ms since the epoch) as an ISO-8601 UTC time to the millisecond
    (a time no date can show, from a log an older release wrote, as its number of ms)."""
    try:
        moment = datetime.fromtimestamp(at / 1000.0, tz=UTC)
    except (OverflowError, ValueError, OSError, TypeError):
        return f"{at!r} ms"
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_TIMES = frozenset({"at", "until", "scheduled_for", "retry_after"})


def is_time_field(name: str) -> bool:
    """Whether an event field named ``name`` holds a time on the scheduler clock (ms
    since the epoch): ``at``, a sleep's ``until``, a run's ``scheduled_for`` and
    ``retry_after``, and every ``..._at`` (a deadline, a retry's time, a completion's):
    what a person reads shows it as :func:`format_at` does."""
    return name in _TIMES or name.endswith("_at")


def field_text(name: str, value: Any) -> str:
    """An event field's value as one line shows it: a time as :func:`format_at`."""
    return format_at(value) if is_time_field(name) else _short(value)


def waiting_for_message(task: TaskState) -> str:
    """What a task waiting for a message waits for, in words (rule 21)."""
    deadline = "" if task.until is None else f" until {format_at(task.until)}"
    if any(ask.waiting and ask.topic == task.message_topic for ask in task.asks):
        return f"an answer to its ask on {task.message_topic!r}{deadline}"  # rules 30-32
    return f"a message on {task.message_topic!r}{deadline}"


def describe(event: TaskEvent) -> str:
    """One line for an event: its type and the fields that say what changed."""
    parts = []
    for name, value in event_payload(event).items():
        if name in _QUIET_FIELDS or value in (None, (), False, {}):
            continue
        if name == "task_id":
            continue
        if name == "values" and isinstance(value, list):  # a stream's chunks: counted
            parts.append(f"chunks={len(value)}")
            continue
        parts.append(f"{name}={field_text(name, value)}")
    rule = f"  [rule {event.rule}]" if event.rule is not None else ""
    return printable(f"{type(event).__name__}({', '.join(parts)}){rule}")


def _short(value: Any) -> str:
    if isinstance(value, tuple | list):
        text = ",".join(_short(v) for v in value)
        return f"[{text}]"
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
