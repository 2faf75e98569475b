"""The engine's contract with a kind, in one room: what the worker knows of a step before it
starts it (`StepPlan`), the shape of a kind as the engine runs it (`JobKind`), the attempt a
worker holds (`Attempt`) and what it tells the queue (`WakeupResult`), and what a running step
may ask of the engine (`StepRuntime`, with its fenced `OperationLedger`). They refer to each
other, so they live together rather than in modules that would import each other.

Users never implement `JobKind`: `leasehold.Kind` (sdk/kind.py) does, from the steps and hooks a
user declares, and `leasehold.StepContext` is the public view of a `StepRuntime`. This module is
the engine's side of that contract and may change.

Every ledger write is fenced like any worker write (arch §6), so a worker that lost its lease
can neither open nor settle an operation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, cast

from aws_lambda_powertools import Logger

from leasehold.domain import sizes
from leasehold.domain.clock import Clock
from leasehold.domain.errors import FatalStepError
from leasehold.domain.job import Checkpoint, Job
from leasehold.domain.limits import Limit, Rate
from leasehold.domain.records import EffectIntent, LedgerEntry
from leasehold.domain.versions import StepList, step_digest
from leasehold.service.telemetry import Telemetry
from leasehold.store.leases import LedgerStore

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


Migrate = Callable[[str, Checkpoint, dict[str, Any]], Checkpoint | None]
"""A kind's migration hook (`JobKind.migrate`): the checkpoint mapped from the list of this
fingerprint onto the kind's current one; None when the kind declares none for it. Raises
ValueError naming what is wrong with a migration that raised or returned a bad checkpoint."""


class JobKind(Protocol):
    name: str
    max_payload_bytes: int
    """The largest payload (UTF-8 JSON) this kind accepts (arch §3.8: 16 KiB by default)."""
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
    declared_schedules: tuple[DeclaredSchedule, ...]
    """The schedules declared on the kind, created by the sweeper at its cold start."""

    def validate_for(self, payload: dict[str, Any], owner: Owner) -> None:
        """What the API calls at accept: raise ValidationError for a payload that can never run
        (including rules that depend on who submits)."""

    def plan(self, payload: dict[str, Any]) -> list[StepPlan]:
        """The steps of a job, known up front (≤ 20, arch §3.8)."""

    def run_step(self, payload: dict[str, Any], index: int, attempt: int, ctx: StepRuntime) -> Any:
        """Run step `index` on try `attempt`; `ctx()` heartbeats and says whether to stop."""

    def result(self, job: Job, checkpoint: Checkpoint) -> Any:
        """The job's visible result once every step ran."""

    def outcome_writes(
        self, job: Job, target: JobState, result: Any, error: dict[str, str] | None, now: int
    ) -> list[dict[str, Any]]:
        """Transaction items that must commit with this outcome, or not at all."""

    def when_related_changed(
        self, job: Job, changed: RelatedItemChangedError
    ) -> tuple[str, dict[str, str]]:
        """How the job ends (`cancelled`, with this stop reason and error) when an outcome
        write's item moved."""

    def view_fields(self, job: Job) -> dict[str, Any]:
        """Fields the kind adds to the job view (an agent's progress); {} for most kinds."""

    def related(self, job: Job) -> dict[str, Any]:
        """What the job belongs to, for operators (the reading list: `bookmark_id`)."""

    def migrate(
        self, fingerprint: str, checkpoint: Checkpoint, payload: dict[str, Any]
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


@dataclass
class Attempt:
    """One claimed attempt as this worker last saw it."""

    job: Job
    kind: JobKind
    plan: list[StepPlan]
    checkpoint: Checkpoint
    last_beat: int
    remaining_ms: RemainingMs | None
    lease_lost: bool = False
    out_of_time: bool = False
    """The invocation ended (or is about to) while a plain step ran: it is handed back."""
    log_keys: dict[str, Any] = field(default_factory=dict)


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

    def get(self, operation_id: str) -> LedgerEntry | None:
        entry = self._attempt.job.operations.get(operation_id)
        return cast(LedgerEntry, entry) if entry is not None else None

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
        ends as any failed effect step does — the receipt was not recorded."""
        ledger = {**self._attempt.job.operations, operation_id: entry}
        size = sizes.json_bytes(ledger)
        if size > sizes.LEDGER_BUDGET:
            raise FatalStepError(
                f"operation {operation_id}: the ledger would be {size} bytes with this entry "
                f"({sizes.json_bytes(entry)} bytes), over its share of the job item "
                f"({sizes.LEDGER_BUDGET} bytes)",
                error_code=sizes.ITEM_TOO_LARGE,
            )

    def _settle(self, operation_id: str, state: str, details: LedgerEntry) -> None:
        now = self._clock.now_ms()
        entry: LedgerEntry = {**(self.get(operation_id) or {}), **details}
        entry["state"], entry["settled_at"] = state, now
        self._within_budget(operation_id, entry)
        self._attempt.job = self._store.settle(self._attempt.job, operation_id, entry, now=now)
        logger.info(
            f"operation {state}", extra=self._attempt.log_keys | {"operation_id": operation_id}
        )

    def confirm(
        self,
        operation_id: str,
        receipt: dict[str, Any],
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
        the next try calls again with the same key."""
        self._settle(operation_id, "released", {"error": {"code": "not_sent", "message": why}})


class StepRuntime:
    """The engine's side of one running step: what `leasehold.StepContext` (the public view)
    reads and asks. Calling it is the heartbeat tick (True: go on; False: stop now — the lease
    is gone or a cancel came)."""

    def __init__(
        self,
        attempt: Attempt,
        tick: Callable[[], bool],
        ledger: OperationLedger,
        clock: Clock,
        telemetry: Telemetry,
        save: Callable[[Job, dict[str, Any]], Job] | None = None,
        *,
        step_index: int = 0,
        step_try: int = 1,
        safety_margin_ms: int = 0,
    ) -> None:
        self._attempt = attempt
        self._tick = tick
        self._save = save or (lambda job, state: job)
        self.ledger = ledger
        self._clock = clock
        self._telemetry = telemetry
        self.step_index = step_index
        self.step_try = step_try
        self._margin = safety_margin_ms

    def __call__(self) -> bool:
        return self._tick()

    def tick(self) -> bool:
        return self._tick()

    @property
    def job(self) -> Job:
        return self._attempt.job

    @property
    def step_name(self) -> str:
        plan = self._attempt.plan
        return plan[self.step_index].name if self.step_index < len(plan) else ""

    def outputs_by_name(self) -> dict[str, Any]:
        names = [step.name for step in self._attempt.plan]
        outputs = self._attempt.checkpoint.outputs
        return {names[i]: output for i, output in enumerate(outputs) if i < len(names)}

    @property
    def log_keys(self) -> dict[str, Any]:
        return self._attempt.log_keys

    def now_ms(self) -> int:
        return self._clock.now_ms()

    @property
    def progress(self) -> dict[str, Any] | None:
        """The kind's progress as last saved (None before the first save)."""
        return self._attempt.job.kind_state

    def save_progress(self, state: dict[str, Any]) -> None:
        """Save the kind's progress under the fence (a crash resumes from it). Progress over
        its share of the job item (leasehold.domain.sizes) is not saved: FatalStepError
        (`item_too_large`), which ends the job `failed` unless the step catches it."""
        size = sizes.json_bytes(state)
        if size > sizes.KIND_STATE_BUDGET:
            raise FatalStepError(
                f"step {self.step_index} ('{self.step_name}') saved {size} bytes of progress, "
                f"over its share of the job item ({sizes.KIND_STATE_BUDGET} bytes)",
                error_code=sizes.ITEM_TOO_LARGE,
            )
        self._attempt.job = self._save(self._attempt.job, state)

    @property
    def safety_margin_ms(self) -> int:
        """What `remaining_ms` keeps back (the worker's lease safety margin)."""
        return self._margin

    def lease_expires_at(self) -> int:
        return self._attempt.job.lease_expires_at or 0

    def deadline_at(self) -> int:
        return self._attempt.job.deadline_at

    def invocation_remaining_ms(self) -> int | None:
        """What is left of the invocation (None when the caller set no limit)."""
        return self._attempt.remaining_ms() if self._attempt.remaining_ms else None

    def remaining_ms(self) -> int:
        """The least of the lease, the deadline and the invocation, less the safety margin."""
        now = self._clock.now_ms()
        left = [self.lease_expires_at() - now, self.deadline_at() - now]
        invocation = self.invocation_remaining_ms()
        if invocation is not None:
            left.append(invocation)
        return max(0, min(left) - self._margin)
