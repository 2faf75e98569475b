"""The engine's contract with a kind, in one room: what the worker knows of a step before it
starts it (`StepPlan`), the shape of a kind as the engine runs it (`JobKind`), the attempt a
worker holds and the step running under it (`Attempt`, with its fenced `OperationLedger`), and
what the worker tells the queue (`WakeupResult`). They refer to each other, so they live
together rather than in modules that would import each other.

Users never implement `JobKind`: `leasehold.Kind` (sdk/kind.py) does, from the steps and hooks a
user declares, and `leasehold.StepContext` is the public view of an `Attempt`. This module is
the engine's side of that contract and may change.

Every ledger write is fenced like any worker write (docs/architecture.md "External effects"), so a
worker that lost its lease
can neither open nor settle an operation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, cast

from aws_lambda_powertools import Logger

from leasehold.domain import sizes
from leasehold.domain.clock import Clock
from leasehold.domain.debounce import Debounce
from leasehold.domain.errors import FatalStepError, StaleEpochError, StoreUnavailableError
from leasehold.domain.job import Checkpoint, Job
from leasehold.domain.limits import Limit, Rate
from leasehold.domain.policies import LeasePolicy
from leasehold.domain.records import EffectIntent, LedgerEntry
from leasehold.domain.types import JsonObject, RawItem
from leasehold.domain.unique import Unique
from leasehold.domain.versions import StepList, step_digest
from leasehold.domain.waits import StepRequests
from leasehold.service.telemetry import Telemetry
from leasehold.store.leases import LeaseStore, LedgerStore

if TYPE_CHECKING:
    from leasehold.domain.errors import RelatedItemChangedError
    from leasehold.domain.job import Owner, Priority
    from leasehold.domain.states import JobState


@dataclass(frozen=True)
class StepPlan:
    """What the worker must know about a step before it starts it."""

    name: str
    cost: int
    duration_ms: int
    needs_approval: bool
    has_effect: bool
    effect_id: str | None = None
    """An SDK `Effect`'s `provider/capability` (None for none): part of the step's identity in
    the job's step list (kind versions, decision KV1), never used to run it."""

    def digest(self) -> str:
        """This step's identity in a job's step list (domain/versions.py)."""
        return step_digest(
            self.name, self.needs_approval, "intent" if self.has_effect else self.effect_id
        )


def step_list_of(plan: list[StepPlan]) -> StepList:
    """The step list a job of this plan records (its fingerprint names the kind's version)."""
    return StepList(tuple(step.digest() for step in plan))


class DeclaredSchedule(Protocol):
    """A schedule a kind declares (`leasehold.Schedule`), as the sweeper reads it at its cold
    start to create the stored schedule (service/schedules.py)."""

    @property
    def expression(self) -> str: ...
    @property
    def tz(self) -> str: ...
    @property
    def payload(self) -> Mapping[str, Any]: ...
    @property
    def missed(self) -> str: ...


Migrate = Callable[[str, Checkpoint, JsonObject], Checkpoint | None]
"""A kind's migration hook (`JobKind.migrate`): the checkpoint mapped from the list of this
fingerprint onto the kind's current one; None when the kind declares none for it. Raises
ValueError naming what is wrong with a migration that raised or returned a bad checkpoint."""


class JobKind(Protocol):
    name: str
    max_payload_bytes: int
    """The largest payload (UTF-8 JSON) this kind accepts (docs/architecture.md rule 8: 16 KiB by
    default)."""
    submittable: bool
    """Whether callers may submit it with POST /jobs (the reading list's kinds are made by the
    bookmarks API, never submitted directly)."""
    default_max_attempts: int | None
    """The kind's own default for `max_attempts` (None: the function's setting)."""
    operators_see_payload: bool
    """Whether the operator view shows the payload (only for kinds whose payload is not the
    caller's content, such as the reading list's: a bookmark id and a URL)."""
    default_priority: Priority
    """The priority of the kind's jobs when a request names none (decision F4)."""
    concurrency: tuple[Limit, ...] | None
    """The kind's declared concurrency limits (decision F2): None when it declares none (the
    per-user default applies), () for a kind that declared it runs unlimited."""
    rate: tuple[Rate, ...]
    """The kind's declared rates (decision F3); () for none."""
    unique: Unique | None
    """The kind's unique jobs rule (decision UQ1); None for none."""
    debounce: Debounce | None
    """The kind's debounce rule (decision DB1); None for none."""
    declared_schedules: tuple[DeclaredSchedule, ...]
    """The schedules declared on the kind, created by the sweeper at its cold start."""

    def validate_for(self, payload: JsonObject, owner: Owner) -> None:
        """What the API calls at accept: raise ValidationError for a payload that can never run
        (including rules that depend on who submits)."""

    def plan(self, payload: JsonObject) -> list[StepPlan]:
        """The steps of a job, known up front (≤ 20, docs/architecture.md rule 8)."""

    def run_step(self, payload: JsonObject, index: int, attempt: int, ctx: Attempt) -> Any:
        """Run step `index` on try `attempt`; `ctx()` heartbeats and says whether to stop."""

    def result(self, job: Job, checkpoint: Checkpoint) -> Any:
        """The job's visible result once every step ran."""

    def outcome_writes(
        self, job: Job, target: JobState, result: Any, error: dict[str, str] | None, now: int
    ) -> list[RawItem]:
        """Transaction items that must commit with this outcome, or not at all."""

    def when_related_changed(
        self, job: Job, changed: RelatedItemChangedError
    ) -> tuple[str, dict[str, str]]:
        """How the job ends (`cancelled`, with this stop reason and error) when an outcome
        write's item moved."""

    def view_fields(self, job: Job) -> JsonObject:
        """Fields the kind adds to the job view (an agent's progress); {} for most kinds."""

    def related(self, job: Job) -> JsonObject:
        """What the job belongs to, for operators (the reading list: `bookmark_id`)."""

    def migrate(
        self, fingerprint: str, checkpoint: Checkpoint, payload: JsonObject
    ) -> Checkpoint | None:
        """The kind's migration from the step list of `fingerprint` (kind versions, decision
        KV3); None when it declares none from it."""


