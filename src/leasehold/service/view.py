"""The job view of the HTTP contract (docs/architecture.md "HTTP API")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from leasehold.domain.clock import iso
from leasehold.domain.job import Job
from leasehold.domain.states import JobState
from leasehold.domain.storable import NotStorableError, check_storable
from leasehold.domain.types import JsonObject
from leasehold.service.tracing import trace_id_of
from leasehold.store.blobs import ref_size
from leasehold.store.history import expand

logger = Logger(service="leasehold", child=True)

if TYPE_CHECKING:
    from leasehold.service.kinds import JobKind

Kinds = Mapping[str, "JobKind"] | None
"""The registered kinds: a kind may add fields to its jobs' views (an agent's progress), say
what a job belongs to (the reading list's `bookmark_id`) and let operators see the payload."""


def _extras(job: Job, kinds: Kinds) -> tuple[JsonObject, JsonObject, bool]:
    """What the job's kind adds to its view, fenced (decision U3): a hook that raises or returns
    what no answer can carry costs only that job its extra fields — the view says
    `view_error` — never the list it is in, the operators' page or a replay's answer."""
    kind = (kinds or {}).get(job.kind)
    if kind is None:
        return {}, {}, False
    fields = _fenced(job, "view", kind.view_fields)
    related = _fenced(job, "related", kind.related)
    errors = [hook for hook, got in (("view", fields), ("related", related)) if got is None]
    if errors:
        message = f"the kind's {' and '.join(errors)} hook failed; see the worker's logs"
        return {"view_error": message, **(fields or {})}, related or {}, kind.operators_see_payload
    return fields or {}, related or {}, kind.operators_see_payload


def _fenced(job: Job, hook: str, call: Any) -> JsonObject | None:
    """`call(job)` as a dict of storable values; None (logged) when it raised or returned
    anything else."""
    try:
        got = call(job)
        if not isinstance(got, dict):
            raise NotStorableError(f"{hook} returned a {type(got).__name__}, not a dict")
        check_storable(got, hook)
    except Exception:  # a kind's hook is code the engine does not control
        logger.exception("kind hook failed", extra={"job_id": job.job_id, "hook": hook})
        return None
    return got


def history_view(job: Job) -> list[JsonObject]:
    """The stored history spelled out, times as ISO 8601 UTC."""
    entries = []
    for stored in job.history:
        entry = expand(stored)
        entry["at"] = iso(entry.get("at"))
        if "started" in entry:
            entry["started"] = iso(entry["started"])
        entries.append(entry)
    return entries


def operations_view(job: Job) -> list[JsonObject]:
    """The operation ledger (docs/architecture.md "External effects"): open (`submitted`) and
    settled operations, times ISO."""
    out = []
    for operation_id, entry in sorted(job.operations.items()):
        row: JsonObject = {"operation_id": operation_id, **entry}
        for name in ("submitted_at", "settled_at", "superseded_at"):
            if name in row:
                row[name] = iso(row[name])
        out.append(row)
    return out


def effect_view(job: Job) -> JsonObject | None:
    if not job.effect_intent:
        return None
    return {
        "operation_id": job.effect_intent.get("operation_id"),
        "idempotency_key": job.effect_intent.get("idempotency_key"),
        "step": job.effect_intent.get("step"),
        "started_at": iso(job.effect_intent.get("started_at")),
    }


def waiting_for(job: Job, now: int | None, children_done: int | None = None) -> JsonObject | None:
    """Why a `queued` job is not running yet, when the item says (decision F1): `{"time": …}`
    until its `next_attempt_at` (a delay, or a retry's backoff); `{"concurrency": "tenant:acme"}`
    when its last claim found that limit (or the per-user one, `user:alice`) full; `{"rate":
    "tenant:acme"}` when its kind's rate had no start due (F3); between two steps, what the next
    waits for: `{"children": {"done", "total"}}`, `{"signal": name, "until": …}` or `{"time": …}`
    (DESIGN §19); before any of these, `{"paused": {"since", "by"}}` while its kind is paused
    and it is parked (PA2)."""
    if job.state is not JobState.QUEUED:
        return None
    if job.waiting_for and "paused" in job.waiting_for:
        return dict(job.waiting_for)
    if job.wait is not None:  # between two steps (DESIGN §19, WF1)
        wait = job.wait
        if wait.get("type") == "time":
            return {"time": iso(wait.get("at"))}
        if wait.get("type") == "signal":
            return {"signal": wait.get("name"), "until": iso(wait.get("until"))}
        if wait.get("type") == "approval":
            return None  # approved, due now: nothing to wait for but a worker (WF50)
        done: JsonObject = {"total": wait.get("total", 0)}
        if children_done is not None:
            done["done"] = children_done
        return {"children": done}
    if now is not None and job.next_attempt_at is not None and job.next_attempt_at > now:
        return {"time": iso(job.next_attempt_at)}
    if job.waiting_for:
        # what its last claim found full (F2): it waits for a running job of that key to end
        return dict(job.waiting_for)
    return None


def job_view(
    job: Job, kinds: Kinds = None, now: int | None = None, children_done: int | None = None
) -> JsonObject:
    """The caller's view of the job; with `now`, a queued job says what it waits for (a parent
    waiting for its children, how many have ended: `children_done`)."""
    view: JsonObject = {
        "job_id": job.job_id,
        "kind": job.kind,
        "state": job.state.value,
        "priority": job.priority,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "version": job.version,
        "epoch": job.epoch,
        "created_at": iso(job.created_at),
        "updated_at": iso(job.updated_at),
        "deadline_at": iso(job.deadline_at),
        "budget": {
            "max_cost": job.budget.max_cost,
            "cost_used": job.checkpoint.cost_used,
            "max_steps": job.budget.max_steps,
            "steps_used": job.checkpoint.steps_used,
        },
        "progress": {"step": job.checkpoint.next_step, "steps_total": job.steps_total},
        "cancel_requested": job.cancel_requested,
        "replays": job.replays,
    }
    trace_id = trace_id_of(job.traceparent)
    if trace_id is not None:  # a job accepted before traces has none (decision TR2)
        view["trace_id"] = trace_id
    if job.next_attempt_at is not None and job.state is JobState.QUEUED:
        view["next_attempt_at"] = iso(job.next_attempt_at)
    waits = waiting_for(job, now, children_done)
    if waits is not None:
        view["waiting_for"] = waits
    if job.parent is not None:
        view["parent"] = {"job_id": job.parent["job_id"], "step": job.parent["step"]}
    if job.approval:
        view["approval"] = {
            "step": job.approval.get("step"),
            "step_name": job.approval.get("step_name"),
            "requested_at": iso(job.approval.get("requested_at")),
        }
    if job.operations:
        view["operations"] = operations_view(job)
    effect = effect_view(job)
    if effect:
        # An external effect is in progress: said plainly, so nobody mistakes it for done.
        view["effect"] = effect
    fields, _, _ = _extras(job, kinds)
    view.update({name: value for name, value in fields.items() if value is not None})
    if job.state is JobState.SUCCEEDED and job.result is not None:
        size = ref_size(job.result)
        if size is None:
            view["result"] = job.result
        else:  # too large to inline: read whole at its own route (DESIGN §20, LD3)
            view["result_url"] = f"/jobs/{job.job_id}/result"
            view["result_size"] = size
    if job.error:
        view["error"] = {"code": job.error.get("code", ""), "message": job.error.get("message", "")}
    if job.stop_reason:
        view["stop_reason"] = job.stop_reason
    if job.resolution:
        view["resolution"] = {**job.resolution, "at": iso(job.resolution.get("at"))}
    return view


def ops_row(job: Job, now: int, kinds: Kinds = None) -> JsonObject:
    """What an operator needs to decide about one job (API v1 keeps `agent` and `bookmark_id`
    as named fields, filled from the kind's view and related hooks)."""
    fields, related, _ = _extras(job, kinds)
    return {
        "job_id": job.job_id,
        "kind": job.kind,
        "state": job.state.value,
        "tenant": job.owner.tenant,
        "user_id": job.owner.user_id,
        "priority": job.priority,
        "age_seconds": round((now - job.created_at) / 1000, 1),
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "epoch": job.epoch,
        "last_error": job.error,
        "stop_reason": job.stop_reason,
        "next_attempt_at": iso(job.next_attempt_at) if job.state is JobState.QUEUED else None,
        "waiting_for": waiting_for(job, now),
        "lease_owner": job.lease_owner,
        "lease_expires_at": iso(job.lease_expires_at),
        "effect": effect_view(job),
        "agent": fields.get("agent"),
        "operations": operations_view(job),
        "replays": job.replays,
        "history": history_view(job),
        # The reading list's jobs name their bookmark, so a dead title job leads to it
        "bookmark_id": related.get("bookmark_id"),
    }


def lease_view(job: Job) -> JsonObject | None:
    """Who holds the job now: the worker's name (a Lambda log stream deployed; locally the
    worker process's name and pid, `worker-1@12345`), the epoch and the lease's end."""
    if job.state is not JobState.RUNNING or not job.lease_owner:
        return None
    name, _, pid = job.lease_owner.partition("@")
    lease: JsonObject = {
        "holder": job.lease_owner,
        "worker": name,
        "epoch": job.epoch,
        "expires_at": iso(job.lease_expires_at),
        "claimed_at": iso(job.claimed_at),
    }
    if pid.isdigit():
        lease["pid"] = int(pid)
    return lease


def operator_view(
    job: Job, now: int, kinds: Kinds = None, children_done: int | None = None
) -> JsonObject:
    """One job, whole, for an operator: the caller's view, whose it is, every attempt's end and
    every operator act (history), the operation ledger, the lease holder."""
    view = job_view(job, kinds, now, children_done)
    _, related, show_payload = _extras(job, kinds)
    view.update(
        {
            "tenant": job.owner.tenant,
            "user_id": job.owner.user_id,
            "age_seconds": round((now - job.created_at) / 1000, 1),
            "history": history_view(job),
            "history_dropped": job.history_dropped,
            "operations": operations_view(job),
            "lease": lease_view(job),
            "last_dispatch_at": iso(job.last_dispatch_at),
            "payload": job.payload if show_payload else None,
        }
    )
    view.update(related)
    return view
