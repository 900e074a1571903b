"""The report as one HTML document: header, timeline, owner tree, explain trail, verify.

The page loads nothing: its style and its one script are inline, and its Content
Security Policy allows that script alone (by its hash) and no connection, so a string
that slipped through escaping still could not run or fetch. Without JavaScript the
timeline is still drawn (positioned bars, native tooltips) and the rest are plain
tables; the script adds zoom, a filter, richer tooltips and cross-highlighting.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from tasktrail.domain import TaskState
from tasktrail.domain.tasks.describe import format_at
from tasktrail.domain.tasks.streams import summaries

from .assets import CSS, SCRIPT
from .draw import legend, text, timeline_html
from .gather import ReportData
from .scale import duration


def render(data: ReportData) -> str:
    """The whole page for ``data``."""
    row_ids = {row.task_id: f"t{number}" for number, row in enumerate(data.timeline.rows)}
    for task_id in data.tasks:
        row_ids.setdefault(task_id, f"t{len(row_ids)}")
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    policy = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )
    words = _search_words(data)
    title = f"tasktrail report: {data.task_id}" if data.task_id else "tasktrail report"
    sections = [
        _header(data, title),
        _timeline(data, row_ids, words),
        _tree(data, row_ids, words),
        _explain(data),
        _verify(data),
    ]
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{text(title)}</title><style>{CSS}</style></head>\n<body>"
        + "\n".join(sections)
        + "<footer>Written by <code>tasktrail report</code>: one file, nothing loaded from "
        "anywhere; the tables read without JavaScript.</footer>"
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def _header(data: ReportData, title: str) -> str:
    state = data.state
    taken = data.taken_at
    clock = format_at(taken) if taken is not None else "-"
    generated = data.generated_at or datetime.now(UTC)
    position = (
        f"position {state.position} (store head {data.head})"
        if data.until.position is None
        else f"until position {data.until.position} (store head {data.head})"
    )
    verdict = (
        '<span class="badge ok">verify ok</span>'
        if data.verify.ok
        else f'<span class="badge bad">{len(data.verify.violations)} violations</span>'
    )
    rows = [
        ("source", text(data.source)),
        ("read", text(data.scope)),
        ("taken at", f"{text(position)}; scheduler clock {text(clock)}"),
        ("written", text(generated.isoformat(timespec="seconds").replace("+00:00", "Z"))),
    ]
    if data.until.position is not None or data.until.at is not None:
        rows.insert(2, ("as of", text(f"--until {data.until}")))
    if state.skipped or state.problems:
        rows.append(("unread", f"{len(state.skipped)} lines skipped, {len(state.problems)} events"))
    meta = "".join(f"<div><dt>{key}</dt><dd>{value}</dd></div>" for key, value in rows)
    heading = (
        f"tasktrail report <code>{text(data.task_id)}</code>"
        if data.task_id
        else "tasktrail report <span class='muted'>whole store</span>"
    )
    return (
        f'<header><h1>{heading} {verdict}</h1><dl class="meta">{meta}</dl>'
        '<nav><a href="#timeline">Timeline</a><a href="#tree">Owner tree</a>'
        + ('<a href="#explain">Explain</a>' if data.steps is not None else "")
        + '<a href="#verify">Verify</a></nav></header>'
    )


def _timeline(data: ReportData, row_ids: dict[str, str], words: dict[str, str]) -> str:
    timeline = data.timeline
    if not timeline.rows:
        return '<section id="timeline"><h2>Timeline</h2><p>No task events.</p></section>'
    hidden = ""
    paged = data.page
    if paged is not None:
        further = (
            f" <code>--page {paged.number + 1}</code> draws the next {paged.limit}"
            if paged.number < paged.pages
            else ""
        )
        hidden = (
            f'<p class="note">Page {paged.number} of {paged.pages}: tasks {paged.first}-'
            f"{paged.last} of {paged.total} in tree order, <code>--limit {paged.limit}</code> "
            f"a page.{further}{'.' if further else ''} A TASK draws its tree whole.</p>"
        )
    elif timeline.hidden:  # a caller's own builder may leave tasks out
        hidden = f'<p class="note">{timeline.hidden} more tasks not drawn.</p>'
    span = duration(timeline.end - timeline.start)
    return (
        '<div class="tools" id="tools" hidden>'
        '<input type="search" id="filter" placeholder="find tasks: id, kind, status, '
        'outcome, error" aria-label="find tasks">'
        '<span class="count" id="filter-count"></span>'
        '<button type="button" data-zoom="out" title="zoom out">&minus;</button>'
        '<button type="button" data-zoom="in" title="zoom in">+</button>'
        '<button type="button" data-zoom="fit" title="fit the whole range">fit</button>'
        '<span class="zoom" id="zoom-level">1&times;</span>'
        '<span class="hint">Ctrl + wheel zooms; double-click a bar to zoom to it; click '
        "one for its step in the explain trail.</span></div>"
        '<section id="timeline"><h2>Timeline <span class="muted">scheduler clock, '
        f"{text(span)}, {_tasks(len(timeline.rows))}</span></h2>{hidden}"
        f'<div class="legend">{legend()}</div>'
        f"{timeline_html(timeline, row_ids, words)}</section>"
    )


def _tree(data: ReportData, row_ids: dict[str, str], words: dict[str, str]) -> str:
    head = (
        "<tr><th>task</th><th>kind</th><th>status</th><th>outcome</th><th>restarts</th>"
        "<th>blocked</th><th>abort mark</th><th>phase</th><th>events</th></tr>"
    )
    body = []
    for row in data.timeline.rows:
        task = data.tasks.get(row.task_id)
        if task is None:
            continue
        search = words.get(row.task_id, row.task_id)
        body.append(_tree_row(data, task, row.depth, row.context, row_ids[row.task_id], search))
    note = (
        ""
        if data.registry_used
        else f'<p class="note">Blocked reasons: only <code>restart_limit</code> (at '
        f"{data.restart_limit} restarts) is judged without the definitions (--registry).</p>"
    )
    return (
        f'<section id="tree"><h2>Owner tree <span class="muted">{_tasks(len(body))}</span></h2>'
        f'<table class="tree"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'
        f"{note}</section>"
    )


def _tree_row(
    data: ReportData, task: TaskState, depth: int, context: bool, rid: str, search: str
) -> str:
    outcome = task.outcome
    if outcome is None:
        result = ""
    else:
        why = outcome.reason or outcome.message
        result = f'<span class="o-{text(outcome.status)}">{text(outcome.status)}</span>'
        if why:
            result += f' <span class="why">{text(why)}</span>'
        if outcome.result is not None:  # what the task answered, shortened
            result += f' <span class="result">{text(_answer(outcome))}</span>'
    for name, stream in summaries(task).items():  # its streams summed, never each chunk
        shown = f"{name}: {stream['chunks']} chunks, {stream['bytes']} B"
        shown += "" if stream["closed"] else ", open"
        result += f' <span class="stream">{text(shown)}</span>'
    blocked = data.blocked.get(task.id, "")
    mark = ""
    if task.abort_requested:
        mark = "abandon on restart" if task.abort_reason == "restart" else "requested"
    phase = task.checkpoint.phase if task.checkpoint is not None else ""
    status = task.status + (" (held)" if task.status == "completing" else "")
    tag = ' <span class="tag">awaited, outside the tree</span>' if context else ""
    chosen = ' class="chosen"' if task.id == data.task_id else ""
    return (
        f'<tr id="{rid}" data-row="{rid}" data-search="{text(search.lower())}"{chosen}>'
        f'<td class="name" style="--depth:{depth}">{text(task.id)}{tag}</td>'
        f"<td>{text(task.kind)}</td><td>{text(status)}</td><td>{result}</td>"
        f'<td class="num">{task.restarts}</td><td>{text(blocked)}</td><td>{mark}</td>'
        f'<td>{text(phase)}</td><td class="num">{task.events}</td></tr>'
    )


def _tasks(count: int) -> str:
    return f"{count} task" if count == 1 else f"{count} tasks"


def _search_words(data: ReportData) -> dict[str, str]:
    """Each task's words for the page's search: id, kind, status, outcome, blocked
    reason, phase, and the outcome's error message or reason."""
    words = {}
    for task_id, task in data.tasks.items():
        outcome = task.outcome
        said = (
            (outcome.status, outcome.message or "", outcome.reason or "")
            if outcome is not None
            else ()
        )
        phase = task.checkpoint.phase if task.checkpoint is not None else ""
        blocked = data.blocked.get(task_id, "")
        found = (task_id, task.kind, task.status, *said, blocked, phase)
        words[task_id] = " ".join(w for w in found if w)[:600]
    return words


