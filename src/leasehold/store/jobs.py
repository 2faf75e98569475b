"""JobStore: every state change is one conditional write or one transaction, guarded by the
current state and, for a worker, by the fencing epoch and the lease (DESIGN §3)."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.domain.errors import (
    ClaimRejectedError,
    ConflictError,
    IdempotencyConflictError,
    JobNotFoundError,
    LeaseholdError,
    SlotsFullError,
    StaleEpochError,
    ValidationError,
)
from leasehold.domain.job import Checkpoint, Job, Owner
from leasehold.domain.states import REPLAYABLE_STATES, JobState, StopReason, is_terminal
from leasehold.store.errors import error_code, translate
from leasehold.store.expressions import Expression
from leasehold.store.items import (
    IDEMPOTENCY_TTL_SECONDS,
    OWNER_INDEX,
    STATE_INDEX,
    deserialize_item,
    idempotency_key,
    job_from_item,
    job_key,
    new_job_item,
    outbox_item,
    owner_partition,
    slots_key,
    state_partition,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient


class ClaimRejection:
    """Why a claim's condition failed, read from the item DynamoDB returned with the failure."""

    NOT_FOUND = "not_found"
    TERMINAL = "terminal"
    PAUSED = "paused"
    UNCERTAIN = "uncertain"
    LEASED = "leased"
    NOT_DUE = "not_due"
    EFFECT_OPEN = "effect_open"
    DEADLINE = "deadline"
    EXHAUSTED = "exhausted"


@dataclass(frozen=True)
class AcceptResult:
    job_id: str
    created: bool


def _encode_cursor(key: dict[str, Any] | None) -> str | None:
    if not key:
        return None
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode()


def _decode_cursor(cursor: str | None, index_keys: set[str]) -> dict[str, Any] | None:
    """A cursor is the LastEvaluatedKey of the same index: the table key and the index key, each
    a string. Anything else is refused here rather than sent to DynamoDB."""
    if not cursor:
        return None
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationError("'cursor' is not a cursor this API returned") from exc
    expected = {"pk", "sk"} | index_keys
    if (
        not isinstance(key, dict)
        or set(key) != expected
        or not all(isinstance(v, dict) and isinstance(v.get("S"), str) for v in key.values())
    ):
        raise ValidationError("'cursor' is not a cursor this API returned")
    return key


def _fingerprint_hash(fingerprint: str) -> str:
    return hashlib.sha256(fingerprint.encode()).hexdigest()


