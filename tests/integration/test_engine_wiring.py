"""One place wires the engine (decision OW3): a deployed function and `leasehold.testing` build
theirs with `build_engine` from the same `Settings`, so the testbed runs what a deployed worker
runs — its rate waits held (`RATE_HOLD_MS`) included, on the testbed's clock (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from leasehold import Kind, Rate, StepContext
from leasehold.handlers import api, wiring
from leasehold.handlers import worker as worker_function
from leasehold.service.worker import WorkerSettings
from leasehold.testing import LeaseholdTestbed
from leasehold.testing.config import TESTBED_INDEX_SHARDS
from leasehold_dev.local.resources import template_environment

pytestmark = pytest.mark.integration


echo = Kind("echo")


@echo.step()
def _echo(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return dict(payload)


@pytest.fixture
def testbed() -> Iterator[LeaseholdTestbed]:
    with LeaseholdTestbed([echo]) as tb:
        yield tb


def _deployed(tb: LeaseholdTestbed, monkeypatch: pytest.MonkeyPatch) -> wiring.Runtime:
    """A deployed function's engine over the testbed's table and queues: its environment is
    template.yaml's, parameters at their defaults (the testbed's settings come from the same
    defaults), and it is built as every cold start builds it (`runtime()`)."""
    for name, value in template_environment(tb.table_name, tb.queue_urls).items():
        monkeypatch.setenv(name, value)
    for cached in (wiring.runtime, worker_function.worker, api.jobs):
        cached.cache_clear()
    return wiring.runtime()


@pytest.fixture
def clear_caches() -> Iterator[None]:
    yield
    for cached in (wiring.runtime, worker_function.worker, api.jobs):
        cached.cache_clear()


def _settings_of(worker: Any) -> WorkerSettings:
    settings = worker._settings  # the built WorkerService's own settings
    assert isinstance(settings, WorkerSettings)
    return replace(settings, worker_id="any")  # who holds a lease is each one's own


def test_the_testbeds_worker_settings_equal_a_deployed_workers(
    testbed: LeaseholdTestbed, monkeypatch: pytest.MonkeyPatch, clear_caches: None
) -> None:
    # Given the testbed and a deployed worker function for the same environment
    _deployed(testbed, monkeypatch)
    deployed = worker_function.worker()
    # Then the two workers were built with equal settings, rate waits held alike
    assert _settings_of(testbed._worker) == _settings_of(deployed)
    assert _settings_of(deployed).rate_hold_ms == wiring.RATE_HOLD_MS > 0


def test_the_testbeds_engine_is_a_deployed_ones(
    testbed: LeaseholdTestbed, monkeypatch: pytest.MonkeyPatch, clear_caches: None
) -> None:
    # Given the testbed and a deployed function's engine for the same environment
    deployed = _deployed(testbed, monkeypatch)
    mine = testbed.runtime
    # Then the settings each engine was built from are the same but for their labels and who
    # may ask for high priority (the testbed's submit may ask for any, as documented) and how
    # many index shards it reads (at most 8 on moto, decision SH4)
    labels = {"metrics_namespace": "-", "kinds": "-"}
    tenancy = replace(deployed.settings.tenancy, high_priority_tenants=None)
    shards = min(deployed.settings.index_shards, TESTBED_INDEX_SHARDS)
    assert (mine.settings.index_shards, deployed.settings.index_shards) == (8, 64)
    assert replace(mine.settings, **labels) == replace(
        deployed.settings, **labels, tenancy=tenancy, index_shards=shards
    )
    # ...and so are the sweeper's, the accept path's and the application's view of them
    assert mine.sweep_settings() == deployed.sweep_settings()
    assert mine.engine().max_attempts == deployed.engine().max_attempts
    assert mine.engine().tenancy.submit_rate == deployed.engine().tenancy.submit_rate
    assert mine.queue._urls == deployed.queue._urls  # one queue per priority, both


paced = Kind("paced", rate=[Rate("tenant", limit=2, per_seconds=1)])
"""Two starts a second, 500 ms apart: the next start is due within RATE_HOLD_MS."""


@paced.step()
def _paced(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {}


def test_the_testbeds_worker_holds_a_rate_wait_on_the_testbeds_clock() -> None:
    # Given two jobs of a kind that may start twice a second, submitted together
    with LeaseholdTestbed([paced]) as tb:
        first, second = tb.submit("paced", {}), tb.submit("paced", {})
        start = tb.clock.now_ms()
        # When the testbed runs until idle, the clock not moved by the test
        tb.run_until_idle()
        # Then the worker held the second one's wait, as a deployed worker does, and both ran
        # in that one run: the wait passed on the testbed's clock (a wall-clock sleep would leave
        # the manual clock where it was, and the second job queued for a delayed wake-up)
        assert (tb.state(first), tb.state(second)) == ("succeeded", "succeeded")
        assert 0 < tb.clock.now_ms() - start <= wiring.RATE_HOLD_MS
