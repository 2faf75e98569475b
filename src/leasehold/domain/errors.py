"""Typed errors with one root. The API maps each to one HTTP status in a single table."""

from __future__ import annotations

from leasehold.domain.types import JsonObject

MAX_CODE_CHARS = 100
"""An error code a kind gives (`FatalError(code=…)`, `Operation.fail(code, …)`) is kept up to
this many characters and cut there, as its message is cut at 500 (decision ID2)."""


def bounded_code(code: object, default: str) -> str:
    """An error code as it is stored: a code is an identifier, so a non-empty string is kept up
    to MAX_CODE_CHARS characters and cut there; anything else (None, empty, a number) is
    `default`, the error's own code."""
    if not isinstance(code, str) or not code:
        return default
    return code[:MAX_CODE_CHARS]


class LeaseholdError(Exception):
    """Root of every error leasehold raises on purpose: one `except LeaseholdError` catches
    them all. The public ones, by namespace (`[apps]`: `leasehold.apps`, `[client]`:
    `leasehold.client`, `[testing]`: `leasehold.testing`, else `leasehold`), with the HTTP
    status and `code` the API answers for them:

    * LeaseholdError                 code `internal_error`; 500 when nothing below fits
      x ValidationError              400 `invalid_request` (or the code it names)
      x RetryableError               a step: retried after backoff; `transient_error`
      x FatalError                   a step: the job fails; `handler_error`
      x StopJobError                 a kind ends the job itself; `stopped_by_kind`
        + SignalTimeoutError         a signal's wait ran out before it came; `signal_timeout`
      x HandBackError                not now: the job is given back; `handed_back`
      x StepInterruptedError         told to stop (lease lost, cancel); `step_interrupted`
      x KindDefinitionError          a Kind defined wrongly; also a ValueError
      x KindLoadError                LEASEHOLD_KINDS cannot load; also a RuntimeError
      x SettingError                 a setting missing or malformed; also a RuntimeError
      x NotFoundError                [apps] 404 `not_found`
      x ConflictError                [apps] 409 `conflict` (or the code it names)
      x StoreUnavailableError        [apps] 503 `store_unavailable`, with Retry-After
      x ConditionFailed              [apps] a write's condition did not hold
      x ApiError                     [client] an error answer, or none; `status`, `code`
        + ApiError.InvalidInput      [client] 400
        + ApiError.Unauthenticated   [client] 401
          - MfaRequired              [client] 401 `mfa_code_required`, `mfa_setup_required`
        + ApiError.Forbidden         [client] 403
        + ApiError.NotFound          [client] 404
        + ApiError.Conflict          [client] 409
        + ApiError.Unavailable       [client] 503, with `retry_after`
        + ApiError.Unreachable       [client] no answer (status 0)
      x WaitTimeout                  [client] `wait` gave up; also a TimeoutError
      x NotIdleError                 [testing] still busy; also an AssertionError
      x TemplateError                [testing] template.yaml unreadable; also a RuntimeError

    Outside the tree, on purpose: `WorkerCrashed` [testing] is a BaseException, as SystemExit
    is — a test's stand-in for a process dying, which no `except Exception` may catch.

    The engine's own errors (`StaleEpochError`, `SlotsFullError`, …) derive from it too; they
    are handled inside the engine or reach a caller as one of the statuses above.
    tests/unit/test_error_tree.py checks this drawing against the classes."""

    code = "internal_error"

    def __init__(self, *args: object, code: str | None = None) -> None:
        """`code`, when given, is this error's own code instead of its class's (a
        `ValidationError` naming `unknown_kind`, a `ConflictError` naming `busy`)."""
        super().__init__(*args)
        if code is not None:
            self.code = code


class ValidationError(LeaseholdError):
    """Input that can never be accepted as sent (HTTP 400)."""

    code = "invalid_request"


class UnauthenticatedError(LeaseholdError):
    code = "unauthenticated"


class ForbiddenError(LeaseholdError):
    code = "forbidden"


class PriorityNotAllowedError(ForbiddenError):
    """The caller's tenant may not ask for this priority (decision Q1): a 403 that names the
    setting which allows it."""

    code = "priority_not_allowed"


class SubmitRateExceededError(LeaseholdError):
    """The caller's tenant has used its submissions for this second (decision Q3): HTTP 429,
    try again after `retry_after_seconds`. Nothing was accepted."""

    code = "submit_rate_exceeded"

    def __init__(self, message: str, *, retry_after_seconds: int = 1) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class JobNotFoundError(LeaseholdError):
    """Unknown job, or a job outside the caller's scope: callers cannot tell the two apart."""

    code = "not_found"


class ConflictError(LeaseholdError):
    """The request is well-formed but the job's state does not allow it now (HTTP 409)."""

    code = "conflict"


