"""What a running step sees: `StepContext` and its `Operation` (the ledger entry of an effect
step). Both are thin, typed views over the worker's own attempt: every write they make (a
heartbeat, progress, an operation) is fenced by the job's epoch and lease like any worker write,
so a worker that lost its lease can neither save progress nor open or settle an operation."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from aws_lambda_powertools import Logger

from leasehold.domain.errors import FatalStepError, bounded_code
from leasehold.domain.job import Owner
from leasehold.domain.options import JobOptions
from leasehold.domain.storable import NotStorableError, check_storable
from leasehold.domain.waits import ChildView, SignalWait, at_ms
from leasehold.sdk.errors import FatalError

if TYPE_CHECKING:
    from leasehold.domain.job import Job
    from leasehold.service.kinds import Attempt

_logger = Logger(service="leasehold", child=True)


@dataclass(frozen=True)
class JobInfo:
    """A read-only picture of a job, handed to a kind's hooks (result, outcome writes, view)."""

    job_id: str
    kind: str
    owner: Owner
    payload: Mapping[str, Any]
    attempts: int
    epoch: int
    progress: Mapping[str, Any] | None
    """What the kind last saved with `StepContext.save_progress` (None before any save)."""

    @staticmethod
    def of(job: Job) -> JobInfo:
        """The picture of an engine job (the engine makes these; a kind only reads them)."""
        return JobInfo(
            job_id=job.job_id,
            kind=job.kind,
            owner=job.owner,
            payload=job.payload,
            attempts=job.attempts,
            epoch=job.epoch,
            progress=job.kind_state,
        )


class StepLogger:
    """A logger bound to the job: every line carries `job_id`, `epoch`, `attempt`, the step and,
    in an effect step, `operation_id`. Extra keyword arguments become fields of the line."""

    def __init__(self, keys: Mapping[str, Any]) -> None:
        self._keys = dict(keys)

    @property
    def keys(self) -> Mapping[str, Any]:
        """The fields every line of this logger carries."""
        return dict(self._keys)

    def debug(self, message: str, **fields: Any) -> None:
        """Log at DEBUG with the job's fields."""
        _logger.debug(message, extra=self._keys | fields)

    def info(self, message: str, **fields: Any) -> None:
        """Log at INFO with the job's fields."""
        _logger.info(message, extra=self._keys | fields)

    def warning(self, message: str, **fields: Any) -> None:
        """Log at WARNING with the job's fields."""
        _logger.warning(message, extra=self._keys | fields)

    def error(self, message: str, **fields: Any) -> None:
        """Log at ERROR with the job's fields (no traceback: a job's error is data, not a bug)."""
        _logger.error(message, extra=self._keys | fields)


class Operation:
    """The operation-ledger entry of one effect step (a charge, an e-mail, a provider call).

    Its `operation_id` and `key` are stable across attempts, workers and operator replays of the
    same work (`<job id>:<step index>`), so pass `key` to the provider as its idempotency key.
    The engine opens the entry (`submitted`) before your step function runs and confirms it with
    the step's return value after it returns; `recovering` is True when an earlier try opened it
    and never learnt the answer (a crash, a lost response): ask the provider first (status
    lookup) or send again with the same key (idempotent key)."""

    def __init__(
        self,
        runtime: Attempt,
        operation_id: str,
        provider: str,
        capability: str,
        *,
        recovering: bool = False,
    ) -> None:
        self._runtime = runtime
        self.operation_id = operation_id
        """The ledger's id for this operation: `<job id>:<step index>`."""
        self.provider = provider
        """The provider's name, as declared on the step's `Effect`."""
        self.capability = capability
        """How its outcome can be learnt after a lost answer (`Effect.capability`)."""
        self._recovering = recovering

    @property
    def key(self) -> str:
        """The idempotency key to send to the provider (the operation id)."""
        return self.operation_id

    @property
    def state(self) -> str:
        """`new` (not opened yet), `submitted`, `confirmed`, `failed` or `released`."""
        entry = self._runtime.ledger.get(self.operation_id)
        return str(entry["state"]) if entry else "new"

    @property
    def receipt(self) -> Mapping[str, Any] | None:
        """The provider's receipt once `confirmed`."""
        entry = self._runtime.ledger.get(self.operation_id) or {}
        receipt = entry.get("receipt")
        return receipt if isinstance(receipt, dict) else None

    @property
    def recovering(self) -> bool:
        """An earlier try opened this operation and its outcome was never recorded."""
        return self._recovering

    def open(self, request: Any = None) -> None:
        """Record the intent (`submitted`) before the provider is called. The engine does it for
        you before the step runs; call it yourself only after `release`."""
        body = json.dumps(request, sort_keys=True, default=str)
        self._runtime.ledger.submit(
            self.operation_id,
            provider=self.provider,
            key=self.key,
            fingerprint=hashlib.sha256(body.encode()).hexdigest()[:32],
            capability=self.capability,
            step=self._runtime.step_index,
        )

    def confirm(self, receipt: Mapping[str, Any], *, reconciled: bool = False) -> None:
        """The provider did it: `confirmed` with its receipt (`reconciled` when the answer came
        from asking afterwards rather than from the call itself)."""
        self._runtime.ledger.confirm(self.operation_id, dict(receipt), reconciled=reconciled)

    def fail(self, code: str, message: str) -> None:
        """The provider refused it and charged nothing: `failed`. `code` is kept up to 100
        characters, `message` up to 500."""
        error = {"code": bounded_code(code, "provider_refused"), "message": str(message)[:500]}
        self._runtime.ledger.fail(self.operation_id, error)

    def release(self, why: str) -> None:
        """Nothing reached the provider (the connection never opened): the next try calls again
        with the same key."""
        self._runtime.ledger.release(self.operation_id, why)


