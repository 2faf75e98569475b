"""The one door to the DynamoDB table. Every request of every store goes through here, so each
failure is classified in one place (docs/architecture.md rule 9):

- a failed condition is `ConditionFailed`, carrying the old item (single writes ask for
  `ReturnValuesOnConditionCheckFailure=ALL_OLD`) or the transaction's cancellation reasons, in
  the order of the transaction's items — callers decide what it means, never by reading messages;
- a transaction cancelled for `TransactionConflict`, `ThrottlingError` or
  `ProvisionedThroughputExceeded` (which botocore does not retry) is retried here with full
  jitter a bounded number of times, then `StoreUnavailableError`;
- a `ClientRequestToken` met again with other items (`IdempotentParameterMismatchException`,
  a keyed request retried after a lost answer) sends the transaction once more without the
  token: its own conditions then find what the first call wrote (`Table.transact`);
- a single write (PutItem, UpdateItem) that meets an item inside a transaction
  (`TransactionConflictException`, which botocore does not retry either) is retried the same
  way, then `StoreUnavailableError`;
- throttles, internal errors and timeouts of single requests are retried by botocore's standard
  mode (see handlers/wiring.py), then `StoreUnavailableError`;
- a request the store refuses as sent (a `ValidationException`, an item over 400 KB) is a
  `StoreRefusedError` (a 400 at the API), never mistaken for "try again"; any other code
  (access denied, a missing table, one not listed) is `StoreUnavailableError` (store/errors.py).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, cast

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from leasehold.domain.errors import ItemTooLargeError, LeaseholdError, StoreUnavailableError
from leasehold.domain.types import RawItem
from leasehold.store.errors import error_code, is_item_size_message, translate

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

    from leasehold.store.blobs import BlobStore

CLIENT_CONFIG = Config(
    connect_timeout=2, read_timeout=5, retries={"max_attempts": 3, "mode": "standard"}
)
"""Every AWS client of leasehold's: bounded, so a dependency that does not answer gives a 503 in
seconds, not a hung request; botocore's standard retries for throttles and internal errors."""
S3_CLIENT_CONFIG = CLIENT_CONFIG.merge(Config(signature_version="s3v4"))
"""The data bucket's client: the table's timeouts and retries, and SigV4 for what it presigns
(an upload's URL signs its size, checksum and metadata as headers S3 checks, LD7)."""

RETRYABLE_CANCELLATIONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)
TOKEN_MISMATCH = "IdempotentParameterMismatchException"
SINGLE_WRITE_CONFLICT = "TransactionConflictException"


class QueryParams(TypedDict, total=False):
    """One Query as boto3 takes it (the Table adds TableName)."""

    IndexName: str
    KeyConditionExpression: str
    FilterExpression: str
    ExpressionAttributeNames: dict[str, str]
    ExpressionAttributeValues: RawItem
    ScanIndexForward: bool
    Select: str
    Limit: int
    ExclusiveStartKey: RawItem
    ConsistentRead: bool


