"""Cursors: a listing's next page is the query's own LastEvaluatedKey, base64 JSON, and a cursor
that is not one this API returned (another partition's, a forged one) is a 400."""

from __future__ import annotations

import base64
import json
from typing import Any

from leasehold.domain.errors import ValidationError
from leasehold.domain.types import RawItem
from leasehold.store.shards import base_of

MAX_KEY_BYTES = 1024
"""DynamoDB's limit for a sort key (a partition key may be 2,048 bytes; none of ours come close)."""


def encode_cursor(key: RawItem | None) -> str | None:
    if not key:
        return None
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode()


def cursor_partition(cursor: str | None) -> str | None:
    """The index partition a cursor of ours is in (None: no cursor, or not one of ours — which
    decode_cursor then refuses)."""
    if not cursor:
        return None
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        partition = key["gsi1pk"]["S"]
    except (ValueError, UnicodeDecodeError, TypeError, KeyError):
        return None
    return partition if isinstance(partition, str) else None


def decode_cursor(
    cursor: str | None,
    *,
    partition_attribute: str,
    partition: str,
    sort_attribute: str,
    index_keys: bool = True,
) -> RawItem | None:
    """A cursor is the LastEvaluatedKey of the same query: the table key and the index key, each
    a string, in the partition being queried (DynamoDB refuses a start key from another
    partition with a ValidationException). Anything else is a 400 here — including what moto
    takes but DynamoDB refuses with a ValidationException (a 500 if it got that far): an empty
    key value, one longer than a key may be (1,024 bytes), a value with a second type."""
    if not cursor:
        return None
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationError("'cursor' is not a cursor this API returned") from exc
    expected = {"pk", "sk", partition_attribute, sort_attribute} if index_keys else {"pk", "sk"}
    if (
        not isinstance(key, dict)
        or set(key) != expected
        or not all(_is_key_string(value) for value in key.values())
        or key[partition_attribute]["S"] != partition
    ):
        raise ValidationError("'cursor' is not a cursor this API returned")
    return key


def decode_sharded_cursor(cursor: str | None, *, base: str) -> tuple[str, RawItem] | None:
    """A cursor of a merged listing of `base`'s shards (decision SH2): the index key of the
    last entry a page examined, in any shard of `base`. Returns (its sort key, after which every
    shard resumes; the key); anything else is a 400, as `decode_cursor` says."""
    if not cursor:
        return None
    partition = cursor_partition(cursor)
    if partition is None or base_of(partition) != base:
        raise ValidationError("'cursor' is not a cursor this API returned")
    key = decode_cursor(
        cursor, partition_attribute="gsi1pk", partition=partition, sort_attribute="gsi1sk"
    )
    assert key is not None
    return str(key["gsi1sk"]["S"]), key


def _is_key_string(value: Any) -> bool:
    """`{"S": <1 to 1,024 bytes>}`: a string key attribute DynamoDB takes in a start key."""
    if not isinstance(value, dict) or set(value) != {"S"} or not isinstance(value["S"], str):
        return False
    try:
        size = len(value["S"].encode())
    except UnicodeEncodeError:  # a lone surrogate from a JSON "\\udc00" escape
        return False
    return 1 <= size <= MAX_KEY_BYTES
