"""A graceful stop hands running jobs back without spending an attempt (issue 28 item 7).

The local stack stops a worker by ending its invocation early (the invocation's remaining time
drops to nothing); the engine sees it at the running step's next heartbeat and hands the job
back — checkpoint kept, attempt not burned — as it does when a step would not fit."""

from __future__ import annotations

import threading
import time
from typing import Any

from leasehold.domain.states import JobState
from leasehold.service.worker import Disposition
from leasehold_dev.local.invoke import LocalContext
from tests.support.harness import Harness, steps
from tests.support.kinds import ScriptedKind


def test_an_invocation_that_ends_during_a_step_hands_the_job_back_at_its_next_heartbeat(
    harness: Harness,
) -> None:
    # Given a max_attempts 1 job whose second step takes 5 s, heartbeating every 0.25 s
    job_id = harness.submit(payload=steps({}, {"duration_ms": 5_000}), max_attempts=1)
    remaining = [60_000]

    def stop_requested(index: int, attempt: int, tick: Any) -> None:
        if index == 1:
            remaining[0] = 0  # `local down` / Ctrl-C: the invocation ends now

    worker = harness.worker(kinds={"synthetic": ScriptedKind(stop_requested)})
    started = time.monotonic()
    result = worker.handle(harness.wakeup(job_id), remaining_ms=lambda: remaining[0])
    # Then the step stops at its next heartbeat and the job is handed back, not run to its end
    assert time.monotonic() - started < 2.0
    assert result.outcome == "handed_back" and result.disposition is Disposition.ACK
    job = harness.store.get(job_id)
    assert job is not None and job.state is JobState.QUEUED
    assert job.attempts == 0 and job.checkpoint.next_step == 1  # step 0 kept, attempt unspent
    # And the next worker finishes it: the one attempt it has was never spent
    harness.clock.advance(1_000)
    assert harness.worker("w2").handle(harness.wakeup(job_id)).outcome == "succeeded"
    done = harness.store.get(job_id)
    assert done is not None and done.attempts == 1 and done.checkpoint.steps_used == 2


def test_an_effect_step_is_not_cut_short_by_the_end_of_the_invocation(harness: Harness) -> None:
    """An effect in flight is never abandoned for a stop: its outcome would be uncertain (the
    job `unknown`). The step runs to its end (the stop waits for it, within its grace)."""
    job_id = harness.submit(payload=steps({"duration_ms": 600, "effect": True}), max_attempts=1)
    remaining = [60_000]

    def stop_requested(index: int, attempt: int, tick: Any) -> None:
        remaining[0] = 0

    worker = harness.worker(kinds={"synthetic": ScriptedKind(stop_requested)})
    result = worker.handle(harness.wakeup(job_id), remaining_ms=lambda: remaining[0])
    assert result.outcome == "succeeded"


def test_a_local_invocation_has_no_time_left_once_its_worker_is_asked_to_stop() -> None:
    stopping = threading.Event()
    context = LocalContext("worker", timeout_ms=60_000, ends=stopping)
    assert context.get_remaining_time_in_millis() > 50_000
    stopping.set()
    assert context.get_remaining_time_in_millis() == 0
