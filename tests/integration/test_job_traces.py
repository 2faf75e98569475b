"""A job's trace on moto, through the engine's own paths (leasehold.testing): kept from accept
to its end across a retry, carried by every wake-up, named on its log lines; a replay runs in a
trace of its own (decisions TR1–TR4). The spans themselves: tests/e2e/test_local_traces.py."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold import FatalError, Kind, RetryableError, StepContext
from leasehold.domain.options import JobOptions
from leasehold.service import relay
from leasehold.testing import LeaseholdTestbed

pytestmark = pytest.mark.integration

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE}-00f067aa0ba902b7-01"

flaky = Kind("traced_flaky", max_attempts=3)
_tries: dict[str, int] = {}
_log_keys: list[dict[str, Any]] = []


@flaky.step()
def wobble(ctx: StepContext, payload: dict[str, Any]) -> dict[str, int]:
    _log_keys.append(dict(ctx.logger.keys))  # the worker's log keys, and the step's name
    _tries[payload["name"]] = _tries.get(payload["name"], 0) + 1
    if _tries[payload["name"]] == 1:
        raise RetryableError("once")
    if payload.get("fatal"):
        raise FatalError("no")
    return {"tries": _tries[payload["name"]]}


def test_the_trace_is_kept_across_a_retry_and_named_on_every_log_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    carried: list[str | None] = []
    parse = relay.parse_stream_record

    def watched(record: dict[str, Any], now: int) -> Any:
        parsed = parse(record, now)
        if parsed is not None:
            carried.append(parsed.wakeup.traceparent)
        return parsed

    monkeypatch.setattr(relay, "parse_stream_record", watched)
    with LeaseholdTestbed([flaky]) as tb:
        # Given a job submitted under the caller's trace
        job_id = tb.submit(
            "traced_flaky", {"name": "a"}, options=JobOptions(traceparent=TRACEPARENT)
        )
        # When it runs, fails once and is retried
        tb.run_until_idle()
        tb.drain()
        view = tb.view(job_id)
        assert (view["state"], view["attempts"]) == ("succeeded", 2)
        # Then the view names the trace, and both dispatches (accept, retry) carried it
        assert view["trace_id"] == TRACE
        assert carried == [TRACEPARENT, TRACEPARENT]
    # ...and the keys of every log line of its attempts (the worker's and the step's logger)
    # name it beside the attempt and epoch
    of_job = [keys for keys in _log_keys if keys["job_id"] == job_id]
    assert [(k["attempt"], k["epoch"], k["trace_id"]) for k in of_job] == [
        (1, 1, TRACE),
        (2, 2, TRACE),
    ]


def test_a_replay_runs_in_a_trace_of_its_own() -> None:
    with LeaseholdTestbed([flaky]) as tb:
        # Given a job that failed for good in the caller's trace
        job_id = tb.submit(
            "traced_flaky",
            {"name": "b", "fatal": True},
            options=JobOptions(traceparent=TRACEPARENT),
        )
        tb.drain()
        assert tb.view(job_id)["state"] == "failed"
        # When an operator replays it
        tb.replay(job_id, note="fixed")
        tb.drain()
        # Then its next attempts are in a new trace (the replay's span links to the old one)
        view = tb.view(job_id)
        assert view["replays"] == 1 and len(view["trace_id"]) == 32
        assert view["trace_id"] != TRACE


fan = Kind("traced_fan")


@fan.step()
def spread(ctx: StepContext, payload: dict[str, Any]) -> int:
    return len(ctx.map("traced_leaf", [{"n": n} for n in range(2)]))


leaf = Kind("traced_leaf")


@leaf.step()
def settle(ctx: StepContext, payload: dict[str, Any]) -> int:
    return int(payload["n"])


def test_children_join_their_parents_trace() -> None:
    from leasehold.domain.waits import child_id

    with LeaseholdTestbed([fan, leaf]) as tb:
        # Given a parent submitted under the caller's trace, whose step starts two children
        job_id = tb.submit("traced_fan", {}, options=JobOptions(traceparent=TRACEPARENT))
        # When it runs
        tb.run_until_idle()
        tb.drain()
        # Then each child is in the parent's trace
        children = [tb.view(child_id(job_id, 0, n)) for n in range(2)]
        assert [child["state"] for child in children] == ["succeeded", "succeeded"]
        assert {child["trace_id"] for child in children} == {TRACE}


def test_each_schedule_tick_starts_a_trace_of_its_own(harness: Any) -> None:
    from tests.integration.test_schedules import alices_jobs, create, service, to_tick
    from tests.support.harness import ALICE

    # Given a schedule, when two of its ticks fire
    view = create(harness)
    to_tick(harness, view)
    assert service(harness).fire_due() == {"schedule_jobs": 1}
    view = service(harness).get(ALICE, view["schedule_id"])
    to_tick(harness, view)
    assert service(harness).fire_due() == {"schedule_jobs": 1}
    # Then each tick's job has a trace, and no two share one
    traces = [job.traceparent for job in alices_jobs(harness)]
    assert len(traces) == 2 and all(traces)
    assert len({tp[3:35] for tp in traces if tp}) == 2
