"""TransactWriteItems for moto whose cost does not grow with the table.

moto 5.2.5's `DynamoDBBackend.transact_write_items` takes `copy.deepcopy` of the *whole table*
(once per item of the transaction that names it) as its rollback backup, so every transaction
costs time proportional to the table: leasehold's accept, claim and outcome are transactions, so
the local stack and the test harness slow quadratically in jobs seen. Rolling back also swaps
the table object for its copy, which orphans the stream shard a kept shard iterator reads.

`install()` replaces that one method with `transact_write_items` below. It runs moto's own loop
unchanged — the same order of validation, key-uniqueness check, condition evaluation and write,
through moto's own `get_item`, `put_item`, `update_item` and `delete_item`, so the responses,
`CancellationReasons` (in order, with `ReturnValuesOnConditionCheckFailure` items), errors and
stream records are moto's — but it backs up only what the transaction touches: before an item is
read or written, a copy of that one item (or the fact that it was absent), and per table the
length of its stream shard. On any failure those items are put back and the stream records the
transaction appended are dropped, in the same table object. (Each item's condition is evaluated
once, as in moto's loop; moto's write would evaluate it a second time against the same item, so
the write is called without it.)

Two deliberate differences from moto, both places where moto leaves a partial write:
- an item naming more than one operation (`TransactWriteSingleOpException`) after an earlier item
  was written: moto raises without rolling back; here the earlier writes are undone;
- a table named by its ARN: moto's backup is keyed by the name as given, so it never rolls such
  a table back; here its items are undone like any other.

And one place where moto is lenient and DynamoDB is not: moto ignores `ClientRequestToken`.
`install()` also wraps moto's TransactWriteItems handler so the token behaves as DynamoDB
documents it: a transaction that committed with a token is remembered (its request without the
token, in canonical form, and the time it completed) for `TOKEN_WINDOW_MS` (10 minutes). Within
that window the same token with the same request is a no-op that answers as the first call did
(nothing applied again, no stream record); with any other request it is
`IdempotentParameterMismatchException` (HTTP 400). After the window the token is forgotten and a
request with it is a new one. Only a committed transaction is remembered: a cancelled one may be
sent again with its token (a contention retry does exactly that). The memory lives on the moto
backend (a reset forgets it) and is not journaled: a restarted local stack has forgotten every
token. The window's clock is `token_clock` (wall-clock milliseconds by default); tests on a
manual clock point it at theirs with `use_token_clock`.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from leasehold.domain.errors import LeaseholdError

PINNED_MOTO_VERSION = "5.2.5"
"""The moto release whose transact_write_items this module mirrors; pyproject.toml pins it."""


class MotoVersionError(LeaseholdError):
    """The installed moto is not the release this patch was written against: its
    transact_write_items may have changed, so mirroring it blindly could hide a difference."""

    code = "moto_version_mismatch"


@dataclass
class _ItemBackup:
    table: Any
    hash_key: Any
    range_key: Any
    bucket_existed: bool
    item: Any  # a copy of the item before the transaction touched it; None when it was absent


@dataclass
class _StreamBackup:
    shard: Any
    records: list[Any]
    length: int


@dataclass
class _UndoLog:
    """What one transaction changed, recorded before each item is read (moto's `get_item` on a
    table with a range key leaves an empty hash bucket behind) and undone in reverse order."""

    backend: Any
    items: list[_ItemBackup] = field(default_factory=list)
    streams: dict[int, _StreamBackup] = field(default_factory=dict)

    def remember(self, table_name: str, key: dict[str, Any]) -> None:
        """Back up the item at `key`. Resolving the table and key runs the same moto calls, in
        the same order, as the `get_item` that follows, so it raises exactly what that would."""
        table = self.backend.get_table(table_name)
        hash_key, range_key = self.backend.get_keys_value(table, key)
        if table.has_range_key:
            bucket = table.items.get(hash_key)
            bucket_existed = bucket is not None
            current = bucket.get(range_key) if bucket is not None else None
        else:
            bucket_existed = hash_key in table.items
            current = table.items.get(hash_key)
        self.items.append(
            _ItemBackup(table, hash_key, range_key, bucket_existed, copy.deepcopy(current))
        )
        shard = table.stream_shard
        if shard is not None and id(table) not in self.streams:
            self.streams[id(table)] = _StreamBackup(shard, shard.items, len(shard.items))

    def roll_back(self) -> None:
        for backup in reversed(self.items):
            items = backup.table.items
            if not backup.table.has_range_key:
                if backup.item is None:
                    items.pop(backup.hash_key, None)
                else:
                    items[backup.hash_key] = backup.item
                continue
            if backup.item is not None:
                items[backup.hash_key][backup.range_key] = backup.item
                continue
            bucket = items.get(backup.hash_key)
            if bucket is not None:
                bucket.pop(backup.range_key, None)
                if not bucket and not backup.bucket_existed:
                    del items[backup.hash_key]
        for stream in self.streams.values():
            # moto's shard may have swapped its list (records handed to a mapped Lambda)
            del stream.records[stream.length :]
            stream.shard.items = stream.records
        self.items.clear()
        self.streams.clear()


def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    """moto 5.2.5's DynamoDBBackend.transact_write_items, line for line, with an undo log of the
    touched items in place of a deep copy of every table the transaction names, and without
    the second evaluation of each item's condition inside moto's write."""
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MockValidationException,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    undo = _UndoLog(self)

    target_items: set[tuple[str, str]] = set()

    def check_unicity(table_name: str, key: dict[str, Any]) -> None:
        item = (str(table_name), str(dict(sorted(key.items()))))
        if item in target_items:
            raise MultipleTransactionsException()
        target_items.add(item)

    errors: list[tuple[str, str, dict[str, Any]] | tuple[None, None, None]] = []
    for item in transact_items:
        original_item: dict[str, Any] | None = None
        if len(list(item.keys())) > 1:
            undo.roll_back()  # moto raises here without undoing the items before it
            raise TransactWriteSingleOpException

        try:
            op_type, op = next(iter(item.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                raise ValueError("Unsupported transaction operation")

            table_name = op["TableName"]
            condition_expression = op.get("ConditionExpression")
            expression_attribute_names = op.get("ExpressionAttributeNames")
            expression_attribute_values = op.get("ExpressionAttributeValues")
            return_values_on_condition_check_failure = op.get("ReturnValuesOnConditionCheckFailure")

            if op_type == "Put":
                attrs = op["Item"]
                table = self.get_table(table_name)
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]

            check_unicity(table_name, key)
            undo.remember(table_name, key)

            current = self.get_item(table_name, key)
            if condition_expression is not None:
                condition_op = get_filter_expression(
                    condition_expression,
                    expression_attribute_names,
                    expression_attribute_values,
                )
                if not condition_op.expr(current):
                    if return_values_on_condition_check_failure == "ALL_OLD" and current:
                        original_item = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=original_item)

            # The condition held against `current` just above, and nothing has written this item
            # since: moto's write would parse and evaluate it once more to the same answer.
            if op_type == "Put":
                self.put_item(
                    table_name,
                    op["Item"],
                    condition_expression=None,
                    expression_attribute_names=expression_attribute_names,
                    expression_attribute_values=expression_attribute_values,
                )
            elif op_type == "Delete":
                self.delete_item(
                    table_name,
                    key,
                    condition_expression=None,
                    expression_attribute_names=expression_attribute_names,
                    expression_attribute_values=expression_attribute_values,
                )
            elif op_type == "Update":
                self.update_item(
                    table_name,
                    key,
                    update_expression=op["UpdateExpression"],
                    condition_expression=None,
                    expression_attribute_names=expression_attribute_names,
                    expression_attribute_values=expression_attribute_values,
                )
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            undo.roll_back()
            raise
        except ConditionalCheckFailed as e:
            errors.append(("ConditionalCheckFailed", str(e.message), original_item))  # type: ignore[arg-type]
        except Exception as e:  # moto reports any other failure as this item's reason
            errors.append((type(e).__name__, str(e), original_item))  # type: ignore[arg-type]

    if any(code is not None for code, _, _ in errors):
        undo.roll_back()
        raise TransactionCanceledException(errors)


def _moto_version() -> str:
    import moto

    return str(moto.__version__)


def require_pinned_moto(module: str, mirrors: str) -> None:
    """Raise MotoVersionError unless the installed moto is PINNED_MOTO_VERSION: `module` (a
    leasehold_dev.local.moto patch) mirrors `mirrors` of that release and must be re-checked
    against any other before it is trusted."""
    version = _moto_version()
    if version != PINNED_MOTO_VERSION:
        raise MotoVersionError(
            f"leasehold_dev.local.moto.{module} mirrors moto {PINNED_MOTO_VERSION}'s {mirrors}, "
            f"but moto {version} is installed: pin moto[server]=={PINNED_MOTO_VERSION} "
            f"(pyproject.toml) or re-check the patch against {version}"
        )


TOKEN_WINDOW_MS = 10 * 60 * 1000
"""How long DynamoDB keeps a `ClientRequestToken` after the request that used it completed."""
MISMATCH = "IdempotentParameterMismatchException"


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


token_clock: Callable[[], int] = _wall_clock_ms
"""The clock of the token window, in milliseconds (see `use_token_clock`)."""


def use_token_clock(clock: Callable[[], int] | None) -> None:
    """Measure the token window on `clock` (a manual clock's `now_ms`); None: the wall clock."""
    global token_clock  # noqa: PLW0603 - one window clock per process, as moto's backends are
    token_clock = clock or _wall_clock_ms


@dataclass
class _Remembered:
    request: str
    at_ms: int
    answer: Any


_token_lock = threading.RLock()
_TOKENS = "_leasehold_client_request_tokens"  # the attribute a backend keeps its tokens in


def _canonical_request(body: dict[str, Any]) -> str:
    """The request as DynamoDB compares it for a token: every parameter but the token."""
    rest = {name: value for name, value in body.items() if name != "ClientRequestToken"}
    return json.dumps(rest, sort_keys=True, separators=(",", ":"), default=str)


def _mismatch() -> Exception:
    from moto.dynamodb.exceptions import ERROR_TYPE_PREFIX, DynamodbException

    error = DynamodbException(
        ERROR_TYPE_PREFIX + MISMATCH,
        "DynamoDB rejected the request because you retried a request with a different "
        "payload but with an idempotent token that was already used.",
    )
    # The service model names the member `Message` (botocore reads either spelling).
    error.description = json.dumps({"__type": error.error_type, "Message": error.message})
    return error


def transact_write_items_response(self: Any) -> Any:
    """moto's DynamoHandler.transact_write_items with DynamoDB's `ClientRequestToken` rules
    (see the module's docstring)."""
    original = _saved["handler"]
    token = self.body.get("ClientRequestToken")
    if not token:
        return original(self)
    backend = self.dynamodb_backend
    request = _canonical_request(self.body)
    with _token_lock:
        tokens: dict[str, _Remembered] = backend.__dict__.setdefault(_TOKENS, {})
        now = token_clock()
        for stale in [t for t, seen in tokens.items() if now - seen.at_ms >= TOKEN_WINDOW_MS]:
            del tokens[stale]
        seen = tokens.get(token)
        if seen is not None:
            if seen.request != request:
                raise _mismatch()
            return copy.deepcopy(seen.answer)
        answer = original(self)
        tokens[token] = _Remembered(request, token_clock(), copy.deepcopy(answer))
        return answer


_saved: dict[str, Callable[..., Any]] = {}  # moto's methods, once install() replaced them


def moto_original() -> Callable[..., None]:
    """moto's own transact_write_items, whether or not `install()` has run (the differential
    test and the benchmark run it side by side with the patched one)."""
    from moto.dynamodb.models import DynamoDBBackend

    if "moto" in _saved:
        return _saved["moto"]
    method: Callable[..., None] = DynamoDBBackend.transact_write_items
    return method


def installed() -> bool:
    """Whether moto's DynamoDB backends run the transactions of this module (and its
    `ClientRequestToken` rules)."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    return (
        DynamoDBBackend.transact_write_items is transact_write_items
        and DynamoHandler.transact_write_items is transact_write_items_response
    )


def install() -> None:
    """Make every moto DynamoDB backend in this process (the in-process mock and the embedded
    server alike) run `transact_write_items` above, and its handler keep `ClientRequestToken`s.
    Idempotent. Raises MotoVersionError, and changes nothing, when the installed moto is not
    PINNED_MOTO_VERSION."""
    require_pinned_moto("transactions", "transact_write_items")
    if installed():
        return
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    if DynamoDBBackend.transact_write_items is not transact_write_items:
        _saved["moto"] = DynamoDBBackend.transact_write_items
        DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    if DynamoHandler.transact_write_items is not transact_write_items_response:
        _saved["handler"] = DynamoHandler.transact_write_items
        DynamoHandler.transact_write_items = transact_write_items_response  # type: ignore[method-assign]
