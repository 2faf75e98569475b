"""The reading list's use cases (docs/architecture.md "The reading list"): save a URL (a title job
is made with it), read the
tenant's list, edit a note or the URL, mark read, delete, enrich. Shared within a tenant; only
the owner edits or deletes (another member gets the same 404 as an unknown id)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from leasehold import Owner, ValidationError
from leasehold.apps import (
    Engine,
    NewJob,
    NotFoundError,
    StoreUnavailableError,
    idempotency,
    iso_time,
    job_view,
    job_writes,
    pages,
)
from leasehold_apps.reading_list.bookmark import (
    Bookmark,
    parse_edit,
    parse_enrich_request,
    parse_new_bookmark,
    parse_read_mark,
)
from leasehold_apps.reading_list.enrich import EnrichKind, enrich
from leasehold_apps.reading_list.imports import IMPORT_KIND, importing, parse_import
from leasehold_apps.reading_list.kinds import TitleKind, title
from leasehold_apps.reading_list.store import BookmarkStore


@dataclass(frozen=True)
class Accepted:
    job_id: str
    created: bool
    state: str


def bookmark_view(bookmark: Bookmark, caller: Owner, job_state: str | None) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": bookmark.bookmark_id,
        "owner": bookmark.owner,
        "url": bookmark.url,
        "title": bookmark.title,
        "title_status": bookmark.title_status,
        "note": bookmark.note,
        "version": bookmark.version,
        "source_version": bookmark.source_version,
        "is_read": caller.user_id in bookmark.read_by,
        "created_at": iso_time(bookmark.created_at),
        "updated_at": iso_time(bookmark.updated_at),
        "title_job": {
            "job_id": bookmark.title_job_id,
            "state": job_state,
            "status_url": f"/jobs/{bookmark.title_job_id}",
        },
    }
    if bookmark.title_error:
        view["title_error"] = bookmark.title_error
    if bookmark.title_mode:
        view["title_mode"] = bookmark.title_mode
    if bookmark.enrichment:
        # Stored in epoch ms like every time; the API shows times as ISO 8601 UTC
        view["enrichment"] = {**bookmark.enrichment, "at": iso_time(bookmark.enrichment.get("at"))}
    return view


class BookmarkService:
    """Over `engine`'s table, clock and metrics; `title` and `enrich` are the kinds its jobs
    are made of (the deployed ones unless a test gives its own)."""

    def __init__(
        self,
        engine: Engine,
        *,
        title: TitleKind = title,
        enrich: EnrichKind = enrich,
        new_bookmark_id: Callable[[], str] | None = None,
        new_job_id: Callable[[], str] | None = None,
    ) -> None:
        self._engine = engine
        self._store = BookmarkStore(engine.table)
        self._title = title
        self._enrich = enrich
        self._new_bookmark_id = new_bookmark_id or (lambda: engine.new_id("b"))
        self._new_job_id = new_job_id or (lambda: engine.new_id("j"))

    def _title_job(
        self,
        owner: Owner,
        bookmark_id: str,
        url: str,
        source_version: int,
        mode: str | None,
        now: int,
        job_id: str | None = None,
    ) -> NewJob:
        payload: dict[str, Any] = {
            "bookmark_id": bookmark_id,
            "url": url,
            "source_version": source_version,
        }
        if mode:
            payload["title_mode"] = mode
        return job_writes(
            self._engine.table,
            self._title,
            payload,
            owner,
            job_id=job_id or self._new_job_id(),
            max_attempts=self._engine.max_attempts,
            now_ms=now,
        )

    def create(
        self, owner: Owner, body: Any, idempotency_key: str | None
    ) -> tuple[dict[str, Any], bool]:
        """The bookmark, its title job and the job's wake-up, committed together; returns the
        view and whether it was new (a repeat with the same key answers the first one)."""
        idempotency.check(idempotency_key)
        new = parse_new_bookmark(body, fixture_fetcher=self._title.fixture)
        now = self._engine.now_ms()
        bookmark_id = self._new_bookmark_id()
        job_id = None
        if idempotency_key:  # a repeat names the same bookmark and title job (decision C4)
            bookmark_id = idempotency.derived_id("b", owner, idempotency_key, "bookmarks")
            job_id = idempotency.derived_id("j", owner, idempotency_key, "bookmark-title")
        job = self._title_job(owner, bookmark_id, new.url, 1, new.title_mode, now, job_id)
        bookmark = Bookmark.first(
            bookmark_id, owner.tenant, owner.user_id, new.url, job.job_id, new.title_mode, now
        )
        try:
            created = self._store.create(
                bookmark,
                job,
                idempotency_key=idempotency_key,
                fingerprint=new.fingerprint(),
                owner=owner,
            )
        except StoreUnavailableError as unavailable:
            raise StoreUnavailableError(
                f"{unavailable} — the bookmark may or may not have been saved; retry with the "
                "same Idempotency-Key to get the same bookmark"
            ) from unavailable
        if created.created:
            self._engine.count("BookmarksCreated")
            self._engine.count("JobsAccepted")
            return bookmark_view(bookmark, owner, "queued"), True
        self._engine.count("IdempotentReplays")
        return self.view(owner, created.bookmark_id), False

    def view(self, owner: Owner, bookmark_id: str) -> dict[str, Any]:
        bookmark = self._store.get(owner.tenant, bookmark_id)
        states = self._store.job_states([bookmark.title_job_id])
        return bookmark_view(bookmark, owner, states.get(bookmark.title_job_id))

    def list(self, owner: Owner, *, limit: str | None, cursor: str | None) -> dict[str, Any]:
        bookmarks, next_cursor = self._store.list_bookmarks(
            owner.tenant, limit=pages.limit(limit), cursor=cursor
        )
        states = self._store.job_states([b.title_job_id for b in bookmarks])
        return {
            "items": [bookmark_view(b, owner, states.get(b.title_job_id)) for b in bookmarks],
            "next_cursor": next_cursor,
        }

    def _owned(self, owner: Owner, bookmark_id: str) -> Bookmark:
        current = self._store.get(owner.tenant, bookmark_id)
        if current.owner != owner.user_id:
            raise NotFoundError(f"no bookmark {bookmark_id}")
        return current

    def edit(self, owner: Owner, bookmark_id: str, body: Any) -> dict[str, Any]:
        """A note (version fence) or a new URL (a new source: new title job, the old closed)."""
        edit = parse_edit(body)
        now = self._engine.now_ms()
        current = self._owned(owner, bookmark_id)
        if edit.url is None or edit.url == current.url:
            note = edit.note if edit.note is not None else current.note
            self._store.edit_note(owner, bookmark_id, version=edit.version, note=note, now=now)
        else:
            job = self._title_job(
                owner, bookmark_id, edit.url, current.source_version + 1, current.title_mode, now
            )
            self._store.change_url(
                owner,
                current,
                version=edit.version,
                url=edit.url,
                note=edit.note,
                new_job=job,
                now=now,
            )
            self._engine.count("JobsAccepted")
        return self.view(owner, bookmark_id)

    def enrich(
        self, owner: Owner, bookmark_id: str, body: Any, idempotency_key: str | None
    ) -> Accepted:
        """An `enrich` job for the owner's bookmark (docs/architecture.md "External effects"): one
        enrichment costs 1 budget
        unit. Refused (400) when no provider is configured."""
        idempotency.check(idempotency_key)
        if not self._enrich.configured:
            raise ValidationError(
                "no enrichment provider is configured (EnrichmentProviderUrl)",
                code="provider_not_configured",
            )
        request = parse_enrich_request(body, local_modes=self._enrich.local_modes)
        current = self._owned(owner, bookmark_id)
        payload: dict[str, Any] = {
            "bookmark_id": bookmark_id,
            "url": current.url,
            "source_version": current.source_version,
            **request.local,
        }
        job = job_writes(
            self._engine.table,
            self._enrich,
            payload,
            owner,
            idempotency_key=idempotency_key,
            scope=f"enrich:{bookmark_id}",
            fingerprint=json.dumps(
                {"bookmark": bookmark_id, "source": current.source_version, **(body or {})},
                sort_keys=True,
            ),
            job_id=None if idempotency_key else self._new_job_id(),
            budget=request.budget,
            max_attempts=self._engine.max_attempts,
            now_ms=self._engine.now_ms(),
        )
        created = self._store.add_job(job)
        self._engine.count("JobsAccepted" if created else "IdempotentReplays")
        state = "queued"
        if not created:
            state = self._store.job_states([job.job_id]).get(job.job_id, state)
        return Accepted(job_id=job.job_id, created=created, state=state)

    def start_import(self, owner: Owner, body: Any, idempotency_key: str | None) -> Accepted:
        """One `reading_list_import` job for a list of URLs (imports.py); the same key and
        list answer the same import."""
        idempotency.check(idempotency_key)
        new = parse_import(body, fixture_fetcher=self._title.fixture)
        job = job_writes(
            self._engine.table,
            importing,
            new.payload(),
            owner,
            idempotency_key=idempotency_key,
            scope="bookmarks-import",
            fingerprint=new.fingerprint(),
            job_id=None if idempotency_key else self._new_job_id(),
            max_attempts=self._engine.max_attempts,
            now_ms=self._engine.now_ms(),
        )
        try:
            created = self._store.add_job(job)
        except StoreUnavailableError as unavailable:
            raise StoreUnavailableError(
                f"{unavailable} — the import may or may not have started; retry with the same "
                "Idempotency-Key to get the same import"
            ) from unavailable
        self._engine.count("JobsAccepted" if created else "IdempotentReplays")
        state = "queued"
        if not created:
            state = self._store.job_states([job.job_id]).get(job.job_id, state)
        return Accepted(job_id=job.job_id, created=created, state=state)

    def import_view(self, owner: Owner, import_id: str) -> dict[str, Any]:
        """An import's state and progress: `done` of `total` URLs ended (a waiting import's
        `waiting_for.children`), and when it has succeeded its summary."""
        job = job_view(self._engine, owner, import_id)
        if job["kind"] != IMPORT_KIND:
            raise NotFoundError(f"no import {import_id}")
        total = int(job.get("urls", 0))
        children = (job.get("waiting_for") or {}).get("children")
        if children is not None:
            done = int(children.get("done", 0))
        elif job["progress"]["step"] == 0:  # the children are not started yet
            done = 0
        else:  # past the fan-out: every child has ended
            done = total
        view: dict[str, Any] = {
            "import_id": import_id,
            "state": job["state"],
            "progress": {"done": done, "total": total},
            "status_url": f"/jobs/{import_id}",
            "children_url": f"/jobs/{import_id}/children",
            "created_at": job["created_at"],
            "updated_at": job["updated_at"],
        }
        if "result" in job:
            view["summary"] = job["result"]
        if "error" in job:
            view["error"] = job["error"]
        return view

    def mark_read(self, owner: Owner, bookmark_id: str, body: Any) -> dict[str, Any]:
        is_read = parse_read_mark(body)
        self._store.mark_read(owner, bookmark_id, is_read=is_read)
        return {"id": bookmark_id, "is_read": is_read}

    def delete(self, owner: Owner, bookmark_id: str) -> None:
        self._store.delete(owner, bookmark_id, now=self._engine.now_ms())
