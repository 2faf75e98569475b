"""Priorities on the embedded local stack (decision F4): the template's three queues, each with
its own event source mapping, polled independently by the worker process. Behind a normal
backlog that takes one worker many seconds to drain, a high job and a low job submitted after
it both finish while most of the backlog is still to run — the high one because its queue has
no backlog, the low one because its queue's own poller is never held up by the others."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest

from tests.support.localstack import LocalStackProcess

pytestmark = pytest.mark.e2e

BACKLOG = 150
SLOW = {"steps": [{"name": "slow", "duration_ms": 100}]}  # ≥ 15 s for one worker to drain
QUICK = {"steps": [{"name": "quick"}]}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStackProcess]:
    running = LocalStackProcess(tmp_path_factory.mktemp("priorities"))
    running.start_worker("w1")  # one worker process: one poller per priority queue
    try:
        yield running
    finally:
        running.stop()


def _at(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


@pytest.mark.long
def test_high_and_low_jobs_do_not_wait_behind_a_normal_backlog(stack: LocalStackProcess) -> None:
    bob, alice = stack.client("bob"), stack.client("alice")
    backlog = [bob.submit("synthetic", SLOW).job_id for _ in range(BACKLOG)]
    high = alice.submit("synthetic", QUICK, priority="high")
    low = alice.submit("synthetic", QUICK, priority="low")
    assert alice.get(high.job_id)["priority"] == "high"
    done = {"high": high.wait(timeout=60), "low": low.wait(timeout=60)}
    normal = [bob.get(job_id) for job_id in backlog]
    assert {view["state"] for view in normal} <= {"queued", "running", "succeeded"}
    # a backlog job still to run has no end yet: it ends after every job here
    ends = [
        _at(view["updated_at"]) if view["state"] == "succeeded" else float("inf") for view in normal
    ]
    for name, view in done.items():
        assert view["state"] == "succeeded", name
        accepted, ended = _at(view["created_at"]), _at(view["updated_at"])
        # the backlog still to run when this job was accepted, and how much of it ran first
        waiting = [end for end in ends if end > accepted]
        ran_first = [end for end in waiting if end < ended]
        assert len(waiting) >= 40, f"no backlog left to test against ({len(waiting)})"
        # one queue would have run all of `waiting` first; its own queue runs it within a poll
        assert len(ran_first) < len(waiting) // 3, (
            f"{name}: {len(ran_first)} of the {len(waiting)} waiting normal jobs ran first "
            f"(waited {ended - accepted:.1f} s)"
        )
