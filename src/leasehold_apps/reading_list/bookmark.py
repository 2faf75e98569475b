"""The reading list's bookmark (docs/architecture.md "The reading list") and the rules for what a
caller may send.

Unknown fields are refused (400), as everywhere in this API: a typo (`"notes"`) should say so,
not be dropped silently."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from leasehold import ValidationError
from leasehold_apps.reading_list.titles import FIXTURE_MODES, validate_bookmark_url

MAX_NOTE_CHARS = 4000
MAX_VERSION = 2**53


class TitleStatus:
    PENDING = "pending"
    READY = "ready"
    FAILED = "failed"


@dataclass
class Bookmark:
    """The bookmark item, decoded. `version` counts edits by a person; `source_version` counts
    URL changes, and fences the title job's write; a landing title changes neither."""

    bookmark_id: str
    tenant: str
    owner: str
    url: str
    note: str
    version: int
    source_version: int
    created_at: int
    updated_at: int
    title_job_id: str
    title: str | None = None
    title_status: str = TitleStatus.PENDING
    title_error: dict[str, str] | None = None
    title_mode: str | None = None
    read_by: set[str] = field(default_factory=set)
    enrichment: dict[str, Any] | None = None

    @staticmethod
    def first(
        bookmark_id: str,
        tenant: str,
        owner: str,
        url: str,
        title_job_id: str,
        title_mode: str | None,
        now: int,
        title_status: str = TitleStatus.PENDING,
    ) -> Bookmark:
        """A bookmark as it is first saved (by `POST /bookmarks` or an import's child): no
        note, every version 1, its title job named."""
        return Bookmark(
            bookmark_id=bookmark_id,
            tenant=tenant,
            owner=owner,
            url=url,
            note="",
            version=1,
            source_version=1,
            created_at=now,
            updated_at=now,
            title_job_id=title_job_id,
            title_status=title_status,
            title_mode=title_mode,
        )


@dataclass(frozen=True)
class NewBookmark:
    url: str
    title_mode: str | None

    def fingerprint(self) -> str:
        return json.dumps({"url": self.url, "title_mode": self.title_mode}, sort_keys=True)


@dataclass(frozen=True)
class BookmarkEdit:
    version: int
    note: str | None
    url: str | None


def _only(body: Any, allowed: set[str], shape: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValidationError(f"the body must be a JSON object: {shape}")
    extra = sorted(set(body) - allowed)
    if extra:
        raise ValidationError(f"unknown field(s): {', '.join(extra)}; the body is {shape}")
    return body


def parse_new_bookmark(body: Any, *, fixture_fetcher: bool) -> NewBookmark:
    """`{"url", "title_mode"?}`; `title_mode` only while the fixture fetcher is configured."""
    body = _only(body, {"url", "title_mode"}, '{"url": ..., "title_mode"?: ...}')
    if "url" not in body:
        raise ValidationError("'url' is required", code="invalid_url")
    url = validate_bookmark_url(body["url"])
    return NewBookmark(url=url, title_mode=title_mode_of(body, fixture_fetcher))


def title_mode_of(body: dict[str, Any], fixture_fetcher: bool) -> str | None:
    """A request's `title_mode`: one of the fixture fetcher's modes, and only while that fetcher
    is configured (the local stack); None when the request names none."""
    mode = body.get("title_mode")
    if mode is not None:
        if not fixture_fetcher:
            raise ValidationError(
                "'title_mode' is accepted only with the fixture title fetcher (local stack)"
            )
        if mode not in FIXTURE_MODES:
            raise ValidationError(f"'title_mode' must be one of: {', '.join(FIXTURE_MODES)}")
    return str(mode) if mode is not None else None


def parse_version(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_VERSION:
        raise ValidationError("'version' must be the bookmark's current version (an integer ≥ 1)")
    return value


def parse_edit(body: Any) -> BookmarkEdit:
    """`{"version", "note"?, "url"?}`: at least one of note and url."""
    body = _only(body, {"version", "note", "url"}, '{"version": ..., "note"?: ..., "url"?: ...}')
    if "version" not in body:
        raise ValidationError("'version' is required (the bookmark's current version)")
    version = parse_version(body["version"])
    note = body.get("note")
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE_CHARS):
        raise ValidationError(f"'note' must be a string of at most {MAX_NOTE_CHARS} characters")
    url = validate_bookmark_url(body["url"]) if "url" in body else None
    if note is None and url is None:
        raise ValidationError("nothing to change: give 'note' and/or 'url'")
    return BookmarkEdit(version=version, note=note, url=url)


@dataclass(frozen=True)
class EnrichRequest:
    budget: dict[str, int] | None
    """The job's budget (`{"max_cost": …}`), None for none."""
    local: dict[str, str]
    """`provider_mode` / `fault`: only on the local stack's own providers."""


def parse_enrich_request(body: Any, *, local_modes: tuple[str, ...]) -> EnrichRequest:
    """`{"budget"?: {"max_cost"}}`, and locally `provider_mode`/`fault` to try the recovery
    rules against a provider of each capability."""
    body = {} if body is None else body
    allowed = {"budget", "provider_mode", "fault"} if local_modes else {"budget"}
    body = _only(body, allowed, '{"budget"?: {"max_cost": ...}}')
    budget = None
    raw = body.get("budget")
    if raw is not None:
        if not isinstance(raw, dict) or set(raw) - {"max_cost"}:
            raise ValidationError("'budget' must be {\"max_cost\": <integer ≥ 0>}")
        cost = raw.get("max_cost")
        if isinstance(cost, bool) or not isinstance(cost, int) or not 0 <= cost <= 10**12:
            raise ValidationError("'budget.max_cost' must be an integer ≥ 0")
        budget = {"max_cost": cost}
    local: dict[str, str] = {}
    if "provider_mode" in body:
        if body["provider_mode"] not in local_modes:
            raise ValidationError(f"'provider_mode' must be one of: {', '.join(local_modes)}")
        local["provider_mode"] = body["provider_mode"]
    if "fault" in body:
        if body["fault"] not in ("lose_response", "fail", "slow"):
            raise ValidationError("'fault' must be one of: lose_response, fail, slow")
        local["fault"] = body["fault"]
    return EnrichRequest(budget=budget, local=local)


def parse_read_mark(body: Any) -> bool:
    body = _only(body, {"is_read"}, '{"is_read": true|false}')
    value = body.get("is_read")
    if not isinstance(value, bool):
        raise ValidationError("'is_read' must be true or false")
    return value
