"""Per-user concurrency slots (decision D4): one item per tenant+user holding the ids of the
jobs that run. Taking a slot shares a transaction with the claim; every write that takes a job
out of `running` releases it in the same transaction, so the count is never wrong for long."""

from __future__ import annotations

from typing import Any

from leasehold.domain.job import Job, Owner
from leasehold.store.expressions import Expression
from leasehold.store.items import deserialize_item, slots_key
from leasehold.store.table import Table


def take_slot(job_id: str, owner: Owner, limit: int) -> dict[str, Any]:
    """The transaction item that adds the job to its owner's holders, if one is free (a job that
    already holds one — re-claimed after its own lease expired — keeps it)."""
    expr = Expression()
    holders = expr.name("holders")
    expr.condition(
        f"attribute_not_exists({holders}) OR size({holders}) < {expr.value(limit)}"
        f" OR contains({holders}, {expr.value(job_id)})"
    )
    expr.add_to_set("holders", job_id)
    params = expr.update_params(slots_key(owner))
    params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return {"Update": params}


def release_slot(job: Job) -> dict[str, Any]:
    """The transaction item that frees the job's slot (a no-op when it holds none)."""
    expr = Expression().delete_from_set("holders", job.job_id)
    return {"Update": expr.update_params(slots_key(job.owner))}


def running_slots(table: Table, owner: Owner) -> set[str]:
    """Jobs holding one of the owner's slots (for tests and the operator view)."""
    item = table.get(slots_key(owner))
    return set(deserialize_item(item).get("holders", set())) if item else set()
