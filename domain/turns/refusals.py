"""The refusals of section 2's rules: :class:`TurnRuleViolation` names the rule a
command broke (nothing was appended), and :class:`StaleCompletion` is the one refusal
that is recorded (as a :class:`~.events.TurnCompletionRefused` event) before it is
raised.
"""

from __future__ import annotations

from ..errors import Refused


class TurnRuleViolation(Refused):
    """A command broke one of the rules of SPEC.md section 2; nothing was appended
    (except for :class:`StaleCompletion`, whose refusal is itself recorded).

    ``rule`` names the rule, as ``turns.one_active`` or ``wakeups.reason``.
    """

    def __init__(self, rule: str, reason: str, *, task_id: str | None = None) -> None:
        self.rule = rule
        super().__init__(f"{rule}: {reason}", task_id=task_id)


class StaleCompletion(TurnRuleViolation):
    """A completion named a Turn that is not its role's active one (``turns.stale_completion``).

    It was refused and never applied, but the refusal **was recorded** (a
    :class:`TurnCompletionRefused` event), so the audit shows it. ``turn_id`` is
    the Turn the completion named, ``active_turn_id`` the role's active Turn
    (``None`` when the role has none).
    """

    def __init__(self, task_id: str, role: str, turn_id: str, active_turn_id: str | None) -> None:
        self.role = role
        self.turn_id = turn_id
        self.active_turn_id = active_turn_id
        active = (
            f"the active Turn is {active_turn_id}" if active_turn_id else "it has no active Turn"
        )
        super().__init__(
            "turns.stale_completion",
            f"completion of Turn {turn_id} of role {role!r} is stale ({active}); "
            "it was recorded as refused and not applied",
            task_id=task_id,
        )
