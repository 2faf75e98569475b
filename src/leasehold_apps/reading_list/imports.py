"""Importing a list of URLs (docs/guide/applications.md "Importing a list"): one parent job,
`reading_list_import`, whose first step starts a child `imported_title` job per URL
(`ctx.map`, at most `IMPORT_CONCURRENCY` running at once, every failure tolerated) and whose
last step summarises what each URL became. Made by `POST /bookmark-imports`, never
`POST /jobs`.

A child fetches its URL's title with the `title` kind's fetcher and step, and its end commits
the bookmark with it: titled (`ready`), or `failed` with the fetch's error, as a bookmark saved
alone whose title cannot be fetched. A cancelled child (its import cancelled) saves nothing.
The bookmark's id is its job's (`b_` + the child id's 22 hex digits, themselves derived from the
import, the step and the URL's index), so a child ends once and its bookmark is written once; a
URL already in the list is saved again, as `POST /bookmarks` does (decision WF31)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from leasehold import (
    Finished,
    JobInfo,
    Kind,
    Limit,
    Outcome,
    Owner,
    StepContext,
    ValidationError,
)
from leasehold.apps import items
from leasehold_apps.reading_list.bookmark import Bookmark, TitleStatus, title_mode_of
from leasehold_apps.reading_list.codec import new_bookmark_item
from leasehold_apps.reading_list.kinds import TitleKind, title
from leasehold_apps.reading_list.titles import validate_bookmark_url

IMPORT_KIND = "reading_list_import"
CHILD_KIND = "imported_title"
MAX_IMPORT_URLS = 500
IMPORT_CONCURRENCY = 10
"""At most this many of an import's titles are fetched at once."""
MAX_IMPORT_PAYLOAD = 48 * 1024
"""The most a kind's payload may be (the engine's budget, decision SZ1): a list whose URLs do
not fit is a 400 that says to split it."""
_MAX_CODE_CHARS = 20
TITLED = "titled"


@dataclass(frozen=True)
class NewImport:
    urls: list[str]
    title_mode: str | None

    def payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"urls": self.urls}
        if self.title_mode:
            payload["title_mode"] = self.title_mode
        return payload

    def fingerprint(self) -> str:
        return json.dumps(self.payload(), sort_keys=True)


def parse_import(body: Any, *, fixture_fetcher: bool) -> NewImport:
    """`{"urls": [1 to 500 URLs], "title_mode"?}`: each URL checked as a bookmark's is (the
    error names its index); `title_mode` only with the fixture fetcher, for every URL."""
    shape = '{"urls": ["https://…", …], "title_mode"?: ...}'
    if not isinstance(body, dict):
        raise ValidationError(f"the body must be a JSON object: {shape}")
    extra = sorted(set(body) - {"urls", "title_mode"})
    if extra:
        raise ValidationError(f"unknown field(s): {', '.join(extra)}; the body is {shape}")
    urls = body.get("urls")
    if not isinstance(urls, list) or not 1 <= len(urls) <= MAX_IMPORT_URLS:
        raise ValidationError(
            f"'urls' must be a list of 1 to {MAX_IMPORT_URLS} URLs", code="invalid_request"
        )
    checked: list[str] = []
    for index, url in enumerate(urls):
        try:
            checked.append(validate_bookmark_url(url))
        except ValidationError as bad:
            raise ValidationError(f"urls[{index}]: {bad}", code="invalid_url") from None
    new = NewImport(urls=checked, title_mode=title_mode_of(body, fixture_fetcher))
    size = len(json.dumps(new.payload(), separators=(",", ":")).encode())
    if size > MAX_IMPORT_PAYLOAD - 1024:
        raise ValidationError(
            f"the URLs take {size} bytes; an import holds at most {MAX_IMPORT_PAYLOAD - 1024}:"
            " split the list",
            code="too_large",
        )
    return new


def bookmark_id_of(child_job_id: str) -> str:
    """The bookmark an imported URL's job saves: named by the job (`j_<22 hex>`)."""
    return f"b_{child_job_id[2:]}"


