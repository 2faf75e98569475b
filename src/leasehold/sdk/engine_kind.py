"""The engine's view of a `Kind` (`EngineKind`): the calls the worker and the API make —
plan, run a step, compute the result, the outcome writes and view hooks — kept apart from the
names a user declares a kind with, so either can change without the other. An `Effect` step's
operation is opened before the step runs and confirmed with what it returned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from leasehold.domain import sizes
from leasehold.domain.errors import FatalStepError, StepError, ValidationError
from leasehold.domain.job import Checkpoint as SavedCheckpoint
from leasehold.domain.job import Owner
from leasehold.domain.records import LedgerEntry
from leasehold.domain.storable import (
    OUTPUT_NOT_JSON,
    OUTPUT_TOO_LARGE,
    NotStorableError,
    storable_json,
)
from leasehold.domain.types import JsonObject, RawItem
from leasehold.sdk.context import JobInfo, Operation, StepContext
from leasehold.sdk.errors import FatalError
from leasehold.sdk.kind import (
    MAX_OUTPUT_BYTES,
    Checkpoint,
    Effect,
    Finished,
    Kind,
    Outcome,
    RelatedChange,
    Step,
)

if TYPE_CHECKING:
    from leasehold.domain.errors import RelatedItemChangedError
    from leasehold.domain.job import Job
    from leasehold.domain.states import JobState
    from leasehold.service.kinds import Attempt, DeclaredSchedule, StepPlan


class EngineKind:
    """The engine's view of a `Kind` (service/kinds.JobKind): the names the worker and the
    API call, kept apart from the names a user declares with."""

    def __init__(self, kind: Kind, *, max_step_ms: int | None = None) -> None:
        self.kind = kind
        self.max_step_ms = max_step_ms
        """The deployment's longest step: a planned step longer than it is refused."""
        self.name = kind.name
        self.max_payload_bytes = kind.max_payload_bytes
        self.submittable = kind.submittable
        self.default_max_attempts = kind.default_max_attempts
        self.default_priority = kind.default_priority
        """The priority of this kind's jobs when a request names none (decision F4)."""
        self.operators_see_payload = kind.operators_see_payload
        self.concurrency = kind.concurrency
        """The kind's declared concurrency limits (None: the per-user default, decision F2)."""
        self.rate = kind.rate
        """The kind's declared rates (decision F3)."""
        self.unique = kind.unique
        """The kind's unique jobs rule (decision UQ1), None for none."""
        self.declared_schedules: tuple[DeclaredSchedule, ...] = kind.schedules
        self.debounce = kind.debounce
        """The kind's declared debounce (decisions DB1–DB6), or None."""

    def validate_for(self, payload: JsonObject, owner: Owner) -> None:
        self.kind.validate_for(payload, owner)

    def plan(self, payload: JsonObject) -> list[StepPlan]:
        plan = self.kind.plan(payload)
        if self.max_step_ms is not None:
            for step in plan:
                if step.duration_ms > self.max_step_ms:
                    raise ValidationError(
                        f"kind '{self.name}' step '{step.name}' may run {step.duration_ms} ms, "
                        f"over the deployment's longest step ({self.max_step_ms} ms)"
                    )
        return plan

    def run_step(self, payload: JsonObject, index: int, attempt: int, ctx: Attempt) -> Any:
        step = self.kind.steps_for(payload)[index]
        operation = _open_operation(step, index, ctx)
        if isinstance(operation, _Confirmed):
            return operation.output  # a crash came after the confirm: the step is done
        context = StepContext(ctx, operation)
        try:
            output = step.run(context, payload)
        except StepError as failed:
            if operation is not None and failed.effect_settled and operation.state == "submitted":
                if isinstance(failed, FatalStepError):
                    operation.fail(failed.error_code, str(failed))
                else:
                    operation.release(str(failed))
            raise
        try:
            # One rule for plain and effect steps (decision U1, domain/storable.py): JSON that the
            # store and every client keep exactly — no NaN, no lone surrogate, no int key, no
            # 39-digit integer — checked here, before any of it is written.
            encoded = storable_json(output, f"step '{step.name}' output")
        except NotStorableError as exc:
            raise FatalError(
                f"{exc}: the step's output cannot be stored",
                code=OUTPUT_NOT_JSON,
                effect_settled=operation is None,
            ) from exc
        if isinstance(output, dict) and set(output) == {"$blob"}:  # the engine's reference
            raise FatalError(
                f"step '{step.name}' returned an object whose only key is '$blob': that shape "
                "is the engine's reference to stored data (DESIGN §20); wrap it",
                code=OUTPUT_NOT_JSON,
                effect_settled=operation is None,
            )
        inline_only = operation is not None and not ctx.large_values
        limit = MAX_OUTPUT_BYTES if inline_only else sizes.BLOB_LIMIT
        if len(encoded.encode()) > limit:
            # An effect step's output is copied into the ledger: on the job item without a
            # data bucket (its budget: leasehold.domain.sizes), else to S3 when large like any
            # other output (DESIGN §20, LD3, LD16).
            raise FatalError(
                f"step '{step.name}' returned {len(encoded.encode())} bytes of JSON, over {limit}",
                code=OUTPUT_TOO_LARGE,
                effect_settled=operation is None,
            )
        if operation is not None:
            if operation.state == "submitted":
                wrapped = not isinstance(output, dict)
                ctx.ledger.confirm(
                    operation.operation_id,
                    {"value": output} if wrapped else output,
                    reconciled=operation.recovering,
                    returned="value" if wrapped else "receipt",
                )
            elif operation.state == "confirmed":
                ctx.ledger.note_output(operation.operation_id, output)  # the step confirmed it
        return output

    def migrate(
        self, fingerprint: str, checkpoint: SavedCheckpoint, payload: JsonObject
    ) -> SavedCheckpoint | None:
        """The kind's migration from the step list of `fingerprint` applied to a job's saved
        checkpoint (service/versions.py); None when the kind declares none from it. A migration
        that raises or returns something else than a `Checkpoint` is a ValueError naming it."""
        migration = self.kind.migrations.get(fingerprint)
        if migration is None:
            return None
        where = f"the migration from steps {fingerprint} of kind '{self.name}'"
        try:
            mapped = migration(
                Checkpoint(next_step=checkpoint.next_step, outputs=tuple(checkpoint.outputs))
            )
        except Exception as failed:  # the user's code: said once, never retried
            raise ValueError(f"{where} raised {type(failed).__name__}") from failed
        if (
            not isinstance(mapped, Checkpoint)
            or isinstance(mapped.next_step, bool)
            or not isinstance(mapped.next_step, int)
            or not isinstance(mapped.outputs, tuple | list)
        ):
            raise ValueError(
                f"{where} returned {type(mapped).__name__}, not a leasehold.Checkpoint"
            )
        return SavedCheckpoint(next_step=mapped.next_step, outputs=list(mapped.outputs))

    def result(self, job: Job, checkpoint: SavedCheckpoint) -> Any:
        hooks = self.kind._hooks  # noqa: SLF001 - the engine's side of the same declaration
        outputs = list(checkpoint.outputs)
        if hooks.result is None:
            return outputs[-1] if outputs else None
        names = [step.name for step in self.kind.steps_for(job.payload)]
        return hooks.result(
            Finished(
                job=JobInfo.of(job),
                outputs={names[i]: out for i, out in enumerate(outputs) if i < len(names)},
                output_list=outputs,
                cost_used=checkpoint.cost_used,
                steps_completed=checkpoint.steps_used,
            )
        )

    def outcome_writes(
        self, job: Job, target: JobState, result: Any, error: dict[str, str] | None, now: int
    ) -> list[RawItem]:
        hook = self.kind._hooks.outcome_writes  # noqa: SLF001
        if hook is None:
            return []
        return hook(Outcome(JobInfo.of(job), str(target), result, error, now))

    def when_related_changed(
        self, job: Job, changed: RelatedItemChangedError
    ) -> tuple[str, dict[str, str]]:
        hook = self.kind._hooks.related_changed  # noqa: SLF001
        if hook is None:
            raise changed  # a kind with no outcome writes never meets one
        old = changed.old_item if isinstance(changed.old_item, dict) else None
        reason, message = hook(RelatedChange(JobInfo.of(job), changed.index, old))
        return reason, {"code": reason, "message": message}

    def view_fields(self, job: Job) -> JsonObject:
        hook = self.kind._hooks.view  # noqa: SLF001
        return dict(hook(JobInfo.of(job))) if hook else {}

    def related(self, job: Job) -> JsonObject:
        hook = self.kind._hooks.related  # noqa: SLF001
        return dict(hook(JobInfo.of(job))) if hook else {}


@dataclass(frozen=True)
class _Confirmed:
    output: Any


def _open_operation(step: Step, index: int, ctx: Attempt) -> Operation | _Confirmed | None:
    """An `Effect` step's ledger entry, opened (`submitted`) before the step runs unless an
    earlier try opened it (then `recovering`) or confirmed it (then the step is not run)."""
    if not isinstance(step.effect, Effect):
        return None
    operation_id = f"{ctx.job.job_id}:{index}"
    entry = ctx.ledger.get(operation_id)
    state = (entry or {}).get("state")
    if state == "confirmed":
        return _Confirmed(_output_of(entry or {}))
    operation = Operation(
        ctx,
        operation_id,
        step.effect.provider,
        step.effect.capability,
        recovering=state == "submitted",
    )
    if entry is None or state == "released":
        operation.open({"job": ctx.job.job_id, "step": index})
    return operation


def _output_of(entry: LedgerEntry) -> Any:
    """The output a confirmed operation's step returned, as it was kept with the entry."""
    if "output" in entry:
        return entry["output"]
    receipt = entry.get("receipt")
    if entry.get("returned") == "value" and isinstance(receipt, dict):
        return receipt.get("value")
    return receipt


__all__ = ["EngineKind"]
