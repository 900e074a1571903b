"""The command groups a :class:`~.scheduler.Scheduler` is made of, in the order their
methods resolve: the decision cycle first, then each group of ``commands/``,
``dispatch/``, ``service/`` and this room. A new group is added here, once.
``FlowCommands`` comes before ``PhaseCommands``: its ``runnable`` narrows theirs to
what limits and rates let start (rules 33, 34)."""

from __future__ import annotations

from ..commands.batch import BatchCommands
from ..commands.decision import DecisionCycle
from ..commands.forking import ForkCommands
from ..commands.group_commit import GroupCommit
from ..commands.snapshots import SnapshotCommands
from ..commands.submitting import SubmitCommands
from ..commands.task_commands import TaskCommands
from ..commands.turn_commands import TurnCommands
from ..dispatch.run_commands import RunCommands
from ..invoking.awaitable_commands import AwaitableCommands
from ..invoking.loop_commit import LoopCommit
from ..retention.commands import RetentionCommands
from ..service.asks import AskCommands
from ..service.flow import FlowCommands
from ..service.keys import KeyCommands
from ..service.messages import MessageCommands
from ..service.results import ResultCommands
from ..service.schedules import ScheduleCommands
from ..service.streams import StreamCommands
from .fleet import FleetCommands
from .phases import PhaseCommands


class CommandGroups(
    DecisionCycle,
    GroupCommit,
    LoopCommit,
    KeyCommands,
    SubmitCommands,
    TaskCommands,
    AwaitableCommands,
    ForkCommands,
    FlowCommands,
    PhaseCommands,
    BatchCommands,
    TurnCommands,
    RunCommands,
    FleetCommands,
    SnapshotCommands,
    MessageCommands,
    ResultCommands,
    ScheduleCommands,
    AskCommands,
    StreamCommands,
    RetentionCommands,
):
    """Every command group of a scheduler, mixed in one base; the state they share is
    the scheduler's (each group declares what it reads of it)."""
