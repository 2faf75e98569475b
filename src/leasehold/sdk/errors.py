"""The errors a kind raises to say how a step ended, and the errors an application's routes
raise to answer a request. Each is a subclass of the engine's own error, so the worker and the
API treat them exactly as they treat the engine's: there is one error tree, rooted at
`LeaseholdError`."""

from __future__ import annotations

from leasehold.domain.errors import (
    ConflictError,
    FatalStepError,
    JobNotFoundError,
    LeaseholdError,
    StoreUnavailableError,
    TransientStepError,
    ValidationError,
)


class RetryableError(TransientStepError):
    """Raise from a step when trying again later may work (a timeout, a 503 from a provider).

    The job goes back to `queued` with exponential backoff and full jitter, keeping every
    checkpoint before this step; once `max_attempts` is reached the job is `dead` with
    `attempts_exhausted`. `code` becomes the job's `error.code` (default `transient_error`).
    In an effect step, raise it only when the effect's fate can still be learnt from the
    provider, or pass `effect_settled=True` when you know nothing was charged."""

    def __init__(
        self, message: str, *, code: str | None = None, effect_settled: bool = False
    ) -> None:
        super().__init__(message, error_code=code, effect_settled=effect_settled)


class FatalError(FatalStepError):
    """Raise from a step when no retry can help (bad input found late, a refusal).

    The job ends `failed` with `stop_reason` `handler_error` and `error.message` set to this
    message; nothing is retried. `code` becomes the job's `error.code` (default
    `handler_error`). In an effect step whose provider can be asked, the operation stays open
    and the step is tried again to learn what happened unless `effect_settled=True` says the
    provider did nothing."""

    def __init__(
        self, message: str, *, code: str | None = None, effect_settled: bool = False
    ) -> None:
        super().__init__(message, error_code=code, effect_settled=effect_settled)


class NotFoundError(JobNotFoundError):
    """Raise from a route: HTTP 404 `not_found`. Use the same answer for "unknown" and "not
    yours", so a caller cannot probe another tenant's ids."""


__all__ = [
    "ConflictError",
    "FatalError",
    "LeaseholdError",
    "NotFoundError",
    "RetryableError",
    "StoreUnavailableError",
    "ValidationError",
]
