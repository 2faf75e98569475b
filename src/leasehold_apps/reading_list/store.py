"""BookmarkStore: the reading list's room (docs/architecture.md "The reading list"). Every change
that touches a title job is
one transaction with it: create (bookmark + job + wake-up), a URL edit (bookmark + new job +
wake-up + the old job closed), delete (bookmark gone + its open job closed). The title job's
own last write is built here too (`title_landed`, `title_failed`), fenced by the bookmark's
`source_version`, so a fetch that lost the race never writes a title."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from leasehold import LeaseholdError, Owner
from leasehold.apps import (
    ConditionFailed,
    ConflictError,
    NewJob,
    NotFoundError,
    Table,
    idempotency,
    items,
    job_states,
    pages,
    transact_closing_job,
)
from leasehold_apps.reading_list.bookmark import Bookmark, TitleStatus
from leasehold_apps.reading_list.codec import (
    SORT_PREFIX,
    bookmark_from_item,
    bookmark_key,
    bookmarks_partition,
    new_bookmark_item,
)

SOURCE_DELETED = "source_deleted"
"""The stop reason of a job whose bookmark was deleted."""
SUPERSEDED = "superseded"
"""The stop reason of a job whose bookmark got a new URL (a newer job works for it)."""

_OWNED_AT_VERSION = "attribute_exists(pk) AND #owner = :owner AND #version = :version"
_AT_SOURCE = "attribute_exists(pk) AND #source_version = :source_version"
_NAME = re.compile(r"#(\w+)")


def _expression(
    key: dict[str, Any], condition: str, values: Mapping[str, Any], update: str | None = None
) -> dict[str, Any]:
    """The parameters of one conditional write of `key`: every `#name` in the expressions is
    the attribute of that name (reserved words like `owner` are safe), every `:value` one of
    `values`."""
    params: dict[str, Any] = {"Key": key}
    if update:
        params["UpdateExpression"] = update
    params["ConditionExpression"] = condition
    names = {f"#{name}": name for name in _NAME.findall(f"{update or ''} {condition}")}
    if names:
        params["ExpressionAttributeNames"] = names
    params["ExpressionAttributeValues"] = {name: items.value(v) for name, v in values.items()}
    return params


@dataclass(frozen=True)
class Created:
    bookmark_id: str
    job_id: str
    created: bool


class BookmarkStore:
    def __init__(self, table: Table) -> None:
        self._table = table

    # ---------------------------------------------------------------- create and read

    def create(
        self,
        bookmark: Bookmark,
        job: NewJob,
        *,
        idempotency_key: str | None,
        fingerprint: str,
        owner: Owner,
    ) -> Created:
        """Bookmark + its title job + the job's wake-up in one transaction. With a key the ids
        are derived from it (decision C4): a repeat with the same body meets the first
        bookmark's condition and answers its ids, scheduling nothing."""
        fp_hash = idempotency.fingerprint(fingerprint)
        keyed = idempotency_key is not None
        item = new_bookmark_item(bookmark)
        if keyed:
            item["fp"] = {"S": fp_hash}
        transaction = [
            {
                "Put": {
                    "Item": item,
                    "ConditionExpression": "attribute_not_exists(pk)",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            *job.writes,
        ]
        token = None
        if idempotency_key is not None:
            token = idempotency.token(owner, f"bookmarks:{idempotency_key}", fp_hash)
        try:
            self._table.transact(transaction, token=token)
        except ConditionFailed as failed:
            if keyed and not failed.failed_at(0) and failed.failed_at(1):
                # The key's bookmark is gone (deleted) but its title job, named by the key,
                # is still kept: the key was spent on a bookmark that no longer exists.
                raise ConflictError(
                    "this Idempotency-Key saved a bookmark that has since been deleted; "
                    "save the URL again with a new key",
                    code="idempotency_key_reused",
                ) from failed
            if not failed.failed_at(0):
                raise LeaseholdError("create failed a condition it cannot explain") from failed
            if not keyed:  # our own fresh id: an earlier try of this very call committed
                return Created(bookmark.bookmark_id, job.job_id, created=True)
            old = items.plain(failed.old_item(0) or {})
            if old.get("fp") != fp_hash:
                raise ConflictError(
                    "this Idempotency-Key was used with a different body",
                    code="idempotency_key_reused",
                ) from failed
            return Created(old["bookmark_id"], old["title_job_id"], created=False)
        return Created(bookmark.bookmark_id, job.job_id, created=True)

    def add_job(self, job: NewJob) -> bool:
        """A job of the bookmark's alone (an enrichment): committed, or found as the first of
        a repeat with the same key and request (False)."""
        try:
            self._table.transact(job.writes, token=job.token)
        except ConditionFailed as failed:
            return not job.repeated(failed)
        return True

    def get(self, tenant: str, bookmark_id: str) -> Bookmark:
        item = self._table.get(bookmark_key(tenant, bookmark_id))
        if item is None:
            raise NotFoundError(f"no bookmark {bookmark_id}")
        return bookmark_from_item(item)

    def list_bookmarks(
        self, tenant: str, *, limit: int, cursor: str | None
    ) -> tuple[list[Bookmark], str | None]:
        """The tenant's bookmarks, oldest first."""
        partition = bookmarks_partition(tenant)
        params: dict[str, Any] = {
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :b)",
            "ExpressionAttributeValues": {":p": {"S": partition}, ":b": {"S": SORT_PREFIX}},
            "ScanIndexForward": True,
            "Limit": limit,
        }
        start = pages.start(cursor, partition=partition, sort_prefix=SORT_PREFIX)
        if start:
            params["ExclusiveStartKey"] = start
        page = self._table.query(**params)
        found = [bookmark_from_item(item) for item in page["Items"]]
        return found, pages.cursor(page.get("LastEvaluatedKey"))

    def job_states(self, job_ids: Iterable[str]) -> dict[str, str]:
        """The current state of each title job (one BatchGetItem per page of bookmarks)."""
        return job_states(self._table, job_ids)

    # ---------------------------------------------------------------- edits by a person

    def _edit_conflict(
        self, old: dict[str, Any] | None, owner: Owner, bookmark_id: str, version: int
    ) -> LeaseholdError:
        if old is None:
            return NotFoundError(f"no bookmark {bookmark_id}")
        bookmark = bookmark_from_item(old)
        if bookmark.owner != owner.user_id:  # another member: the same 404 as the starter API
            return NotFoundError(f"no bookmark {bookmark_id}")
        return ConflictError(
            f"version {version} is stale; the bookmark is at version {bookmark.version}",
            code="stale_version",
        )

    def edit_note(
        self, owner: Owner, bookmark_id: str, *, version: int, note: str, now: int
    ) -> Bookmark:
        params = _expression(
            bookmark_key(owner.tenant, bookmark_id),
            _OWNED_AT_VERSION,
            {":owner": owner.user_id, ":version": version, ":note": note, ":one": 1, ":now": now},
            "SET #note = :note, #version = #version + :one, #updated_at = :now",
        )
        try:
            item = self._table.update(params)
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
        new_job: NewJob,
        now: int,
    ) -> None:
        """A new source: the bookmark's URL, `source_version` + 1, the title back to pending and
        a new title job with its wake-up — one transaction, with the old job closed in it."""
        values: dict[str, Any] = {
            ":owner": owner.user_id,
            ":version": version,
            ":source_version": current.source_version,
            ":url": url,
            ":one": 1,
            ":now": now,
            ":pending": TitleStatus.PENDING,
            ":job": new_job.job_id,
        }
        update = (
            "SET #url = :url, #version = #version + :one,"
            " #source_version = #source_version + :one, #updated_at = :now,"
            " #title_status = :pending, #title_job_id = :job"
        )
        if note is not None:
            update += ", #note = :note"
            values[":note"] = note
        params = _expression(
            bookmark_key(owner.tenant, current.bookmark_id),
            f"{_OWNED_AT_VERSION} AND #source_version = :source_version",
            values,
            f"{update} REMOVE #title, #title_error, #enrichment",
        )
        bookmark_update = {"Update": {**params, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}
        self._with_old_job(
            [bookmark_update, *new_job.writes],
            current.title_job_id,
            SUPERSEDED,
            now,
            on_bookmark_failed=lambda old: self._edit_conflict(
                old, owner, current.bookmark_id, version
            ),
        )

    def delete(self, owner: Owner, bookmark_id: str, *, now: int) -> None:
        """The bookmark goes, and its open title job is closed (`source_deleted`) with it."""
        current = self.get(owner.tenant, bookmark_id)
        if current.owner != owner.user_id:
            raise NotFoundError(f"no bookmark {bookmark_id}")
        params = _expression(
            bookmark_key(owner.tenant, bookmark_id),
            "attribute_exists(pk) AND #owner = :owner AND #title_job_id = :job",
            {":owner": owner.user_id, ":job": current.title_job_id},
        )
        delete = {"Delete": {**params, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}

        def changed(old: dict[str, Any] | None) -> LeaseholdError:
            if old is None:
                return NotFoundError(f"no bookmark {bookmark_id}")
            return ConflictError("the bookmark changed meanwhile; try again", code="busy")

        self._with_old_job(
            [delete], current.title_job_id, SOURCE_DELETED, now, on_bookmark_failed=changed
        )

    def _with_old_job(
        self,
        transaction: list[dict[str, Any]],
        old_job_id: str,
        reason: str,
        now: int,
        *,
        on_bookmark_failed: Callable[[dict[str, Any] | None], LeaseholdError],
    ) -> None:
        """Commit `transaction` (the bookmark's write first) with the old title job closed as
        its state allows (decision R4)."""
        try:
            transact_closing_job(self._table, transaction, old_job_id, reason=reason, now_ms=now)
        except ConditionFailed as failed:
            if failed.failed_at(0):
                raise on_bookmark_failed(failed.old_item(0)) from failed
            raise LeaseholdError(
                "a bookmark change failed a condition it cannot explain"
            ) from failed
        except ConflictError as busy:
            raise ConflictError("the title job kept changing; try again", code="busy") from busy

    def mark_read(self, owner: Owner, bookmark_id: str, *, is_read: bool) -> None:
        """Any member's own read mark; not an edit of the bookmark (no version change)."""
        params = _expression(
            bookmark_key(owner.tenant, bookmark_id),
            "attribute_exists(pk)",
            {":user": {owner.user_id}},
            f"{'ADD' if is_read else 'DELETE'} #read_by :user",
        )
        try:
            self._table.update(params, return_new=False)
        except ConditionFailed as failed:
            raise NotFoundError(f"no bookmark {bookmark_id}") from failed


# -------------------------------------------------------------------- a job's last word


def _fenced_bookmark_update(
    tenant: str, bookmark_id: str, source_version: int, update: str, values: dict[str, Any]
) -> dict[str, Any]:
    """The bookmark write that commits with a title or enrich job's outcome: only if the
    bookmark is still there, at the source the job worked on — never re-creating a deleted
    one."""
    params = _expression(
        bookmark_key(tenant, bookmark_id),
        _AT_SOURCE,
        {":source_version": source_version, **values},
        update,
    )
    return {"Update": {**params, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}


def title_source_unchanged(tenant: str, bookmark_id: str, source_version: int) -> dict[str, Any]:
    """Transaction item for a title job stopped by a cancel: a check (no write) that the bookmark
    is still there at the source it fetched. A job stopped because its bookmark was deleted or
    given a new URL fails it, so the job says `source_deleted` / `superseded` — not that a person
    cancelled it."""
    params = _expression(
        bookmark_key(tenant, bookmark_id), _AT_SOURCE, {":source_version": source_version}
    )
    return {"ConditionCheck": {**params, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}


def title_landed(
    tenant: str, bookmark_id: str, source_version: int, title: str, now: int
) -> dict[str, Any]:
    """Transaction item: the title is ready (no `version` change: a person's edit in progress
    never conflicts with a background fetch)."""
    return _fenced_bookmark_update(
        tenant,
        bookmark_id,
        source_version,
        "SET #title = :title, #title_status = :ready, #updated_at = :now REMOVE #title_error",
        {":title": title, ":ready": TitleStatus.READY, ":now": now},
    )


def title_failed(
    tenant: str, bookmark_id: str, source_version: int, error: Mapping[str, str], now: int
) -> dict[str, Any]:
    """Transaction item: the title could not be fetched; `error` says why."""
    return _fenced_bookmark_update(
        tenant,
        bookmark_id,
        source_version,
        "SET #title_status = :failed, #title_error = :error, #updated_at = :now",
        {":failed": TitleStatus.FAILED, ":error": dict(error), ":now": now},
    )


def enrichment_saved(
    tenant: str, bookmark_id: str, source_version: int, enrichment: dict[str, Any], now: int
) -> dict[str, Any]:
    """Transaction item: the provider's summary and tags, with the receipt and operation id."""
    return _enrichment(tenant, bookmark_id, source_version, {**enrichment, "status": "ready"}, now)


def enrichment_failed(
    tenant: str, bookmark_id: str, source_version: int, failure: dict[str, Any], now: int
) -> dict[str, Any]:
    return _enrichment(tenant, bookmark_id, source_version, {**failure, "status": "failed"}, now)


def _enrichment(
    tenant: str, bookmark_id: str, source_version: int, enrichment: dict[str, Any], now: int
) -> dict[str, Any]:
    return _fenced_bookmark_update(
        tenant,
        bookmark_id,
        source_version,
        "SET #enrichment = :enrichment, #updated_at = :now",
        {":enrichment": {**enrichment, "at": now}, ":now": now},
    )
