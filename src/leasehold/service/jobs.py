"""The caller's use cases: accept a job, read it, list them, cancel, decide an approval."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from leasehold.domain import sizes
from leasehold.domain.clock import Clock
from leasehold.domain.debounce import Debounce, debounced
from leasehold.domain.errors import (
    JobNotFoundError,
    LeaseholdError,
    StoreUnavailableError,
    SubmitRateExceededError,
    ValidationError,
)
from leasehold.domain.ids import IdFactory
from leasehold.domain.job import Job, JobSpec, Owner
from leasehold.domain.limits import keyed_fields
from leasehold.domain.options import Submission, check_debounce_options, check_kind_known
from leasehold.domain.policies import DEFAULT_MAX_ATTEMPTS
from leasehold.domain.states import JobState
from leasehold.domain.tenancy import TenantPolicy
from leasehold.domain.types import JsonObject, RawItem
from leasehold.domain.unique import Claim, chosen_unique
from leasehold.service.fanin import child_ended, children_done
from leasehold.service.job_specs import (
    MAX_LIST_LIMIT,
    _default_priority,
    batch_results,
    new_job_for,
    parse_limit,
    parse_state_filter,
    resolve_spec,
)
from leasehold.service.kinds import JobKind
from leasehold.service.telemetry import CountingTelemetry, Telemetry
from leasehold.service.tracing import current_traceparent
from leasehold.service.uploads import UploadedPayload, UploadService, accept_uploaded, adopt_payload
from leasehold.service.view import job_view
from leasehold.store import Stores
from leasehold.store.batch import Accepted, NewJobEntry
from leasehold.store.blobs import BlobStore, encoded, is_ref
from leasehold.store.debounce import accept_debounced
from leasehold.store.jobs import JobStore
from leasehold.store.keys import derived_id, fingerprint_hash, request_token
from leasehold.store.rates import SubmitCounter
from leasehold.store.table import Table
from leasehold.store.waits import WaitStore

MAX_VERSION = 2**53
"""Versions are counters; anything larger than a JSON-safe integer is not one of ours."""


@dataclass(frozen=True)
class Prepared:
    """A submission that passed every check, as the job it makes (not yet written)."""

    job: Job
    spec: JobSpec
    key: str | None
    """The idempotency key, when the request has one."""
    fp_hash: str | None
    """With a key: the hash of the request's canonical text, kept on the job (`fp`)."""
    token: str | None
    """With a key: the `ClientRequestToken` of the commit."""
    unique: Claim | None = None
    """With a unique rule (the kind's or the request's): the key the job takes (decision UQ1)."""


