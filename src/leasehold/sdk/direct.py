"""`submit_direct`: a new job committed straight to the table over boto3, for code of one's own
that runs inside AWS beside a deployed engine (a Lambda function of the project, a container, a
script with the stack's credentials) — no API Gateway request, no API function.

It is `POST /jobs` without HTTP: the same accept path (`leasehold.service.jobs.Intake`), so
the same checks, defaults and limits (submittable kinds only), the same writes (the job item
and its outbox item, each conditional on not existing, in one TransactWriteItems), the same
`Idempotency-Key` rules and the same errors, raised as the typed leasehold errors the API maps
to its statuses. The relay moves the outbox item to the queue as it does for a job accepted
over HTTP."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Unpack

from leasehold.domain.errors import ValidationError
from leasehold.domain.job import Owner
from leasehold.domain.options import JobOptions, OptionKeywords, Submission
from leasehold.sdk.apps import engine_intake, known_kind, run_at_text_of
from leasehold.sdk.kind import Kind
from leasehold.sdk.routes import check_request_text
from leasehold.store.table import CLIENT_CONFIG, Table

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
    duplicate: bool = False
    """True when no job was made: another job holds the request's unique key (`options.unique`
    or the kind's `unique=`), and this is it (decision UQ2)."""


def submit_direct(
    table: Table | str,
    kind: Kind | str,
    payload: Mapping[str, Any],
    owner: Owner,
    *,
    options: JobOptions | None = None,
    client: DynamoDBClient | None = None,
    now_ms: int | None = None,
    **keywords: Unpack[OptionKeywords],
) -> Submitted:
    """Accept a job of `kind` for `owner` through the accept path `POST /jobs` takes, over boto3:
    validate (the payload's size, the kind's schema and checks, 1–20 steps, `options`; a kind
    that is not submittable is `unknown_kind`), then commit the job and its outbox item in one
    TransactWriteItems. Returns only after the commit.

    `table`: the stack's table name (its `TableName` output) or a `Table`; `client`: the
    DynamoDB client to use with a name (default: boto3's, with leasehold's timeouts and
    retries). `kind`: a `Kind` (imported from the module the engine runs) or the name of one the
    running engine registered. `options`: a `JobOptions` (key, budget, deadline, attempts,
    priority, `run_at` / `delay_seconds`); the keyword arguments of the same names build one.
    The same key and request give the same job; the same key with another request is a
    ConflictError (`idempotency_key_reused`). `now_ms`: the time the job is made at, by default
    the system's (a test passes its manual clock's). Inside a leasehold function the running
    engine's defaults, tenant limits and metrics apply, as they do to `POST /jobs`.

    Errors: ValidationError (400: the request can never be accepted as sent),
    PriorityNotAllowedError (403), ConflictError (409), SubmitRateExceededError (429),
    StoreUnavailableError (503: nothing promised; retry with the same key), and a
    LeaseholdError for a transaction cancelled for any other reason."""
    engine_kind = known_kind(kind)
    if not engine_kind.submittable:
        raise ValidationError(
            f"unknown kind '{engine_kind.name[:64]}': it is not submittable (only an "
            "application's own routes make its jobs, with job_writes)",
            code="unknown_kind",
        )
    check_request_text(owner, payload, run_at=run_at_text_of(keywords))
    chosen = JobOptions.of(options, **keywords)
    door = table if isinstance(table, Table) else Table(client or _client(), table)
    intake = engine_intake({engine_kind.name: engine_kind}, now_ms)
    accepted = intake.accept(door, owner, Submission(engine_kind.name, dict(payload), chosen))
    return Submitted(accepted.job_id, accepted.state, accepted.created, accepted.duplicate)


def _client() -> DynamoDBClient:
    import boto3

    return boto3.client("dynamodb", config=CLIENT_CONFIG)


__all__ = ["Submitted", "submit_direct"]
