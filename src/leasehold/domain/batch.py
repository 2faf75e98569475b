"""`POST /jobs/batch` at the edge (issue 33 item 3, decisions BA1–BA6): `{"jobs": [...]}` with 1 to
`MAX_BATCH_JOBS` bodies exactly as for `POST /jobs`, each with an optional `idempotency_key` in
place of the header. The request's shape is the whole request's 400; each item's own faults are
that item's error, in its place, and the other items go in."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from leasehold.domain.errors import ValidationError
from leasehold.domain.options import Submission

MAX_BATCH_JOBS = 100
"""The most jobs one `POST /jobs/batch` carries (DESIGN §21)."""
MAX_BATCH_BODY_BYTES = 2 * 1024 * 1024
"""A batch's whole body: 100 items of 20 KiB each, under Lambda's 6 MB request as API Gateway
hands it over (the body is escaped into the event's JSON). Each item is also held to
`POST /jobs`'s own 64 KiB."""
MAX_ITEM_BYTES = 64 * 1024
"""One item, as `POST /jobs` holds its body (leasehold.sdk.routes.MAX_BODY_BYTES)."""


def submissions_of(
    body: Any, known_kinds: Collection[str] | None = None
) -> list[Submission | ValidationError]:
    """The batch's items in order, each a `Submission` or the `ValidationError` that refuses it
    (the same code and message `POST /jobs` answers for that body). The request itself — not an
    object `{"jobs": [...]}`, no items, more than `MAX_BATCH_JOBS` — is a ValidationError
    raised for the whole."""
    if not isinstance(body, dict) or set(body) != {"jobs"}:
        raise ValidationError(
            'the body must be {"jobs": [...]}: a list of 1 to '
            f"{MAX_BATCH_JOBS} job requests, each as for POST /jobs"
        )
    items = body["jobs"]
    if not isinstance(items, list):
        raise ValidationError("'jobs' must be a list of job requests")
    if not 1 <= len(items) <= MAX_BATCH_JOBS:
        raise ValidationError(
            f"'jobs' must hold 1 to {MAX_BATCH_JOBS} job requests, not {len(items)}",
            code="too_large" if len(items) > MAX_BATCH_JOBS else "invalid_request",
        )
    return [_item(item, known_kinds) for item in items]


def _item(item: Any, known_kinds: Collection[str] | None) -> Submission | ValidationError:
    try:
        if not isinstance(item, dict):
            raise ValidationError("each job request must be a JSON object")
        size = len(json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode())
        if size > MAX_ITEM_BYTES:
            raise ValidationError(
                f"the job request is larger than {MAX_ITEM_BYTES} bytes", code="too_large"
            )
        fields = dict(item)
        if "payload_upload" in fields:  # one upload, one job: POST /jobs (decision LD8)
            raise ValidationError(
                "a batch's job requests carry their 'payload': a job naming an upload "
                "('payload_upload') is submitted on its own, with POST /jobs"
            )
        key = fields.pop("idempotency_key", None)
        if key is not None and not isinstance(key, str):
            raise ValidationError(
                "'idempotency_key' must be 1–128 characters of A-Z a-z 0-9 . _ : -",
                code="invalid_idempotency_key",
            )
        return Submission.from_body(fields, key, known_kinds=known_kinds)
    except ValidationError as refused:
        return refused


__all__ = ["MAX_BATCH_BODY_BYTES", "MAX_BATCH_JOBS", "submissions_of"]
