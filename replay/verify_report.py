"""What ``verify`` reports: each broken invariant, and the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tasktrail.domain.retention.across import Finding
from tasktrail.domain.tasks.describe import printable

from .seal_check import SealCheck
from .tamper import ChainReport


@dataclass(frozen=True)
class Violation:
    """One broken invariant."""

    check: str
    task_id: str | None
    message: str
    positions: tuple[int, ...] = ()

    def __str__(self) -> str:
        where = f" (positions {', '.join(map(str, self.positions))})" if self.positions else ""
        task = f"task {self.task_id}: " if self.task_id else ""
        return printable(f"{self.check}: {task}{self.message}{where}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "task_id": self.task_id,
            "message": self.message,
            "positions": list(self.positions),
        }


@dataclass
class VerifyReport:
    """What ``verify`` found: ``ok`` when nothing."""

    position: int
    events: int
    checks: list[str]
    violations: list[Violation] = field(default_factory=list)
    chain: ChainReport | None = None
    """The digest chain's tally (``None`` for a state folded already: no rows to check)."""
    notes: list[str] = field(default_factory=list)
    """What is worth knowing and breaks nothing (snapshots an earlier release took)."""
    unchecked: list[str] = field(default_factory=list)
    """What could not be checked without the chain key (a keyed store's digests, a
    seal's MAC): the report is then not ``ok``, though it found no violation."""

    @property
    def ok(self) -> bool:
        """No violation, and nothing left unchecked for want of the key."""
        return not self.violations and not self.unchecked

    @property
    def unreadable(self) -> bool:
        """Whether the log could not be read to its end (a corrupt or unknown event)."""
        return any(v.check == "readable" for v in self.violations)

    def lines(self) -> list[str]:
        """The report, a line each: the verdict, the chain's tally, each violation."""
        verdict = "ok" if self.ok else f"{len(self.violations)} violations"
        if self.unchecked and not self.violations:
            verdict = "no violations, but the keys were not checked"
        head = f"{self.events} events to position {self.position}, {len(self.checks)} checks: "
        lines = [head + verdict]
        if self.chain is not None:
            keyed = f"{self.chain.unverified} keyed, unchecked; " if self.chain.unverified else ""
            lines.append(
                f"  chain: {self.chain.chained} events chained, {keyed}{self.chain.unchained} "
                "unchained (recorded before the chain)"
            )
        lines += [f"  keys not checked: {what}" for what in self.unchecked]
        return (
            lines + [f"  note: {note}" for note in self.notes] + [f"  {v}" for v in self.violations]
        )

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "position": self.position,
            "events": self.events,
            "checks": self.checks,
            "violations": [v.to_dict() for v in self.violations],
            "chain": self.chain.to_dict() if self.chain is not None else None,
            "notes": list(self.notes),
            "unchecked": list(self.unchecked),
        }


def seal_violations(sealed: SealCheck | None) -> list[Violation]:
    """Each seal the log no longer extends, as a ``seals`` violation."""
    if sealed is None:
        return []
    found = []
    for p in sealed.problems:
        label = sealed.labels.get(p.line)  # a snapshot's recorded seal
        check, where = ("snapshots", label) if label else ("seals", f"seal line {p.line}")
        found.append(Violation(check, None, f"{where}: {p.message}", _positions(p.position)))
    return found


def _positions(position: int | None) -> tuple[int, ...]:
    return (position,) if position is not None else ()


def unchecked_keys(chain: ChainReport | None, sealed: SealCheck | None) -> list[str]:
    """What could not be checked for want of the key (never reported as ok)."""
    found = []
    if chain is not None and chain.unverified:
        found.append(
            f"{chain.unverified} keyed digests not checked: the store is keyed (key id "
            f"{chain.key_id}) and no key was given (--key-file, $TASKTRAIL_CHAIN_KEY)"
        )
    if sealed is not None and sealed.macs_unchecked:
        found.append(f"{sealed.macs_unchecked} seal MACs not checked: no key was given")
    return found


def chain_violations(chain: ChainReport | None) -> list[Violation]:
    """Each break of the digest chain, as a ``chain`` violation at its position."""
    found = []
    for broken in chain.problems if chain is not None else []:
        where = "" if broken.stream_id == "*" else f"stream {broken.stream_id}: "
        found.append(Violation("chain", None, where + broken.message, _positions(broken.position)))
    return found


def archive_checked(report: VerifyReport, found: list[Finding]) -> VerifyReport:
    """``report`` with the ``archive`` check: each segment that failed it, a violation."""
    report.checks.append("archive")
    report.violations.extend(
        Violation("archive", None, f"segment {f.segment}: {f.message}", _positions(f.position))
        for f in found
    )
    return report