class ConditionFailed(LeaseholdError):  # noqa: N818 - a control-flow signal for the store's callers
    """A write's condition did not hold — not an error: the caller decides what it means (a
    stale version, an item gone, a repeat). `item` is the old item of a single write; `reasons`
    are the cancellation reasons of a transaction (one per item, in order)."""

    def __init__(
        self, *, item: Mapping[str, Any] | None = None, reasons: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__("condition failed")
        self.item = dict(item) if item else None
        self.reasons = reasons or []

    def failed_at(self, index: int) -> bool:
        """Whether the transaction item at `index` is the one whose condition failed."""
        return (
            index < len(self.reasons)
            and self.reasons[index].get("Code") == "ConditionalCheckFailed"
        )

    def old_item(self, index: int = 0) -> RawItem | None:
        """The old item (ALL_OLD) of the failed single write, or of transaction item `index`."""
        if self.reasons:
            if index < len(self.reasons):
                return cast(RawItem | None, self.reasons[index].get("Item"))
            return None
        return self.item


@dataclass
class TransactionRetry:
    """Bounded full-jitter retries of a cancelled-for-contention transaction."""

    attempts: int = 4
    base_ms: int = 25
    cap_ms: int = 400
    sleep: Callable[[float], None] = field(default=time.sleep)
    rng: random.Random = field(default_factory=random.Random)

    def pause(self, attempt: int) -> None:
        ceiling = min(self.cap_ms, self.base_ms * (2 ** (attempt - 1)))
        self.sleep(self.rng.uniform(0, ceiling) / 1000)


@dataclass
class TableStats:
    """What the door saw (tests and the benchmark read it)."""

    transaction_retries: int = 0
    transactions_given_up: int = 0
    token_mismatches: int = 0
    single_write_retries: int = 0
    """PutItem / UpdateItem sent again after TransactionConflictException."""
    single_writes_given_up: int = 0
    """Transactions sent again without their token after IdempotentParameterMismatch."""


class Table:
    """The door to the single table: every read and write of the engine (and of an application
    that stores items of its own beside the jobs) goes through one, built once per cold start
    with the function's bounded client (and `LEASEHOLD_FAULTS`' injected faults, when set).
    What it guarantees is in this module's docstring: a failed condition is `ConditionFailed`
    with the old item or the transaction's reasons; contention and throttling are retried a
    bounded number of times, then `StoreUnavailableError` (503); anything else is a
    `LeaseholdError`, never mistaken for "try again"."""

    def __init__(
        self,
        client: DynamoDBClient,
        name: str,
        *,
        retry: TransactionRetry | None = None,
        index_shards: int = 1,
    ) -> None:
        self.client = client
        self.name = name
        self.index_shards = index_shards
        """How many shards each `by_state` key is written over (decision SH1, `IndexShards`)."""
        self.retry = retry or TransactionRetry()
        self.stats = TableStats()
        self.blobs: BlobStore | None = None
        """The engine's data bucket (DESIGN §20), reached by every store through this door."""

    # ---------------------------------------------------------------- reads

    def get(self, key: RawItem) -> RawItem | None:
        """One item by its key, read consistently (None when there is none); a store that does
        not answer raises StoreUnavailableError."""
        try:
            answer = self.client.get_item(TableName=self.name, Key=key, ConsistentRead=True)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
        return cast(RawItem | None, answer.get("Item"))

    def query(self, **params: Any) -> dict[str, Any]:
        """One Query page on this table (`params` as boto3 takes them, TableName added); a store
        that does not answer raises StoreUnavailableError."""
        try:
            return cast(dict[str, Any], self.client.query(TableName=self.name, **params))
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc

    def batch_get(self, keys: list[RawItem], *, consistent: bool = True) -> list[RawItem]:
        """Items for `keys` (strongly consistent unless `consistent` is False: half the read
        units, for a display that may lag a second), unprocessed keys retried a bounded number
        of times; a key still unprocessed after that is `StoreUnavailableError`."""
        found: list[RawItem] = []
        pending = list(keys)
        try:
            for _ in range(10):
                if not pending:
                    return found
                chunk, pending = pending[:100], pending[100:]
                answer = self.client.batch_get_item(
                    RequestItems={self.name: {"Keys": chunk, "ConsistentRead": consistent}}
                )
                found.extend(answer["Responses"].get(self.name, []))
                unprocessed = (
                    cast(dict[str, Any], answer.get("UnprocessedKeys") or {})
                    .get(self.name, {})
                    .get("Keys")
                )
                if unprocessed:
                    pending = list(unprocessed) + pending
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
        if pending:
            raise StoreUnavailableError("the store kept keys unprocessed; nothing was promised")
        return found

    # ---------------------------------------------------------------- writes

    def update(self, params: dict[str, Any], *, return_new: bool = True) -> RawItem | None:
        """One conditional UpdateItem. Returns the new item (or None when `return_new` is
        False); raises ConditionFailed with the old item."""
        answer = self._single_write(
            lambda: self.client.update_item(
                TableName=self.name,
                **params,
                ReturnValues="ALL_NEW" if return_new else "NONE",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        )
        return cast(RawItem, answer.get("Attributes")) if return_new else None

    def put(self, params: dict[str, Any]) -> None:
        """One conditional PutItem (`Item`, `ConditionExpression`, …); raises ConditionFailed
        with the old item."""
        params = {k: v for k, v in params.items() if k != "ReturnValuesOnConditionCheckFailure"}
        self._single_write(
            lambda: self.client.put_item(
                TableName=self.name, **params, ReturnValuesOnConditionCheckFailure="ALL_OLD"
            )
        )

    def _single_write(self, send: Callable[[], Any]) -> dict[str, Any]:
        """Send one PutItem / UpdateItem: a failed condition is ConditionFailed with the old
        item; `TransactionConflictException` (the item is inside a transaction; botocore does
        not retry it) is retried with full jitter, bounded as a transaction's contention is,
        then StoreUnavailableError. The retry cannot apply a write twice: DynamoDB refuses the
        write without applying it, so the first try changed nothing."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return cast(dict[str, Any], send())
            except ClientError as exc:
                code = error_code(exc)
                if code == "ConditionalCheckFailedException":
                    raise ConditionFailed(item=exc.response.get("Item")) from exc  # type: ignore[arg-type]
                if code != SINGLE_WRITE_CONFLICT:
                    raise translate(exc) from exc
                if attempt >= self.retry.attempts:
                    self.stats.single_writes_given_up += 1
                    raise StoreUnavailableError(
                        "the item stayed inside other transactions (TransactionConflict); "
                        "nothing was promised"
                    ) from exc
                self.stats.single_write_retries += 1
                self.retry.pause(attempt)
            except BotoCoreError as exc:
                raise translate(exc) from exc

    def transact(self, items: list[dict[str, Any]], *, token: str | None = None) -> None:
        """One TransactWriteItems (each item a {"Put"|"Update"|"Delete"|"ConditionCheck": …}
        whose TableName defaults to this table). Raises ConditionFailed with the reasons when
        any condition failed; retries contention and throttling cancellations; otherwise
        StoreUnavailableError or LeaseholdError.

        `token` is the `ClientRequestToken`: within DynamoDB's ten minutes, the same token with
        the same items is a no-op that succeeds (an SDK retry of a commit whose answer was
        lost). The same token with *other* items — a keyed request retried later, its items
        stamped with a later time — is `IdempotentParameterMismatchException`: the
        transaction is then sent once more without the token, and its own conditions answer
        (the first call's new item exists: ConditionFailed with it, which the caller reads as
        a repeat). So send a token only with a transaction that a repeat cannot apply twice —
        one that puts a new item on `attribute_not_exists`, as a new job's writes do."""
        prepared = [with_table_name(item, self.name) for item in items]
        params: dict[str, Any] = {"TransactItems": prepared}
        if token:
            params["ClientRequestToken"] = token
        attempt = 0
        while True:
            attempt += 1
            try:
                self.client.transact_write_items(**params)
                return
            except ClientError as exc:
                code = error_code(exc)
                if code == TOKEN_MISMATCH and "ClientRequestToken" in params:
                    self.stats.token_mismatches += 1
                    params.pop("ClientRequestToken")
                    attempt -= 1  # not contention: the same try, without the token
                    continue
                if code != "TransactionCanceledException":
                    raise translate(exc) from exc
                reasons = cast(list[dict[str, Any]], exc.response.get("CancellationReasons") or [])
                codes = {str(reason.get("Code") or "") for reason in reasons}
                if "ConditionalCheckFailed" in codes:
                    raise ConditionFailed(reasons=reasons) from exc
                oversized = [
                    str(reason.get("Message") or "")
                    for reason in reasons
                    if reason.get("Code") == "ValidationError"
                    and is_item_size_message(str(reason.get("Message") or ""))
                ]
                if oversized:  # an item of the transaction would pass 400 KB
                    raise ItemTooLargeError(f"DynamoDB refused the write: {oversized[0]}") from exc
                if not codes & RETRYABLE_CANCELLATIONS:
                    raise LeaseholdError(
                        f"transaction cancelled: {sorted(c for c in codes if c)}"
                    ) from exc
                if attempt >= self.retry.attempts:
                    self.stats.transactions_given_up += 1
                    reasons_seen = sorted(codes & RETRYABLE_CANCELLATIONS)
                    raise StoreUnavailableError(
                        f"the store kept cancelling the transaction ({reasons_seen}); "
                        "nothing was promised"
                    ) from exc
                self.stats.transaction_retries += 1
                self.retry.pause(attempt)
            except BotoCoreError as exc:
                raise translate(exc) from exc


def with_table_name(item: dict[str, Any], table: str) -> dict[str, Any]:
    """A transaction item with its `TableName` (kept when it has one)."""
    ((operation, body),) = item.items()
    if "TableName" in body:
        return item
    return {operation: {"TableName": table, **body}}