class StepContext:
    """Everything a step may know and ask while it runs. Made by the engine for each step; a
    step never builds one (tests use `leasehold.testing`)."""

    def __init__(self, runtime: Attempt, operation: Operation | None = None) -> None:
        self._runtime = runtime
        self._operation = operation
        keys = dict(runtime.log_keys) | {"step": runtime.step_name}
        if operation is not None:
            keys["operation_id"] = operation.operation_id
        self._log = StepLogger(keys)

    # ----------------------------------------------------------------- who and where

    @property
    def job_id(self) -> str:
        """The job's id (stable across attempts and replays)."""
        return self._runtime.job.job_id

    @property
    def kind(self) -> str:
        """The job's kind name."""
        return self._runtime.job.kind

    @property
    def owner(self) -> Owner:
        """Who submitted the job (tenant and user), from the authorizer's claims at accept."""
        return self._runtime.job.owner

    @property
    def attempt(self) -> int:
        """The job's attempt number, 1 on its first claim (a retry, or a claim after a crash,
        adds one)."""
        return self._runtime.job.attempts

    @property
    def step_try(self) -> int:
        """How many times this step has been tried, this one included (1 on the first try)."""
        return self._runtime.step_try

    @property
    def epoch(self) -> int:
        """The fencing token of this claim: every write of this attempt is conditional on it."""
        return self._runtime.job.epoch

    @property
    def step(self) -> str:
        """The running step's name."""
        return self._runtime.step_name

    @property
    def step_index(self) -> int:
        """The running step's position, from 0."""
        return self._runtime.step_index

    @property
    def outputs(self) -> Mapping[str, Any]:
        """The outputs of the steps finished before this one, by step name (read from the
        checkpoint: a resumed job sees them without running those steps again)."""
        return self._runtime.outputs_by_name()

    @property
    def logger(self) -> StepLogger:
        """A logger bound to the job, attempt, epoch, step and operation ids."""
        return self._log

    @property
    def operation(self) -> Operation:
        """This effect step's ledger entry. Only effect steps (`effect=` on the step) have one;
        asking in another step is a programming error."""
        if self._operation is None:
            raise RuntimeError(f"step '{self.step}' declares no effect: it has no operation")
        return self._operation

    # ----------------------------------------------------------------- time

    def now_ms(self) -> int:
        """The engine's clock (epoch milliseconds): controlled in `leasehold.testing`."""
        return self._runtime.now_ms()

    def remaining_ms(self) -> int:
        """How long this step may still run: the least of what is left of the lease, of the
        invocation (on Lambda) and of the job's deadline, less the engine's safety margin. A long
        step checks it (or `heartbeat()`) between pieces of work."""
        return self._runtime.time_left_ms()

    @property
    def lease_expires_at_ms(self) -> int:
        """When this attempt's lease ends (epoch milliseconds, on the engine's clock). The
        engine renews it on `heartbeat()` when due and on every `save_progress`; a step that
        must not start a piece of work it cannot finish in time compares against it."""
        return self._runtime.lease_expires_at()

    @property
    def deadline_at_ms(self) -> int:
        """The job's deadline (epoch milliseconds): past it no attempt may run, and the job ends
        `dead` / `deadline_exceeded`."""
        return self._runtime.deadline_at()

    @property
    def safety_margin_ms(self) -> int:
        """The time the engine keeps back before the lease's end (and the deadline's, and the
        invocation's): `remaining_ms()` is already less it; a step that checks
        `lease_expires_at_ms` or `deadline_at_ms` itself keeps it back too."""
        return self._runtime.safety_margin_ms

    def heartbeat(self) -> bool:
        """Tell the engine the step is alive (the lease is renewed when due). Returns False when
        the step must stop now: its lease is gone, a cancel was requested, or the invocation is
        ending (the job is then handed back, attempt not spent). Stop by raising
        `StepInterruptedError` (or returning nothing more); the engine decides what the job
        becomes."""
        return self._runtime.tick()

    # ----------------------------------------------------------------- progress

    @property
    def progress(self) -> Mapping[str, Any] | None:
        """What this job last saved with `save_progress` (None before the first save)."""
        return self._runtime.progress

    def save_progress(self, state: Mapping[str, Any]) -> None:
        """Save a JSON document under the fence, within a step: a crash resumes the step with
        `progress` set to it. Over 7 KiB it is written to the data bucket first and the job item
        keeps a reference (`progress` reads it back whole); over 10 MiB (32 KiB in an engine
        without a data bucket) it is not saved and `FatalError` (code `item_too_large`) is
        raised — uncaught, the job ends `failed`; caught, save less. A document the store
        could not keep exactly (domain/storable.py's rule, as for outputs) ends the step with
        `FatalError` code `progress_not_json`, nothing saved."""
        try:
            check_storable(state, "progress")
        except NotStorableError as exc:
            raise FatalError(f"{exc}: progress cannot be saved", code="progress_not_json") from exc
        try:
            self._runtime.save_progress(dict(state))
        except FatalStepError as refused:
            if isinstance(refused, FatalError):
                raise
            raise FatalError(str(refused), code=refused.error_code) from None

    # ----------------------------------------------------------------- workflows (DESIGN §19)

    def spawn(
        self, kind: str, payload: Mapping[str, Any], *, options: JobOptions | None = None
    ) -> str:
        """Start one child job of `kind` when this step's checkpoint is written (not before:
        a stale attempt starts none, and a re-run of this step starts the same child, not a
        second). The next step runs once every child this step started has ended. The child's
        owner is this job's; its deadline and budget never outlive this job's. Returns its id."""
        return self.map(kind, [payload], options=options)[0]

    def map(
        self,
        kind: str,
        payloads: Sequence[Mapping[str, Any]],
        *,
        max_concurrency: int | None = None,
        tolerate_failures: int = 0,
        options: JobOptions | None = None,
    ) -> list[str]:
        """Start a child of `kind` per payload (as `spawn`), at most `max_concurrency` of them
        running at once. If more than `tolerate_failures` end other than `succeeded`, this job
        ends `failed` / `children_failed` and its unfinished children are cancelled. At most
        10,000 children a job; a payload the kind refuses is this step's FatalError. Returns
        their ids, in order."""
        runtime = self._runtime
        return list(
            runtime.flows.request_children(
                runtime,
                kind,
                [dict(payload) for payload in payloads],
                options,
                max_concurrency=max_concurrency,
                tolerate_failures=tolerate_failures,
            )
        )

    def children(self, step: str | None = None) -> Iterator[ChildView]:
        """The children an earlier step started (by default the last step that started any),
        in order: each `ChildView` has `job_id`, `state`, `result` and `error`. Read a page of
        100 at a time, so 10,000 children never sit in memory at once."""
        runtime = self._runtime
        index = None
        if step is not None:
            names = [planned.name for planned in runtime.plan]
            if step not in names:
                raise ValueError(f"no step {step!r} in this job")
            index = names.index(step)
        start: int | None = 0
        while start is not None:
            page, start = runtime.flows.children_views(runtime.job, index, start=start)
            yield from page

    def wait_for_signal(self, name: str, *, timeout_seconds: int) -> SignalWait:
        """Make the next step wait for the signal `name` — the owner's
        `POST /jobs/{id}/signals/{name}`, or a third party's `POST /callbacks/{token}` with the
        returned wait's `.token` — for at most `timeout_seconds`. No lease is held meanwhile.
        The next step reads the body with `signal(name)`."""
        return cast(
            SignalWait, self._runtime.flows.request_signal(self._runtime, name, timeout_seconds)
        )

    def signal(self, name: str) -> Any:
        """The body of signal `name`, which an earlier step waited for. Raises
        `SignalTimeoutError` when the wait ran out first (uncaught: the job ends `failed` /
        `signal_timeout`)."""
        return self._runtime.flows.signal_body(self._runtime.job, name)

    def continue_after(self, seconds: float) -> None:
        """Make the next step start `seconds` from now (up to 365 days), holding no lease."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise ValueError("continue_after takes a number of seconds ≥ 0")
        self._runtime.flows.request_time(self._runtime, self.now_ms() + int(seconds * 1000))

    def continue_at(self, when: datetime) -> None:
        """Make the next step start at `when` (an aware datetime, up to 365 days ahead)."""
        self._runtime.flows.request_time(self._runtime, at_ms(when))


__all__ = ["JobInfo", "Operation", "StepContext", "StepLogger"]
