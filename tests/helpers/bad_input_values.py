"""What the bad-input tests (``test_bad_input_*.py``) share: the tally of bad inputs
tried, the registry their stores open with, and junk values of every kind."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import strategies as st

from tasktrail.domain import Registry, TaskDefinition
from tasktrail.domain.tasks.validation import MAX_VALUE_BYTES

TRIED: Counter[str] = Counter()
"""Bad inputs tried, by kind (printed at the end of each module that imports ``_tally``,
so far in this process, for docs/reliability.md)."""


@pytest.fixture(scope="module", autouse=True)
def _tally() -> Iterator[None]:
    yield
    print(f"\nbad inputs tried: {sum(TRIED.values())} {dict(sorted(TRIED.items()))}")


def registry() -> Registry:
    return Registry([TaskDefinition("job", 1, {"start": lambda i: "end", "end": lambda i: None})])


huge_text = st.integers(MAX_VALUE_BYTES - 8, 3 * MAX_VALUE_BYTES).map(lambda n: "x" * n)
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(2**63, 2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", " ", "\ud800", "\x00", "start", "end", "job"]),
    st.text(max_size=12),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.lists(st.lists(st.integers(), max_size=2), min_size=1, max_size=2),
    st.tuples(st.text(max_size=3)),
    st.frozensets(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2),
    st.builds(object),
    huge_text,
)