def _explain(data: ReportData) -> str:
    if data.steps is None:
        return ""
    start = data.timeline.start
    body = []
    for step in data.steps:
        move = (
            f"{text(step.status_before or '-')} → {text(step.status_after)}"
            if step.status_before != step.status_after
            else f'<span class="muted">stays</span> {text(step.status_after)}'
        )
        rule = f"rule {step.rule}" if step.rule is not None else ""
        body.append(
            f'<tr id="p{step.position}" data-pos="{step.position}">'
            f'<td class="num">{step.position}</td>'
            f'<td title="{text(format_at(step.at))}">+{text(duration(step.at - start))}</td>'
            f"<td>{text(step.event_type)}</td><td>{rule}</td><td>{move}</td>"
            f"<td>{text(step.why)}</td></tr>"
        )
    return (
        f'<section id="explain"><h2>Explain <code>{text(data.task_id)}</code> '
        f'<span class="muted">{len(data.steps)} events</span></h2>'
        '<table class="explain"><thead><tr><th>position</th><th>at</th><th>event</th>'
        "<th>rule</th><th>before → after</th><th>command or rule applied</th></tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></section>"
    )


def _verify(data: ReportData) -> str:
    report = data.verify
    scope = (
        f"over the streams read, for the tasks of {text(data.task_id)}'s tree"
        if data.task_id
        else "over the whole log"
    )
    summary = (
        f"<p>{report.events} events to position {report.position}, {len(report.checks)} "
        f"checks {scope}: "
        + (
            '<span class="badge ok">ok</span>'
            if report.ok
            else f'<span class="badge bad">{len(report.violations)} violations</span>'
        )
        + "</p>"
    )
    rows = "".join(
        f"<tr><td>{text(v.check)}</td><td>{text(v.task_id or '')}</td>"
        f"<td>{text(v.message)}</td><td>{text(', '.join(map(str, v.positions)))}</td></tr>"
        for v in report.violations
    )
    table = (
        '<table class="verify"><thead><tr><th>check</th><th>task</th><th>what is wrong</th>'
        f"<th>positions</th></tr></thead><tbody>{rows}</tbody></table>"
        if rows
        else ""
    )
    checks = ", ".join(text(name) for name in report.checks)
    return (
        f'<section id="verify"><h2>Verify</h2>{summary}{table}'
        f'<p class="note">Checks: {checks}.</p></section>'
    )


__all__ = ["render"]


def _answer(outcome: Any) -> str:
    """A task's result as the page shows it: compact JSON, at most 80 characters."""
    answer = json.dumps(outcome.to_dict()["result"], ensure_ascii=False, separators=(",", ":"))
    return answer if len(answer) <= 80 else answer[:77] + "..."
