"""A task's page (``/tasks/{id}``): what it is and holds (status, phase, owner, children,
memos, result or error, messages), the report's timeline of its tree, and its history
with the rule, the actor and the reason behind each event. The acts (abort, retry, fork
as of a position picked on the timeline or in the history, send) sit outside the live
part, so a refresh never loses what an operator is typing."""

from __future__ import annotations

import json

from tasktrail.domain import TaskState

from ...report.draw import legend, timeline_html
from ...report.scale import duration
from ..model.streams import outputs
from ..model.task_view import TREE_LIMIT, TaskView
from .layout import Viewer, status_badge, task_href, task_link, text, value_text, when

SHOWN_CHARS = 20_000
"""The most of a stream's output a page shows (its end: the latest output)."""


def task_body(view: TaskView, viewer: Viewer, notes: str) -> str:
    """The page's body: title, the acts (signed in), the live part."""
    task = view.task
    badge = status_badge(task.status, _oc(task))
    title = (
        f'<h1 class="task-title"><code>{text(task.id)}</code> {badge}'
        f' <span class="muted">{text(task.kind)} v{task.version}</span></h1>'
    )
    acts = _acts(view, viewer) if viewer.can_act else ""
    return f'{notes}{title}{acts}<div id="live">{live_task(view)}</div>'


def live_task(view: TaskView) -> str:
    """Everything a refresh of the task's page replaces."""
    tree = text(json.dumps(view.tree), 10**7)
    return (
        f'<span hidden id="tree-ids" data-tree="{tree}"></span>'
        + _summary(view)
        + _streams(view)
        + _memos(view.task)
        + _messages(view)
        + _timeline(view)
        + _history(view)
        + _children(view)
    )


def _oc(task: TaskState) -> str | None:
    return task.outcome.status if task.outcome is not None else None


def _summary(view: TaskView) -> str:
    task = view.task
    rows: list[tuple[str, str]] = []
    if view.owners:
        chain = " &lsaquo; ".join(task_link(o, limit=60) for o in view.owners)
        rows.append(("owner", chain))
    phase = task.checkpoint.phase if task.checkpoint is not None else ""
    if task.checkpoint is not None and task.checkpoint.attempt is not None:
        phase += f" (attempt {task.checkpoint.attempt})"
    if phase:
        rows.append(("phase", text(phase)))
    if task.status == "waiting" and task.message_topic is not None:
        rows.append(("waiting for", f"a message on {text(task.message_topic)}"))
    elif task.status == "waiting":
        awaited = ", ".join(task_link(t, limit=50) for t in task.on[:50])
        rows.append(("waiting on", f"{awaited} ({text(task.policy or '')})"))
    if task.status == "sleeping" and task.until is not None:
        rows.append(("sleeping until", when(task.until)))
    if task.worker:
        rows.append(("worker", text(task.worker)))
    outcome = task.outcome
    if outcome is not None:
        rows.append(("outcome", status_badge("terminal", outcome.status)))
        if outcome.message is not None:
            rows.append(("error", f'<span class="err">{text(outcome.message, 2_000)}</span>'))
        if outcome.detail is not None:
            rows.append(("detail", value_text(outcome.detail)))
        if outcome.reason is not None:
            rows.append(("reason", text(outcome.reason, 2_000)))
        if outcome.result is not None:
            rows.append(("result", value_text(outcome.result)))
    if view.blocked:
        rows.append(("blocked", text(view.blocked)))
    if task.abort_requested:
        mark = "abandon on restart" if task.abort_reason == "restart" else "requested"
        rows.append(("abort mark", text(mark)))
    if task.restarts:
        rows.append(("restarts", str(task.restarts)))
    if task.priority:
        rows.append(("priority", str(task.priority)))
    rows.append(("submitted", when(task.submitted_at)))
    rows.append(("updated", when(task.updated_at)))
    if view.actors:
        rows.append(("actors", ", ".join(text(a, 80) for a in view.actors)))
    rows.append(("events", f"{task.events} (as of position {view.position:,})"))
    cells = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in rows)
    return f'<section class="card"><dl class="facts">{cells}</dl></section>'


def _streams(view: TaskView) -> str:
    """The task's streams as its page shows them (nothing for a task that emitted none)."""
    found = outputs(view.events)
    if not found:
        return ""
    parts = []
    for stream in found.values():
        said = stream.text()
        cut = ""
        if len(said) > SHOWN_CHARS:
            cut = f'<p class="note">The last {SHOWN_CHARS:,} characters of {len(said):,}.</p>'
            said = said[-SHOWN_CHARS:]
        state = "closed" if stream.closed else "open: more may come"
        parts.append(
            f'<h3>{text(stream.name)} <span class="muted">{len(stream.chunks):,} chunks, '
            f'{state}</span></h3>{cut}<pre class="stream">{text(said, SHOWN_CHARS)}</pre>'
        )
    return f'<section class="card" id="streams"><h2>Output</h2>{"".join(parts)}</section>'


def _memos(task: TaskState) -> str:
    if not task.memos:
        return ""
    rows = "".join(
        f"<tr><td>{text(name, 200)}</td><td>{value_text(value)}</td></tr>"
        for name, value in task.memos.items()
    )
    return (
        '<section class="card" id="memos"><h2>Memos</h2><table class="kv">'
        f"<thead><tr><th>name</th><th>value</th></tr></thead><tbody>{rows}</tbody></table>"
        "</section>"
    )


