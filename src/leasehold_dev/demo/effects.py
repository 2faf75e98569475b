"""E1–E2: an external effect that charges money, its answer lost to a worker's crash. The local
stack runs a real billable provider per capability with a durable charge ledger; its
`GET /v1/charges?key=<operation_id>` is the evidence. The provider's `slow` fault answers after
3 s: the worker is killed while it waits, the provider still charges, nobody hears the answer."""

from __future__ import annotations

import signal
import time
from typing import Any

from leasehold_dev.demo.reading import EXAMPLE, save_bookmark
from leasehold_dev.demo.session import SETTLED, Session, Task
from leasehold_dev.demo.story import iso_ms, log_entries, log_time


def _enrich_and_crash(
    s: Session, task: Task, url: str, mode: str
) -> tuple[str, str | None, str, dict[str, Any]]:
    """Save a bookmark, ask for its enrichment from provider `mode` with the `slow` fault, and
    kill the worker while the provider holds the call. Returns (job, victim, operation id,
    bookmark view)."""
    bookmark = save_bookmark(s, task, "carol", url)
    s.wait_settled(bookmark["title_job"]["job_id"], "carol", timeout=20)
    answer = s.call(
        "POST",
        f"/bookmarks/{bookmark['id']}/enrich",
        {"provider_mode": mode, "fault": "slow"},
        user="carol",
    )
    if answer.status != 202:
        raise RuntimeError(f"enrich answered {answer.status} {answer.body}")
    job = s.track(task, str(answer.body["job_id"]))
    s.act(task, f"carol asks to enrich {bookmark['id']} (provider {mode}, fault slow) → 202 {job}")
    opened = s.wait_job(job, "carol", lambda v: bool(v.get("effect")), timeout=20)
    operation = str((opened.get("effect") or {}).get("operation_id", ""))
    s.act(task, f"the job view shows the open operation {operation} (effect); the call is out")
    time.sleep(1.0)  # well inside the provider's 3 s: the request has surely been sent
    victim = s.signal_holder(task, job, signal.SIGKILL, "crash while the provider holds the call")
    return job, victim, operation, bookmark


def _charges(s: Session, mode: str, key: str) -> dict[str, Any]:
    base = s.stack.providers[mode].url
    answer = s.call("GET", f"/v1/charges?key={key}", base=base)
    return answer.body if answer.status == 200 else {}


def _claim_times(s: Session, job: str, epoch: int) -> list[int]:
    """When workers logged a claim of `job` at `epoch` (epoch milliseconds)."""
    return [
        at
        for _, entry in log_entries(s.log_dir)
        if entry.get("message") == "claimed"
        and entry.get("job_id") == job
        and entry.get("epoch") == epoch
        and (at := log_time(str(entry.get("timestamp")))) is not None
    ]


def e1_idempotent(s: Session, task: Task) -> None:
    job, victim, operation, bookmark = _enrich_and_crash(
        s, task, f"{EXAMPLE}/exactly-once", "idempotent"
    )
    done = s.wait_job(job, "carol", lambda v: v.get("state") in SETTLED, timeout=30)
    charges = _charges(s, "idempotent", operation)
    listed = charges.get("charges") or [{}]
    s.act(
        task, f"provider idempotent: GET /v1/charges?key={operation} → count {charges.get('count')}"
    )
    ledger: dict[str, Any] = next(
        (o for o in done.get("operations", []) if o["operation_id"] == operation), {}
    )
    receipt = (ledger.get("receipt") or {}).get("receipt")
    enrichment = s.call("GET", f"/bookmarks/{bookmark['id']}", user="carol").body.get("enrichment")
    charged_at = iso_ms(listed[0].get("at"))
    recovered = min(_claim_times(s, job, 2), default=None)
    s.check(
        task,
        "E1",
        "success, lost answer, crash (idempotent provider): the next worker records the "
        "existing receipt, one charge",
        f"killed {victim}; job {done.get('state')} at epoch {done.get('epoch')}; charges for "
        f"{operation}: {charges.get('count')} (receipt {listed[0].get('receipt')}, charged at "
        f"{listed[0].get('at')}, before the epoch-2 claim: "
        f"{charged_at is not None and recovered is not None and charged_at < recovered}); "
        f"ledger {ledger.get('state')}, reconciled {ledger.get('reconciled')}; bookmark "
        f"enrichment.receipt {(enrichment or {}).get('receipt')}",
        victim is not None
        and done.get("state") == "succeeded"
        and done.get("epoch") == 2
        and charges.get("count") == 1
        and receipt == listed[0].get("receipt") == (enrichment or {}).get("receipt")
        and ledger.get("state") == "confirmed"
        and ledger.get("reconciled") is True
        and charged_at is not None
        and recovered is not None
        and charged_at < recovered,
    )


def e2_unknown(s: Session, task: Task) -> None:
    job, victim, operation, _ = _enrich_and_crash(s, task, f"{EXAMPLE}/ask-a-person", "none")
    unknown = s.wait_job(job, "carol", lambda v: v.get("state") in SETTLED, timeout=30)

    # The provider committed the charge 3 s into the call; the lease ran out after that.
    def charged() -> dict[str, Any] | None:
        found = _charges(s, "none", operation)
        return found if found.get("count") else None

    charges = s.wait(charged, timeout=5) or _charges(s, "none", operation)
    listed = charges.get("charges") or [{}]
    s.act(
        task,
        f"ops: {job} is {unknown.get('state')}/{unknown.get('stop_reason')}; provider none: "
        f"GET /v1/charges?key={operation} → count {charges.get('count')}, receipt "
        f"{listed[0].get('receipt')}",
    )
    note = f"provider charged once at {listed[0].get('at')}"
    resolve = s.call(
        "POST",
        f"/ops/jobs/{job}/resolve",
        {"outcome": "succeeded", "receipt": listed[0].get("receipt"), "note": note},
        user="ops",
    )
    s.act(
        task,
        f"ops resolves it succeeded with receipt {listed[0].get('receipt')} → {resolve.status}",
    )
    after = s.ops_job(job)
    resolution = after.get("resolution") or {}
    again = _charges(s, "none", operation)
    s.check(
        task,
        "E2",
        "the same with a provider that cannot be asked: unknown, then resolved by the operator "
        "with the receipt",
        f"killed {victim}; {unknown.get('state')}/{unknown.get('stop_reason')} after "
        f"{unknown.get('attempts')} attempt; charges {charges.get('count')} → after the resolve "
        f"{again.get('count')}; job {after.get('state')}/{after.get('stop_reason')}, resolution "
        f"by {resolution.get('by')} receipt {resolution.get('receipt')}",
        victim is not None
        and unknown.get("state") == "unknown"
        and unknown.get("stop_reason") == "effect_uncertain"
        and unknown.get("attempts") == 1
        and charges.get("count") == 1
        and resolve.status == 200
        and after.get("state") == "succeeded"
        and after.get("stop_reason") == "resolved_by_operator"
        and resolution.get("by") == "ops"
        and resolution.get("receipt") == listed[0].get("receipt")
        and resolution.get("operation_id") == operation
        and again.get("count") == 1,
    )
