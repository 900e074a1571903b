"""Agent Turns, Leader wakeups, runtime cleanups and controller passes (SPEC.md section 2).

A task has **roles** (``leader`` and named others). A **Turn** is one agent
turn of one role: ``started -> delivered -> completed | failed | exited |
stalled``. At most one Turn per (task, role) is active (``started`` or
``delivered``). Turn events live on the task's own stream, so the task's
aggregate version guards them and rule 4 holds: nothing is recorded on a
terminal task.

Two kinds of record must outlive the task, so they live on streams of their
own:

- the task's **pending Leader wakeup**, on ``wakeup:<task id>``: requested,
  aggregated, dispatched (a Leader Turn started, or the reasons steered into the
  busy one) or dropped (the task has decided its outcome or ended);
- the **runtime-cleanup obligations** of a completed task's roles, on
  ``cleanup:<task id>``: required, claimed by the worker that asks its runtime,
  failed (still open), settled.

A **controller pass** applies the rules to the tasks of its scope and records
what it did on ``pass:<pass id>``, and the task-pass retries it arms on
``task-pass:<task id>``.

Section 2's rules are not numbered in SPEC.md; events a rule produced name it in
``cause`` (``turns.completion_due``, ``wakeups.dispatch``, ...), and events a
controller pass recorded carry its ``pass_id``. Each rule is applied in one
place, its name in a comment above the branch that applies it:

- ``turns.one_active``, ``turns.stale_completion``, ``turns.completion_due`` /
  ``turns.completion_wins``: :mod:`.rules`;
- ``turns.delivery_retry`` / ``turns.delivery_exhausted``,
  ``turns.held_offered_again``: :mod:`.delivery`;
- ``turns.stall_diagnostic``, ``turns.stall_window`` and the judging of exit and
  stall observations: :mod:`.liveness`;
- ``cleanup.completed_task``, ``cleanup.role_stopped``: :mod:`.cleanup`
  (``cleanup.failed_excludes``: :mod:`.task_pass`; ``cleanup.claimed``: :mod:`.claims`);
- ``wakeups.aggregate``, ``wakeups.dispatch``, ``wakeups.deadline``,
  ``wakeups.resignal``, ``wakeups.force``, ``wakeups.task_done``: :mod:`.wakeups`
  (``wakeups.fence``: :mod:`.task_pass`);
- ``turns.settings_recorded``: :mod:`.settings`;
- task-pass retries: :mod:`.pass_decisions`; ``passes.full_takes_over``:
  :mod:`.scope` and :mod:`.queue`.

Where these follow the seeds beyond SPEC.md: ``docs/seed-fidelity.md``.

The modules, from the bottom up: :mod:`.state` (the states events fold into),
:mod:`.settings`, :mod:`.refusals`, :mod:`.events` and :mod:`.pass_events`;
:mod:`.folds` (every fold, and the world index passes read; :mod:`.cleanup_fold`);
:mod:`.checks` (what the rules share) and the rule modules above; then the pass itself:
:mod:`.keys`, :mod:`.scope`, :mod:`.queue`, :mod:`.attempts`, :mod:`.runtime`, :mod:`.report`,
:mod:`.host`, :mod:`.claims`, :mod:`.task_pass`, :mod:`.engine` and :mod:`.deadlines`.

This file imports nothing: ``tasks.state`` imports :mod:`.state`, and loading
more here would import ``tasks`` back while it is half loaded.
"""
