"""The `Idempotency-Key` rules of an accept (decisions C4, ID1): a keyed request's id, the
request's hash kept on the job, the ClientRequestToken of its commit, and how a failed condition
tells a repeat from a key reused with another request."""

from __future__ import annotations

import hashlib

from leasehold.domain.errors import IdempotencyConflictError, LeaseholdError
from leasehold.domain.ids import hash_source
from leasehold.domain.job import Owner
from leasehold.domain.types import RawItem
from leasehold.store.items import deserialize_item, job_key
from leasehold.store.table import ConditionFailed, Table


def fingerprint_hash(fingerprint: str) -> str:
    """88 bits of the request's hash: kept on the job, compared on a repeat."""
    return hashlib.sha256(fingerprint.encode()).hexdigest()[:22]


def request_token(owner: Owner, idempotency: str, fp_hash: str) -> str:
    """Same key and body → same ClientRequestToken: an SDK retry of a commit whose answer was
    lost succeeds on DynamoDB instead of failing its own condition. The parts are encoded, not
    joined (decision ID1): no separator in a tenant, user or key makes two owners' tokens alike."""
    source = hash_source(owner.tenant, owner.user_id, idempotency, fp_hash, verbatim=1)
    return hashlib.sha256(source.encode()).hexdigest()[:36]


def derived_id(prefix: str, owner: Owner, idempotency: str, namespace: str = "") -> str:
    """The id of what a keyed request makes: the same tenant, user and key always name the same
    job (or bookmark), so a repeat meets the first one's condition (decision C4). The parts are
    encoded, not joined (decision ID1): tenant `a|b` with user `c` and tenant `a` with user
    `b|c` name different jobs; an ordinary identity's ids are what the plain join made."""
    source = hash_source(namespace, owner.tenant, owner.user_id, idempotency, verbatim=2)
    return f"{prefix}_{hashlib.sha256(source.encode()).hexdigest()[:22]}"


def repeat_of(failed: ConditionFailed, index: int, fp_hash: str | None) -> bool:
    """A transaction holding a new job's Put at `index` failed: whether it is a repeat of a
    request made before under the same key (the job is the first one's). With no key
    (`fp_hash` None) the job's own fresh id already exists: an earlier try of this very call
    committed and its answer was lost (the SDK retried it) — not a repeat. A key used with
    another request is IdempotencyConflictError; any other failure, LeaseholdError."""
    single = not failed.reasons and index == 0  # a lone Put, not a transaction
    if not (single or failed.failed_at(index)):
        raise LeaseholdError("accept failed a condition it cannot explain") from failed
    if fp_hash is None:
        return False
    old = deserialize_item(failed.old_item(index) or {})
    if old.get("fp") != fp_hash:
        raise IdempotencyConflictError() from failed
    return True


def keyed_repeat(table: Table, job_id: str, fp_hash: str) -> RawItem | None:
    """The job a keyed request made before (its item, read consistently), when `job_id` (the
    key's derived id) exists: a repeat of the same request, or IdempotencyConflictError for the
    key used with another. None: no such job yet. For a request whose input is gone after its
    first accept (an upload, decision LD8), answered before the input is looked for."""
    raw = table.get(job_key(job_id))
    if raw is None:
        return None
    old = deserialize_item(raw)
    if old.get("fp") != fp_hash:
        raise IdempotencyConflictError()
    return old


__all__ = ["derived_id", "fingerprint_hash", "keyed_repeat", "repeat_of", "request_token"]
