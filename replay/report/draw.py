"""The timeline as HTML that needs no script: rows of positioned bars and marks, an axis
of the scheduler clock and an SVG layer of wait arrows, all placed in percentages of
the clock range, so the page's script only has to widen the canvas to zoom.

Every string a task recorded goes through :func:`text` (escaped, control characters
shown as symbols, long values cut) before it reaches the page.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable

from tasktrail.domain.tasks.describe import format_at

from .scale import ASSUMED_PX, Scale, at_end, duration, tick_label
from .stays import RUNS_LANE, TASK_LANE, Bar, Details, Mark
from .timeline import Timeline

LANE_PX = 26
"""The height of one lane (a task row has one lane, plus one per role and one for runs)."""
AXIS_PX = 30
ROOM_PX = 170
"""Room right of the clock's end, for the words beside what ends there."""
MAX_TEXT = 400
"""Characters of one recorded value a tooltip or cell shows (the rest is cut, and said)."""
_CONTROLS = {code: chr(0x2400 + code) for code in range(32) if chr(code) not in "\n\t"}
_CONTROLS[0x7F] = "\u2421"


def text(value: object, limit: int = MAX_TEXT) -> str:
    """``value`` as HTML text: control characters as their symbols (no terminal or
    parser tricks), cut at ``limit`` characters, then escaped, quotes included."""
    raw = str(value).translate(_CONTROLS)
    if len(raw) > limit:
        raw = f"{raw[:limit]}… ({len(raw) - limit} more characters)"
    return html.escape(raw, quote=True)


def tip(label: str, details: Details, start: float | None = None) -> str:
    lines = [label]
    if start is not None:
        lines.append(format_at(start))
    lines += [f"{key}: {value}" for key, value in details]
    return text("\n".join(lines), MAX_TEXT * 4)


def lane_label(lane: str) -> str:
    if lane == RUNS_LANE:
        return "dispatch runs"
    return f"Turns of {lane.removeprefix('role:')}"


def timeline_html(
    timeline: Timeline,
    row_ids: dict[str, str],
    search: dict[str, str],
    link: Callable[[str], str] | None = None,
) -> str:
    """The timeline's HTML: names on the left, a canvas of lanes on the right.
    ``search`` holds each task's words for the page's filter (id, kind, status);
    ``link`` gives a task's name the address it leads to (default: its row below, on
    the report's own page; the console's: the task's page)."""
    scale = Scale(timeline.start, timeline.end, _moments(timeline))
    names: list[str] = []
    lanes: list[str] = []
    lane_of: dict[str, int] = {}
    for row in timeline.rows:
        rid = row_ids[row.task_id]
        lane_of[row.task_id] = len(lanes)
        words = text(search.get(row.task_id, f"{row.task_id} {row.kind}").lower())
        for number, lane in enumerate(row.lanes):
            first = " first" if number == 0 else ""
            data = f'data-row="{rid}" data-search="{words}"'
            if lane == TASK_LANE:
                context = ' <span class="tag">awaited</span>' if row.context else ""
                names.append(
                    f'<div class="tl-name{first}" {data} style="--depth:{row.depth}">'
                    f'<a href="{text(link(row.task_id)) if link else "#" + rid}">'
                    f"{text(row.task_id)}</a> "
                    f'<span class="kind">{text(row.kind)}</span>{context}</div>'
                )
            else:
                names.append(
                    f'<div class="tl-name sub{first}" {data} style="--depth:{row.depth}">'
                    f"{text(lane_label(lane))}</div>"
                )
            items = "".join(_bar(bar, scale) for bar in row.bars if bar.lane == lane)
            items += "".join(_mark(mark, scale) for mark in row.marks if mark.lane == lane)
            lanes.append(
                f'<div class="tl-lane{first}" {data} data-lane="{text(lane)}">'
                f'<div class="tl-track">{items}</div></div>'
            )
    height = AXIS_PX + LANE_PX * len(lanes)
    arrows = []
    for arrow in timeline.arrows:
        top = AXIS_PX + LANE_PX * lane_of[arrow.from_task] + LANE_PX // 2
        bottom = AXIS_PX + LANE_PX * lane_of[arrow.to_task] + LANE_PX // 2
        to_at = arrow.to_at if arrow.to_at is not None else timeline.end
        arrows.append(
            f'<line data-from="{row_ids[arrow.from_task]}" data-to="{row_ids[arrow.to_task]}" '
            f'x1="{scale.x(arrow.at):.4f}%" y1="{top}" x2="{scale.x(to_at):.4f}%" '
            f'y2="{bottom}" class="p-{text(arrow.policy)}" marker-end="url(#head)">'
            f"<title>{text(f'{arrow.from_task} waits ({arrow.policy}) on {arrow.to_task}')}"
            f"</title></line>"
        )
    svg = (
        f'<svg class="tl-arrows" width="100%" height="{height}" aria-hidden="true">'
        '<defs><marker id="head" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z"/></marker>'
        f"</defs>{''.join(arrows)}</svg>"
    )
    first = format_at(timeline.start)
    return (
        f'<div class="tl" id="tl" style="--lane:{LANE_PX}px;--axis:{AXIS_PX}px;--room:{ROOM_PX}px">'
        f'<div class="tl-names"><div class="tl-corner">from {text(first)}</div>'
        f"{''.join(names)}</div>"
        f'<div class="tl-scroll" id="tl-scroll"><div class="tl-canvas" id="tl-canvas" '
        f'data-knots="{json.dumps(scale.knots)}" data-folds="{json.dumps(scale.folds)}" '
        f'style="height:{height}px">'
        f'<div class="tl-axis"><div class="tl-track" id="tl-axis">{_ticks(scale)}</div></div>'
        f"{''.join(lanes)}{svg}</div></div></div>"
    )


