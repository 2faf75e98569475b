"""The bookmark item (docs/architecture.md "The reading list", decision R1): its key and its codec.
One item collection per
tenant, `BOOKMARKS#<tenant>`, sort key `BM#<id>`; ids sort by creation time, so a Query of the
partition is the tenant's shared list, oldest first."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from leasehold.apps import NotFoundError, items
from leasehold_apps.reading_list.bookmark import Bookmark

SORT_PREFIX = "BM#"
_BOOKMARK_ID = re.compile(r"^b_[0-9a-f]{22}$")


def bookmarks_partition(tenant: str) -> str:
    """One item collection per tenant: the list is shared by the tenant's members, oldest first
    (bookmark ids sort by creation time). Encoded as the engine's keys are (decision ID1)."""
    return items.key("BOOKMARKS", tenant)


def bookmark_key(tenant: str, bookmark_id: str) -> dict[str, Any]:
    """An id that could never have been issued is an unknown bookmark (404), not a request for
    DynamoDB to reject."""
    if not _BOOKMARK_ID.fullmatch(bookmark_id):
        raise NotFoundError(f"no bookmark {bookmark_id[:100]!r}")
    return {"pk": {"S": bookmarks_partition(tenant)}, "sk": {"S": f"{SORT_PREFIX}{bookmark_id}"}}


def new_bookmark_item(bookmark: Bookmark) -> dict[str, Any]:
    doc: dict[str, Any] = {
        **{
            name: value["S"]
            for name, value in bookmark_key(bookmark.tenant, bookmark.bookmark_id).items()
        },
        "bookmark_id": bookmark.bookmark_id,
        "tenant": bookmark.tenant,
        "owner": bookmark.owner,
        "url": bookmark.url,
        "note": bookmark.note,
        "version": bookmark.version,
        "source_version": bookmark.source_version,
        "created_at": bookmark.created_at,
        "updated_at": bookmark.updated_at,
        "title_job_id": bookmark.title_job_id,
        "title_status": bookmark.title_status,
        "title_mode": bookmark.title_mode,
    }
    return {name: items.value(value) for name, value in doc.items() if value is not None}


def bookmark_from_item(item: Mapping[str, Any]) -> Bookmark:
    doc = items.plain(item)
    return Bookmark(
        bookmark_id=doc["bookmark_id"],
        tenant=doc["tenant"],
        owner=doc["owner"],
        url=doc["url"],
        note=doc.get("note", ""),
        version=doc["version"],
        source_version=doc["source_version"],
        created_at=doc["created_at"],
        updated_at=doc["updated_at"],
        title_job_id=doc["title_job_id"],
        title=doc.get("title"),
        title_status=doc.get("title_status", "pending"),
        title_error=doc.get("title_error"),
        title_mode=doc.get("title_mode"),
        read_by=set(doc.get("read_by", set())),
        enrichment=doc.get("enrichment"),
    )