class JobStore:
    """The table of DESIGN §1. `slot_limit` is the per-user concurrency limit (0 = no limit):
    with a limit, taking and releasing a slot share a transaction with the job's own write."""

    def __init__(self, client: DynamoDBClient, table_name: str, slot_limit: int = 0) -> None:
        self._db = client
        self._table = table_name
        self._slot_limit = slot_limit

    # ---------------------------------------------------------------- accept and read

    def accept(
        self,
        job: Job,
        *,
        idempotency: str | None,
        fingerprint: str,
    ) -> AcceptResult:
        """Job + outbox wake-up (+ idempotency key) in one transaction, each Put conditional on
        `attribute_not_exists`. Returns only after the commit (DESIGN §3.1)."""
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": new_job_item(job),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Put": {
                    "TableName": self._table,
                    "Item": outbox_item(
                        job.job_id,
                        job.owner,
                        version=job.version,
                        deliver_at=job.created_at,
                        now_ms=job.created_at,
                    ),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ]
        params: dict[str, Any] = {"TransactItems": items}
        fp_hash = _fingerprint_hash(fingerprint)
        if idempotency is not None:
            key = idempotency_key(job.owner, idempotency)
            items.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": {
                            **key,
                            "job_id": {"S": job.job_id},
                            "fingerprint": {"S": fp_hash},
                            "expires_at": {
                                "N": str(job.created_at // 1000 + IDEMPOTENCY_TTL_SECONDS)
                            },
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
            )
            # Same key and body → same token: an SDK retry of a commit whose answer was lost
            # succeeds instead of failing its own condition.
            token_source = f"{job.owner.tenant}|{job.owner.user_id}|{idempotency}|{fp_hash}"
            params["ClientRequestToken"] = hashlib.sha256(token_source.encode()).hexdigest()[:36]
        try:
            self._db.transact_write_items(**params)
        except ClientError as exc:
            code = error_code(exc)
            if idempotency is None or code not in {
                "TransactionCanceledException",
                "IdempotentParameterMismatchException",
            }:
                raise translate(exc) from exc
            existing = self._existing_idempotency_item(exc, job.owner, idempotency)
            if existing is None:
                raise translate(exc) from exc
            if existing["fingerprint"] != fp_hash:
                raise IdempotencyConflictError() from exc
            return AcceptResult(job_id=existing["job_id"], created=False)
        except BotoCoreError as exc:
            raise translate(exc) from exc
        return AcceptResult(job_id=job.job_id, created=True)

    def _existing_idempotency_item(
        self, exc: ClientError, owner: Owner, idempotency: str
    ) -> dict[str, Any] | None:
        reasons = exc.response.get("CancellationReasons") or []
        if len(reasons) >= 3 and reasons[2].get("Code") == "ConditionalCheckFailed":
            item = reasons[2].get("Item")
            if item:
                return deserialize_item(item)
        try:
            found = self._db.get_item(
                TableName=self._table, Key=idempotency_key(owner, idempotency), ConsistentRead=True
            ).get("Item")
        except (ClientError, BotoCoreError) as read_exc:
            raise translate(read_exc) from read_exc
        return deserialize_item(found) if found else None

    def get(self, job_id: str) -> Job | None:
        try:
            item = self._db.get_item(
                TableName=self._table, Key=job_key(job_id), ConsistentRead=True
            ).get("Item")
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
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
        params: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": OWNER_INDEX,
            "KeyConditionExpression": "gsi2pk = :p",
            "ExpressionAttributeValues": {":p": {"S": owner_partition(owner)}},
            "ScanIndexForward": False,
        }
        if state is not None:
            params["FilterExpression"] = "#state = :s"
            params["ExpressionAttributeNames"] = {"#state": "state"}
            params["ExpressionAttributeValues"][":s"] = {"S": state.value}
        return self._query_jobs(params, limit=limit, cursor=cursor)

    def list_by_state(
        self, state: JobState, *, limit: int, cursor: str | None = None
    ) -> tuple[list[Job], str | None]:
        """Jobs in one state, oldest first (index `by_state`)."""
        params: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": STATE_INDEX,
            "KeyConditionExpression": "gsi1pk = :p",
            "ExpressionAttributeValues": {":p": {"S": state_partition(state)}},
            "ScanIndexForward": True,
        }
        return self._query_jobs(params, limit=limit, cursor=cursor)

    def count_by_state(self, state: JobState, *, max_pages: int = 10) -> int:
        """Count of jobs in a state from the index (bounded: at most `max_pages` pages)."""
        params: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": STATE_INDEX,
            "KeyConditionExpression": "gsi1pk = :p",
            "ExpressionAttributeValues": {":p": {"S": state_partition(state)}},
            "Select": "COUNT",
        }
        total = 0
        try:
            for _ in range(max_pages):
                page = self._db.query(**params)
                total += page["Count"]
                if "LastEvaluatedKey" not in page:
                    break
                params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
        return total

    def _query_jobs(
        self, params: dict[str, Any], *, limit: int, cursor: str | None, max_pages: int = 5
    ) -> tuple[list[Job], str | None]:
        keys: list[dict[str, Any]] = []
        index_keys = (
            {"gsi1pk", "gsi1sk"} if params["IndexName"] == STATE_INDEX else {"gsi2pk", "gsi2sk"}
        )
        start = _decode_cursor(cursor, index_keys)
        last_key: dict[str, Any] | None = None
        try:
            for _ in range(max_pages):
                page_params = dict(params, Limit=limit - len(keys))
                if start:
                    page_params["ExclusiveStartKey"] = start
                page = self._db.query(**page_params)
                keys.extend({"pk": item["pk"], "sk": item["sk"]} for item in page["Items"])
                last_key = page.get("LastEvaluatedKey")
                if not last_key or len(keys) >= limit:
                    break
                start = last_key
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
        return self._batch_get(keys), _encode_cursor(last_key)

    def _batch_get(self, keys: list[dict[str, Any]]) -> list[Job]:
        found: dict[str, Job] = {}
        pending = list(keys)
        try:
            for _ in range(10):
                if not pending:
                    break
                chunk, pending = pending[:100], pending[100:]
                answer = self._db.batch_get_item(
                    RequestItems={self._table: {"Keys": chunk, "ConsistentRead": True}}
                )
                for item in answer["Responses"].get(self._table, []):
                    found[item["pk"]["S"]] = job_from_item(item)
                unprocessed = (
                    cast(dict[str, Any], answer.get("UnprocessedKeys") or {})
                    .get(self._table, {})
                    .get("Keys")
                )
                if unprocessed:
                    pending = unprocessed + pending
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
        return [found[key["pk"]["S"]] for key in keys if key["pk"]["S"] in found]

    # ---------------------------------------------------------------- the worker's writes

    def claim(self, job_id: str, owner: Owner, *, worker_id: str, now: int, lease_ms: int) -> Job:
        """One conditional write (with a per-user limit: one transaction with the slot take)
        that makes this worker the only valid holder: epoch + 1, attempts + 1, a new lease
        (DESIGN §3.2). Raises ClaimRejectedError with the reason read from the failed item, or
        SlotsFullError."""
        expr = Expression()
        state, attempts = expr.name("state"), expr.name("attempts")
        lease, deadline = expr.name("lease_expires_at"), expr.name("deadline_at")
        max_attempts, effect = expr.name("max_attempts"), expr.name("effect_intent")
        queued, running, now_v = (
            expr.value(JobState.QUEUED.value),
            expr.value(JobState.RUNNING.value),
            expr.value(now),
        )
        expr.condition(
            f"{expr.name('tenant')} = {expr.value(owner.tenant)}"
            f" AND {expr.name('user_id')} = {expr.value(owner.user_id)}"
        )
        expr.condition(
            f"({state} = {queued} AND {expr.name('next_attempt_at')} <= {now_v}"
            f" AND {deadline} > {now_v} AND {attempts} < {max_attempts})"
            f" OR ({state} = {running} AND {lease} < {now_v} AND {deadline} > {now_v}"
            f" AND {attempts} < {max_attempts} AND attribute_not_exists({effect}))"
        )
        expr.set("state", JobState.RUNNING.value).increment("epoch").increment("attempts")
        expr.set("lease_owner", worker_id).set("lease_expires_at", now + lease_ms)
        expr.set("gsi1pk", state_partition(JobState.RUNNING)).set("updated_at", now)
        expr.increment("version").remove("next_attempt_at")
        update = expr.update_params(self._table, job_key(job_id))
        try:
            if self._slot_limit <= 0:
                answer = self._db.update_item(
                    **update, ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD"
                )
                return job_from_item(answer["Attributes"])
            claim_items: list[Any] = [
                {"Update": {**update, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
                {"Update": self._take_slot_params(job_id, owner)},
            ]
            self._db.transact_write_items(TransactItems=claim_items)
        except ClientError as exc:
            raise self._claim_failure(exc, job_id, now) from exc
        except BotoCoreError as exc:
            raise translate(exc) from exc
        # A transaction returns no attributes; the claimed item is read once, strongly.
        job = self.get(job_id)
        if job is None:  # pragma: no cover - the transaction just wrote it
            raise ClaimRejectedError(ClaimRejection.NOT_FOUND)
        return job

    def _take_slot_params(self, job_id: str, owner: Owner) -> dict[str, Any]:
        expr = Expression()
        holders = expr.name("holders")
        expr.condition(
            f"attribute_not_exists({holders}) OR size({holders}) < {expr.value(self._slot_limit)}"
            f" OR contains({holders}, {expr.value(job_id)})"
        )
        expr.add_to_set("holders", job_id)
        params = expr.update_params(self._table, slots_key(owner))
        params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return params

    def _claim_failure(self, exc: ClientError, job_id: str, now: int) -> LeaseholdError:
        code = error_code(exc)
        if code == "ConditionalCheckFailedException":
            item = cast(dict[str, Any] | None, exc.response.get("Item"))
            return self._classify_claim(job_from_item(item) if item else None, now)
        if code == "TransactionCanceledException":
            reasons = exc.response.get("CancellationReasons") or []
            job_reason = reasons[0] if reasons else {}
            slot_reason = reasons[1] if len(reasons) > 1 else {}
            if job_reason.get("Code") == "ConditionalCheckFailed":
                old_item = job_reason.get("Item")
                return self._classify_claim(job_from_item(old_item) if old_item else None, now)
            if slot_reason.get("Code") == "ConditionalCheckFailed":
                return SlotsFullError(f"per-user limit of {self._slot_limit} running jobs reached")
        return translate(exc)

    @staticmethod
    def _classify_claim(job: Job | None, now: int) -> ClaimRejectedError:
        if job is None:
            return ClaimRejectedError(ClaimRejection.NOT_FOUND)
        if is_terminal(job.state):
            return ClaimRejectedError(ClaimRejection.TERMINAL, job)
        if job.state is JobState.WAITING_APPROVAL:
            return ClaimRejectedError(ClaimRejection.PAUSED, job)
        if job.state is JobState.UNKNOWN:
            return ClaimRejectedError(ClaimRejection.UNCERTAIN, job)
        if job.state is JobState.RUNNING and (job.lease_expires_at or 0) >= now:
            return ClaimRejectedError(ClaimRejection.LEASED, job)
        if job.state is JobState.RUNNING and job.effect_intent:
            return ClaimRejectedError(ClaimRejection.EFFECT_OPEN, job)
        if job.deadline_at <= now:
            return ClaimRejectedError(ClaimRejection.DEADLINE, job)
        if job.attempts >= job.max_attempts:
            return ClaimRejectedError(ClaimRejection.EXHAUSTED, job)
        return ClaimRejectedError(ClaimRejection.NOT_DUE, job)

    def _fenced(self, job: Job, now: int, *, require_deadline: bool = True) -> Expression:
        """The guard of every later worker write (DESIGN §3.3): my epoch, still running, my lease
        not expired, the deadline not passed. Bumps `version` and `updated_at`."""
        expr = Expression()
        now_v = expr.value(now)
        expr.condition(
            f"{expr.name('epoch')} = {expr.value(job.epoch)}"
            f" AND {expr.name('state')} = {expr.value(JobState.RUNNING.value)}"
            f" AND {expr.name('lease_expires_at')} > {now_v}"
        )
        if require_deadline:
            expr.condition(f"{expr.name('deadline_at')} > {now_v}")
        expr.increment("version").set("updated_at", now)
        return expr

    def _update_returning(self, expr: Expression, job_id: str, *, stale_message: str) -> Job:
        try:
            answer = self._db.update_item(
                **expr.update_params(self._table, job_key(job_id)), ReturnValues="ALL_NEW"
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise StaleEpochError(stale_message) from exc
            raise translate(exc) from exc
        except BotoCoreError as exc:
            raise translate(exc) from exc
        return job_from_item(answer["Attributes"])

    def heartbeat(self, job: Job, *, now: int, lease_ms: int) -> Job:
        """Extend my lease; returns the item so the worker sees `cancel_requested`."""
        expr = self._fenced(job, now).set("lease_expires_at", now + lease_ms)
        return self._update_returning(
            expr, job.job_id, stale_message="heartbeat under a lost lease"
        )

    def save_checkpoint(self, job: Job, checkpoint: Checkpoint, *, now: int, lease_ms: int) -> Job:
        """Progress after a finished step, under the lease; clears an open effect (it finished)
        and extends the lease."""
        expr = self._fenced(job, now)
        self._set_checkpoint(expr, checkpoint)
        expr.set("lease_expires_at", now + lease_ms).remove("effect_intent")
        return self._update_returning(
            expr, job.job_id, stale_message="checkpoint under a lost lease"
        )

    def record_effect_intent(self, job: Job, intent: dict[str, Any], *, now: int) -> Job:
        """The ledger entry written before an external effect (DESIGN §3.6): while it is open, an
        expired lease makes the job `unknown`, never an automatic retry."""
        expr = self._fenced(job, now).set("effect_intent", intent)
        return self._update_returning(
            expr, job.job_id, stale_message="effect intent under a lost lease"
        )

    @staticmethod
    def _set_checkpoint(expr: Expression, checkpoint: Checkpoint) -> None:
        expr.set("next_step", checkpoint.next_step).set("cost_used", checkpoint.cost_used)
        expr.set("steps_used", checkpoint.steps_used).set("step_failures", checkpoint.step_failures)
        expr.set("outputs", json.dumps(checkpoint.outputs, separators=(",", ":")))

    def finish(
        self,
        job: Job,
        target: JobState,
        *,
        now: int,
        checkpoint: Checkpoint,
        result: Any = None,
        error: dict[str, str] | None = None,
        stop_reason: StopReason | None = None,
        retry_at: int | None = None,
        approval: dict[str, Any] | None = None,
        history_entry: dict[str, Any] | None = None,
    ) -> None:
        """The outcome of this worker's attempt, under the fence (DESIGN §3.3–3.5), in one
        transaction with the per-user slot release and, for a retry, the delayed wake-up.
        Raises StaleEpochError when the epoch, state, lease or deadline no longer match."""
        expr = self._fenced(job, now, require_deadline=target is not JobState.DEAD)
        self._set_checkpoint(expr, checkpoint)
        expr.set("state", target.value).set("gsi1pk", state_partition(target))
        expr.remove("lease_owner", "lease_expires_at", "effect_intent")
        if result is not None:
            expr.set("result", json.dumps(result, separators=(",", ":")))
        if error is not None:
            expr.set("error", error)
        if stop_reason is not None:
            expr.set("stop_reason", stop_reason.value)
        if history_entry is not None:
            expr.set_raw(
                "history",
                f"list_append(if_not_exists({{x}}, {expr.value([])}), "
                f"{expr.value([history_entry])})",
            )
        extra: list[dict[str, Any]] = []
        if target is JobState.QUEUED:
            assert retry_at is not None, "a retry needs retry_at"
            expr.set("next_attempt_at", retry_at).set("last_dispatch_at", now)
            extra.append(
                self._outbox_put(
                    job.job_id, job.owner, version=job.version + 1, deliver_at=retry_at, now=now
                )
            )
        if target is JobState.WAITING_APPROVAL:
            assert approval is not None, "a pause needs the approval request"
            # A pause is not a failed try: the attempt it used is given back.
            expr.set("approval", approval).increment("attempts", -1)
        self._write(
            expr, job, extra, release_slot=True, stale_message=f"{target} under a lost lease"
        )

    def _outbox_put(
        self, job_id: str, owner: Owner, *, version: int, deliver_at: int, now: int
    ) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self._table,
                "Item": outbox_item(
                    job_id, owner, version=version, deliver_at=deliver_at, now_ms=now
                ),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _release_slot(self, job: Job) -> dict[str, Any]:
        expr = Expression().delete_from_set("holders", job.job_id)
        return {"Update": expr.update_params(self._table, slots_key(job.owner))}

    def _write(
        self,
        expr: Expression,
        job: Job,
        extra: list[dict[str, Any]],
        *,
        release_slot: bool,
        stale_message: str,
        return_old: bool = False,
    ) -> None:
        """One UpdateItem when it alone gives the guarantee; a transaction when the slot release
        or a wake-up must commit with it."""
        update = expr.update_params(self._table, job_key(job.job_id))
        items = list(extra)
        if release_slot and self._slot_limit > 0:
            items.append(self._release_slot(job))
        try:
            if not items:
                self._db.update_item(**update)
                return
            transaction: list[Any] = [{"Update": update}, *items]
            self._db.transact_write_items(TransactItems=transaction)
        except ClientError as exc:
            code = error_code(exc)
            reasons = exc.response.get("CancellationReasons") or [{}]
            if code == "ConditionalCheckFailedException" or (
                code == "TransactionCanceledException"
                and reasons[0].get("Code") == "ConditionalCheckFailed"
            ):
                raise StaleEpochError(stale_message) from exc
            raise translate(exc) from exc
        except BotoCoreError as exc:
            raise translate(exc) from exc

    # ---------------------------------------------------------------- expired leases, sweeper

    def settle_expired_lease(
        self,
        job: Job,
        target: JobState,
        *,
        now: int,
        stop_reason: StopReason | None = None,
        error: dict[str, str] | None = None,
    ) -> None:
        """A `running` job whose lease (as last seen, `job.epoch`) expired: back to `queued` with a
        fresh wake-up (rescue), or to `unknown` (an effect was open) or `dead`. Conditional on
        the same epoch and the lease still expired, so a live worker is never overtaken."""
        expr = Expression()
        expr.condition(
            f"{expr.name('epoch')} = {expr.value(job.epoch)}"
            f" AND {expr.name('state')} = {expr.value(JobState.RUNNING.value)}"
            f" AND {expr.name('lease_expires_at')} < {expr.value(now)}"
        )
        expr.increment("version").set("updated_at", now)
        expr.set("state", target.value).set("gsi1pk", state_partition(target))
        expr.remove("lease_owner", "lease_expires_at")
        if stop_reason is not None:
            expr.set("stop_reason", stop_reason.value)
        if error is not None:
            expr.set("error", error)
        extra: list[dict[str, Any]] = []
        if target is JobState.QUEUED:
            expr.set("next_attempt_at", now).set("last_dispatch_at", now)
            extra.append(
                self._outbox_put(
                    job.job_id, job.owner, version=job.version + 1, deliver_at=now, now=now
                )
            )
        self._write(expr, job, extra, release_slot=True, stale_message="lease no longer expired")

    def expire_queued(self, job: Job, *, now: int) -> None:
        """A `queued` job whose deadline passed becomes `dead` / `deadline_exceeded`."""
        expr = Expression()
        expr.condition(
            f"{expr.name('state')} = {expr.value(JobState.QUEUED.value)}"
            f" AND {expr.name('deadline_at')} <= {expr.value(now)}"
        )
        expr.increment("version").set("updated_at", now)
        expr.set("state", JobState.DEAD.value).set("gsi1pk", state_partition(JobState.DEAD))
        expr.set("stop_reason", StopReason.DEADLINE_EXCEEDED.value)
        expr.set(
            "error", {"code": "deadline_exceeded", "message": "the deadline passed while queued"}
        )
        self._write(expr, job, [], release_slot=False, stale_message="no longer queued")

    def redispatch(self, job: Job, *, now: int) -> None:
        """A new wake-up for a due `queued` job whose last one was lost; conditional on the
        version seen, so two sweepers never both dispatch."""
        expr = Expression()
        expr.condition(
            f"{expr.name('state')} = {expr.value(JobState.QUEUED.value)}"
            f" AND {expr.name('version')} = {expr.value(job.version)}"
        )
        expr.increment("version").set("updated_at", now).set("last_dispatch_at", now)
        outbox = self._outbox_put(
            job.job_id, job.owner, version=job.version + 1, deliver_at=now, now=now
        )
        self._write(expr, job, [outbox], release_slot=False, stale_message="job changed meanwhile")

    # ---------------------------------------------------------------- the caller's controls

    def _owned_condition(self, expr: Expression, owner: Owner) -> None:
        expr.condition(
            f"{expr.name('tenant')} = {expr.value(owner.tenant)}"
            f" AND {expr.name('user_id')} = {expr.value(owner.user_id)}"
        )

    def _update_or_old(self, params: dict[str, Any]) -> tuple[Job | None, Job | None]:
        """Run a conditional update: (new job, None) when it applied, (None, old job or None)
        when its condition failed — the old item comes with the failure, not from a second read."""
        try:
            answer = self._db.update_item(
                **params, ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD"
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                item = cast(dict[str, Any] | None, exc.response.get("Item"))
                return None, job_from_item(item) if item else None
            raise translate(exc) from exc
        except BotoCoreError as exc:
            raise translate(exc) from exc
        return job_from_item(answer["Attributes"]), None

    @staticmethod
    def _require_owned(job: Job | None, owner: Owner, job_id: str) -> Job:
        if job is None or (job.owner.tenant, job.owner.user_id) != (owner.tenant, owner.user_id):
            raise JobNotFoundError(f"no job {job_id}")
        return job

    def cancel(self, owner: Owner, job_id: str, *, now: int) -> Job:
        """`queued` / `waiting_approval` → `cancelled` at once; `running` → `cancel_requested`
        (the worker stops before its next step); terminal → ConflictError."""
        for _ in range(3):  # the job may change state between the two guarded writes
            expr = Expression()
            self._owned_condition(expr, owner)
            state = expr.name("state")
            expr.condition(
                f"{state} IN ({expr.value(JobState.QUEUED.value)},"
                f" {expr.value(JobState.WAITING_APPROVAL.value)})"
            )
            expr.increment("version").set("updated_at", now)
            expr.set("state", JobState.CANCELLED.value)
            expr.set("gsi1pk", state_partition(JobState.CANCELLED))
            expr.set("stop_reason", StopReason.CANCELLED_BY_USER.value)
            expr.set("cancel_requested", True).remove("approval", "next_attempt_at")
            new, old = self._update_or_old(expr.update_params(self._table, job_key(job_id)))
            if new is not None:
                return new
            old = self._require_owned(old, owner, job_id)
            if old.state is not JobState.RUNNING:
                raise ConflictError(
                    f"job {job_id} is {old.state.value}; only queued, waiting or running jobs can "
                    "be cancelled",
                    code="not_cancellable",
                )
            expr = Expression()
            self._owned_condition(expr, owner)
            expr.condition(f"{expr.name('state')} = {expr.value(JobState.RUNNING.value)}")
            expr.increment("version").set("updated_at", now).set("cancel_requested", True)
            new, old = self._update_or_old(expr.update_params(self._table, job_key(job_id)))
            if new is not None:
                return new
        raise ConflictError(f"job {job_id} kept changing; try again", code="busy")

    def decide_approval(
        self, owner: Owner, job_id: str, *, version: int, approve: bool, now: int
    ) -> Job:
        """Approve (back to `queued` through the outbox, resuming at the paused step) or reject
        (`cancelled` / `approval_rejected`), only in `waiting_approval` at the given version."""
        expr = Expression()
        self._owned_condition(expr, owner)
        expr.condition(
            f"{expr.name('state')} = {expr.value(JobState.WAITING_APPROVAL.value)}"
            f" AND {expr.name('version')} = {expr.value(version)}"
        )
        expr.increment("version").set("updated_at", now).remove("approval")
        if approve:
            expr.set("state", JobState.QUEUED.value).set("gsi1pk", state_partition(JobState.QUEUED))
            expr.set_raw("approved_step", expr.name("next_step"))
            expr.set("next_attempt_at", now).set("last_dispatch_at", now)
        else:
            expr.set("state", JobState.CANCELLED.value)
            expr.set("gsi1pk", state_partition(JobState.CANCELLED))
            expr.set("stop_reason", StopReason.APPROVAL_REJECTED.value)
        update = expr.update_params(self._table, job_key(job_id))
        if not approve:
            new, old = self._update_or_old(update)
            if new is not None:
                return new
            raise self._approval_conflict(old, owner, job_id, version)
        try:
            approval_items: list[Any] = [
                {"Update": {**update, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
                self._outbox_put(job_id, owner, version=version + 1, deliver_at=now, now=now),
            ]
            self._db.transact_write_items(TransactItems=approval_items)
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons") or [{}]
            if reasons[0].get("Code") == "ConditionalCheckFailed":
                item = reasons[0].get("Item")
                raise self._approval_conflict(
                    job_from_item(item) if item else None, owner, job_id, version
                ) from exc
            raise translate(exc) from exc
        except BotoCoreError as exc:
            raise translate(exc) from exc
        return self.get_owned(owner, job_id)

    def _approval_conflict(
        self, old: Job | None, owner: Owner, job_id: str, version: int
    ) -> LeaseholdError:
        job = self._require_owned(old, owner, job_id)
        if job.state is not JobState.WAITING_APPROVAL:
            return ConflictError(
                f"job {job_id} is {job.state.value}, not waiting for approval", code="not_waiting"
            )
        return ConflictError(
            f"version {version} is stale; the job is at version {job.version}", code="stale_version"
        )

    # ---------------------------------------------------------------- operator actions

    def replay(self, job_id: str, *, now: int) -> Job:
        """`dead` / `failed` / `unknown` → `queued` under the same job id: attempts start again,
        the finished attempts go to `history`, budget use is kept, `replays` counts up."""
        job = self.get(job_id)
        if job is None:
            raise JobNotFoundError(f"no job {job_id}")
        if job.state not in REPLAYABLE_STATES:
            raise ConflictError(
                f"job {job_id} is {job.state.value}; only dead, failed or unknown jobs replay",
                code="not_replayable",
            )
        expr = Expression()
        expr.condition(f"{expr.name('version')} = {expr.value(job.version)}")
        expr.increment("version").increment("replays").set("updated_at", now)
        expr.set("state", JobState.QUEUED.value).set("gsi1pk", state_partition(JobState.QUEUED))
        expr.set("attempts", 0).set("next_attempt_at", now).set("last_dispatch_at", now)
        expr.set("deadline_at", now + (job.deadline_at - job.created_at))
        expr.set("cancel_requested", False).set("step_failures", 0)
        entry = {
            "event": "replayed",
            "from_state": job.state.value,
            "attempts": job.attempts,
            "stop_reason": job.stop_reason or "",
            "error_code": (job.error or {}).get("code", ""),
            "at": now,
        }
        expr.set_raw(
            "history",
            f"list_append(if_not_exists({{x}}, {expr.value([])}), {expr.value([entry])})",
        )
        expr.remove("error", "stop_reason", "result", "effect_intent", "approval")
        outbox = self._outbox_put(
            job.job_id, job.owner, version=job.version + 1, deliver_at=now, now=now
        )
        self._write(expr, job, [outbox], release_slot=False, stale_message="job changed meanwhile")
        replayed = self.get(job_id)
        assert replayed is not None
        return replayed

    def resolve(self, job_id: str, *, succeeded: bool, note: str, now: int) -> Job:
        """Settle an `unknown` job by an operator's word, with a note."""
        expr = Expression()
        expr.condition(f"{expr.name('state')} = {expr.value(JobState.UNKNOWN.value)}")
        target = JobState.SUCCEEDED if succeeded else JobState.FAILED
        expr.increment("version").set("updated_at", now)
        expr.set("state", target.value).set("gsi1pk", state_partition(target))
        expr.set("resolution_note", note).set("stop_reason", StopReason.RESOLVED_BY_OPERATOR.value)
        expr.remove("effect_intent")
        new, old = self._update_or_old(expr.update_params(self._table, job_key(job_id)))
        if new is not None:
            return new
        if old is None:
            raise JobNotFoundError(f"no job {job_id}")
        raise ConflictError(f"job {job_id} is {old.state.value}, not unknown", code="not_unknown")

    def running_slots(self, owner: Owner) -> set[str]:
        """Jobs holding one of the owner's per-user slots (for tests and the operator view)."""
        try:
            item = self._db.get_item(
                TableName=self._table, Key=slots_key(owner), ConsistentRead=True
            ).get("Item")
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc
        return set(deserialize_item(item).get("holders", set())) if item else set()


__all__ = ["AcceptResult", "ClaimRejection", "JobStore"]
