"""The task list page (``/``): the filter form, one page of tasks, the pager, and (for a
signed-in actor) the submit form. The table and the pager are the page's live part: the
script fetches them again (``?part=live``) when the news says a task changed, so the
form, what was typed in it and the scroll position stay as they are."""

from __future__ import annotations

from urllib.parse import urlencode

from tasktrail.domain import TaskState

from ...cli.tasks_command import OUTCOMES, STATUSES
from ..model.listing import LIVE, TaskPage, TaskQuery
from .layout import Viewer, error_box, status_badge, task_link, text, when


def list_body(
    listed: TaskPage | None,
    query: TaskQuery,
    kinds: list[str],
    viewer: Viewer,
    problem: str | None,
    notes: str,
) -> str:
    """The page's body: the form, the live part, the submit form."""
    return (
        f"{notes}{_form(query, kinds)}"
        + (error_box(problem) if problem else "")
        + f'<div id="live">{live_list(listed)}</div>'
        + (_submit_form(viewer) if viewer.can_act else "")
    )


def live_list(listed: TaskPage | None) -> str:
    """The table of tasks and the pager: what a refresh replaces."""
    if listed is None:
        return ""
    head = (
        "<tr><th>task</th><th>kind</th><th>status</th><th>phase</th><th>error or reason</th>"
        "<th>owner</th><th>submitted</th><th>updated</th><th>actors</th></tr>"
    )
    rows = "".join(_row(listed, task) for task in listed.tasks)
    if not rows:
        rows = '<tr><td colspan="9" class="empty">No task matches.</td></tr>'
    return (
        f'<p class="count" id="count">{_count(listed)}</p>'
        f'<table class="tasks"><thead>{head}</thead><tbody id="rows">{rows}</tbody></table>'
        f"{_pager(listed)}"
    )


def _row(listed: TaskPage, task: TaskState) -> str:
    outcome = task.outcome
    said = ""
    if outcome is not None:
        said = outcome.message or outcome.reason or ""
    elif listed.parked(task):
        said = f"parked at restart limit {listed.restart_limit}"
    elif task.abort_requested:
        said = "abort-marked"
    phase = task.checkpoint.phase if task.checkpoint is not None else ""
    owner = task_link(task.owner_id, limit=40) if task.owner_id else ""
    actors = ", ".join(text(a, 60) for a in listed.actors.get(task.id, []))
    status = status_badge(task.status, outcome.status if outcome else None)
    return (
        f'<tr data-task="{text(task.id)}"><td class="id">{task_link(task.id)}</td>'
        f"<td>{text(task.kind, 60)}</td><td>{status}</td><td>{text(phase, 60)}</td>"
        f'<td class="err">{text(said, 200)}</td><td class="id">{owner}</td>'
        f"<td>{when(task.submitted_at)}</td><td>{when(task.updated_at)}</td>"
        f"<td>{actors}</td></tr>"
    )


def _count(listed: TaskPage) -> str:
    if listed.total == 0:
        return f"No task matches, as of position {listed.position:,}."
    return (
        f"Tasks {listed.first:,}-{listed.last:,} of {listed.total:,}, "
        f"{listed.query.order} first, as of position {listed.position:,}."
    )


def _pager(listed: TaskPage) -> str:
    query, pages = listed.query, listed.pages
    if pages <= 1:
        return ""

    def link(page: int, label: str, rel: str = "") -> str:
        href = "/?" + urlencode(query.params(page=page))
        attributes = f' rel="{rel}"' if rel else ""
        return f'<a href="{text(href)}"{attributes}>{label}</a>'

    parts = []
    if query.page > 1:
        parts += [
            link(1, "&laquo; first"),
            link(
                query.page - 1, "&lsaquo; newer" if _newest(query) else "&lsaquo; previous", "prev"
            ),
        ]
    parts.append(f'<span class="at">page {query.page:,} of {pages:,}</span>')
    if query.page < pages:
        parts += [
            link(query.page + 1, "older &rsaquo;" if _newest(query) else "next &rsaquo;", "next"),
            link(pages, "last &raquo;"),
        ]
    return f'<nav class="pager">{"".join(parts)}</nav>'


def _newest(query: TaskQuery) -> bool:
    return query.order == "newest"


def _form(query: TaskQuery, kinds: list[str]) -> str:
    def options(values: tuple[str, ...] | list[str], chosen: str, blank: str) -> str:
        out = [f'<option value="">{blank}</option>']
        out += [
            f'<option value="{text(v)}"{" selected" if v == chosen else ""}>{text(v)}</option>'
            for v in values
        ]
        return "".join(out)

    kind_list = "".join(f'<option value="{text(k)}">' for k in kinds)
    return (
        '<form class="filters" id="filters" method="get" action="/" role="search">'
        f'<input type="search" name="q" value="{text(query.q)}" placeholder="search ids, kinds, '
        'actors, errors" aria-label="search" autocomplete="off">'
        f'<input name="kind" list="kinds" value="{text(query.kind)}" placeholder="kind" '
        f'aria-label="kind" autocomplete="off"><datalist id="kinds">{kind_list}</datalist>'
        f'<select name="status" aria-label="status">'
        f"{options((*STATUSES, LIVE), query.status, 'any status')}</select>"
        f'<select name="outcome" aria-label="outcome">'
        f"{options(OUTCOMES, query.outcome, 'any outcome')}</select>"
        f'<input name="since" value="{text(query.since)}" placeholder="since 2026-01-05" '
        'aria-label="submitted since" size="14">'
        f'<input name="until" value="{text(query.until)}" placeholder="until" '
        'aria-label="submitted until" size="14">'
        f'<select name="order" aria-label="order">{_orders(query.order)}</select>'
        '<button type="submit">Filter</button> <a class="reset" href="/">reset</a></form>'
    )


def _orders(chosen: str) -> str:
    return "".join(
        f'<option value="{o}"{" selected" if o == chosen else ""}>{o} first</option>'
        for o in ("newest", "oldest")
    )


def _submit_form(viewer: Viewer) -> str:
    return (
        '<details class="act-box"><summary>Submit a task</summary>'
        '<form class="act" method="post" action="/tasks" data-act="submit">'
        f'<input type="hidden" name="csrf" value="{text(viewer.csrf)}">'
        '<label>kind <input name="kind" required></label>'
        '<label>phase <input name="phase" required></label>'
        '<label>version <input name="version" inputmode="numeric" size="4"></label>'
        '<label>owner <input name="owner"></label>'
        '<label>id <input name="id" placeholder="a fresh one"></label>'
        '<label>priority <input name="priority" inputmode="numeric" size="5"></label>'
        '<label>key <input name="key"></label>'
        '<label class="wide">memos (a JSON object) <input name="memos" placeholder=\'{"day": '
        '"2026-01-05"}\'></label>'
        '<label class="wide">reason <input name="reason" required></label>'
        f'<button type="submit">Submit as {text(viewer.actor or "")}</button></form></details>'
    )
