"""Index shards (decision SH1): every `by_state` key a job or a schedule touches — the active
jobs, the delayed ones, each terminal state, the due schedules — is spread over `count` partition
keys by a stable hash of the item's id, so no one key takes every accept and every success.

Shard 0 is the bare base key (`STATE#active`), shard k > 0 is `STATE#active#k`: a table written
before sharding is a table with count 1, and raising the count on a live table loses nothing — a
reader of N shards reads every key a writer of fewer shards used (decision SH3)."""

from __future__ import annotations

import zlib

MAX_SHARDS = 256
"""The most shards a deployment may ask for (`IndexShards`): a page of a merged listing costs one
Query per shard."""


def shard_of(item_id: str, count: int) -> int:
    """The item's shard among `count`: CRC-32 of its id (stable across processes and Python
    versions, unlike `hash()`), modulo the count."""
    if count <= 1:
        return 0
    return zlib.crc32(item_id.encode()) % count


def shard_key(base: str, shard: int) -> str:
    """The partition key of shard `shard` of `base`: the base itself for shard 0."""
    return base if shard == 0 else f"{base}#{shard}"


def shard_keys(base: str, count: int) -> list[str]:
    """Every partition key of `base` over `count` shards, shard 0 first."""
    return [shard_key(base, shard) for shard in range(max(count, 1))]


def item_key(base: str, item_id: str, count: int) -> str:
    """The partition key an item with this id is written under."""
    return shard_key(base, shard_of(item_id, count))


def base_of(key: str) -> str:
    """The base key of a shard key (`STATE#active#7` → `STATE#active`)."""
    head, _, tail = key.rpartition("#")
    return head if head and tail.isdigit() else key
