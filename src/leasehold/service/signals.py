"""The workflow routes (DESIGN §19): an owner's signal, a third party's callback, a job's
children — over `service.workflows.Workflows`, kept apart from `JobService` so that the accept
path does not import the workflow engine."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools import Logger

from leasehold.domain import sizes
from leasehold.domain.clock import Clock
from leasehold.domain.errors import JobNotFoundError, ValidationError
from leasehold.domain.job import Job, Owner
from leasehold.domain.types import JsonObject
from leasehold.domain.waits import child_id
from leasehold.service.jobs import parse_limit
from leasehold.service.kinds import JobKind
from leasehold.service.ops import _note
from leasehold.service.telemetry import Telemetry
from leasehold.service.view import job_view, waiting_for
from leasehold.service.workflows import Workflows
from leasehold.store import Stores
from leasehold.store.blobs import encoded, is_ref

logger = Logger(service="leasehold", child=True)

MAX_SIGNAL_BYTES = 16 * 1024
"""A signal's body kept on its item: at most 16 KiB of JSON (an engine without a data bucket)."""
MAX_LARGE_SIGNAL_BYTES = sizes.API_BODY_LIMIT
"""A signal's body with a data bucket (decision LD13): what an API request may carry, 5 MiB;
a body over the inline limit is written to the bucket and the signal item names it."""


class WorkflowService:
    """`POST /jobs/{id}/signals/{name}`, `POST /callbacks/{token}`, `GET /jobs/{id}/children`."""

    def __init__(
        self,
        stores: Stores,
        kinds: Mapping[str, JobKind],
        clock: Clock,
        telemetry: Telemetry,
    ) -> None:
        self._stores = stores
        self._kinds = dict(kinds)
        self._clock = clock
        self._telemetry = telemetry
        self._flows = Workflows(stores, clock, kinds, telemetry)

    def signal(self, owner: Owner, job_id: str, name: str, body: Any) -> JsonObject:
        """`POST /jobs/{id}/signals/{name}`: the owner's signal (DESIGN §19)."""
        self._check_body(body)
        job = self._flows.signal(owner, job_id, name, body)
        return job_view(job, self._kinds, self._clock.now_ms())

    def callback(self, token: str, body: Any) -> JsonObject:
        """`POST /callbacks/{token}`: no identity; the token is the authority (DESIGN §19)."""
        self._check_body(body)
        job = self._flows.callback(token, body)
        return {"job_id": job.job_id, "accepted": True}

    def children(
        self, owner: Owner, job_id: str, *, cursor: str | None, limit: str | None
    ) -> JsonObject:
        """`GET /jobs/{id}/children`: a page of the job's children, every set in order."""
        job = self._stores.jobs.get_owned(owner, job_id)
        return self._children_page(job, cursor, limit, _owner_row)

    def ops_children(self, job_id: str, *, cursor: str | None, limit: str | None) -> JsonObject:
        """`GET /ops/jobs/{id}/children`: any tenant's job's children, the owner's page with
        each child's `waiting_for` and how many children it has itself (read with it: free)."""
        job = self._stores.jobs.get(job_id)
        if job is None:
            raise JobNotFoundError(f"no job {job_id}")
        now = self._clock.now_ms()
        return self._children_page(job, cursor, limit, lambda i, s, c: _ops_row(i, s, c, now))

    def ops_signal(self, operator: Owner, job_id: str, name: str, body: Any) -> JsonObject:
        """`POST /ops/jobs/{id}/signals/{name}`, body `{"note", "body"?}`: an operator's signal
        to any tenant's job, delivered as the owner's would be, then recorded in the job's
        history (`signaled`, by, note; decision WF40)."""
        if not isinstance(body, dict) or set(body) - {"note", "body"}:
            raise ValidationError('the body must be {"note": ..., "body"?: ...}')
        note = _note(body, required=True)
        sent = body.get("body")
        self._check_body(sent)
        job = self._flows.signal_any(job_id, name, sent)
        self._stores.operator.note_act(
            job_id,
            "signaled",
            operator=operator.user_id,
            note=note,
            now=self._clock.now_ms(),
            reason=name,
        )
        logger.info(
            "operator signal",
            extra={"job_id": job_id, "operator": operator.user_id, "signal": name, "note": note},
        )
        return job_view(job, self._kinds, self._clock.now_ms())

    def _check_body(self, body: Any) -> None:
        """A signal's body: any JSON value but the engine's own reference shape, up to 5 MiB
        with a data bucket (413 `payload_too_large` past it, as `POST /jobs`), else 16 KiB (400
        `too_large`: the body rides on the signal item)."""
        if is_ref(body):
            raise ValidationError("a signal's body may not be an object whose only key is '$blob'")
        if self._stores.table.blobs is None:
            limit, code = MAX_SIGNAL_BYTES, "too_large"
        else:
            limit, code = MAX_LARGE_SIGNAL_BYTES, "payload_too_large"
        if len(encoded(body)) > limit:
            raise ValidationError(f"a signal's body is at most {limit} bytes", code=code)

    def _children_page(
        self,
        job: Job,
        cursor: str | None,
        limit: str | None,
        row: Callable[[str, int, Job | None], JsonObject],
    ) -> JsonObject:
        size = parse_limit(limit)
        sets = [(int(step), int(total)) for step, total in (job.spawned or [])]
        position = _children_cursor(cursor, sets)
        items: list[JsonObject] = []
        next_cursor: str | None = None
        for number, (step, total) in enumerate(sets):
            if number < position[0]:
                continue
            start = position[1] if number == position[0] else 0
            while start < total and len(items) < size:
                stop = min(total, start + min(100, size - len(items)))
                ids = [child_id(job.job_id, step, i) for i in range(start, stop)]
                found = self._flows.waits.children_states(ids)
                items.extend(row(i, step, c) for i, c in zip(ids, found, strict=True))
                start = stop
            if len(items) >= size:
                if start < total:
                    next_cursor = f"{number}.{start}"
                elif number + 1 < len(sets):
                    next_cursor = f"{number + 1}.0"
                break
        return {"items": items, "next_cursor": next_cursor}


def _owner_row(job_id: str, step: int, child: Job | None) -> JsonObject:
    """A child as its owner sees it (`queued` for one not written yet)."""
    if child is None:
        return {"job_id": job_id, "step": step, "state": "queued", "result": None, "error": None}
    return {
        "job_id": job_id,
        "step": step,
        "state": child.state.value,
        "result": child.result,
        "error": child.error,
    }


def _ops_row(job_id: str, step: int, child: Job | None, now: int) -> JsonObject:
    row = _owner_row(job_id, step, child)
    row["waiting_for"] = waiting_for(child, now) if child is not None else None
    row["children"] = sum(int(n) for _, n in (child.spawned or [])) if child else 0
    return row


def _children_cursor(cursor: str | None, sets: list[tuple[int, int]]) -> tuple[int, int]:
    """`<set>.<index>`, as `children` hands it out; ValidationError for anything else."""
    if cursor is None:
        return (0, 0)
    try:
        number, index = (int(part) for part in cursor.split(".", 1))
    except ValueError:
        raise ValidationError("'cursor' is not one this API gave") from None
    if not (0 <= number < len(sets) and 0 <= index <= sets[number][1]):
        raise ValidationError("'cursor' is not one this API gave")
    return (number, index)


__all__ = ["MAX_LARGE_SIGNAL_BYTES", "MAX_SIGNAL_BYTES", "WorkflowService"]