class ScheduleQuotaExceededError(ConflictError):
    """The owner has as many active schedules as the deployment allows (decision Q2): HTTP 409
    until one is deleted."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="schedule_quota_exceeded")


class IdempotencyConflictError(ConflictError):
    def __init__(
        self, message: str = "this Idempotency-Key was used with a different body"
    ) -> None:
        super().__init__(message, code="idempotency_key_reused")


class StaleEpochError(LeaseholdError):
    """A worker wrote under an epoch or lease it no longer holds; the write was dropped."""

    code = "stale_epoch"


class ClaimRejectedError(LeaseholdError):
    """A claim's condition failed; `reason` says why (see service.worker)."""

    code = "claim_rejected"

    def __init__(self, reason: str, job: object | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.job = job


class SlotsFullError(LeaseholdError):
    """The job's owner already runs as many jobs as the per-user limit allows, or one of its
    kind's concurrency limits is reached (`label` names it: `tenant:acme`)."""

    code = "slots_full"

    def __init__(self, message: str, label: str | None = None) -> None:
        super().__init__(message)
        self.label = label


class RateLimitedError(LeaseholdError):
    """A kind's rate (`label`: `tenant:acme`) allows no start now; the next is due at
    `due_at` (epoch ms)."""

    code = "rate_limited"

    def __init__(self, message: str, label: str, due_at: int) -> None:
        super().__init__(message)
        self.label = label
        self.due_at = due_at


class StoreUnavailableError(LeaseholdError):
    """DynamoDB or SQS did not answer or throttled past retries: nothing is promised (HTTP 503)."""

    code = "store_unavailable"


class StoreRefusedError(LeaseholdError):
    """DynamoDB or SQS refused the request as sent (a ValidationException, an item over 400 KB):
    nothing was written, a retry would be refused again (HTTP 400; never retried)."""

    code = "invalid_request"


class ItemTooLargeError(StoreRefusedError):
    """DynamoDB refused a write because the item would pass its 400 KB limit (its message
    says so): the worker ends the job `failed` / `item_too_large` rather than let the message
    be re-delivered into the DLQ (decision SZ3; the budget is leasehold.domain.sizes)."""


class StepError(LeaseholdError):
    """A step failed. In a step with an external effect the engine assumes the effect's outcome
    is uncertain (the job becomes `unknown`) unless the kind says `effect_settled=True`: it knows
    the effect did not happen (the provider refused it, nothing was sent)."""

    def __init__(
        self, message: str, *, effect_settled: bool = False, error_code: str | None = None
    ) -> None:
        super().__init__(message)
        self.effect_settled = effect_settled
        self.error_code = bounded_code(error_code, self.code)
        """What the job's `error.code` says (a kind may be more precise than the class; cut at
        MAX_CODE_CHARS)."""


class TransientStepError(StepError):
    """A step failed in a way worth retrying with backoff."""

    code = "transient_error"


class FatalStepError(StepError):
    """A step failed in a way no retry can fix."""

    code = "handler_error"


class StepInterruptedError(LeaseholdError):
    """A running step was told to stop: its lease is gone or a cancel was requested."""

    code = "step_interrupted"


class RelatedItemChangedError(LeaseholdError):
    """An item written together with a job's outcome (the bookmark a title job fills in, …)
    failed its condition: nothing of the transaction was written. `index` is its position among
    the related items; `old_item` what the item was (None when it is gone)."""

    code = "related_item_changed"

    def __init__(self, index: int, old_item: object | None) -> None:
        super().__init__(f"related item {index} changed")
        self.index = index
        self.old_item = old_item


class StopJobError(LeaseholdError):
    """A kind ends the job itself, not as a step failure: `failed` with a stop reason of its
    own (`tool_rejected`, `budget_exhausted`), the error for the job view and an entry for the
    history (`record`: a small dict, never the content the job worked on).

    `state` is `failed` unless the kind knows no attempt can finish before the job's deadline:
    then `dead` (with the reason `deadline_exceeded`), as the engine ends a job whose deadline
    passed — no hand-back loop until it does."""

    code = "stopped_by_kind"

    def __init__(
        self,
        reason: str,
        error_code: str,
        message: str,
        record: JsonObject | None = None,
        *,
        state: str = "failed",
    ) -> None:
        super().__init__(message)
        if state not in {"failed", "dead"}:
            raise ValueError(f"a kind may end a job failed or dead, not {state!r}")
        self.reason = reason
        self.error_code = bounded_code(error_code, bounded_code(str(reason), self.code))
        self.record = record or {}
        self.state = state


class SignalTimeoutError(StopJobError):
    """`StepContext.signal(name)`: the wait for the signal ran out before it came (DESIGN §19).
    Uncaught, the job ends `failed` / `signal_timeout`; a step may catch it and go on."""

    code = "signal_timeout"

    def __init__(self, name: str) -> None:
        super().__init__(
            "signal_timeout",
            "signal_timeout",
            f"the wait for signal {name!r} timed out before it came",
            {"signal": name},
        )
        self.name = name


class HandBackError(LeaseholdError):
    """A kind cannot start its next piece of work in the time left (the invocation's, or the
    lease's): the engine gives the job back with its progress, attempt not burned."""

    code = "handed_back"


class ScheduleNotFoundError(JobNotFoundError):
    """Unknown schedule, or one outside the caller's scope: the same 404 as an unknown job."""


ANSWERED_ERRORS: tuple[type[LeaseholdError], ...] = (
    ValidationError,
    StoreRefusedError,
    UnauthenticatedError,
    ForbiddenError,
    JobNotFoundError,
    ConflictError,
    SubmitRateExceededError,
    StoreUnavailableError,
)
"""The errors the API answers with a status of their own (`STATUS_BY_ERROR` in
leasehold.handlers.api). Code of a user's that raises one of these gives that answer; any other
error it raises, a `LeaseholdError` or not (a `SettingError`, a `ConditionFailed`), is its own bug
and is answered as such (a kind's check: a 400 `check_failed`)."""
