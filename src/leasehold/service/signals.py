"""The workflow routes (DESIGN §19): an owner's signal, a third party's callback, a job's
children — over `service.workflows.Workflows`, kept apart from `JobService` so that the accept
path does not import the workflow engine."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from leasehold.domain.clock import Clock
from leasehold.domain.errors import ValidationError
from leasehold.domain.job import Owner
from leasehold.domain.types import JsonObject
from leasehold.service.jobs import parse_limit
from leasehold.service.kinds import JobKind
from leasehold.service.telemetry import Telemetry
from leasehold.service.view import job_view
from leasehold.service.workflows import Workflows
from leasehold.store import Stores

MAX_SIGNAL_BYTES = 16 * 1024
"""A signal's body, as a payload: at most 16 KiB of JSON."""


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
        self._flows = Workflows(stores, clock, kinds, telemetry)

    def signal(self, owner: Owner, job_id: str, name: str, body: Any) -> JsonObject:
        """`POST /jobs/{id}/signals/{name}`: the owner's signal (DESIGN §19)."""
        _check_signal_body(body)
        job = self._flows.signal(owner, job_id, name, body)
        return job_view(job, self._kinds, self._clock.now_ms())

    def callback(self, token: str, body: Any) -> JsonObject:
        """`POST /callbacks/{token}`: no identity; the token is the authority (DESIGN §19)."""
        _check_signal_body(body)
        job = self._flows.callback(token, body)
        return {"job_id": job.job_id, "accepted": True}

    def children(
        self, owner: Owner, job_id: str, *, cursor: str | None, limit: str | None
    ) -> JsonObject:
        """`GET /jobs/{id}/children`: a page of the job's children, every set in order."""
        job = self._stores.jobs.get_owned(owner, job_id)
        size = parse_limit(limit)
        sets = [(int(step), int(total)) for step, total in (job.spawned or [])]
        position = _children_cursor(cursor, sets)
        items: list[JsonObject] = []
        flows = self._flows
        next_cursor: str | None = None
        for number, (step, total) in enumerate(sets):
            if number < position[0]:
                continue
            start = position[1] if number == position[0] else 0
            while start < total and len(items) < size:
                page, after = flows.children_views(
                    job, step, start=start, limit=min(100, size - len(items))
                )
                items.extend(
                    {
                        "job_id": v.job_id,
                        "step": step,
                        "state": v.state,
                        "result": v.result,
                        "error": v.error,
                    }
                    for v in page
                )
                start = total if after is None else after
            if len(items) >= size:
                if start < total:
                    next_cursor = f"{number}.{start}"
                elif number + 1 < len(sets):
                    next_cursor = f"{number + 1}.0"
                break
        return {"items": items, "next_cursor": next_cursor}


def _check_signal_body(body: Any) -> None:
    """A signal's body: any JSON value, up to the payload limit (16 KiB)."""
    size = len(json.dumps(body, separators=(",", ":")).encode())
    if size > MAX_SIGNAL_BYTES:
        raise ValidationError(
            f"a signal's body is at most {MAX_SIGNAL_BYTES} bytes", code="too_large"
        )


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


__all__ = ["MAX_SIGNAL_BYTES", "WorkflowService"]
