"""B1: batches (DESIGN §21, decisions BA1–BA6) on the local stack — one `POST /jobs/batch` of 10
jobs, the fourth of them invalid, answers each in its place: 9 jobs accepted and run, one 400
`error` for the bad one, nothing all-or-nothing."""

from __future__ import annotations

from leasehold_dev.demo.session import Session, Task
from leasehold_dev.demo.synthetic import synthetic_job

SIZE, BAD = 10, 3


def b1_batch(s: Session, task: Task) -> None:
    """Ten synthetic jobs in one request, the fourth with `max_attempts` 0 (invalid): nine
    results name a job, in order, and each succeeds; the fourth is an `error` naming the field."""
    jobs = [synthetic_job([{"name": f"batch_{n}"}]) for n in range(SIZE)]
    jobs[BAD]["max_attempts"] = 0
    answer = s.call("POST", "/jobs/batch", {"jobs": jobs}, user="alice")
    results = answer.body.get("results") or []
    ids = [str(r["job_id"]) for r in results if isinstance(r, dict) and "job_id" in r]
    for job_id in ids:
        s.track(task, job_id)
    bad = results[BAD] if len(results) > BAD else {}
    s.act(
        task, f"POST /jobs/batch of {SIZE} (item {BAD} invalid) → {answer.status}, {len(ids)} jobs"
    )
    states = [s.wait_settled(job_id, "alice", timeout=60).get("state") for job_id in ids]
    error = bad.get("error") if isinstance(bad, dict) else None
    s.check(
        task,
        "B1",
        "a batch: each item accepted or refused on its own, in order",
        f"{answer.status}; {len(results)} results, {len(ids)} jobs ({states.count('succeeded')} "
        f"succeeded); item {BAD}: {error}",
        answer.status == 200
        and len(results) == SIZE
        and len(ids) == SIZE - 1
        and "job_id" not in bad
        and isinstance(error, dict)
        and "max_attempts" in str(error.get("message"))
        and states == ["succeeded"] * (SIZE - 1),
    )
