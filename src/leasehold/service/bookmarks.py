"""The reading list's use cases (DESIGN §7): save a URL (a title job is made with it), read the
tenant's list, edit a note or the URL, mark read, delete. Shared within a tenant; only the
owner edits or deletes (another member gets the same 404 as an unknown id)."""

from __future__ import annotations

import json
from typing import Any

from leasehold.domain.bookmark import (
    Bookmark,
    TitleStatus,
    parse_edit,
    parse_enrich_request,
    parse_new_bookmark,
    parse_read_mark,
)
from leasehold.domain.clock import Clock, iso
from leasehold.domain.errors import BookmarkNotFoundError, StoreUnavailableError, ValidationError
from leasehold.domain.ids import IdFactory
from leasehold.domain.job import Job, Owner, new_job
from leasehold.kinds.enrich import EnrichKind
from leasehold.kinds.title import TitleKind
from leasehold.service.jobs import Accepted, check_idempotency_key, parse_limit
from leasehold.service.telemetry import Telemetry
from leasehold.store.bookmarks import BookmarkStore
from leasehold.store.jobs import JobStore, derived_id


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
        "created_at": iso(bookmark.created_at),
        "updated_at": iso(bookmark.updated_at),
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
        view["enrichment"] = {**bookmark.enrichment, "at": iso(bookmark.enrichment.get("at"))}
    return view


