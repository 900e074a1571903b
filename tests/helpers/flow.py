"""What the flow control tests share (tests/test_flow.py, tests/test_flow_debounce.py and
tests/test_flow_policies.py, issue 44): the tenant key function, and the ``flows`` and
``s`` fixtures (a test module imports both by name, ``s`` needs ``flows``)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import finishing

from tasktrail.domain import Limit, ManualClock, Rate, Registry, Scheduler, TaskDefinition


def _tenant(memos: dict[str, Any]) -> str | None:
    tenant = memos.get("tenant")
    return tenant if isinstance(tenant, str) else None


@pytest.fixture
def flows() -> Registry:
    """``job``: at most 2 running a tenant; ``call``: 2 starts a second of a model, 3 at
    once at most; ``plain``: neither."""
    return Registry(
        [
            TaskDefinition("job", 1, {"go": finishing()}, limit=Limit(key=_tenant, max_running=2)),
            TaskDefinition(
                "call",
                1,
                {"go": finishing()},
                rate=Rate(key=lambda memos: memos["model"], per_s=2, burst=3),
            ),
            TaskDefinition("plain", 1, {"go": finishing()}),
        ]
    )


@pytest.fixture
def s(store_url: str, clock: ManualClock, flows: Registry) -> Any:
    opened = Scheduler.open(store_url, clock=clock, registry=flows, worker="w1")
    yield opened
    opened.close()
