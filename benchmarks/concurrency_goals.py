"""The goals ``python -m benchmarks.concurrency`` judges, each with its figures.

Issue 27's (``sync3``, ``async3``): one worker at 32 on SQLite at least 0.8 of the
ideal, four workers at 32 at least 3x one where the store is not the bound, ahead of
DBOS everywhere. Issue 43's (``next3``, against the job queues): at least 1.0x every
peer at every configuration on its store, at least 0.85 of the ideal at 1x128, and
the worker's CPU per task at 1x128 at most 1.0 ms on SQLite and 1.5 ms on PostgreSQL
(the workers' own CPU; the server's is printed beside it, not judged).
"""

from __future__ import annotations

from typing import Any

CPU_MS = {"sqlite": 1.0, "postgresql": 1.5}
"""Issue 43's bound on the worker's CPU per task at 1x128, by store."""
OF_IDEAL = 0.85
"""Issue 43's bound on the ratio to the ideal at 1x128."""


def met(ok: bool) -> str:
    """A verdict as the tables print it."""
    return "**met**" if ok else "**missed**"


def goals(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Every goal the figures can judge, each with its figures and verdict."""
    return _issue27(results) + _issue43(results)


def _issue27(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    out = []
    median = {k: f["tasks_per_s"]["median"] for k, f in results.items()}
    for kind in ("sync3", "async3"):
        key = f"sqlite/tasktrail/{kind}/1x32"
        if key in results:
            ratio = results[key]["ratio"]["median"]
            out.append(
                (f"1x32 on SQLite >= 0.8 of ideal ({kind})", f"{ratio:.2f}", met(ratio >= 0.8))
            )
        for store in ("sqlite", "postgresql"):
            one, four = (f"{store}/tasktrail/{kind}/{c}" for c in ("1x32", "4x32"))
            if one in results and four in results:
                times = median[four] / median[one]
                bound = results[four]["ideal"] < results[four]["unbounded_ideal"]
                verdict = "store-bound: no verdict" if bound else met(times >= 3)
                out.append((f"4x32 >= 3x 1x32 on {store} ({kind})", f"{times:.2f}x", verdict))
            out += _ahead(results, store, kind, ("dbos", "dbos-fast"), "ahead of", strict=True)
    return out


def _ahead(
    results: dict[str, Any],
    store: str,
    kind: str,
    others: tuple[str, ...],
    goal: str,
    strict: bool,
) -> list[tuple[str, str, str]]:
    """tasktrail's rate against each other system's, configuration by configuration."""
    out = []
    median = {k: f["tasks_per_s"]["median"] for k, f in results.items()}
    ours = [k for k in results if k.startswith(f"{store}/tasktrail/{kind}/")]
    for other in others:
        pairs = [(a, a.replace("/tasktrail/", f"/{other}/")) for a in ours]
        pairs = [(a, b) for a, b in pairs if b in results]
        if pairs:
            ratios = ", ".join(f"{a.split('/')[-1]} {median[a] / median[b]:.2f}x" for a, b in pairs)
            ok = all(median[a] > median[b] if strict else median[a] >= median[b] for a, b in pairs)
            out.append((f"{goal} {other} on {store} ({kind})", ratios, met(ok)))
    return out


def _issue43(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    out = []
    kind = "next3"
    for store in ("sqlite", "postgresql"):
        peers = sorted(
            {k.split("/")[1] for k in results if k.startswith(f"{store}/")} - {"tasktrail"}
        )
        out += _ahead(results, store, kind, tuple(peers), ">= 1.0x", strict=False)
        key = f"{store}/tasktrail/{kind}/1x128"
        if key in results:
            f = results[key]
            ratio = f["ratio"]["median"]
            out.append(
                (f"1x128 >= {OF_IDEAL} of ideal on {store}", f"{ratio:.2f}", met(ratio >= OF_IDEAL))
            )
            cpu = f["cpu_ms_per_task"]["median"]
            server = f.get("server_cpu_ms_per_task")
            figures = f"{cpu:.2f} ms" + (
                "" if server is None else f" (+{server['median']:.2f} ms server)"
            )
            out.append(
                (
                    f"CPU per task at 1x128 <= {CPU_MS[store]} ms on {store} (the worker's)",
                    figures,
                    met(cpu <= CPU_MS[store]),
                )
            )
    return out