RemainingMs = Callable[[], int]
"""The invocation's time left (Lambda's `get_remaining_time_in_millis`)."""


class Disposition(StrEnum):
    ACK = "ack"
    """The job item says all there is to say: the message may be deleted."""
    KEEP = "keep"
    """Report the message as failed so SQS keeps it (it was re-delayed, or the store failed)."""


@dataclass(frozen=True)
class WakeupResult:
    disposition: Disposition
    outcome: str


logger = Logger(service="leasehold", child=True)


class OperationLedger:
    """The job's operations, as this worker last wrote or read them."""

    def __init__(
        self, attempt: Attempt, store: LedgerStore, clock: Clock, telemetry: Telemetry
    ) -> None:
        self._attempt = attempt
        self._store = store
        self._clock = clock
        self._telemetry = telemetry
        self._whole: dict[str, tuple[Any, Any]] = {}
        """operation id → (the entry as the item holds it, the entry whole)."""

    def get(self, operation_id: str) -> LedgerEntry | None:
        """The entry whole: a receipt or output kept in the data bucket is read back (once)."""
        entry = self._attempt.job.operations.get(operation_id)
        if entry is None:
            return None
        blobs = self._store.blob_store()
        if blobs is None:
            return cast(LedgerEntry, entry)
        stored, whole = self._whole.get(operation_id, (None, None))
        if stored != entry:
            stored, whole = entry, blobs.load_entry(self._attempt.job.job_id, entry)
            self._whole[operation_id] = (stored, whole)
        return cast(LedgerEntry, whole)

    def submit(
        self,
        operation_id: str,
        *,
        provider: str,
        key: str,
        fingerprint: str,
        capability: str,
        step: int,
    ) -> None:
        """Before the provider is called: the entry, `submitted`, and the open intent."""
        now = self._clock.now_ms()
        entry: LedgerEntry = {
            "provider": provider,
            "key": key,
            "fingerprint": fingerprint,
            "capability": capability,
            "state": "submitted",
            "step": step,
            "submitted_at": now,
        }
        intent: EffectIntent = {
            "operation_id": operation_id,
            "idempotency_key": key,
            "provider": provider,
            "capability": capability,
            "step": step,
            "started_at": now,
        }
        self._within_budget(operation_id, entry)
        self._attempt.job = self._store.submit(self._attempt.job, entry, intent, now=now)
        self._telemetry.count("EffectsSubmitted")
        logger.info(
            "operation submitted",
            extra=self._attempt.log_keys | {"operation_id": operation_id, "provider": provider},
        )

    def _within_budget(self, operation_id: str, entry: LedgerEntry) -> None:
        """FatalStepError (`item_too_large`) when the ledger with `entry` would pass its share of
        the job item (leasehold.domain.sizes): nothing is written. With its effect open, the step
        ends as any failed effect step does — the receipt was not recorded. With a data bucket
        the share is LEDGER_INLINE and `entry` holds references for large receipts (LD16)."""
        ledger = {**self._attempt.job.operations, operation_id: entry}
        size = sizes.json_bytes(ledger)
        share = sizes.LEDGER_BUDGET if self._store.blob_store() is None else sizes.LEDGER_INLINE
        if size > share:
            raise FatalStepError(
                f"operation {operation_id}: the ledger would be {size} bytes with this entry "
                f"({sizes.json_bytes(entry)} bytes), over its share of the job item "
                f"({share} bytes)",
                error_code=sizes.ITEM_TOO_LARGE,
            )

    def _settle(self, operation_id: str, state: str, details: LedgerEntry) -> None:
        now = self._clock.now_ms()
        whole: LedgerEntry = {**(self.get(operation_id) or {}), **details}
        whole["state"], whole["settled_at"] = state, now
        entry, blobs, job = whole, self._store.blob_store(), self._attempt.job
        if blobs is not None:  # large receipts to the bucket first, under the epoch (LD16)
            others = {key: value for key, value in job.operations.items() if key != operation_id}
            kept = blobs.keep_entry(job.job_id, job.epoch, operation_id, whole, others)
            entry = cast(LedgerEntry, kept)
        self._within_budget(operation_id, entry)
        self._attempt.job = self._store.settle(job, operation_id, entry, now=now)
        self._whole[operation_id] = (self._attempt.job.operations.get(operation_id), whole)
        logger.info(
            f"operation {state}", extra=self._attempt.log_keys | {"operation_id": operation_id}
        )

    def confirm(
        self,
        operation_id: str,
        receipt: JsonObject,
        *,
        reconciled: bool,
        returned: str | None = None,
    ) -> None:
        """After the provider answered (or was asked afterwards): `confirmed`, with its receipt.
        `returned` (the SDK's own confirm): how the step's output is read back from the receipt
        if the worker dies before the checkpoint (`receipt` itself, or its `value`)."""
        details: LedgerEntry = {"receipt": receipt, "reconciled": reconciled}
        if returned is not None:
            details["returned"] = returned
        self._settle(operation_id, "confirmed", details)
        if reconciled:
            self._telemetry.count("EffectsReconciled")

    def note_output(self, operation_id: str, output: Any) -> None:
        """A step that confirmed its own operation returned `output`: kept with the entry, so a
        worker that dies before the checkpoint hands the next one the same output."""
        self._settle(operation_id, "confirmed", {"output": output})

    def fail(self, operation_id: str, error: dict[str, str]) -> None:
        """The provider refused it, and charged nothing: `failed`."""
        self._settle(operation_id, "failed", {"error": error})

    def release(self, operation_id: str, why: str) -> None:
        """Nothing reached the provider (the connection never opened): the entry is released and
        the next try calls again with the same key. `why` is kept up to 500 characters, as a
        failure's message is (the ledger's share holds twenty entries, decision LD17)."""
        error = {"code": "not_sent", "message": str(why)[:500]}
        self._settle(operation_id, "released", {"error": error})


