"""The only place that knows DynamoDB and SQS: keys, items, conditions, transactions.

One `Table` (the door every request goes through, store/table.py) is shared by the stores of the
job's room, each owning one kind of write: `JobStore` (accept and reads), `LeaseStore` (the
worker's fenced writes), `UpkeepStore` (the sweeper's), `ControlStore` (the caller's controls)
and `OperatorStore` (replay, resolve)."""

from __future__ import annotations

from dataclasses import dataclass

from leasehold.store.controls import ControlStore
from leasehold.store.jobs import JobStore
from leasehold.store.leases import LeaseStore, LedgerStore
from leasehold.store.operator import OperatorStore
from leasehold.store.slots import ClaimStores
from leasehold.store.table import Table
from leasehold.store.upkeep import UpkeepStore


@dataclass(frozen=True)
class Stores:
    table: Table
    claims: ClaimStores
    """The slots and rates a claim takes before its write (service/claiming.py)."""
    jobs: JobStore
    leases: LeaseStore
    ledger: LedgerStore
    upkeep: UpkeepStore
    controls: ControlStore
    operator: OperatorStore

    @staticmethod
    def over(table: Table, slot_limit: int = 0, slot_grace_ms: int = 120_000) -> Stores:
        """`slot_limit`: the per-user concurrency limit (0 = none); `slot_grace_ms`: how old a
        slot entry nobody holds must be before it is freed (twice the lease)."""
        claims = ClaimStores.over(table, slot_limit, slot_grace_ms)
        leases = LeaseStore(table, claims)
        return Stores(
            table=table,
            claims=claims,
            jobs=JobStore(table),
            leases=leases,
            ledger=LedgerStore(table),
            upkeep=UpkeepStore(table, leases),
            controls=ControlStore(table),
            operator=OperatorStore(table),
        )


__all__ = ["Stores", "Table"]
