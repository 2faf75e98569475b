"""SetAsideStore: where the API's DLQ redrive keeps a poison message before deleting it from the
DLQ (the CLI keeps them in a file; a Lambda has no file that outlives it). One item per message,
`SETASIDE#<message id>`, written whole (an SQS body is at most 256 KiB, an item 400 KB) with who,
when and why, and kept 30 days (TTL) for an operator to read with the table's own tools."""

from __future__ import annotations

from dataclasses import dataclass

from leasehold.domain.types import JsonObject
from leasehold.store.expressions import Expression
from leasehold.store.items import JOB_TTL_SECONDS
from leasehold.store.table import ConditionFailed, Table

SET_ASIDE_PREFIX = "SETASIDE#"
EXCERPT_CHARS = 200
"""How much of a poison message's body the redrive's report shows (the store keeps it whole)."""


@dataclass(frozen=True)
class SetAside:
    """A poison dead letter: why it cannot wake a job, and the message as SQS held it."""

    message_id: str
    reason: str
    body: str
    job_id: str | None = None

    def as_dict(self, *, whole: bool = False) -> JsonObject:
        body = (
            self.body
            if whole or len(self.body) <= EXCERPT_CHARS
            else (self.body[:EXCERPT_CHARS] + "…")
        )
        answer: JsonObject = {"message_id": self.message_id, "reason": self.reason}
        if self.job_id is not None:
            answer["job_id"] = self.job_id
        answer["body"] = body
        return answer


class SetAsideStore:
    def __init__(self, table: Table) -> None:
        self._table = table

    def keep(self, poison: SetAside, *, by: str, note: str, now: int) -> None:
        """Keep one poison message, whole, with who set it aside, when and why (once: the same
        message kept again is already there). Raises StoreUnavailableError when the store
        cannot take it, and then the caller leaves the message in the DLQ."""
        expr = Expression()
        expr.condition(f"attribute_not_exists({expr.name('pk')})")
        expr.set("message_id", poison.message_id).set("reason", poison.reason)
        expr.set("body", poison.body)
        expr.set("by", by).set("note", note).set("set_aside_at", now)
        expr.set("expires_at", now // 1000 + JOB_TTL_SECONDS)
        if poison.job_id is not None:
            expr.set("job_id", poison.job_id)
        key = {"pk": {"S": f"{SET_ASIDE_PREFIX}{poison.message_id}"}, "sk": {"S": "SETASIDE"}}
        try:
            self._table.update(expr.update_params(key), return_new=False)
        except ConditionFailed:
            return  # kept by an earlier redrive that stopped before the delete