class Intake:
    """The one accept path (decision OW2): `POST /jobs`, `submit_direct`, the testbed's `submit`
    and an application's `job_writes` all validate a `Submission` here, resolve the kind's
    defaults in one function (`resolve_spec`), check the tenant's limits and build the job;
    `accept` then commits it (all but `job_writes`, whose application commits the writes in a
    transaction of its own), counts it and answers a repeat with the job as it is."""

    def __init__(
        self,
        kinds: Mapping[str, JobKind],
        clock: Clock,
        new_id: IdFactory,
        telemetry: Telemetry | None = None,
        *,
        default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        tenancy: TenantPolicy | None = None,
        key_name: str = "Idempotency-Key",
        blobs: BlobStore | None = None,
    ) -> None:
        self._key_name = key_name
        self._blobs = blobs
        """Where a payload too large for the item goes (DESIGN §20), when no door names one."""
        """What the caller calls the key (the header, or a keyword argument), in a 503's text."""
        self._kinds = kinds
        self._clock = clock
        self._new_id = new_id
        self._telemetry: Telemetry = telemetry or CountingTelemetry()
        self._default_max_attempts = default_max_attempts
        self._tenancy = tenancy or TenantPolicy()

    def submittable(self) -> list[str]:
        """The kinds a caller may name (`POST /jobs`): not those only an application makes."""
        return [name for name, kind in self._kinds.items() if kind.submittable]

    def prepare(
        self,
        owner: Owner,
        submission: Submission,
        *,
        submittable_only: bool = True,
        scope: str = "",
        fingerprint: str | None = None,
        job_id: str | None = None,
        tenant_limits: bool = True,
        now: int | None = None,
        blobs: BlobStore | None = None,
        uploaded: UploadedPayload | None = None,
    ) -> Prepared:
        """The job `submission` makes for `owner`, after every check: the kind (one a caller
        may submit, unless `submittable_only` is False), the kind's defaults, the payload's size,
        the tenant's priority, the kind's own schema and plan. With a key the job's id is
        derived from the owner, the key and `scope`, and `fingerprint` (default: the request's
        own canonical text) is what a repeat is compared by. `tenant_limits` False: the
        tenant's priority was checked already (a schedule's tick: at the schedule's create).
        `now`: the accept time, by default the clock's. A payload over the inline limit is
        written to `blobs` (else the intake's own) before the job that references it; an
        `uploaded` one (its checked upload, decision LD8) is copied there instead."""
        if submission.payload_upload is not None and uploaded is None:
            raise ValidationError(
                "'payload_upload' is taken by POST /jobs alone (one job a request)"
            )
        kind = self.kind_for(submission, submittable_only=submittable_only)
        if is_ref(submission.payload):  # the engine's own shape for stored data (DESIGN §20)
            raise ValidationError("'payload' may not be an object whose only key is '$blob'")
        spec = resolve_spec(kind, submission, self._default_max_attempts)
        options = submission.options
        if tenant_limits:
            self._tenancy.check_priority(owner, options.priority, _default_priority(kind))
        key = options.idempotency_key
        fp_hash = token = None
        if key is not None:
            job_id = derived_id("j", owner, key, scope)
            fp_hash = fingerprint_hash(spec.fingerprint() if fingerprint is None else fingerprint)
            token = request_token(owner, key, fp_hash)
        elif job_id is None:
            job_id = self._new_id()
        at = self._clock.now_ms() if now is None else now
        job = new_job_for(kind, spec, owner, job_id, at)
        store = blobs or self._blobs
        if store is not None and uploaded is not None:  # copied in, never sent again (LD8)
            job.payload = adopt_payload(store, job_id, uploaded)
        elif store is not None:  # the kind saw it whole; the item keeps what fits (LD3)
            job.payload = store.keep(job_id, "payload/{sha}", job.payload)
        elif sizes.json_bytes(job.payload) > sizes.PAYLOAD_BUDGET:  # no bucket: the item's share
            raise ValidationError(
                f"'payload' is larger than {sizes.PAYLOAD_BUDGET} bytes, and this engine has no "
                "data bucket (DATA_BUCKET) to keep it in",
                code="payload_too_large",
            )
        if is_ref(job.payload):  # the claim's keys, read now from the whole payload (LD15)
            fields = keyed_fields(kind.concurrency or (), kind.rate, spec.payload)
            job.key_fields = fields or None
        # The caller's trace, else the current span's, else a new one (decision TR1).
        job.traceparent = current_traceparent(options.traceparent)
        unique = chosen_unique(kind.unique, options.unique, submission.kind)
        claim = unique.claim(submission.kind, owner, spec.payload, at) if unique else None
        return Prepared(job, spec, key, fp_hash, token, claim)

    def kind_for(self, submission: Submission, *, submittable_only: bool = True) -> JobKind:
        """The submission's kind: one a caller may name (unless `submittable_only` is False)."""
        known = self.submittable() if submittable_only else list(self._kinds)
        check_kind_known(submission.kind, known)
        return self._kinds[submission.kind]

    def spec_of(self, submission: Submission) -> JobSpec:
        """The submission's options resolved as `prepare` resolves them (its kind known)."""
        return resolve_spec(self.kind_for(submission), submission, self._default_max_attempts)

    def accept(
        self,
        table: Table,
        owner: Owner,
        submission: Submission,
        *,
        uploaded: UploadedPayload | None = None,
        fingerprint: str | None = None,
    ) -> Accepted:
        """Validate, then commit job + outbox together (`JobStore.accept`); only a commit
        returns. A tenant past its submit rate is refused before anything is written.
        `uploaded`: the checked upload the payload came from; `fingerprint`: what a keyed
        repeat is compared by, when not the request's own text (an upload's, LD8)."""
        prepared = self.prepare(
            owner, submission, blobs=table.blobs, uploaded=uploaded, fingerprint=fingerprint
        )
        debounce = self.debounce_for(submission)
        self._take_submission(table, owner, prepared.job.created_at)
        if debounce is not None:
            return self._accept_debounced(table, prepared.job, debounce, prepared.spec.payload)
        try:
            outcome = JobStore(table).accept(
                prepared.job,
                idempotency=prepared.key,
                fingerprint=fingerprint or prepared.spec.fingerprint(),
                unique=prepared.unique,
            )
        except StoreUnavailableError as unavailable:
            # The commit may have happened with its answer lost: say so, and how to find out.
            raise StoreUnavailableError(
                f"{unavailable} — the job may or may not have been accepted; retry with the "
                f"same {self._key_name} to get the same job (without a key a retry may create "
                "a second one)"
            ) from unavailable
        self._telemetry.count(
            "JobsAccepted"
            if outcome.created
            else ("UniqueDuplicates" if outcome.duplicate else "IdempotentReplays")
        )
        # A repeat answers with what the job is now (it may have run, or been cancelled).
        return Accepted(
            job_id=outcome.job_id,
            created=outcome.created,
            state=outcome.state,
            traceparent=prepared.job.traceparent if outcome.created else outcome.traceparent,
            duplicate=outcome.duplicate,
        )

    def debounce_for(self, submission: Submission) -> Debounce | None:
        """The request's debounce, else its kind's (None: none); a kind's is checked against
        the request's other options as a request's own is (400)."""
        chosen = submission.options.debounce
        if chosen is None:
            kind = self._kinds.get(submission.kind)
            chosen = kind.debounce if kind is not None else None
            if chosen is not None:
                check_debounce_options(chosen, submission.options)
        return chosen

    def _accept_debounced(
        self, table: Table, job: Job, debounce: Debounce, payload: JsonObject
    ) -> Accepted:
        """Collapse into the key's pending job, or open its window with `job` (decisions
        DB1–DB6, store/debounce.py). The key is read from the whole `payload` (LD15)."""
        key = debounce.key(job.kind, job.owner, payload)
        plan = accept_debounced(table, debounced(job, debounce), key, debounce, job.created_at)
        self._telemetry.count("JobsDebounced" if plan.debounced else "JobsAccepted")
        return Accepted(
            plan.job_id,
            created=not plan.debounced,
            state=plan.state,
            traceparent=None if plan.debounced else job.traceparent,
            debounced=plan.debounced,
        )

    def accept_many(
        self,
        table: Table,
        owner: Owner,
        items: Sequence[Submission | LeaseholdError],
        *,
        guard: RawItem | None = None,
    ) -> list[Accepted | LeaseholdError]:
        """Many jobs through the one accept path (`POST /jobs/batch`, `submit_many`, decisions
        BA1–BA6): each item validated as `accept` validates one (an item that fails is its own
        error, in its place; an item given as an error stays one), the valid ones counted
        against the tenant's rate together and committed in as few transactions as DynamoDB
        allows (`JobStore.accept_many`), each answered on its own. StoreUnavailableError only
        when nothing of the batch was committed; `guard`: see `JobStore.accept_many`."""
        outcomes: list[Accepted | LeaseholdError | None] = [None] * len(items)
        ready: list[tuple[int, Prepared]] = []
        for index, item in enumerate(items):
            if isinstance(item, LeaseholdError):
                outcomes[index] = item
                continue
            try:
                if self.debounce_for(item) is not None:
                    raise ValidationError(
                        "a batch takes no debounced job: submit it on its own (POST /jobs)",
                        code="debounce_in_batch",
                    )
                ready.append((index, self.prepare(owner, item, blobs=table.blobs)))
            except StoreUnavailableError:
                raise
            except LeaseholdError as refused:
                outcomes[index] = refused
        if ready:
            self._take_submission(table, owner, ready[0][1].job.created_at, len(ready))
            entries = [NewJobEntry(p.job, p.fp_hash, p.unique) for _, p in ready]
            try:
                committed = JobStore(table).accept_many(entries, guard=guard)
            except StoreUnavailableError as unavailable:
                raise StoreUnavailableError(
                    f"{unavailable} — no job of the batch was accepted, or some were with "
                    "their answer lost; retry with the same idempotency_key on each item to "
                    "get the same jobs (an item without a key may be created twice)"
                ) from unavailable
            for (index, _), outcome in zip(ready, committed, strict=True):
                outcomes[index] = outcome
        done = [o if o is not None else LeaseholdError("not attempted") for o in outcomes]
        created = sum(1 for o in done if isinstance(o, Accepted) and o.created)
        duplicates = sum(1 for o in done if isinstance(o, Accepted) and o.duplicate)
        repeats = sum(1 for o in done if isinstance(o, Accepted) and not o.created) - duplicates
        if created:
            self._telemetry.count("JobsAccepted", created)
        if repeats:
            self._telemetry.count("IdempotentReplays", repeats)
        if duplicates:
            self._telemetry.count("UniqueDuplicates", duplicates)
        return done

    def _take_submission(self, table: Table, owner: Owner, now: int, jobs: int = 1) -> None:
        """Count the submission (a batch's `jobs`, decision BA5) against its tenant's rate
        (decision Q3), when the deployment sets one: a tenant past it is refused (429) before
        anything is written for the job."""
        rate = self._tenancy.submit_rate
        if rate and not SubmitCounter(table).take(owner.tenant, rate, now, jobs):
            raise SubmitRateExceededError(
                f"tenant {owner.tenant[:80]!r} has submitted {rate} jobs this second, the most "
                "this deployment allows a tenant (TenantSubmitRate)"
                + (f", and a batch of {jobs} does not fit" if jobs > 1 else "")
                + "; nothing was accepted - retry after a second",
                retry_after_seconds=1,
            )


