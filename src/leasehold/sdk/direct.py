"""`submit_direct`: a new job committed straight to the table over boto3, for code of one's own
that runs inside AWS beside a deployed engine (a Lambda function of the project, a container, a
script with the stack's credentials) — no API Gateway request, no API function.

It is `POST /jobs` without HTTP: the same checks and limits (`job_writes`, submittable kinds
only), the same writes (the job item and its outbox item, each conditional on not existing, in
one TransactWriteItems), the same `Idempotency-Key` rules and the same errors, raised as the
typed leasehold errors the API maps to its statuses. The relay moves the outbox item to the
queue as it does for a job accepted over HTTP."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from leasehold.domain.errors import StoreUnavailableError, ValidationError
from leasehold.domain.job import Owner, Priority
from leasehold.domain.states import JobState
from leasehold.sdk.apps import job_writes, known_kind
from leasehold.sdk.kind import Kind
from leasehold.store.items import deserialize_item
from leasehold.store.table import CLIENT_CONFIG, ConditionFailed, Table

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient


@dataclass(frozen=True)
class Submitted:
    """What `submit_direct` made, as `POST /jobs` answers it."""

    job_id: str
    """The job's id (`GET /jobs/{job_id}` reads it)."""
    state: str
    """`queued` for a new job; for a repeat of a keyed request, the state the job is in now."""
    created: bool
    """False when an earlier request with the same idempotency key and the same request made
    the job (nothing was scheduled again). Within DynamoDB's ten-minute window for a
    `ClientRequestToken`, an identical repeat succeeds as a no-op and reports True, as
    `POST /jobs` does: either way there is one job."""


def submit_direct(
    table: Table | str,
    kind: Kind | str,
    payload: Mapping[str, Any],
    owner: Owner,
    *,
    client: DynamoDBClient | None = None,
    idempotency_key: str | None = None,
    budget: Mapping[str, int] | None = None,
    deadline_seconds: int | None = None,
    max_attempts: int | None = None,
    now_ms: int | None = None,
    run_at: str | None = None,
    delay_seconds: int | None = None,
    priority: Priority | None = None,
) -> Submitted:
    """Accept a job of `kind` for `owner` as `POST /jobs` does, over boto3: validate (the payload's
    size, the kind's schema and checks, 1–20 steps, budget, deadline, attempts; a kind that is not
    submittable is `unknown_kind`), then commit the job and its outbox item in one
    TransactWriteItems. Returns only after the commit.

    `table`: the stack's table name (its `TableName` output) or a `Table`; `client`: the
    DynamoDB client to use with a name (default: boto3's, with leasehold's timeouts and
    retries). `kind`: a `Kind` (imported from the module the engine runs) or the name of one the
    running engine registered. `idempotency_key`: as the header — the same key and request give
    the same job; the same key with another request is a ConflictError
    (`idempotency_key_reused`). `now_ms`: the time the job is made at, by default the system's
    (a test passes its manual clock's). `run_at` / `delay_seconds`: as on `POST /jobs`, the job
    does not start before then (up to 365 days). `priority`: high, normal or low (default: the
    kind's).

    Errors: ValidationError (400: the request can never be accepted as sent), ConflictError
    (409), StoreUnavailableError (503: nothing promised; retry with the same key), and a
    LeaseholdError for a transaction cancelled for any other reason."""
    if not known_kind(kind).submittable:
        name = kind.name if isinstance(kind, Kind) else kind
        raise ValidationError(
            f"unknown kind '{name[:64]}': it is not submittable (only an application's own "
            "routes make its jobs, with job_writes)",
            code="unknown_kind",
        )
    door = table if isinstance(table, Table) else Table(client or _client(), table)
    new = job_writes(
        door,
        kind,
        payload,
        owner,
        idempotency_key=idempotency_key,
        budget=budget,
        deadline_seconds=deadline_seconds,
        max_attempts=max_attempts,
        now_ms=now_ms,
        run_at=run_at,
        delay_seconds=delay_seconds,
        priority=priority,
    )
    try:
        door.transact(new.writes, token=new.token)
    except ConditionFailed as failed:
        if new.repeated(failed):  # a reuse with another request raises ConflictError
            old = deserialize_item(failed.old_item(0) or {})
            return Submitted(new.job_id, str(old.get("state", JobState.QUEUED.value)), False)
        # This very call's own earlier try committed and its answer was lost (botocore retried).
        return Submitted(new.job_id, JobState.QUEUED.value, True)
    except StoreUnavailableError as unavailable:
        raise StoreUnavailableError(
            f"{unavailable} — the job may or may not have been accepted; retry with the same "
            "idempotency_key to get the same job (without a key a retry may create a second one)"
        ) from unavailable
    return Submitted(new.job_id, JobState.QUEUED.value, True)


def _client() -> DynamoDBClient:
    import boto3

    return boto3.client("dynamodb", config=CLIENT_CONFIG)


__all__ = ["Submitted", "submit_direct"]
