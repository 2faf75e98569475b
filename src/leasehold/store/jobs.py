"""JobStore: how a job comes into the table and how it is read back — accept (job + outbox
wake-up + idempotency key in one transaction, DESIGN §3.1), get, and the two listings."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from leasehold.domain.errors import (
    IdempotencyConflictError,
    JobNotFoundError,
    LeaseholdError,
    ValidationError,
)
from leasehold.domain.job import Job, Owner
from leasehold.domain.states import JobState
from leasehold.store.guards import idempotency_put, new_job_writes
from leasehold.store.items import (
    OWNER_INDEX,
    STATE_INDEX,
    deserialize_item,
    idempotency_key,
    job_from_item,
    job_key,
    owner_partition,
    state_partition,
)
from leasehold.store.table import ConditionFailed, Table


@dataclass(frozen=True)
class AcceptResult:
    job_id: str
    created: bool


def fingerprint_hash(fingerprint: str) -> str:
    return hashlib.sha256(fingerprint.encode()).hexdigest()


def request_token(owner: Owner, idempotency: str, fp_hash: str) -> str:
    """Same key and body → same ClientRequestToken: an SDK retry of a commit whose answer was
    lost succeeds on DynamoDB instead of failing its own condition."""
    source = f"{owner.tenant}|{owner.user_id}|{idempotency}|{fp_hash}"
    return hashlib.sha256(source.encode()).hexdigest()[:36]


def repeated_request(
    table: Table, failed: ConditionFailed, index: int, owner: Owner, idempotency: str, fp_hash: str
) -> dict[str, Any]:
    """The key item a repeat met (from the failure, else read): the same body answers what the
    first request made; another body is IdempotencyConflictError."""
    item = failed.old_item(index) or table.get(idempotency_key(owner, idempotency))
    if not item:
        raise LeaseholdError("the idempotency key vanished while it was being read")
    existing = deserialize_item(item)
    if existing["fingerprint"] != fp_hash:
        raise IdempotencyConflictError() from failed
    return existing


def encode_cursor(key: dict[str, Any] | None) -> str | None:
    if not key:
        return None
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode()


def decode_cursor(
    cursor: str | None,
    *,
    partition_attribute: str,
    partition: str,
    sort_attribute: str,
    index_keys: bool = True,
) -> dict[str, Any] | None:
    """A cursor is the LastEvaluatedKey of the same query: the table key and the index key, each
    a string, in the partition being queried (DynamoDB refuses a start key from another
    partition with a ValidationException). Anything else is a 400 here."""
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
        or not all(isinstance(v, dict) and isinstance(v.get("S"), str) for v in key.values())
        or key[partition_attribute]["S"] != partition
    ):
        raise ValidationError("'cursor' is not a cursor this API returned")
    return key


class JobStore:
    def __init__(self, table: Table) -> None:
        self._table = table

    def accept(self, job: Job, *, idempotency: str | None, fingerprint: str) -> AcceptResult:
        """Job + outbox wake-up (+ idempotency key) in one transaction, each Put conditional on
        `attribute_not_exists`. Returns only after the commit (DESIGN §3.1). The same key with
        the same body answers the first job; with another body, IdempotencyConflictError."""
        items = new_job_writes(job)
        fp_hash = fingerprint_hash(fingerprint)
        token = None
        if idempotency is not None:
            items.append(
                idempotency_put(
                    job.owner,
                    idempotency,
                    fingerprint_hash=fp_hash,
                    created_at=job.created_at,
                    answer={"job_id": job.job_id},
                )
            )
            token = request_token(job.owner, idempotency, fp_hash)
        try:
            self._table.transact(items, token=token)
        except ConditionFailed as failed:
            if idempotency is not None and failed.failed_at(2):
                existing = repeated_request(self._table, failed, 2, job.owner, idempotency, fp_hash)
                return AcceptResult(job_id=existing["job_id"], created=False)
            if failed.failed_at(0):
                # Our own fresh id already exists: an earlier try of this very call committed
                # and its answer was lost (the SDK retried it). It is accepted.
                return AcceptResult(job_id=job.job_id, created=True)
            raise LeaseholdError("accept failed a condition it cannot explain") from failed
        return AcceptResult(job_id=job.job_id, created=True)

    def get(self, job_id: str) -> Job | None:
        item = self._table.get(job_key(job_id))
        return job_from_item(item) if item else None

    def get_owned(self, owner: Owner, job_id: str) -> Job:
        """The job if it is the caller's; otherwise the same JobNotFoundError as an unknown id."""
        job = self.get(job_id)
        if job is None or (job.owner.tenant, job.owner.user_id) != (owner.tenant, owner.user_id):
            raise JobNotFoundError(f"no job {job_id}")
        return job

    def list_for_owner(
        self, owner: Owner, *, state: JobState | None, limit: int, cursor: str | None
    ) -> tuple[list[Job], str | None]:
        """The owner's jobs, newest first (index `by_owner`, which projects `state`)."""
        partition = owner_partition(owner)
        params: dict[str, Any] = {
            "IndexName": OWNER_INDEX,
            "KeyConditionExpression": "gsi2pk = :p",
            "ExpressionAttributeValues": {":p": {"S": partition}},
            "ScanIndexForward": False,
        }
        if state is not None:
            params["FilterExpression"] = "#state = :s"
            params["ExpressionAttributeNames"] = {"#state": "state"}
            params["ExpressionAttributeValues"][":s"] = {"S": state.value}
        start = decode_cursor(
            cursor, partition_attribute="gsi2pk", partition=partition, sort_attribute="gsi2sk"
        )
        return self._query_jobs(params, limit=limit, start=start)

    def list_by_state(
        self, state: JobState, *, limit: int, cursor: str | None = None
    ) -> tuple[list[Job], str | None]:
        """Jobs in one state, oldest first (index `by_state`)."""
        partition = state_partition(state)
        params: dict[str, Any] = {
            "IndexName": STATE_INDEX,
            "KeyConditionExpression": "gsi1pk = :p",
            "ExpressionAttributeValues": {":p": {"S": partition}},
            "ScanIndexForward": True,
        }
        start = decode_cursor(
            cursor, partition_attribute="gsi1pk", partition=partition, sort_attribute="gsi1sk"
        )
        return self._query_jobs(params, limit=limit, start=start)

    def count_by_state(self, state: JobState, *, max_pages: int = 10) -> int:
        """Count of jobs in a state from the index (bounded: at most `max_pages` pages)."""
        params: dict[str, Any] = {
            "IndexName": STATE_INDEX,
            "KeyConditionExpression": "gsi1pk = :p",
            "ExpressionAttributeValues": {":p": {"S": state_partition(state)}},
            "Select": "COUNT",
        }
        total = 0
        for _ in range(max_pages):
            page = self._table.query(**params)
            total += page["Count"]
            if "LastEvaluatedKey" not in page:
                break
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return total

    def _query_jobs(
        self,
        params: dict[str, Any],
        *,
        limit: int,
        start: dict[str, Any] | None,
        max_pages: int = 5,
    ) -> tuple[list[Job], str | None]:
        keys: list[dict[str, Any]] = []
        last_key: dict[str, Any] | None = None
        for _ in range(max_pages):
            page_params = dict(params, Limit=limit - len(keys))
            if start:
                page_params["ExclusiveStartKey"] = start
            page = self._table.query(**page_params)
            keys.extend({"pk": item["pk"], "sk": item["sk"]} for item in page["Items"])
            last_key = page.get("LastEvaluatedKey")
            if not last_key or len(keys) >= limit:
                break
            start = last_key
        found = {item["pk"]["S"]: job_from_item(item) for item in self._table.batch_get(keys)}
        jobs = [found[key["pk"]["S"]] for key in keys if key["pk"]["S"] in found]
        return jobs, encode_cursor(last_key)
