"""The console's page shell and the small pieces every page uses.

Every value the log holds (ids, kinds, memos, errors, actors, reasons) reaches a page
only through :func:`text` (the report's: escaped, quotes included, control characters
as symbols, long values cut) or :func:`task_link` (its URL percent-encoded whole,
then escaped). The pages load one style sheet and one script, both the server's own
(``/static/``); the Content Security Policy (:data:`POLICY`) allows no other script,
no inline one and no connection elsewhere, so a string that slipped through escaping
still could not run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from tasktrail.domain.frozen import thawed
from tasktrail.domain.tasks.describe import format_at

from ...report.draw import text

POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
"""The pages' Content Security Policy. Inline styles stay allowed: the report's timeline
places each bar with a ``style`` attribute (percentages of the clock range)."""
SECURITY_HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
NAV = (
    ("/", "Tasks"),
    ("/inbox", "Inbox"),
    ("/workers", "Workers"),
    ("/runs", "Runs"),
    ("/schedules", "Schedules"),
)


@dataclass(frozen=True)
class Viewer:
    """Who looks at a page: the actor signed in (``None``: nobody), whether the server
    takes acts at all (``--token-file``), and the value a form must carry (CSRF)."""

    actor: str | None
    acts_enabled: bool
    csrf: str = ""

    @property
    def can_act(self) -> bool:
        return self.acts_enabled and self.actor is not None


def page(
    title: str,
    body: str,
    *,
    viewer: Viewer,
    store: str,
    here: str,
    watch: str,
    tree: list[str] | None = None,
    poll_s: float | None = None,
) -> str:
    """A whole page: the bar (nav, store, live dot, who is signed in) and ``body``.
    ``watch`` says which news refreshes the page's ``#live`` part (``tasks``, ``tree``,
    ``runs``, ``schedules``, ``all``); ``tree`` the tasks a task page shows."""
    links = "".join(
        f'<a href="{href}"{" class=on" if href == here else ""}>{name}</a>' for href, name in NAV
    )
    who = ""
    if viewer.acts_enabled:
        if viewer.actor is None:
            who = f'<a class="who" href="/login?{urlencode({"next": here})}">sign in to act</a>'
        else:
            who = (
                f'<form class="who" method="post" action="/logout">'
                f'<input type="hidden" name="csrf" value="{text(viewer.csrf)}">'
                f"acting as <b>{text(viewer.actor)}</b> "
                '<button type="submit" class="link">sign out</button></form>'
            )
    data = f'data-watch="{text(watch)}"'
    if tree is not None:
        data += f' data-tree="{text(json.dumps(tree), 1_000_000)}"'
    if poll_s is not None:
        data += f' data-poll="{poll_s:g}"'
    csrf = f'<meta name="csrf" content="{text(viewer.csrf)}">' if viewer.can_act else ""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="referrer" content="no-referrer">{csrf}'
        f"<title>{text(title)} · tasktrail console</title>"
        '<link rel="icon" href="data:,"><link rel="stylesheet" href="/static/console.css">'
        '<script src="/static/console.js" defer></script></head>\n'
        f"<body {data}>"
        f'<div class="topbar"><a class="brand" href="/">tasktrail <span>console</span></a>'
        f'<nav class="main">{links}</nav><span class="store" title="{text(store)}">'
        f"{text(store, 80)}</span>"
        '<span id="conn" class="conn off" title="live updates: off">live</span>'
        f"{who}</div>\n<main>{body}</main>"
        '<div id="said" class="said" role="status" hidden></div></body></html>\n'
    )


def task_href(task_id: str, action: str = "") -> str:
    """A task's page (or an act on it): its id percent-encoded whole, ``/`` included."""
    return f"/tasks/{quote(task_id, safe='')}" + (f"/{action}" if action else "")


def task_link(task_id: str, *, limit: int = 80) -> str:
    """A link to a task's page, its id as text."""
    return f'<a href="{text(task_href(task_id))}">{text(task_id, limit)}</a>'


def when(at: float | None) -> str:
    """A scheduler time, short (to the second, UTC), the full time in its title."""
    if at is None:
        return ""
    full = format_at(at)
    return f'<time title="{text(full)}">{text(full[:19].replace("T", " "))}</time>'


def value_text(value: Any, limit: int = 2_000) -> str:
    """A JSON value the log holds (a memo, a result, a message), as escaped text."""
    try:
        said = json.dumps(thawed(value), ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        said = repr(value)
    return f"<code>{text(said, limit)}</code>"


def status_badge(status: str, outcome: str | None = None) -> str:
    """A status (and outcome) as a small coloured word."""
    shown = outcome if status == "terminal" and outcome else status
    css = "".join(c if c.isalnum() else "-" for c in shown)
    return f'<span class="st st-{css}">{text(shown)}</span>'


def problems_note(status: dict[str, Any]) -> str:
    """What a page says when the follower is behind, skipped events or stopped, and of
    its archive: the ranges it skips without one, each segment that failed its check."""
    notes = []
    if not status["ready"]:
        notes.append(
            f"Reading the store: position {status['position']:,} of "
            f"{status['head_at_start']:,}. This page fills in as it goes."
        )
    if status["skipped"]:
        shown = "; ".join(status["problems"][:3])
        notes.append(f"{status['skipped']} events could not be read and are left out: {shown}")
    if status["failure"]:
        notes.append(f"The store cannot be read just now (trying again): {status['failure']}")
    archive = status.get("archive") or {}
    if archive.get("skipped"):
        said = str(archive["skipped"])
        notes.append(said[:1].upper() + said[1:] + ".")
    notes += [f"{found}; its events are left out." for found in archive.get("findings") or ()]
    return "".join(f'<p class="warn">{text(n, 2_000)}</p>' for n in notes)


def error_box(message: str) -> str:
    return f'<p class="error" role="alert">{text(message, 2_000)}</p>'


__all__ = [
    "NAV",
    "POLICY",
    "SECURITY_HEADERS",
    "Viewer",
    "error_box",
    "page",
    "problems_note",
    "status_badge",
    "task_href",
    "task_link",
    "text",
    "value_text",
    "when",
]
