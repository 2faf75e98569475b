"""Many jobs without HTTP (issue 33 item 3, decisions BA1–BA6): `job_writes_many` (the entries of
many new jobs, for transactions of one's own) and `submit_direct_many` (many jobs committed
alone over boto3). Both build one `Submission` a job and hand it to the one accept path
(`leasehold.service.jobs.Intake`), as `job_writes` and `submit_direct` do for one."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from leasehold.domain.errors import LeaseholdError, ValidationError
from leasehold.domain.job import Owner
from leasehold.domain.options import Submission
from leasehold.domain.types import RawItem
from leasehold.sdk.apps import NewJob, engine_intake, job_writes, known_kind
from leasehold.sdk.direct import Submitted, _client
from leasehold.sdk.kind import Kind
from leasehold.sdk.routes import check_request_text
from leasehold.store.batch import MAX_ACTIONS, MAX_TRANSACTION_BYTES, pack_sizes, write_size
from leasehold.store.table import Table

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

    from leasehold.service.kinds import JobKind


@dataclass(frozen=True)
class NewJobs:
    """Many new jobs' entries (`job_writes_many`), in the order asked for. A job is 2 actions
    (its item and its outbox item; 1 when it is due more than 15 minutes ahead), so one
    TransactWriteItems (100 actions, 4 MB) holds 50 jobs, fewer with items of your own:
    `transactions(reserve=…)` packs them for you."""

    jobs: list[NewJob]

    def writes(self) -> list[RawItem]:
        """Every job's entries, in order (for one transaction when they fit in one)."""
        return [write for job in self.jobs for write in job.writes]

    def transactions(self, *, reserve: int = 0, reserve_bytes: int = 0) -> list[list[RawItem]]:
        """The entries packed into as few transactions as DynamoDB allows, each leaving room for
        `reserve` actions (and `reserve_bytes` of items) of your own; a job's entries are never
        split. A transaction that fails names its jobs' items by their place in it
        (`NewJob.repeated(failed, index)`)."""
        if not 0 <= reserve < MAX_ACTIONS:
            raise ValueError(f"reserve is 0 to {MAX_ACTIONS - 1} actions")
        sizes = [(len(job.writes), sum(write_size(w) for w in job.writes)) for job in self.jobs]
        chunks = pack_sizes(
            sizes, actions=MAX_ACTIONS - reserve, budget=MAX_TRANSACTION_BYTES - reserve_bytes
        )
        return [[w for i in chunk for w in self.jobs[i].writes] for chunk in chunks]


def job_writes_many(
    table: Table | str,
    jobs: Iterable[Submission],
    owner: Owner,
    *,
    kinds: Sequence[Kind] = (),
    scope: str = "",
    now_ms: int | None = None,
) -> NewJobs:
    """`job_writes` for each of `jobs` (a `Submission` each: the kind's name, the payload, the
    `JobOptions` with its own idempotency key), all at one time `now_ms`: the same checks,
    defaults and limits. `kinds`: the `Kind`s the names mean (default: the running engine's).
    Every job is checked before anything is returned — these entries go into your own
    transactions, which commit your items and the jobs together, so a job that cannot be
    accepted raises (ValidationError naming its place), not an answer in its place."""
    by_name = {kind.name: kind for kind in kinds}
    made: list[NewJob] = []
    for index, job in enumerate(jobs):
        try:
            made.append(
                job_writes(
                    table,
                    by_name.get(job.kind, job.kind),
                    job.payload,
                    owner,
                    options=job.options,
                    scope=scope,
                    now_ms=now_ms,
                )
            )
        except ValidationError as refused:
            raise ValidationError(f"job {index}: {refused}", code=refused.code) from refused
    return NewJobs(made)


def submit_direct_many(
    table: Table | str,
    jobs: Iterable[Submission],
    owner: Owner,
    *,
    kinds: Sequence[Kind] = (),
    client: DynamoDBClient | None = None,
    now_ms: int | None = None,
) -> list[Submitted | LeaseholdError]:
    """`submit_direct` for many (`POST /jobs/batch` without HTTP): one answer a job, in order —
    what it made, or the error `submit_direct` would have raised for it alone; the accepted
    jobs are committed in as few transactions as DynamoDB allows. `kinds`: the `Kind`s the
    names mean (default: the running engine's). Raises only for the whole: the tenant's submit
    rate (429) and the store not answering before anything was committed (503)."""
    by_name = {kind.name: kind for kind in kinds}
    items: list[Submission | LeaseholdError] = []
    engine_kinds: dict[str, JobKind] = {}
    for job in jobs:
        try:
            engine_kind = known_kind(by_name.get(job.kind, job.kind))
            if not engine_kind.submittable:
                raise ValidationError(
                    f"unknown kind '{engine_kind.name[:64]}': it is not submittable",
                    code="unknown_kind",
                )
            check_request_text(owner, job.payload, run_at=_run_at_text(job))
            engine_kinds[engine_kind.name] = engine_kind
            items.append(replace(job, payload=dict(job.payload)))
        except ValidationError as refused:
            items.append(refused)
    door = table if isinstance(table, Table) else Table(client or _client(), table)
    outcomes = engine_intake(engine_kinds, now_ms).accept_many(door, owner, items)
    return [
        o if isinstance(o, LeaseholdError) else Submitted(o.job_id, o.state, o.created, o.duplicate)
        for o in outcomes
    ]


def _run_at_text(job: Submission) -> str | None:
    run_at = job.options.run_at
    return run_at if isinstance(run_at, str) else None


__all__ = ["NewJobs", "job_writes_many", "submit_direct_many"]