def _moments(timeline: Timeline) -> Iterable[float]:
    """Every time something is drawn at: what the axis folds the idle stretches between."""
    for row in timeline.rows:
        for bar in row.bars:
            yield bar.start
            if bar.end is not None:
                yield bar.end
            if bar.planned_end is not None:
                yield bar.planned_end
        for mark in row.marks:
            yield mark.at
    for arrow in timeline.arrows:
        yield arrow.at
        if arrow.to_at is not None:
            yield arrow.to_at


def _ticks(scale: Scale) -> str:
    ticks, folds = scale.axis()
    out = [
        f'<span class="tick{" end" if at_end(x, ASSUMED_PX) else ""}" '
        f'style="left:{x:.4f}%" '
        f'title="{format_at(at)}">{tick_label(at - scale.start)}</span>'
        for at, x in ticks
    ]
    for a, b, labelled in folds:
        left, right = scale.x(a), scale.x(b)
        words = f"<span>{duration(b - a)}</span>" if labelled else ""
        out.append(
            f'<span class="fold" style="left:{left:.4f}%;width:{right - left:.4f}%" '
            f'title="{text(f"{duration(b - a)} with nothing happening: folded")}">'
            f"{words}</span>"
        )
    return "".join(out)


def _bar(bar: Bar, scale: Scale) -> str:
    end = bar.end if bar.end is not None else bar.start
    left = scale.x(bar.start)
    width = max(scale.x(end) - left, 0.0)
    took = f"took {duration(end - bar.start)}"
    classes = f"bar s-{_css(bar.css)}" + (f" st-{_css(bar.state)}" if bar.state else "")
    out = (
        f'<div class="{classes}" data-pos="{bar.position}" '
        f'style="left:{left:.4f}%;width:{width:.4f}%" '
        f'title="{tip(f"{bar.label} ({took})", bar.details, bar.start)}">'
        f"<span>{text(bar.label, 80)}</span></div>"
    )
    if bar.planned_end is not None and bar.planned_end > end:
        planned = scale.x(bar.planned_end)
        out += (
            f'<div class="bar planned" style="left:{scale.x(end):.4f}%;'
            f'width:{max(planned - scale.x(end), 0.0):.4f}%" '
            f'title="{text("due to wake at " + format_at(bar.planned_end))}"></div>'
        )
    if bar.note:
        out += _note(bar.note, scale.x(end), bar.state, bar.position)
    return out


def _note(note: str, x: float, state: str, position: int) -> str:
    """Words beside a mark or a bar's end (an outcome, an error), not only on hover.
    The page's script hides one that would cover the note before it or another mark
    in its lane (its mark's tooltip still says it)."""
    return (
        f'<span class="note-by st-{_css(state)}" data-pos="{position}" '
        f'style="left:{x:.4f}%">{text(note, 120)}</span>'
    )


def _mark(mark: Mark, scale: Scale) -> str:
    classes = f"mark m-{_css(mark.css)}" + (f" st-{_css(mark.state)}" if mark.state else "")
    x = scale.x(mark.at)
    out = (
        f'<div class="{classes}" data-pos="{mark.position}" style="left:{x:.4f}%" '
        f'title="{tip(mark.label, mark.details, mark.at)}"></div>'
    )
    return out + (_note(mark.note, x, mark.state, mark.position) if mark.note else "")


def _css(name: str) -> str:
    """A class name made of letters, digits and dashes only (never a recorded string)."""
    return "".join(c if c.isascii() and (c.isalnum() or c == "-") else "-" for c in name)


def legend() -> str:
    """The key to the timeline's colours and shapes."""
    items: Iterable[tuple[str, str]] = (
        ("bar s-pending", "pending"),
        ("bar s-running", "running a phase"),
        ("bar s-running st-abort", "abort handler"),
        ("bar s-running st-interrupted", "cut off by a crash"),
        ("bar s-waiting", "waiting (arrows: awaited)"),
        ("bar s-sleeping", "sleeping"),
        ("bar s-completing", "holding an outcome"),
        ("bar s-turn", "Turn"),
        ("bar s-run", "dispatch run"),
        ("mark m-end st-completed", "completed"),
        ("mark m-end st-failed", "failed / faulted"),
        ("mark m-end st-aborted", "aborted"),
        ("mark m-abort", "abort mark"),
        ("mark m-crash", "crash, recovery"),
        ("mark m-parked", "parked"),
        ("mark m-retry", "retry"),
        ("mark m-refusal", "refused / dropped"),
        ("mark m-wakeup", "wakeup"),
        ("mark m-note", "memo, other"),
    )
    return "".join(
        f'<span class="key"><span class="{css} sample"></span>{label}</span>'
        for css, label in items
    )


__all__ = ["LANE_PX", "legend", "text", "timeline_html"]
