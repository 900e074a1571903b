"""The fleet's pages: the workers, the run ledger (filters and pages) and the schedules,
drawn from what :mod:`..model.fleet` read."""

from __future__ import annotations

from typing import Any

from tasktrail.domain import RunState

from ..model.fleet import RunQuery
from .layout import status_badge, task_link, text, when


def workers_body(rows: list[dict[str, Any]], notes: str) -> str:
    """The workers page's body (all of it live)."""
    return f'{notes}<h1>Workers</h1><div id="live">{live_workers(rows)}</div>'


def live_workers(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return (
            '<p class="empty">No worker in this store (none holds a lease or a running task).</p>'
        )
    body = []
    for row in rows:
        live = "live" if row["live"] else ("process gone" if row["process_gone"] else "not live")
        css = "completed" if row["live"] else "failed"
        held = row["running"]
        tasks = ", ".join(task_link(t, limit=50) for t in held[:100])
        if len(held) > 100:
            tasks += f" and {len(held) - 100} more"
        body.append(
            f"<tr><td>{text(row['worker'])}</td>"
            f'<td><span class="st st-{css}">{live}</span></td>'
            f"<td>{when(row['renewed_at'])}</td><td>{when(row['expires_at'])}</td>"
            f'<td>{when(row["started_at"])}</td><td class="num">{len(held)}</td>'
            f"<td>{tasks}</td></tr>"
        )
    return (
        '<table class="tasks"><thead><tr><th>worker</th><th>live</th><th>last heartbeat</th>'
        "<th>lease until</th><th>started</th><th>running</th><th>tasks held</th></tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
        '<p class="note">Live: its lease is current by this machine\'s clock and its process '
        "holds its liveness lock. A gone worker's tasks wait for recovery (rule 9).</p>"
    )


def runs_body(shown: list[RunState], total: int, query: RunQuery, notes: str) -> str:
    """The run ledger page's body: the filters, then the live table and pager."""
    form = (
        '<form class="filters" method="get" action="/runs">'
        f'<input name="day" value="{text(query.day)}" placeholder="day YYYY-MM-DD" size="14" '
        'aria-label="day">'
        f'<input name="task" value="{text(query.task)}" placeholder="task" aria-label="task">'
        f'<label><input type="checkbox" name="live" value="1"{" checked" if query.live else ""}>'
        ' in flight only</label><button type="submit">Filter</button> '
        '<a class="reset" href="/runs">reset</a></form>'
    )
    return f'{notes}<h1>Run ledger</h1>{form}<div id="live">{live_runs(shown, total, query)}</div>'


def live_runs(shown: list[RunState], total: int, query: RunQuery) -> str:
    if not shown:
        return '<p class="empty">No run matches.</p>'
    rows = []
    for run in shown:
        if run.error is not None:
            what = f"{run.error.code}: {run.error.message}"
        elif run.job_id is not None:
            what = run.job_id + (f" ({run.last_known_status})" if run.last_known_status else "")
        else:
            what = f"waiting to submit ({run.last_submit_error})" if run.last_submit_error else ""
        rows.append(
            f"<tr><td>{text(run.run_id, 120)}</td><td>{task_link(run.task_id, limit=50)}</td>"
            f'<td>{text(run.day)}</td><td class="num">{run.attempt}</td>'
            f"<td>{status_badge(run.status)}</td><td>{text(run.trigger)}</td>"
            f'<td class="num">{run.submit_attempts}</td><td class="err">{text(what, 300)}</td>'
            f"<td>{when(run.updated_at)}</td></tr>"
        )
    pages = max(1, -(-total // query.per_page))
    pager = ""
    if pages > 1:
        parts = []
        if query.page > 1:
            parts.append(
                f'<a href="{text(query.link(query.page - 1))}" rel="prev">&lsaquo; newer</a>'
            )
        parts.append(f'<span class="at">page {query.page:,} of {pages:,}</span>')
        if query.page < pages:
            parts.append(
                f'<a href="{text(query.link(query.page + 1))}" rel="next">older &rsaquo;</a>'
            )
        pager = f'<nav class="pager">{"".join(parts)}</nav>'
    first = (query.page - 1) * query.per_page + 1
    return (
        f'<p class="count">Runs {first:,}-{first + len(shown) - 1:,} of {total:,}, newest '
        'minted first.</p><table class="tasks"><thead><tr><th>run</th><th>task</th>'
        "<th>day</th><th>attempt</th><th>status</th><th>trigger</th><th>submits</th>"
        "<th>job or error</th><th>updated</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>{pager}"
    )


def schedules_body(found: list[dict[str, Any]], notes: str) -> str:
    """The schedules page's body (all of it live)."""
    return f'{notes}<h1>Schedules</h1><div id="live">{live_schedules_html(found)}</div>'


def live_schedules_html(found: list[dict[str, Any]]) -> str:
    if not found:
        return '<p class="empty">No live schedule.</p>'
    rows = "".join(
        f"<tr><td>{text(s['name'])}</td><td>{text(s['kind'])}</td><td>{text(s['phase'])}</td>"
        f"<td><code>{text(s['cron'])}</code></td><td>{text(s['tz'])}</td>"
        f"<td>{when(s.get('next_at'))}</td><td>{when(s.get('last_tick'))}</td>"
        f'<td class="num">{s.get("submitted", 0)}</td>'
        f"<td>{'yes' if s.get('catch_up') else 'no'}</td></tr>"
        for s in found
    )
    return (
        '<table class="tasks"><thead><tr><th>name</th><th>kind</th><th>phase</th><th>cron</th>'
        "<th>zone</th><th>next tick</th><th>last tick</th><th>submitted</th><th>catch up</th>"
        f"</tr></thead><tbody>{rows}</tbody></table>"
    )