class JobService:
    """The caller's use cases over the table (`POST /jobs` and the routes under `/jobs`)."""

    def __init__(
        self,
        stores: Stores,
        kinds: dict[str, JobKind],
        clock: Clock,
        new_id: IdFactory,
        telemetry: Telemetry,
        default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        tenancy: TenantPolicy | None = None,
        uploads: UploadService | None = None,
    ) -> None:
        self._stores = stores
        self._uploads = uploads
        """`POST /uploads` and the uploads a job names (None: no data bucket, no uploads)."""
        self._kinds = kinds
        self._clock = clock
        self._telemetry = telemetry
        self.intake = Intake(
            kinds,
            clock,
            new_id,
            telemetry,
            default_max_attempts=default_max_attempts,
            tenancy=tenancy,
        )
        """The accept path this service commits through."""

    def accept(self, owner: Owner, submission: Submission) -> Accepted:
        """Validate, then commit job + outbox (+ key) together; only a commit returns. A
        submission naming an upload takes its payload from it (decision LD8)."""
        if submission.payload_upload is None:
            return self.intake.accept(self._stores.table, owner, submission)
        uploads = self._require_uploads()
        return accept_uploaded(self.intake, uploads, self._stores.table, owner, submission)

    def create_upload(self, owner: Owner, body: Any) -> JsonObject:
        """`POST /uploads`: an owner-scoped, expiring PUT for a large input (decision LD7)."""
        return self._require_uploads().create(owner, body)

    def _require_uploads(self) -> UploadService:
        if self._uploads is None:
            raise ValidationError(
                "this engine has no data bucket (DATA_BUCKET): no uploads", code="upload_not_found"
            )
        return self._uploads

    def accept_many(
        self, owner: Owner, items: Sequence[Submission | LeaseholdError]
    ) -> list[Accepted | LeaseholdError]:
        """`POST /jobs/batch`: each item accepted or refused on its own (`Intake.accept_many`)."""
        return self.intake.accept_many(self._stores.table, owner, items)

    def view(self, owner: Owner, job_id: str) -> JsonObject:
        job = self._stores.jobs.get_owned(owner, job_id)
        return job_view(job, self._kinds, self._clock.now_ms(), children_done(self._stores, job))

    def result(self, owner: Owner, job_id: str) -> bytes:
        """`GET /jobs/{job_id}/result`: the succeeded job's result as JSON, read whole from the
        data bucket when large; the owner's only (another caller's job is not found), or any
        job's for an operator (`GET /ops/jobs/{job_id}/result`, the console's download)."""
        job = (
            self._stores.jobs.get(job_id) if owner.is_operator else None
        ) or self._stores.jobs.get_owned(owner, job_id)
        if job.state is not JobState.SUCCEEDED or job.result is None:
            raise JobNotFoundError(f"job {job_id} has no result (it is {job.state.value})")
        blobs = self._stores.table.blobs
        if blobs is None or not is_ref(job.result):
            return encoded(job.result)
        return blobs.read(job.job_id, job.result)

    def result_link(self, owner: Owner, job_id: str, *, seconds: int = 300) -> str | None:
        """A presigned URL reading the owner's large result for `seconds` (None: inline)."""
        job = self._stores.jobs.get_owned(owner, job_id)
        blobs = self._stores.table.blobs
        if blobs is None or job.state is not JobState.SUCCEEDED or not is_ref(job.result):
            return None
        return blobs.presigned(job.result, seconds=seconds)

    def list(
        self, owner: Owner, *, state: str | None, limit: str | None, cursor: str | None
    ) -> JsonObject:
        parsed_state = parse_state_filter(state)
        parsed_limit = parse_limit(limit)
        jobs, next_cursor = self._stores.jobs.list_for_owner(
            owner, state=parsed_state, limit=parsed_limit, cursor=cursor
        )
        now = self._clock.now_ms()
        return {
            "jobs": [job_view(job, self._kinds, now) for job in jobs],
            "next_cursor": next_cursor,
        }

    def cancel(self, owner: Owner, job_id: str) -> JsonObject:
        now = self._clock.now_ms()
        job = self._stores.controls.cancel(owner, job_id, now=now)
        self._telemetry.count(
            "JobsCancelled" if job.state is JobState.CANCELLED else "CancelRequested"
        )
        if job.state is JobState.CANCELLED:
            child_ended(WaitStore(self._stores.table), job, job.state, now, self._telemetry)
        return job_view(job, self._kinds, self._clock.now_ms())

    def decide_approval(self, owner: Owner, job_id: str, body: Any) -> JsonObject:
        if not isinstance(body, dict) or set(body) - {"decision", "version"}:
            raise ValidationError('the body must be {"decision": ..., "version": ...}')
        decision = body.get("decision")
        if decision not in ("approve", "reject"):
            raise ValidationError('\'decision\' must be "approve" or "reject"')
        version = body.get("version")
        if (
            isinstance(version, bool)
            or not isinstance(version, int)
            or not 1 <= version <= MAX_VERSION
        ):
            raise ValidationError("'version' must be the job's current version (an integer ≥ 1)")
        now = self._clock.now_ms()
        job = self._stores.controls.decide_approval(
            owner, job_id, version=version, approve=decision == "approve", now=now
        )
        if job.state is JobState.CANCELLED:  # a rejected child's end wakes its parent (WF4)
            child_ended(WaitStore(self._stores.table), job, job.state, now, self._telemetry)
        self._telemetry.count("ApprovalsGranted" if decision == "approve" else "ApprovalsRejected")
        return job_view(job, self._kinds)


__all__ = [
    "MAX_LIST_LIMIT",
    "Intake",
    "JobService",
    "Prepared",
    "batch_results",
    "new_job_for",
    "parse_limit",
    "parse_state_filter",
    "resolve_spec",
]