def _messages(view: TaskView) -> str:
    messages = view.messages()
    if not messages:
        return ""
    rows = "".join(
        f'<tr data-pos="{m["position"]}"><td class="num">{m["seq"]}</td>'
        f"<td>{text(m['topic'], 200)}</td><td>{value_text(m['value'])}</td>"
        f"<td>{when(m['at'])}</td><td>{text(m['actor'] or '', 80)}</td>"
        f"<td>{text(m['reason'] or '', 300)}</td><td>{'read' if m['read'] else 'unread'}</td></tr>"
        for m in messages
    )
    return (
        '<section class="card" id="messages"><h2>Messages</h2><table class="kv"><thead><tr>'
        "<th>#</th><th>topic</th><th>value</th><th>sent</th><th>by</th><th>why</th><th></th>"
        f"</tr></thead><tbody>{rows}</tbody></table></section>"
    )


def _timeline(view: TaskView) -> str:
    timeline = view.timeline
    if not timeline.rows:
        return ""
    row_ids = {row.task_id: f"t{n}" for n, row in enumerate(timeline.rows)}
    words = {row.task_id: f"{row.task_id} {row.kind}" for row in timeline.rows}
    more = ""
    if view.tree_total > TREE_LIMIT:
        more = (
            f'<p class="note">Its tree holds {view.tree_total:,} tasks: the first '
            f"{TREE_LIMIT} are drawn (owners first).</p>"
        )
    span = duration(timeline.end - timeline.start)
    return (
        '<section id="timeline"><h2>Timeline <span class="muted">scheduler clock, '
        f"{text(span)}, {len(timeline.rows)} tasks; click a bar or mark to fork as of it</span>"
        '<span class="zoom-tools"><button type="button" data-zoom="out" title="zoom out">'
        '&minus;</button><button type="button" data-zoom="in" title="zoom in">+</button>'
        '<button type="button" data-zoom="fit" title="fit">fit</button></span></h2>'
        f'{more}<div class="legend">{legend()}</div>'
        f"{timeline_html(timeline, row_ids, words, task_href)}</section>"
    )


def _history(view: TaskView) -> str:
    rows = []
    for step in view.steps:
        move = (
            f"{text(step.status_before or '-')} → {text(step.status_after or '')}"
            if step.status_before != step.status_after
            else f'<span class="muted">stays</span> {text(step.status_after or "")}'
        )
        rule = f"rule {step.rule}" if step.rule is not None else ""
        rows.append(
            f'<tr data-pos="{step.position}" title="fork as of position {step.position}">'
            f'<td class="num">{step.position}</td><td>{when(step.at)}</td>'
            f"<td>{text(step.event_type)}</td><td>{rule}</td><td>{move}</td>"
            f"<td>{text(step.actor or '', 80)}</td><td>{text(step.reason or '', 400)}</td>"
            f'<td class="why">{text(step.why, 600)}</td></tr>'
        )
    return (
        f'<section class="card" id="history"><h2>History <span class="muted">{len(rows)} '
        'events: the command or rule behind each</span></h2><table class="history"><thead><tr>'
        "<th>position</th><th>at</th><th>event</th><th>rule</th><th>before → after</th>"
        "<th>actor</th><th>reason</th><th>command or rule applied</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


def _children(view: TaskView) -> str:
    if not view.children:
        return ""
    rows = "".join(
        f'<tr><td class="id">{task_link(c.id)}</td><td>{text(c.kind, 60)}</td>'
        f"<td>{status_badge(c.status, _oc(c))}</td>"
        f"<td>{text(c.checkpoint.phase if c.checkpoint else '', 60)}</td>"
        f'<td class="err">{text((c.outcome.message or "") if c.outcome else "", 200)}</td>'
        f"<td>{when(c.updated_at)}</td></tr>"
        for c in view.children
    )
    return (
        f'<section class="card" id="children"><h2>Owns <span class="muted">{len(view.children)}'
        ' tasks</span></h2><table class="tasks"><thead><tr><th>task</th><th>kind</th>'
        "<th>status</th><th>phase</th><th>error or reason</th><th>updated</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></section>"
    )


def _acts(view: TaskView, viewer: Viewer) -> str:
    task = view.task
    csrf = f'<input type="hidden" name="csrf" value="{text(viewer.csrf)}">'
    reason = '<label class="wide">reason <input name="reason" required></label>'

    def form(action: str, label: str, fields: str = "", hint: str = "") -> str:
        href = text(task_href(task.id, action))
        return (
            f'<form class="act" method="post" action="{href}" data-act="{action}">{csrf}'
            f'{fields}{reason}<button type="submit">{label}</button>'
            + (f'<span class="hint">{hint}</span>' if hint else "")
            + "</form>"
        )

    fork_fields = (
        '<label>as of position <input name="at" id="fork-at" inputmode="numeric" size="9" '
        'placeholder="now"></label><label>new id <input name="id" placeholder="a fresh one">'
        "</label>"
    )
    send_fields = (
        '<label>topic <input name="topic" required></label>'
        '<label class="wide">value (JSON) <input name="value" required placeholder=\'"yes"\'>'
        "</label>"
    )
    forms = [
        form("abort", "Abort", hint="marks it and its live descendants (rules 3, 6)"),
        form("retry", "Retry", hint="unparks a task parked at the restart limit (rule 9)"),
        form("fork", "Fork", fork_fields, "a new task at its checkpoint and memos as of then"),
        form("send", "Send message", send_fields, "into its mailbox (rules 20-22)"),
    ]
    # Open while the task is live; an ended one is mostly forked: one click away.
    shown = " open" if task.status != "terminal" else ""
    return (
        f'<details class="acts" id="acts"{shown}><summary>Act on it as '
        f'{text(viewer.actor or "")} <span class="muted">abort, retry, fork, send: each '
        "recorded with your name and reason</span></summary>"
        f"{''.join(forms)}</details>"
    )
