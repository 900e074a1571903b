"""``decide``: the decisions of SPEC.md section 1, gathered in one namespace.

The application hands these pure functions to its ``_decide``: each takes a
:class:`~..world.Draft` and a :class:`~.context.Context`, emits the events its
command produces into the draft, or raises a refusal naming the rule and the
task, which appends nothing. Nothing is defined here: each rule lives in the
module of its part of a task's life (:mod:`.starting`, :mod:`.running`,
:mod:`.ending`, :mod:`.restarts`, :mod:`.messages`, :mod:`.asks`, :mod:`.readiness`,
:mod:`.forking`, :mod:`.debounce`).
"""

from __future__ import annotations

from .asks import answer, ask
from .context import Context
from .debounce import submit_debounced
from .ending import abort, fault, finish
from .forking import fork
from .guards import held_elsewhere
from .messages import reading, send, wait_message
from .readiness import readiness
from .restarts import recover, retry, stop
from .retrying import retry_phase
from .running import checkpoint, memo, sleep, wait
from .starting import reserve, submit, submit_owned
from .streams import emitting
from .streams import flush as flush_streams

__all__ = [
    "Context",
    "abort",
    "answer",
    "ask",
    "checkpoint",
    "emitting",
    "fault",
    "finish",
    "flush_streams",
    "fork",
    "held_elsewhere",
    "memo",
    "readiness",
    "reading",
    "recover",
    "reserve",
    "retry",
    "retry_phase",
    "send",
    "sleep",
    "stop",
    "submit",
    "submit_debounced",
    "submit_owned",
    "wait",
    "wait_message",
]
