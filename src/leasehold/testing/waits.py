"""The testbed's `expire_wait`: a waiting job's signal wait times out, or its sleep ends, now —
through the store's own writes (the timed-out mark a claim would write, the wake a signal
would send), so the next step sees what it would see after the real wait."""

from __future__ import annotations

from leasehold.domain.errors import JobNotFoundError
from leasehold.domain.states import JobState
from leasehold.store.expressions import Expression
from leasehold.store.items import job_from_item, job_key
from leasehold.store.table import ConditionFailed, Table
from leasehold.store.waits import WaitStore


def expire_wait(table: Table, job_id: str, now: int) -> None:
    """End `job_id`'s signal or time wait at `now` and make the job due (see
    `LeaseholdTestbed.expire_wait`)."""
    waits = WaitStore(table)
    got = table.get(job_key(job_id))
    if got is None:
        raise JobNotFoundError(f"no job {job_id}")
    job = job_from_item(got)
    wait = job.wait
    if wait is None or job.state is not JobState.QUEUED:
        raise ValueError(f"job {job_id} is not waiting (it is {job.state.value})")
    step = int(wait.get("step", 0))
    if wait.get("type") == "signal":
        waits.mark_timed_out(job, str(wait.get("name")), now=now)  # False: the signal came first
    elif wait.get("type") == "time":
        expr = Expression()
        expr.condition(f"{expr.name('version')} = {expr.value(job.version)}")
        expr.set("wait", {**wait, "at": now}).increment("version").set("updated_at", now)
        try:
            table.update(expr.update_params(job_key(job_id)), return_new=False)
        except ConditionFailed:
            raise ValueError(f"job {job_id} moved on while its wait was expired") from None
    elif wait.get("type") == "approval":
        raise ValueError(f"job {job_id} was approved: it waits for nothing (run it)")
    else:
        raise ValueError(
            f"job {job_id} waits for children: run them (expire_wait ends a signal wait or a sleep)"
        )
    waits.wake(job_id, step, now)


__all__ = ["expire_wait"]
