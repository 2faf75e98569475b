"""A child's end wakes its parent when it completes (or fails) its set (DESIGN §19, WF4–WF5):
called by every writer of an end once its write is in — the worker's outcomes, the sweeper, a
cancel, an operator's resolve."""

from __future__ import annotations

from aws_lambda_powertools import Logger

from leasehold.domain.errors import LeaseholdError
from leasehold.domain.job import Job
from leasehold.domain.states import TERMINAL_STATES, JobState
from leasehold.domain.waits import expected_per_shard, fanin_shard
from leasehold.service.telemetry import Telemetry
from leasehold.store import Stores
from leasehold.store.waits import WaitStore
from leasehold.store.waits_ends import fanin_key

logger = Logger(service="leasehold", child=True)


def child_ended(
    waits: WaitStore, job: Job, target: JobState, now: int, telemetry: Telemetry | None = None
) -> None:
    """After a child's end was written (and counted with it, store/waits_ends.py): if it may
    complete its set (or fail it), sum the set and wake the parent when it is over. One read
    when the child's own counter item is not complete yet; a wake lost to a crash here is found
    by the parent's next check (WF5)."""
    parent = job.parent
    if parent is None or target not in TERMINAL_STATES:
        return
    try:
        parent_id, step = parent["job_id"], int(parent["step"])
        shards, total = int(parent["shards"]), int(parent.get("total", 0))
        tolerate = int(parent.get("tolerate", 0))
        if target is JobState.SUCCEEDED and shards > 1:
            own = fanin_shard(job.job_id, shards)
            mine = waits.fanin_one(fanin_key(parent_id, step, own))
            if mine < expected_per_shard(parent_id, step, total, shards)[own]:
                return
        fan = waits.fanin(parent_id, step, shards)
        over = fan.ended >= total or fan.failed > tolerate
        if over and waits.wake(parent_id, step, now) and telemetry is not None:
            telemetry.count("ParentsWoken")
    except LeaseholdError as failed:  # the parent's check finds it
        logger.warning(
            "parent wake failed; its next check finds it",
            extra={"job_id": job.job_id, "detail": str(failed)},
        )


def children_done(stores: Stores, job: Job) -> int | None:
    """How many of the children a parked parent waits for have ended (its view's
    `waiting_for`); None for a job that waits for none."""
    wait = job.wait
    if wait is None or wait.get("type") != "children" or job.state is not JobState.QUEUED:
        return None
    fan = WaitStore(stores.table).fanin(
        job.job_id, int(wait.get("step", 0)), int(wait.get("shards", 1))
    )
    return fan.ended


__all__ = ["child_ended", "children_done"]