def outcome_of(state: str, error: Any) -> str:
    """An imported URL's outcome in the summary: `titled`, or why not (the fetch's error code,
    or the child's state when it has none: `cancelled`)."""
    if state == "succeeded":
        return TITLED
    code = error.get("code") if isinstance(error, dict) else None
    return str(code or state)[:_MAX_CODE_CHARS]


# -------------------------------------------------------------------- the child: one URL


class ImportedTitleKind(Kind):
    """One imported URL: the `title` kind's fetch step; its end saves the bookmark."""

    def __init__(self, title_kind: TitleKind = title) -> None:
        # Its own limit instead of the deployment's per-user one (5 by default, shared with
        # every kind): one user's imported titles, all imports together, fetch at most
        # IMPORT_CONCURRENCY at once (decision WF32).
        super().__init__(
            CHILD_KIND,
            submittable=False,
            operators_see_payload=True,
            concurrency=[Limit(key="user", max=IMPORT_CONCURRENCY)],
        )
        self._title = title_kind
        self.check(self._check_payload)
        self.planner(self._title.fetch_plan)
        self.result(self._result)
        self.outcome_writes(self._outcome_writes)

    @staticmethod
    def _check_payload(payload: dict[str, Any], owner: Owner) -> None:
        if not isinstance(payload.get("url"), str):
            raise ValidationError("an imported title needs 'url'")

    @staticmethod
    def _result(finished: Finished) -> dict[str, Any]:
        return {
            "bookmark_id": bookmark_id_of(finished.job.job_id),
            "title": finished.output_list[-1]["title"],
        }

    @staticmethod
    def _outcome_writes(outcome: Outcome) -> list[dict[str, Any]]:
        """The bookmark, committed with the job's end: titled, or its title `failed`."""
        job, now = outcome.job, outcome.now_ms
        if outcome.state == "succeeded":
            status, title_text, error = TitleStatus.READY, outcome.result["title"], None
        elif outcome.state in {"dead", "failed"} and outcome.error is not None:
            status, title_text, error = TitleStatus.FAILED, None, dict(outcome.error)
        else:  # cancelled with its import: nothing saved
            return []
        bookmark = Bookmark.first(
            bookmark_id_of(job.job_id),
            job.owner.tenant,
            job.owner.user_id,
            job.payload["url"],
            job.job_id,
            job.payload.get("title_mode"),
            now,
            title_status=status,
        )
        item = new_bookmark_item(bookmark)
        if title_text is not None:
            item["title"] = items.value(title_text)
        if error is not None:
            item["title_error"] = items.value(error)
        return [{"Put": {"Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}]


imported_title = ImportedTitleKind()
"""The deployed `imported_title` kind: the deployed `title` kind's fetcher."""


# -------------------------------------------------------------------- the parent: the list


importing = Kind(
    IMPORT_KIND,
    submittable=False,
    operators_see_payload=True,
    max_payload_bytes=MAX_IMPORT_PAYLOAD,
)
"""An import: a child per URL, then the summary (its result)."""


@importing.step()
def fan_out(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    urls: list[str] = payload["urls"]
    mode = {"title_mode": payload["title_mode"]} if payload.get("title_mode") else {}
    started = ctx.map(
        CHILD_KIND,
        [{"url": url, **mode} for url in urls],
        max_concurrency=IMPORT_CONCURRENCY,
        tolerate_failures=len(urls),
    )
    return {"children": len(started)}


@importing.step()
def summarise(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    """`imported` (titled), `failed` (saved, title not fetched, or not saved when cancelled),
    and each URL's outcome in the request's order (at most 20 characters each, so 500 of them
    stay within a result's 16 KiB). Each bookmark is named in its child's result."""
    outcomes: list[str] = []
    for child in ctx.children("fan_out"):
        outcomes.append(outcome_of(child.state, child.error))
    imported = outcomes.count(TITLED)
    return {
        "total": len(outcomes),
        "imported": imported,
        "failed": len(outcomes) - imported,
        "outcomes": outcomes,
    }


@importing.view
def _import_view(job: JobInfo) -> dict[str, Any]:
    return {"urls": len(job.payload.get("urls", []))}
