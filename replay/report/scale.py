"""The timeline's clock axis: scheduler time to a percentage of the canvas width.

An incident is bursts of events with idle stretches between them (a nightly job
sleeps 36 hours, a parked task waits a minute for its operator). Drawn linearly,
the bursts would be slivers. :class:`Scale` folds each idle stretch that is both
long against the time that is not idle and far longer than the usual gap between
events: a fold gets a narrow fixed width (drawn as a hatched band saying how long
it lasted) and the rest of the width goes to the active time, linearly. The map is
piecewise linear through :attr:`Scale.knots`; the page's script reads the same knots
to redraw the ticks when it zooms.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections.abc import Iterable

FOLD_SHARE = 10
"""A gap folds if longer than 1/FOLD_SHARE of the active (unfolded) time ..."""
FOLD_OVER_TYPICAL = 20
"""... and longer than this many times the median gap between moments."""
FOLD_WIDTH = 3.0
"""The width of one fold, in percent of the canvas (less when there are many)."""
MAX_FOLDED_WIDTH = 24.0
TICK_PX = 110
"""About one tick label per this many pixels."""
TICK_CHAR_PX = 6.6
"""The width of one character of a tick label (11 px type), a little generous."""
FOLD_CHAR_PX = 5.8
"""... and of a fold's label (9.5 px type)."""
LABEL_GAP_PX = 8
"""The least room between two labels of the axis."""
END_PX = 80
"""A tick this close to the right edge is written to the left of its line."""
ASSUMED_PX = 900
"""The canvas width the ticks written into the page assume (the script redraws them)."""

STEPS = (
    *(n * 10**p for p in range(0, 3) for n in (1, 2, 5)),
    250,
    1_000,
    2_000,
    5_000,
    10_000,
    15_000,
    30_000,
    60_000,
    120_000,
    300_000,
    600_000,
    900_000,
    1_800_000,
    3_600_000,
    7_200_000,
    10_800_000,
    21_600_000,
    43_200_000,
    86_400_000,
    172_800_000,
    604_800_000,
)
"""Tick steps a clock reads well on, in ms (from 1 ms to a week)."""


def duration(ms: float) -> str:
    """A span of the scheduler clock in words a person reads: ``250 ms``, ``16.5 s``,
    ``4 min 1 s``, ``2 h 30 min``, ``1 d 12 h``."""
    ms = abs(ms)
    if ms < 1_000:
        return f"{ms:.3g} ms" if ms else "0 ms"
    if ms < 60_000:
        return f"{ms / 1_000:.3g} s"
    if ms < 3_600_000:
        whole, rest, big, small = *divmod(round(ms / 1_000), 60), "min", "s"
    elif ms < 86_400_000:
        whole, rest, big, small = *divmod(round(ms / 60_000), 60), "h", "min"
    else:
        whole, rest, big, small = *divmod(round(ms / 3_600_000), 24), "d", "h"
    return f"{whole} {big}" + (f" {rest} {small}" if rest else "")


def nice_step(raw: float) -> float:
    """The smallest step that reads well (1, 2, 5 ms ... 15 s, 30 s, 1 min ... 1 d,
    1 week, then whole weeks) and is at least ``raw`` ms."""
    raw = max(raw, 1e-3)
    if raw < 1:
        power = 10 ** math.floor(math.log10(raw))
        return float(next(f * power for f in (1, 2, 5, 10) if raw <= f * power))
    for step in STEPS:
        if raw <= step:
            return float(step)
    return float(604_800_000 * math.ceil(raw / 604_800_000))


