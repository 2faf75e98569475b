"""One function turns AWS client failures into leasehold errors."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.domain.errors import LeaseholdError, StoreUnavailableError

_UNAVAILABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "TransactionInProgressException",
        "TransactionConflictException",
        "RequestThrottled",
        "AWS.SimpleQueueService.RequestThrottled",
        "KMS.ThrottlingException",
    }
)


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def translate(exc: Exception) -> LeaseholdError:
    """Map a boto error to a leasehold error; callers `raise translate(exc) from exc`."""
    if isinstance(exc, ClientError):
        code = error_code(exc)
        if code in _UNAVAILABLE_CODES:
            return StoreUnavailableError(f"the store is unavailable ({code}); nothing was promised")
        return LeaseholdError(f"unexpected store error {code}")
    if isinstance(exc, BotoCoreError):
        return StoreUnavailableError(f"the store did not answer ({type(exc).__name__})")
    return LeaseholdError(str(exc))
