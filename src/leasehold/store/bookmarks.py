"""BookmarkStore: the reading list's room (arch §5). Every change that touches a title job is
one transaction with it: create (bookmark + job + wake-up + key), a URL edit (bookmark + new
job + wake-up + the old job closed), delete (bookmark gone + its open job closed). The title
job's own last write is built here too (`title_landed`, `title_failed`), fenced by the
bookmark's `source_version`, so a fetch that lost the race never writes a title."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leasehold.domain.bookmark import Bookmark, TitleStatus
from leasehold.domain.errors import (
    BookmarkNotFoundError,
    ConflictError,
    IdempotencyConflictError,
    LeaseholdError,
    ValidationError,
)
from leasehold.domain.job import Job, Owner
from leasehold.domain.states import JobState, StopReason
from leasehold.store.expressions import Expression
from leasehold.store.guards import (
    append_history,
    keep_for_operators,
    new_job_writes,
    state_change,
)
from leasehold.store.history import entry
from leasehold.store.items import (
    bookmark_from_item,
    bookmark_key,
    bookmarks_partition,
    deserialize_item,
    job_key,
    new_bookmark_item,
)
from leasehold.store.jobs import decode_cursor, encode_cursor, fingerprint_hash, request_token
from leasehold.store.table import ConditionFailed, Table


@dataclass(frozen=True)
class Created:
    bookmark_id: str
    job_id: str
    created: bool


class OldJob:
    """How a change closes the bookmark's previous title job, decided by its state: a queued
    job is cancelled outright; a running one is asked to stop (its title would be refused by
    the source fence anyway); a finished one is left alone."""

    CANCEL_IF_QUEUED = "cancel_if_queued"
    STOP_IF_RUNNING = "stop_if_running"
    LEAVE = "leave"


def close_old_job(job_id: str, how: str, reason: StopReason, now: int) -> dict[str, Any] | None:
    if how == OldJob.LEAVE:
        return None
    expr = Expression()
    state = expr.name("state")
    expr.increment("version").set("updated_at", now)
    if how == OldJob.CANCEL_IF_QUEUED:
        expr.condition(f"{state} = {expr.value(JobState.QUEUED.value)}")
        state_change(expr, JobState.CANCELLED, from_active=True)
        expr.set("stop_reason", reason.value).set("cancel_requested", True)
        expr.remove("next_attempt_at")
        keep_for_operators(expr, JobState.CANCELLED, now)
        append_history(
            expr, entry("cancelled", at=now, state=JobState.CANCELLED.value, reason=reason.value)
        )
    else:
        expr.condition(f"{state} = {expr.value(JobState.RUNNING.value)}")
        expr.set("cancel_requested", True)
    params = expr.update_params(job_key(job_id))
    params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return {"Update": params}


def _next_how(old_job_item: dict[str, Any] | None) -> str:
    state = (old_job_item or {}).get("state", {}).get("S")
    return OldJob.STOP_IF_RUNNING if state == JobState.RUNNING.value else OldJob.LEAVE


class BookmarkStore:
    def __init__(self, table: Table) -> None:
        self._table = table

    # ---------------------------------------------------------------- create and read

    def create(
        self,
        bookmark: Bookmark,
        job: Job,
        *,
        idempotency: str | None,
        fingerprint: str,
        owner: Owner,
    ) -> Created:
        """Bookmark + its title job + the job's wake-up in one transaction. With a key the ids
        are derived from it (decision C4): a repeat with the same body meets the first
        bookmark's condition and answers its ids, scheduling nothing."""
        fp_hash = fingerprint_hash(fingerprint)
        keyed = idempotency is not None
        item = new_bookmark_item(bookmark)
        if keyed:
            item["fp"] = {"S": fp_hash}
        items = [
            {
                "Put": {
                    "Item": item,
                    "ConditionExpression": "attribute_not_exists(pk)",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            *new_job_writes(job),
        ]
        token = request_token(owner, f"bookmarks:{idempotency}", fp_hash) if keyed else None
        try:
            self._table.transact(items, token=token)
        except ConditionFailed as failed:
            if keyed and not failed.failed_at(0) and failed.failed_at(1):
                # The key's bookmark is gone (deleted) but its title job, named by the key,
                # is still kept: the key was spent on a bookmark that no longer exists.
                raise IdempotencyConflictError(
                    "this Idempotency-Key saved a bookmark that has since been deleted; "
                    "save the URL again with a new key"
                ) from failed
            if not failed.failed_at(0):
                raise LeaseholdError("create failed a condition it cannot explain") from failed
            if not keyed:  # our own fresh id: an earlier try of this very call committed
                return Created(bookmark.bookmark_id, job.job_id, created=True)
            old = deserialize_item(failed.old_item(0) or {})
            if old.get("fp") != fp_hash:
                raise IdempotencyConflictError() from failed
            return Created(old["bookmark_id"], old["title_job_id"], created=False)
        return Created(bookmark.bookmark_id, job.job_id, created=True)

    def get(self, tenant: str, bookmark_id: str) -> Bookmark:
        item = self._table.get(bookmark_key(tenant, bookmark_id))
        if item is None:
            raise BookmarkNotFoundError(f"no bookmark {bookmark_id}")
        return bookmark_from_item(item)

    def list_bookmarks(
        self, tenant: str, *, limit: int, cursor: str | None
    ) -> tuple[list[Bookmark], str | None]:
        """The tenant's bookmarks, oldest first."""
        partition = bookmarks_partition(tenant)
        params: dict[str, Any] = {
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :b)",
            "ExpressionAttributeValues": {":p": {"S": partition}, ":b": {"S": "BM#"}},
            "ScanIndexForward": True,
            "Limit": limit,
        }
        start = decode_cursor(
            cursor,
            partition_attribute="pk",
            partition=partition,
            sort_attribute="sk",
            index_keys=False,
        )
        if start:
            if not start["sk"]["S"].startswith("BM#"):
                raise ValidationError("'cursor' is not a cursor this API returned")
            params["ExclusiveStartKey"] = start
        page = self._table.query(**params)
        items = [bookmark_from_item(item) for item in page["Items"]]
        return items, encode_cursor(page.get("LastEvaluatedKey"))

    # ---------------------------------------------------------------- edits by a person

    def _owned_at_version(self, expr: Expression, owner: Owner, version: int) -> None:
        expr.condition(
            f"attribute_exists(pk) AND {expr.name('owner')} = {expr.value(owner.user_id)}"
            f" AND {expr.name('version')} = {expr.value(version)}"
        )

    def _edit_conflict(
        self, old: dict[str, Any] | None, owner: Owner, bookmark_id: str, version: int
    ) -> LeaseholdError:
        if old is None:
            return BookmarkNotFoundError(f"no bookmark {bookmark_id}")
        bookmark = bookmark_from_item(old)
        if bookmark.owner != owner.user_id:  # another member: the same 404 as the starter API
            return BookmarkNotFoundError(f"no bookmark {bookmark_id}")
        return ConflictError(
            f"version {version} is stale; the bookmark is at version {bookmark.version}",
            code="stale_version",
        )

    def edit_note(
        self, owner: Owner, bookmark_id: str, *, version: int, note: str, now: int
    ) -> Bookmark:
        expr = Expression()
        self._owned_at_version(expr, owner, version)
        expr.set("note", note).increment("version").set("updated_at", now)
        try:
            item = self._table.update(expr.update_params(bookmark_key(owner.tenant, bookmark_id)))
        except ConditionFailed as failed:
            raise self._edit_conflict(failed.old_item(), owner, bookmark_id, version) from failed
        assert item is not None
        return bookmark_from_item(item)

    def change_url(
        self,
        owner: Owner,
        current: Bookmark,
        *,
        version: int,
        url: str,
        note: str | None,
        new_job: Job,
        now: int,
    ) -> None:
        """A new source: the bookmark's URL, `source_version` + 1, the title back to pending and
        a new title job with its wake-up — one transaction, with the old job closed in it."""
        expr = Expression()
        self._owned_at_version(expr, owner, version)
        expr.condition(f"{expr.name('source_version')} = {expr.value(current.source_version)}")
        expr.set("url", url).increment("version").increment("source_version")
        expr.set("updated_at", now).set("title_status", TitleStatus.PENDING)
        expr.set("title_job_id", new_job.job_id).remove("title", "title_error", "enrichment")
        if note is not None:
            expr.set("note", note)
        bookmark_update = {
            "Update": {
                **expr.update_params(bookmark_key(owner.tenant, current.bookmark_id)),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        self._with_old_job(
            [bookmark_update, *new_job_writes(new_job)],
            current.title_job_id,
            StopReason.SUPERSEDED,
            now,
            on_bookmark_failed=lambda old: self._edit_conflict(
                old, owner, current.bookmark_id, version
            ),
        )

    def delete(self, owner: Owner, bookmark_id: str, *, now: int) -> None:
        """The bookmark goes, and its open title job is closed (`source_deleted`) with it."""
        current = self.get(owner.tenant, bookmark_id)
        if current.owner != owner.user_id:
            raise BookmarkNotFoundError(f"no bookmark {bookmark_id}")
        expr = Expression()
        expr.condition(
            f"attribute_exists(pk) AND {expr.name('owner')} = {expr.value(owner.user_id)}"
            f" AND {expr.name('title_job_id')} = {expr.value(current.title_job_id)}"
        )
        delete: dict[str, Any] = {
            "Delete": {
                "Key": bookmark_key(owner.tenant, bookmark_id),
                "ConditionExpression": expr.condition_expression(),
                "ExpressionAttributeNames": expr.names,
                "ExpressionAttributeValues": expr.values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

        def changed(old: dict[str, Any] | None) -> LeaseholdError:
            if old is None:
                return BookmarkNotFoundError(f"no bookmark {bookmark_id}")
            return ConflictError("the bookmark changed meanwhile; try again", code="busy")

        self._with_old_job(
            [delete],
            current.title_job_id,
            StopReason.SOURCE_DELETED,
            now,
            on_bookmark_failed=changed,
        )

    def _with_old_job(
        self,
        items: list[dict[str, Any]],
        old_job_id: str,
        reason: StopReason,
        now: int,
        *,
        on_bookmark_failed: Any,
    ) -> None:
        """Commit `items` with the old title job closed as its state allows; the state is learnt
        from the failed condition itself (ALL_OLD), at most three tries."""
        how = OldJob.CANCEL_IF_QUEUED
        for _ in range(3):
            close = close_old_job(old_job_id, how, reason, now)
            transaction = [*items, close] if close else list(items)
            try:
                self._table.transact(transaction)
                return
            except ConditionFailed as failed:
                if failed.failed_at(0):
                    raise on_bookmark_failed(failed.old_item(0)) from failed
                if close is None or not failed.failed_at(len(items)):
                    raise LeaseholdError(
                        "a bookmark change failed a condition it cannot explain"
                    ) from failed
                how = _next_how(failed.old_item(len(items)))
        raise ConflictError("the title job kept changing; try again", code="busy")

    def mark_read(self, owner: Owner, bookmark_id: str, *, is_read: bool) -> None:
        """Any member's own read mark; not an edit of the bookmark (no version change)."""
        expr = Expression()
        expr.condition("attribute_exists(pk)")
        if is_read:
            expr.add_to_set("read_by", owner.user_id)
        else:
            expr.delete_from_set("read_by", owner.user_id)
        try:
            self._table.update(
                expr.update_params(bookmark_key(owner.tenant, bookmark_id)), return_new=False
            )
        except ConditionFailed as failed:
            raise BookmarkNotFoundError(f"no bookmark {bookmark_id}") from failed

    def job_states(self, job_ids: list[str]) -> dict[str, str]:
        """The current state of each title job (one BatchGetItem per page of bookmarks)."""
        keys = [job_key(job_id) for job_id in dict.fromkeys(job_ids)]
        return {item["job_id"]["S"]: item["state"]["S"] for item in self._table.batch_get(keys)}


# -------------------------------------------------------------------- the title job's last word


def _fenced_bookmark_update(
    tenant: str, bookmark_id: str, source_version: int, expr: Expression
) -> dict[str, Any]:
    """The bookmark write that commits with a title job's outcome: only if the bookmark is still
    there, at the source the job fetched — never re-creating a deleted one."""
    expr.condition(
        f"attribute_exists(pk) AND {expr.name('source_version')} = {expr.value(source_version)}"
    )
    params = expr.update_params(bookmark_key(tenant, bookmark_id))
    params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return {"Update": params}


def title_source_unchanged(tenant: str, bookmark_id: str, source_version: int) -> dict[str, Any]:
    """Transaction item for a title job stopped by a cancel: a check (no write) that the bookmark
    is still there at the source it fetched. A job stopped because its bookmark was deleted or
    given a new URL fails it, so the job says `source_deleted` / `superseded` — not that a person
    cancelled it."""
    expr = Expression()
    expr.condition(
        f"attribute_exists(pk) AND {expr.name('source_version')} = {expr.value(source_version)}"
    )
    return {
        "ConditionCheck": {
            "Key": bookmark_key(tenant, bookmark_id),
            "ConditionExpression": expr.condition_expression(),
            "ExpressionAttributeNames": expr.names,
            "ExpressionAttributeValues": expr.values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def title_landed(
    tenant: str, bookmark_id: str, source_version: int, title: str, now: int
) -> dict[str, Any]:
    """Transaction item: the title is ready (no `version` change: a person's edit in progress
    never conflicts with a background fetch)."""
    expr = Expression().set("title", title).set("title_status", TitleStatus.READY)
    expr.set("updated_at", now).remove("title_error")
    return _fenced_bookmark_update(tenant, bookmark_id, source_version, expr)


def title_failed(
    tenant: str, bookmark_id: str, source_version: int, error: dict[str, str], now: int
) -> dict[str, Any]:
    """Transaction item: the title could not be fetched; `error` says why."""
    expr = Expression().set("title_status", TitleStatus.FAILED).set("title_error", error)
    expr.set("updated_at", now)
    return _fenced_bookmark_update(tenant, bookmark_id, source_version, expr)


def enrichment_saved(
    tenant: str, bookmark_id: str, source_version: int, enrichment: dict[str, Any], now: int
) -> dict[str, Any]:
    """Transaction item: the provider's summary and tags, with the receipt and operation id."""
    expr = Expression().set("enrichment", {**enrichment, "status": "ready", "at": now})
    expr.set("updated_at", now)
    return _fenced_bookmark_update(tenant, bookmark_id, source_version, expr)


def enrichment_failed(
    tenant: str, bookmark_id: str, source_version: int, failure: dict[str, Any], now: int
) -> dict[str, Any]:
    expr = Expression().set("enrichment", {**failure, "status": "failed", "at": now})
    expr.set("updated_at", now)
    return _fenced_bookmark_update(tenant, bookmark_id, source_version, expr)