class Scale:
    """Scheduler time to a percentage of the canvas width, idle stretches folded."""

    def __init__(self, start: float, end: float, moments: Iterable[float] = ()) -> None:
        self.start = start
        self.end = max(end, start + 1.0)
        times = sorted({start, self.end, *(t for t in moments if start <= t <= self.end)})
        gaps = [(a, b) for a, b in itertools.pairwise(times) if b > a]
        self.folds = _folds(gaps, self.end - start)
        width = min(FOLD_WIDTH, MAX_FOLDED_WIDTH / len(self.folds)) if self.folds else 0.0
        active = (self.end - start) - sum(b - a for a, b in self.folds)
        per_ms = (100.0 - width * len(self.folds)) / active if active > 0 else 0.0
        knots = [(start, 0.0)]
        x = 0.0
        cursor = start
        for a, b in self.folds:
            x += (a - cursor) * per_ms
            knots += [(a, x), (b, x + width)]
            x += width
            cursor = b
        knots.append((self.end, 100.0))
        self.knots = knots
        self._times = [t for t, _ in knots]

    def x(self, at: float) -> float:
        """Where ``at`` is drawn, in percent of the width (clamped to the range)."""
        if at <= self.start:
            return 0.0
        if at >= self.end:
            return 100.0
        i = bisect.bisect_right(self._times, at) - 1
        (t0, x0), (t1, x1) = self.knots[i], self.knots[i + 1]
        return x0 + (x1 - x0) * (at - t0) / (t1 - t0) if t1 > t0 else x0

    def ticks(self, width_px: float = ASSUMED_PX) -> list[tuple[float, float]]:
        """``(time, x)`` of the ticks for a canvas ``width_px`` wide (see :meth:`axis`)."""
        return self.axis(width_px)[0]

    def axis(
        self, width_px: float = ASSUMED_PX
    ) -> tuple[list[tuple[float, float]], list[tuple[float, float, bool]]]:
        """The axis for a canvas ``width_px`` wide: ``(time, x)`` of each tick (round
        steps inside each stretch that is not folded, about :data:`TICK_PX` apart), and
        ``(from, to, labelled)`` of each fold. Labels are laid out left to right and one
        that would touch the label before it is left out (a fold keeps its band and
        its title), so no two pile up where narrow folds and short bursts alternate.
        The page's script lays out the part in view the same way."""
        ticks: list[tuple[float, float]] = []
        folds: list[tuple[float, float, bool]] = []
        folded = set(self.folds)
        free = -math.inf  # the first pixel the next label may take
        for (t0, x0), (t1, x1) in itertools.pairwise(self.knots):
            if t1 <= t0:
                continue
            if (t0, t1) in folded:
                left, right = x0 / 100.0 * width_px, x1 / 100.0 * width_px
                need = len(duration(t1 - t0)) * FOLD_CHAR_PX + 6
                labelled = right - left >= need and left >= free
                if labelled:
                    free = right + LABEL_GAP_PX
                folds.append((t0, t1, labelled))
                continue
            pixels = (x1 - x0) / 100.0 * width_px
            step = nice_step((t1 - t0) / max(pixels / TICK_PX, 1e-9))
            k = math.ceil((t0 - self.start) / step - 1e-9)
            while self.start + k * step <= t1 + 1e-9:
                at = self.start + k * step
                x = self.x(at)
                left, right = label_extent(tick_label(at - self.start), x, width_px)
                if left >= free:
                    ticks.append((at, x))
                    free = right + LABEL_GAP_PX
                k += 1
        return ticks, folds


def tick_label(offset: float) -> str:
    """A tick's words: ``0`` at the start, else ``+`` and the time since it."""
    return "0" if offset == 0 else f"+{duration(offset)}"


def at_end(x: float, width_px: float) -> bool:
    """Whether a tick at ``x`` percent is written to the left of its line (near the
    right edge, where there is no room after it)."""
    return (100.0 - x) / 100.0 * width_px < END_PX


def label_extent(label: str, x: float, width_px: float) -> tuple[float, float]:
    """The pixels a tick label at ``x`` percent takes: from its line rightwards (4 px
    in), or leftwards :func:`at_end`."""
    at_px, width = x / 100.0 * width_px, 4 + len(label) * TICK_CHAR_PX
    return (at_px - width, at_px) if at_end(x, width_px) else (at_px, at_px + width)


def _folds(gaps: list[tuple[float, float]], span: float) -> list[tuple[float, float]]:
    """The gaps to fold: long against the active time and against the usual gap."""
    if len(gaps) < 2:
        return []
    typical = statistics.median(b - a for a, b in gaps)
    folded: set[tuple[float, float]] = set()
    for _ in range(8):  # folding shrinks the active time: look again, a few times at most
        active = span - sum(b - a for a, b in folded)
        more = {
            (a, b)
            for a, b in gaps
            if (b - a) > active / FOLD_SHARE and (b - a) > FOLD_OVER_TYPICAL * typical
        }
        if more <= folded:
            break
        folded |= more
        if len(folded) == len(gaps):  # never fold every gap: nothing would be left
            folded = set()
            break
    return sorted(folded)


__all__ = ["STEPS", "Scale", "at_end", "duration", "label_extent", "nice_step", "tick_label"]
