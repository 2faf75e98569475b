"""One function turns AWS client failures into leasehold errors. Every error code has a class:

- the store refused the request *as sent* (`REFUSED_CODES`: a `ValidationException` — an item
  over 400 KB, a key too long —, an item collection full, a message SQS will not take):
  `StoreRefusedError`, never retried, a 400 at the API; one whose message says the item's size
  passed the limit is its subclass `ItemTooLargeError` (the worker ends the job for it);
- anything else — throttling, internal errors, and also access denied, a missing table or queue,
  a KMS key disabled, expired credentials, a code no one listed: `StoreUnavailableError`, a 503
  at the API (nothing is promised; an operator may have to act before a retry succeeds)."""

from __future__ import annotations

import re

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.domain.errors import (
    ItemTooLargeError,
    LeaseholdError,
    StoreRefusedError,
    StoreUnavailableError,
)

REFUSED_CODES = frozenset(
    {
        "ValidationException",
        "ItemCollectionSizeLimitExceededException",
        "InvalidMessageContents",
        "BatchRequestTooLong",
        "MessageTooLong",
        "AWS.SimpleQueueService.MessageTooLong",
    }
)

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


_ITEM_SIZE = re.compile(r"item size.*exceeded", re.IGNORECASE)
"""DynamoDB's words for an item over 400 KB: `Item size has exceeded the maximum allowed size`
(PutItem, a transaction's item) and `Item size to update has exceeded …` (UpdateItem)."""


def is_item_size_message(message: str) -> bool:
    return bool(_ITEM_SIZE.search(message))


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def translate(exc: Exception) -> LeaseholdError:
    """Map a boto error to a leasehold error; callers `raise translate(exc) from exc`."""
    if isinstance(exc, ClientError):
        code = error_code(exc)
        message = str(exc.response.get("Error", {}).get("Message", ""))
        if code == "ValidationException" and is_item_size_message(message):
            return ItemTooLargeError(f"DynamoDB refused the write: {message}")
        if code in REFUSED_CODES:
            return StoreRefusedError(f"the store refused the request as sent ({code})")
        if code in _UNAVAILABLE_CODES:
            return StoreUnavailableError(f"the store is unavailable ({code}); nothing was promised")
        return StoreUnavailableError(f"the store failed ({code or 'no code'}); nothing promised")
    if isinstance(exc, BotoCoreError):
        return StoreUnavailableError(f"the store did not answer ({type(exc).__name__})")
    return LeaseholdError(str(exc))