class BookmarkService:
    def __init__(
        self,
        store: BookmarkStore,
        title_kind: TitleKind,
        clock: Clock,
        new_bookmark_id: IdFactory,
        new_job_id: IdFactory,
        telemetry: Telemetry,
        default_max_attempts: int = 3,
        *,
        jobs: JobStore | None = None,
        enrich: EnrichKind | None = None,
    ) -> None:
        self._jobs = jobs
        self._enrich = enrich
        self._store = store
        self._title = title_kind
        self._clock = clock
        self._new_bookmark_id = new_bookmark_id
        self._new_job_id = new_job_id
        self._telemetry = telemetry
        self._max_attempts = default_max_attempts

    def _title_job(
        self,
        owner: Owner,
        bookmark_id: str,
        url: str,
        source_version: int,
        mode: str | None,
        now: int,
        job_id: str | None = None,
    ) -> Job:
        payload: dict[str, Any] = {
            "bookmark_id": bookmark_id,
            "url": url,
            "source_version": source_version,
        }
        if mode:
            payload["title_mode"] = mode
        return new_job(
            job_id or self._new_job_id(),
            TitleKind.name,
            owner,
            payload,
            now=now,
            steps_total=1,
            max_attempts=self._max_attempts,
        )

    def create(
        self, owner: Owner, body: Any, idempotency_key: str | None
    ) -> tuple[dict[str, Any], bool]:
        """The bookmark, its title job and the job's wake-up, committed together; returns the
        view and whether it was new (a repeat with the same key answers the first one)."""
        check_idempotency_key(idempotency_key)
        new = parse_new_bookmark(body, fixture_fetcher=self._title.fixture)
        now = self._clock.now_ms()
        bookmark_id = self._new_bookmark_id()
        job_id = None
        if idempotency_key:  # a repeat names the same bookmark and title job (decision C4)
            bookmark_id = derived_id("b", owner, idempotency_key, "bookmarks")
            job_id = derived_id("j", owner, idempotency_key, "bookmark-title")
        job = self._title_job(owner, bookmark_id, new.url, 1, new.title_mode, now, job_id)
        bookmark = Bookmark(
            bookmark_id=bookmark_id,
            tenant=owner.tenant,
            owner=owner.user_id,
            url=new.url,
            note="",
            version=1,
            source_version=1,
            created_at=now,
            updated_at=now,
            title_job_id=job.job_id,
            title_mode=new.title_mode,
        )
        try:
            created = self._store.create(
                bookmark,
                job,
                idempotency=idempotency_key,
                fingerprint=new.fingerprint(),
                owner=owner,
            )
        except StoreUnavailableError as unavailable:
            raise StoreUnavailableError(
                f"{unavailable} — the bookmark may or may not have been saved; retry with the "
                "same Idempotency-Key to get the same bookmark"
            ) from unavailable
        if created.created:
            self._telemetry.count("BookmarksCreated")
            self._telemetry.count("JobsAccepted")
            return bookmark_view(bookmark, owner, "queued"), True
        self._telemetry.count("IdempotentReplays")
        return self.view(owner, created.bookmark_id), False

    def view(self, owner: Owner, bookmark_id: str) -> dict[str, Any]:
        bookmark = self._store.get(owner.tenant, bookmark_id)
        states = self._store.job_states([bookmark.title_job_id])
        return bookmark_view(bookmark, owner, states.get(bookmark.title_job_id))

    def list(self, owner: Owner, *, limit: str | None, cursor: str | None) -> dict[str, Any]:
        bookmarks, next_cursor = self._store.list_bookmarks(
            owner.tenant, limit=parse_limit(limit), cursor=cursor
        )
        states = self._store.job_states([b.title_job_id for b in bookmarks])
        return {
            "items": [bookmark_view(b, owner, states.get(b.title_job_id)) for b in bookmarks],
            "next_cursor": next_cursor,
        }

    def edit(self, owner: Owner, bookmark_id: str, body: Any) -> dict[str, Any]:
        """A note (version fence) or a new URL (a new source: new title job, the old closed)."""
        edit = parse_edit(body)
        now = self._clock.now_ms()
        current = self._store.get(owner.tenant, bookmark_id)
        if current.owner != owner.user_id:
            raise BookmarkNotFoundError(f"no bookmark {bookmark_id}")
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
            self._telemetry.count("JobsAccepted")
        return self.view(owner, bookmark_id)

    def enrich(
        self, owner: Owner, bookmark_id: str, body: Any, idempotency_key: str | None
    ) -> Accepted:
        """An `enrich` job for the owner's bookmark (DESIGN §8): one enrichment costs 1 budget
        unit. Refused (400) when no provider is configured."""
        check_idempotency_key(idempotency_key)
        if self._enrich is None or not self._enrich.configured:
            raise ValidationError(
                "no enrichment provider is configured (EnrichmentProviderUrl)",
                code="provider_not_configured",
            )
        request = parse_enrich_request(body, local_modes=self._enrich.local_modes)
        current = self._store.get(owner.tenant, bookmark_id)
        if current.owner != owner.user_id:
            raise BookmarkNotFoundError(f"no bookmark {bookmark_id}")
        payload: dict[str, Any] = {
            "bookmark_id": bookmark_id,
            "url": current.url,
            "source_version": current.source_version,
            **request.local,
        }
        job_id = self._new_job_id()
        if idempotency_key:
            job_id = derived_id("j", owner, idempotency_key, f"enrich:{bookmark_id}")
        job = new_job(
            job_id,
            EnrichKind.name,
            owner,
            payload,
            now=self._clock.now_ms(),
            steps_total=1,
            max_attempts=self._max_attempts,
            budget=request.budget,
        )
        assert self._jobs is not None
        outcome = self._jobs.accept(
            job,
            idempotency=idempotency_key,
            fingerprint=json.dumps(
                {"bookmark": bookmark_id, "source": current.source_version, **(body or {})},
                sort_keys=True,
            ),
        )
        self._telemetry.count("JobsAccepted" if outcome.created else "IdempotentReplays")
        state = "queued"
        if not outcome.created:
            existing = self._jobs.get(outcome.job_id)
            state = existing.state.value if existing else state
        return Accepted(job_id=outcome.job_id, created=outcome.created, state=state)

    def mark_read(self, owner: Owner, bookmark_id: str, body: Any) -> dict[str, Any]:
        is_read = parse_read_mark(body)
        self._store.mark_read(owner, bookmark_id, is_read=is_read)
        return {"id": bookmark_id, "is_read": is_read}

    def delete(self, owner: Owner, bookmark_id: str) -> None:
        self._store.delete(owner, bookmark_id, now=self._clock.now_ms())


__all__ = ["BookmarkService", "TitleStatus", "bookmark_view"]
