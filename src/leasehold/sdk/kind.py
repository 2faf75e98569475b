"""`Kind`: a job kind a user owns. Declare it at module level, register steps with
`@kind.step()`, and name the module in `LEASEHOLD_KINDS`; the engine finds it at cold start and
runs its jobs with every guarantee it gives its own (fenced claims, checkpoints after each step,
retries with backoff, budgets, approvals, the operation ledger for effects).

    shout = Kind("shout", schema={"type": "object", "required": ["text"]})

    @shout.step()
    def upper(ctx: StepContext, payload: dict) -> dict:
        return {"text": payload["text"].upper()}
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, overload

from aws_lambda_powertools import Logger

from leasehold.domain import sizes
from leasehold.domain.debounce import Debounce, checked_debounce
from leasehold.domain.errors import ANSWERED_ERRORS, LeaseholdError, ValidationError
from leasehold.domain.job import PRIORITIES, Owner, Priority
from leasehold.domain.limits import Limit, Rate, check_limits, check_rates, key_value
from leasehold.domain.policies import MAX_ATTEMPTS_LIMIT, MAX_PAYLOAD_BYTES, MAX_STEPS
from leasehold.domain.types import JsonObject, RawItem
from leasehold.domain.unique import Unique, checked_unique
from leasehold.domain.versions import is_fingerprint
from leasehold.sdk.context import JobInfo, StepContext
from leasehold.sdk.hooks import Checkpoint, Finished, Migration, Outcome, RelatedChange
from leasehold.service.kinds import StepPlan, step_list_of

logger = Logger(service="leasehold", child=True)

Capability = Literal["idempotent_key", "status_lookup", "none"]
CAPABILITIES: tuple[str, ...] = ("idempotent_key", "status_lookup", "none")
StepFunction = Callable[[StepContext, JsonObject], Any]
F = TypeVar("F", bound=Callable[..., Any])

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
MAX_PAYLOAD_LIMIT = sizes.UPLOAD_LIMIT
"""The most a kind may allow for its payload (32 MiB, decision LD7): up to 5 MiB it fits a
`POST /jobs` body, up to 10 MiB `submit_direct`/`job_writes`, beyond that a presigned upload
(`POST /uploads`, which `Client.submit` uses by itself)."""
MAX_OUTPUT_BYTES = sizes.OUTPUT_LIMIT
"""The largest effect step's output (compact UTF-8 JSON) in an engine without a data bucket, where
it is copied into the ledger on the job item; with one, any step's output may be 10 MiB
(sizes.BLOB_LIMIT, decisions LD2, LD16)."""
DEFAULT_STEP_TIMEOUT_SECONDS = 10.0


class KindDefinitionError(LeaseholdError, ValueError):
    """A kind declared wrongly (a bad name, a bad schema, two steps with one name…): raised
    where it is declared, so the function stops at cold start with a message that names it."""


@dataclass(frozen=True)
class Schedule:
    """A schedule declared on a kind: every tick of `expression` (`cron(…)` or `rate(…)`, in
    time zone `tz`) submits one job of the kind with `payload`; `missed` is what ticks the
    trigger reached more than one period late make (`skip` or `run_once`, docs/schedules.md).

    The sweeper creates it at its cold start if it does not exist, and deletes the kind's
    declared schedules that are no longer declared, so a deploy that changes the declaration
    replaces it. Its jobs belong to the reserved owner tenant `_kinds`, user = the kind's name
    (operators see them under /ops). A bad expression, zone or policy raises
    KindDefinitionError where it is declared."""

    expression: str
    tz: str = "UTC"
    payload: Mapping[str, Any] = field(default_factory=dict)
    missed: Literal["skip", "run_once"] = "skip"

    def __post_init__(self) -> None:
        from leasehold.domain.schedule import MissedTicks, parse_expression

        try:
            parse_expression(self.expression, self.tz)
            MissedTicks(self.missed)
        except (ValidationError, ValueError) as exc:
            raise KindDefinitionError(f"schedule {self.expression!r}: {exc}") from None
        if not isinstance(self.payload, Mapping):
            raise KindDefinitionError(f"schedule {self.expression!r}: payload must be a mapping")


@dataclass(frozen=True)
class Effect:
    """What an effect step does outside leasehold, and what its provider can tell afterwards.

    - `idempotent_key`: the provider deduplicates by key; after a lost answer the step runs
      again and sends the same `ctx.operation.key` (at most one charge).
    - `status_lookup`: the provider can be asked by key; after a lost answer the step runs
      again with `ctx.operation.recovering` True and should ask before sending.
    - `none`: nothing can be learnt; a lost answer makes the job `unknown` for an operator,
      never an automatic retry."""

    provider: str
    capability: Capability = "none"

    def __post_init__(self) -> None:
        if self.capability not in CAPABILITIES:
            raise KindDefinitionError(
                f"Effect capability {self.capability!r} must be one of {', '.join(CAPABILITIES)}"
            )
        if not self.provider or len(self.provider) > 64:
            raise KindDefinitionError("Effect provider must be a name of 1 to 64 characters")


@dataclass(frozen=True)
class Step:
    """One step of a kind: its function and what the engine must know before starting it.

    `cost` is charged to the job's budget before the step runs (a step that would pass
    `max_cost` stops the job `failed` / `budget_exhausted` without running). `approval=True`
    pauses the job in `waiting_approval` before the step, once. `timeout_seconds` is the
    longest the step may run: the engine starts it only when that much lease and invocation
    time is left (it must not exceed the deployment's `MaxStepSeconds`). `effect` marks an
    external side effect: an `Effect` opens an operation-ledger entry around the step; `True`
    records a bare intent (no provider to ask: a lost answer makes the job `unknown`)."""

    name: str
    run: StepFunction
    cost: int = 0
    approval: bool = False
    timeout_seconds: float = DEFAULT_STEP_TIMEOUT_SECONDS
    effect: Effect | bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not 1 <= len(self.name) <= 64:
            raise KindDefinitionError(f"step name {self.name!r} must be 1 to 64 characters")
        if isinstance(self.cost, bool) or not isinstance(self.cost, int) or self.cost < 0:
            raise KindDefinitionError(f"step '{self.name}': cost must be an integer >= 0")
        if (
            isinstance(self.timeout_seconds, bool)
            or not isinstance(self.timeout_seconds, int | float)
            or not 0 <= float(self.timeout_seconds) <= 900
        ):
            raise KindDefinitionError(f"step '{self.name}': timeout_seconds must be 0 to 900")
        if not callable(self.run):
            raise KindDefinitionError(f"step '{self.name}': run must be callable")


@dataclass
class _Hooks:
    checks: list[Callable[[JsonObject, Owner], None]] = field(default_factory=list)
    planner: Callable[[JsonObject], Sequence[Step]] | None = None
    result: Callable[[Finished], Any] | None = None
    outcome_writes: Callable[[Outcome], list[RawItem]] | None = None
    related_changed: Callable[[RelatedChange], tuple[str, str]] | None = None
    view: Callable[[JobInfo], Mapping[str, Any]] | None = None
    related: Callable[[JobInfo], Mapping[str, Any]] | None = None


class Kind:
    """A job kind: a name, an optional JSON Schema for its payload, and steps that run in order
    with a checkpoint after each.

    - `schema`: JSON Schema (draft-07) checked at `POST /jobs`; a payload that does not match is
      a 400 naming the field.
    - `max_attempts`: this kind's default (a request may still ask for 1–10).
    - `submittable=False`: the kind is made only by an application's own routes (through
      `job_writes`), never by `POST /jobs` (an unknown kind to callers).
    - `max_payload_bytes`: the largest payload accepted (16 KiB by default, 32 MiB at most:
      past the API's 5 MiB body, `Client.submit` uploads it first, decision LD7).
    - `operators_see_payload`: show the payload in the operator view (off: a payload is the
      caller's content).
    - `concurrency`: `[Limit(key="tenant", max=2), …]` — at most `max` of this kind's jobs
      running per value of each key (`user`, `tenant`, `kind`, `payload.<field>`); a job over
      a limit waits `queued` (`waiting_for: {"concurrency": "tenant:acme"}`), it does not
      fail. Left out (None), the deployment's per-user limit applies, as to every kind that
      declares nothing; `[]` runs the kind's jobs without any limit.
    - `rate`: `[Rate(key="tenant", limit=5, per_seconds=1), …]` — at most `limit` starts of
      this kind's jobs per `per_seconds` per key value; a job over it waits `queued`
      (`waiting_for: {"rate": "tenant:acme"}`) until its next start is due.
    - `unique`: `Unique(by=["payload.account"], period_seconds=3600)` — a second job with the
      same key within the window is not created; the first one answers (docs/sdk.md).
    - `priority`: `"high"`, `"normal"` (the default) or `"low"` — the priority of this kind's
      jobs when a request names none. Each priority has its own queue and workers: a high job
      does not wait behind a normal backlog, and a low job is never starved.
    - `migrations`: `{old_fingerprint: fn}` — after a deploy that changed the steps a job had
      already done, `fn(Checkpoint) -> Checkpoint` maps the job's checkpoint under the old
      list (`Kind.fingerprint()` before the change) onto this one; without one such a job
      stops `failed` / `kind_changed` (docs/sdk.md, "Changing a kind's steps").
    - `debounce`: a `Debounce(...)`: submissions with one key run once, as one job (docs/sdk.md).

    Unless a `result` hook says otherwise, the job's result is the last step's output."""

    def __init__(
        self,
        name: str,
        *,
        schema: Mapping[str, Any] | None = None,
        max_attempts: int | None = None,
        submittable: bool = True,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        operators_see_payload: bool = False,
        concurrency: Sequence[Limit] | None = None,
        rate: Sequence[Rate] | None = None,
        schedules: Sequence[Schedule] = (),
        priority: Priority = "normal",
        migrations: Mapping[str, Migration] | None = None,
        debounce: Debounce | None = None,
        unique: Unique | None = None,
    ) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise KindDefinitionError(
                f"kind name {name!r} must be 1 to 64 of a-z, 0-9 and _, starting with a letter"
            )
        self.name = name
        if max_attempts is not None and not (
            isinstance(max_attempts, int) and 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT
        ):
            raise KindDefinitionError(
                f"kind '{name}': max_attempts must be 1 to {MAX_ATTEMPTS_LIMIT}"
            )
        self.default_max_attempts = max_attempts
        if priority not in PRIORITIES:
            raise KindDefinitionError(
                f"kind '{name}': priority must be one of high, normal, low (not {priority!r})"
            )
        self.default_priority = priority
        if not isinstance(submittable, bool) or not isinstance(operators_see_payload, bool):
            raise KindDefinitionError(
                f"kind '{name}': submittable and operators_see_payload are True or False"
            )
        if (
            isinstance(max_payload_bytes, bool)
            or not isinstance(max_payload_bytes, int)
            or not 1 <= max_payload_bytes <= MAX_PAYLOAD_LIMIT
        ):
            raise KindDefinitionError(
                f"kind '{name}': max_payload_bytes must be an integer 1 to {MAX_PAYLOAD_LIMIT}"
            )
        try:
            self.concurrency: tuple[Limit, ...] | None = (
                None if concurrency is None else check_limits(concurrency)
            )
            self.rate: tuple[Rate, ...] = check_rates(rate or ())
            self.debounce: Debounce | None = checked_debounce(debounce)
            self.unique: Unique | None = checked_unique(unique)
        except (TypeError, ValueError) as exc:
            raise KindDefinitionError(f"kind '{name}': {exc}") from exc
        self.submittable = submittable
        self.max_payload_bytes = max_payload_bytes
        self.operators_see_payload = operators_see_payload
        self.schema = dict(schema) if schema is not None else None
        self._validate_schema = _compile_schema(name, self.schema)
        if not all(isinstance(declared, Schedule) for declared in schedules):
            raise KindDefinitionError(f"kind '{name}': schedules are leasehold.Schedule(...)")
        if schedules and not submittable:
            raise KindDefinitionError(f"kind '{name}': only a submittable kind has schedules")
        self.schedules: tuple[Schedule, ...] = tuple(schedules)
        """The schedules declared on the kind (created by the sweeper at its cold start)."""
        self.migrations: dict[str, Migration] = _check_migrations(name, migrations)
        """How a job checkpointed under an older step list (by its fingerprint) goes on under
        this one (kind versions, docs/sdk.md)."""
        self._steps: list[Step] = []
        self._hooks = _Hooks()

    def __repr__(self) -> str:
        return f"Kind({self.name!r}, steps={[step.name for step in self._steps]})"

    # ----------------------------------------------------------------- declaring

    @property
    def steps(self) -> tuple[Step, ...]:
        """The declared steps, in order (empty for a kind that plans its steps per payload)."""
        return tuple(self._steps)

    @property
    def has_steps(self) -> bool:
        """Whether the kind can run anything: declared steps or a planner."""
        return bool(self._steps) or self._hooks.planner is not None

    @overload
    def step(self, name: F, /) -> F: ...

    @overload
    def step(
        self,
        name: str | None = None,
        *,
        cost: int = 0,
        approval: bool = False,
        timeout_seconds: float = DEFAULT_STEP_TIMEOUT_SECONDS,
        effect: Effect | bool | None = None,
    ) -> Callable[[F], F]: ...

    def step(
        self,
        name: str | F | None = None,
        *,
        cost: int = 0,
        approval: bool = False,
        timeout_seconds: float = DEFAULT_STEP_TIMEOUT_SECONDS,
        effect: Effect | bool | None = None,
    ) -> Callable[[F], F] | F:
        """Register the decorated function `fn(ctx, payload) -> JSON` as the next step
        (`@kind.step()` or bare `@kind.step`). Its return value is saved in the checkpoint
        and read by later steps as `ctx.outputs[name]` (the name defaults to the function's)."""
        if callable(name):  # used bare: @kind.step
            return self.step()(name)

        def register(fn: F) -> F:
            step = Step(
                name or fn.__name__,
                fn,
                cost=cost,
                approval=approval,
                timeout_seconds=timeout_seconds,
                effect=effect,
            )
            if self._hooks.planner is not None:
                raise KindDefinitionError(f"kind '{self.name}' plans its steps: no @step too")
            if any(existing.name == step.name for existing in self._steps):
                raise KindDefinitionError(f"kind '{self.name}' has two steps named '{step.name}'")
            if len(self._steps) >= MAX_STEPS:
                raise KindDefinitionError(f"kind '{self.name}' has more than {MAX_STEPS} steps")
            self._steps.append(step)
            return fn

        return register

    def planner(
        self, fn: Callable[[JsonObject], Sequence[Step]]
    ) -> Callable[[JsonObject], Sequence[Step]]:
        """For a kind whose steps depend on the payload: `fn(payload)` returns the `Step`s
        (1 to 20, the same list for the same payload every time it is called)."""
        if self._steps:
            raise KindDefinitionError(f"kind '{self.name}' declares steps: no planner too")
        self._hooks.planner = fn
        return fn

    def check(self, fn: Callable[[JsonObject, Owner], None]) -> Callable[[JsonObject, Owner], None]:
        """An accept-time check beside the schema: `fn(payload, owner)` raises
        `ValidationError` (a 400) for a payload that can never run."""
        self._hooks.checks.append(fn)
        return fn

    def result(self, fn: Callable[[Finished], Any]) -> Callable[[Finished], Any]:
        """Compute the job's result from every step's output (default: the last one's)."""
        self._hooks.result = fn
        return fn

    def outcome_writes(
        self, fn: Callable[[Outcome], list[RawItem]]
    ) -> Callable[[Outcome], list[RawItem]]:
        """`fn(outcome)` returns DynamoDB `TransactWriteItems` entries that must commit with the
        job's outcome, or not at all (each with its own condition). When one's condition fails,
        nothing is written and the `on_related_changed` hook says how the job ends."""
        self._hooks.outcome_writes = fn
        return fn

    def on_related_changed(
        self, fn: Callable[[RelatedChange], tuple[str, str]]
    ) -> Callable[[RelatedChange], tuple[str, str]]:
        """`fn(change)` returns `(stop_reason, message)`: the job ends `cancelled` with them."""
        self._hooks.related_changed = fn
        return fn

    def view(
        self, fn: Callable[[JobInfo], Mapping[str, Any]]
    ) -> Callable[[JobInfo], Mapping[str, Any]]:
        """Extra fields for the job view (small, never the caller's content)."""
        self._hooks.view = fn
        return fn

    def related(
        self, fn: Callable[[JobInfo], Mapping[str, Any]]
    ) -> Callable[[JobInfo], Mapping[str, Any]]:
        """What the job belongs to, for operators (`{"bookmark_id": …}`)."""
        self._hooks.related = fn
        return fn

    # ----------------------------------------------------------------- the engine's side

    def steps_for(self, payload: JsonObject) -> list[Step]:
        """The steps a job of this payload runs."""
        if self._hooks.planner is None:
            return list(self._steps)
        steps = list(self._hooks.planner(payload))
        if not 1 <= len(steps) <= MAX_STEPS:
            raise ValidationError(f"kind '{self.name}' planned {len(steps)} steps (1–{MAX_STEPS})")
        return steps

    def validate_for(self, payload: JsonObject, owner: Owner) -> None:
        """Run the accept-time checks (the schema, then each `check`) as `POST /jobs` and
        `job_writes` do: `ValidationError` (a 400 naming the field) when the payload can
        never run."""
        if self._validate_schema is not None:
            _check_schema(self._validate_schema, payload)
        for limit in (*(self.concurrency or ()), *(Limit(r.key, 1) for r in self.rate)):
            if limit.payload_field is not None:  # the field its limit is counted by
                key_value(limit, self.name, owner, payload)
        for check in self._hooks.checks:
            try:
                check(payload, owner)
            except ANSWERED_ERRORS:
                raise  # a ValidationError is the check's answer (a 400); a store error is 503
            except Exception as failed:  # a check's own bug must not be a 500 (decision U3)
                logger.exception("check raised", extra={"kind": self.name})
                raise ValidationError(
                    f"kind '{self.name}' could not check this payload: its check "
                    f"{getattr(check, '__name__', 'check')!r} raised {type(failed).__name__}",
                    code="check_failed",
                ) from failed

    def plan(self, payload: JsonObject) -> list[StepPlan]:
        """What the engine knows of each step before starting it (name, cost, timeout,
        approval, bare effect), for a job of this payload."""
        return [_plan_of(step) for step in self.steps_for(payload)]

    def fingerprint(self, payload: Mapping[str, Any] | None = None) -> str:
        """The fingerprint of the step list a job of `payload` records (12 hex characters): the
        steps' names, order, approvals and effects — not their code, cost or timeout. A kind
        with a planner needs the payload; one with declared steps has one fingerprint. Note it
        before changing the steps, to declare a migration from it."""
        return step_list_of(self.plan(dict(payload or {}))).fingerprint


def _plan_of(step: Step) -> StepPlan:
    return StepPlan(
        name=step.name,
        cost=step.cost,
        duration_ms=round(float(step.timeout_seconds) * 1000),
        needs_approval=step.approval,
        has_effect=step.effect is True,
        effect_id=(
            f"{step.effect.provider}/{step.effect.capability}"
            if isinstance(step.effect, Effect)
            else None
        ),
    )


def _check_migrations(
    name: str, migrations: Mapping[str, Migration] | None
) -> dict[str, Migration]:
    if migrations is None:
        return {}
    if not isinstance(migrations, Mapping):
        raise KindDefinitionError(f"kind '{name}': migrations is a mapping fingerprint -> fn")
    for fingerprint, migrate in migrations.items():
        if not is_fingerprint(fingerprint):
            raise KindDefinitionError(
                f"kind '{name}': migration key {fingerprint!r} is not a fingerprint (12 hex "
                "characters, as Kind.fingerprint() gives)"
            )
        if not callable(migrate):
            raise KindDefinitionError(
                f"kind '{name}': migration from {fingerprint} is not callable"
            )
    return dict(migrations)


def _compile_schema(name: str, schema: JsonObject | None) -> Callable[[Any], Any] | None:
    if schema is None:
        return None
    import fastjsonschema

    try:
        json.dumps(schema)
        return fastjsonschema.compile(schema)
    except (TypeError, ValueError, re.error, fastjsonschema.JsonSchemaDefinitionException) as exc:
        raise KindDefinitionError(f"kind '{name}' has a bad schema: {exc}") from exc


def _check_schema(validate: Callable[[Any], Any], payload: JsonObject) -> None:
    import fastjsonschema

    try:
        validate(payload)
    except fastjsonschema.JsonSchemaValueException as refused:
        where = (refused.name or "data").replace("data", "payload", 1)
        message = str(refused.message).replace("data", "payload", 1)
        raise ValidationError(f"'{where}': {message}", code="invalid_request") from refused
    except (ArithmeticError, ValueError, TypeError, RecursionError) as broken:
        # The compiled check itself failed on the caller's value (`multipleOf` on 1e400 or a
        # 400-digit integer overflows a float): the payload cannot be checked, so it is refused.
        raise ValidationError(
            "'payload' cannot be checked against the kind's schema (a number too large?)",
            code="invalid_request",
        ) from broken


__all__ = [
    "CAPABILITIES",
    "Capability",
    "Checkpoint",
    "Effect",
    "Finished",
    "Kind",
    "KindDefinitionError",
    "Migration",
    "Outcome",
    "RelatedChange",
    "Step",
    "StepFunction",
]