@dataclass(frozen=True)
class LeaseKeeper:
    """What an attempt writes with while it holds the lease: the worker's fenced stores, its
    clock and counters, and its lease settings."""

    leases: LeaseStore
    ledger: LedgerStore
    clock: Clock
    telemetry: Telemetry
    lease: LeasePolicy
    heartbeat_every_ms: int


@dataclass(eq=False)
class Attempt:
    """One claimed attempt as this worker holds it, and the step running under it: the one
    runtime value of a running step. `leasehold.StepContext` (and its `Operation`) is the public
    view a kind's step gets of it. Calling it is the heartbeat tick (True: go on; False: stop
    now — the lease is gone, a cancel came, or the invocation is ending)."""

    job: Job
    kind: JobKind
    keeper: LeaseKeeper
    checkpoint: Checkpoint
    last_beat: int
    remaining_ms: RemainingMs | None
    plan: list[StepPlan] = field(default_factory=list)
    lease_lost: bool = False
    out_of_time: bool = False
    """The invocation ended (or is about to) while a plain step ran: it is handed back."""
    log_keys: dict[str, Any] = field(default_factory=dict)
    step_index: int = 0
    """The running step's position (set by `begin_step`)."""
    step_try: int = 1
    """How many times the running step has been tried, this one included."""
    ledger: OperationLedger = field(init=False)
    """The running step's view of the job's operation ledger (fenced writes)."""
    requests: StepRequests = field(default_factory=StepRequests)
    """What the running step asked for between it and the next (children, a wait)."""
    flows: Any = None
    """The worker's `service.workflows.Workflows`, for the step's requests."""

    def __post_init__(self) -> None:
        self.ledger = self._new_ledger()

    def _new_ledger(self) -> OperationLedger:
        keeper = self.keeper
        return OperationLedger(self, keeper.ledger, keeper.clock, keeper.telemetry)

    def begin_step(self, index: int, step_try: int) -> None:
        """Step `index` starts, on its try `step_try`, with a fresh view of the ledger."""
        self.step_index, self.step_try = index, step_try
        self.ledger = self._new_ledger()
        self.requests = StepRequests()

    # ------------------------------------------------------------------ the lease

    def heartbeat(self, now: int) -> None:
        """Extend the lease now (fenced): the item comes back, so a cancel is seen."""
        self.job = self.keeper.leases.heartbeat(
            self.job, now=now, lease_ms=self.keeper.lease.lease_ms
        )
        self.last_beat = now

    def __call__(self) -> bool:
        return self.tick()

    def tick(self) -> bool:
        """Heartbeat while a step runs; False tells the step to stop (lease lost or cancel). A
        heartbeat the store could not take is tried again at the next tick while the lease
        still holds — the step goes on; it is never counted as the step failing."""
        now, margin = self.now_ms(), self.safety_margin_ms
        if now - self.last_beat >= self.keeper.heartbeat_every_ms:
            try:
                self.heartbeat(now)
            except StaleEpochError as stale:
                # A late worker's heartbeat refused by the fence: a stale write like any other
                # (docs/architecture.md rule 3), counted and logged as one; the step stops.
                self.keeper.telemetry.count("StaleWritesRejected")
                logger.warning(
                    "stale write rejected",
                    extra=self.log_keys | {"write": "heartbeat", "detail": str(stale)},
                )
                self.lease_lost = True
                return False
            except StoreUnavailableError:
                self.keeper.telemetry.count("HeartbeatsFailed")
                logger.warning(
                    "heartbeat failed; retrying while the lease holds", extra=self.log_keys
                )
        if (self.job.lease_expires_at or 0) <= now + margin // 2:
            self.lease_lost = True
            return False
        if (
            self.remaining_ms is not None
            and not self.job.effect_intent  # an effect in flight runs to its end
            and self.remaining_ms() <= margin // 2
        ):
            # The invocation is ending under the step (Lambda's timeout is near; the local
            # stack's worker was asked to stop): stop now and hand the job back, attempt not
            # burned, rather than be killed holding the lease and spend it.
            self.out_of_time = True
            return False
        return not self.job.cancel_requested

    # ------------------------------------------------------------------ what a step reads

    @property
    def step_name(self) -> str:
        plan = self.plan
        return plan[self.step_index].name if self.step_index < len(plan) else ""

    def outputs_by_name(self) -> JsonObject:
        names = [step.name for step in self.plan]
        outputs = self.checkpoint.outputs
        return {names[i]: output for i, output in enumerate(outputs) if i < len(names)}

    def now_ms(self) -> int:
        return self.keeper.clock.now_ms()

    @property
    def large_values(self) -> bool:
        """Whether this engine keeps large values in a data bucket (an effect step may then
        return up to 10 MiB: its receipt goes to S3, decision LD16)."""
        return self.keeper.ledger.blob_store() is not None

    @property
    def progress(self) -> JsonObject | None:
        """The kind's progress as last saved (None before the first save)."""
        return self.job.kind_state

    def save_progress(self, state: JsonObject) -> None:
        """Save the kind's progress under the fence (a crash resumes from it). With a data
        bucket, progress over KIND_STATE_INLINE goes to S3 (the item keeps a reference) and up to
        10 MiB is saved; without one, progress over its share of the job item
        (leasehold.domain.sizes) is not saved. Either way, past the limit: FatalStepError
        (`item_too_large`), which ends the job `failed` unless the step catches it."""
        size = sizes.json_bytes(state)
        bucket = self.keeper.ledger.blob_store() is not None
        limit = sizes.BLOB_LIMIT if bucket else sizes.KIND_STATE_BUDGET
        if size > limit:
            where = "one stored value" if bucket else "its share of the job item"
            raise FatalStepError(
                f"step {self.step_index} ('{self.step_name}') saved {size} bytes of progress, "
                f"over {where} ({limit} bytes)",
                error_code=sizes.ITEM_TOO_LARGE,
            )
        self.job = self.keeper.leases.save_progress(
            self.job, state, now=self.now_ms(), lease_ms=self.keeper.lease.lease_ms
        )

    @property
    def safety_margin_ms(self) -> int:
        """What `remaining_ms` keeps back (the worker's lease safety margin)."""
        return self.keeper.lease.safety_margin_ms

    def lease_expires_at(self) -> int:
        return self.job.lease_expires_at or 0

    def deadline_at(self) -> int:
        return self.job.deadline_at

    def invocation_remaining_ms(self) -> int | None:
        """What is left of the invocation (None when the caller set no limit)."""
        return self.remaining_ms() if self.remaining_ms else None

    def time_left_ms(self) -> int:
        """The least of the lease, the deadline and the invocation, less the safety margin."""
        now = self.now_ms()
        left = [self.lease_expires_at() - now, self.deadline_at() - now]
        invocation = self.invocation_remaining_ms()
        if invocation is not None:
            left.append(invocation)
        return max(0, min(left) - self.safety_margin_ms)
