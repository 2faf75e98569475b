"""pytest fixtures for testing leasehold kinds. Enable them in your top-level conftest.py:

    pytest_plugins = ["leasehold.testing.pytest_plugin"]

Then ask for `leasehold_testbed` — a `LeaseholdTestbed`, open (moto started, fake AWS
credentials and region set) for the test and closed after it. Which kinds it runs, first found:

1. the test's marker: `@pytest.mark.leasehold_kinds(shout, "app.kinds", lease_seconds=10)`
   (positional: `Kind`s, `Routes` and module strings; keywords: `TestbedSettings` overrides);
2. the `leasehold_kinds` fixture: override it in a conftest.py (or parametrize it) to return
   the kinds for a whole directory;
3. the `LEASEHOLD_KINDS` environment variable, as the deployed functions read it.

Settings overrides for every test come from the `leasehold_settings` fixture (override it to
return a dict); a marker's keywords win over it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold.testing.config import KindsSpec
from leasehold.testing.mocking import FAKE_ENVIRONMENT, REMOVED_ENVIRONMENT
from leasehold.testing.testbed import LeaseholdTestbed

MARKER = "leasehold_kinds"


def pytest_configure(config: pytest.Config) -> None:
    """Register the `leasehold_kinds` marker (so `--strict-markers` accepts it)."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*kinds, **settings): the kinds (Kind and Routes objects or "
        "LEASEHOLD_KINDS-style module strings) and TestbedSettings overrides of the "
        "leasehold_testbed fixture",
    )


@pytest.fixture
def leasehold_kinds() -> KindsSpec | None:
    """The kinds of `leasehold_testbed` when the test has no `leasehold_kinds` marker:
    `LEASEHOLD_KINDS` from the environment by default. Override it in a conftest.py."""
    return os.environ.get("LEASEHOLD_KINDS") or None


@pytest.fixture
def leasehold_settings() -> dict[str, Any]:
    """`TestbedSettings` overrides for every `leasehold_testbed` (none by default)."""
    return {}


@pytest.fixture
def leasehold_testbed(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    leasehold_kinds: KindsSpec | None,
    leasehold_settings: dict[str, Any],
) -> Iterator[LeaseholdTestbed]:
    """An open `LeaseholdTestbed` for this test (see the module's docstring for its kinds)."""
    marker = request.node.get_closest_marker(MARKER)
    kinds: KindsSpec | None = list(marker.args) if marker and marker.args else leasehold_kinds
    if not kinds:
        pytest.fail(
            "leasehold_testbed has no kinds: mark the test @pytest.mark.leasehold_kinds(...), "
            "override the leasehold_kinds fixture, or set LEASEHOLD_KINDS",
            pytrace=False,
        )
    settings = {**leasehold_settings, **(marker.kwargs if marker else {})}
    for name, value in FAKE_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    for name in REMOVED_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    with LeaseholdTestbed(kinds, settings=settings) as testbed:
        yield testbed


__all__ = ["leasehold_kinds", "leasehold_settings", "leasehold_testbed", "pytest_configure"]
