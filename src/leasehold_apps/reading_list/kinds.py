"""The reading list's job kinds share one shape: a job works on one bookmark's source, its
payload names the bookmark, its URL and the `source_version` its outcome is fenced by, and the
bookmarks API makes it with the bookmark (never `POST /jobs`, decision R7).

The `title` kind (docs/architecture.md "The reading list") fetches a bookmark's page title. Its
last write commits with the
job's outcome and is fenced by the bookmark's `source_version`: a bookmark deleted meanwhile
ends the job `cancelled` / `source_deleted`, a newer URL `cancelled` / `superseded` — and no
title is written."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from leasehold import (
    FatalError,
    Finished,
    JobInfo,
    Kind,
    Outcome,
    Owner,
    RelatedChange,
    RetryableError,
    Step,
    StepContext,
    ValidationError,
)
from leasehold_apps.reading_list import settings
from leasehold_apps.reading_list.store import (
    SOURCE_DELETED,
    SUPERSEDED,
    title_failed,
    title_landed,
    title_source_unchanged,
)

if TYPE_CHECKING:
    from leasehold_apps.reading_list.titles import TitleFetcher

LIVE_FETCH_BOUND_MS = 6_000
"""The live fetcher's whole-fetch bound (5 s) plus its thread hand-off: the step's duration for
the engine's time checks."""


class BookmarkKind(Kind):
    """A kind whose job works on one bookmark's source (`title`, `enrich`)."""

    def __init__(self, name: str, noun: str, deleted: str, superseded: str) -> None:
        super().__init__(name, submittable=False, operators_see_payload=True)
        self.noun = noun
        self._messages = {SOURCE_DELETED: deleted, SUPERSEDED: superseded}
        self.check(self._check_payload)
        self.related(self._bookmark)
        self.on_related_changed(self._source_changed)

    def _check_payload(self, payload: dict[str, Any], owner: Owner) -> None:
        if not isinstance(payload.get("bookmark_id"), str) or not isinstance(
            payload.get("url"), str
        ):
            raise ValidationError(f"{self.noun} needs 'bookmark_id' and 'url'")
        if not isinstance(payload.get("source_version"), int):
            raise ValidationError(f"{self.noun} needs 'source_version'")

    @staticmethod
    def _bookmark(job: JobInfo) -> dict[str, Any]:
        return {"bookmark_id": job.payload.get("bookmark_id")}

    def _source_changed(self, change: RelatedChange) -> tuple[str, str]:
        """The bookmark the outcome would have written moved on: gone, or at a newer URL."""
        reason = SOURCE_DELETED if change.old_item is None else SUPERSEDED
        return reason, self._messages[reason]


class TitleKind(BookmarkKind):
    """`fetcher_name`: `fixture` or `live` (default: TITLE_FETCHER, read when first needed);
    `fetcher`: a fetcher of one's own (a test's), used under that name's rules."""

    def __init__(
        self,
        fetcher_name: str | None = None,
        *,
        slow_seconds: float = 3.0,
        fetcher: TitleFetcher | None = None,
    ) -> None:
        super().__init__(
            "title",
            "a title job",
            deleted="the bookmark was deleted while its title was being fetched",
            superseded="the bookmark's URL changed; a newer job fetches the new title",
        )
        self._fetcher_name = fetcher_name
        self._slow_seconds = slow_seconds
        self._fetcher = fetcher
        self._built: dict[str, TitleFetcher] = {}
        self.planner(self.fetch_plan)
        self.result(self._result)
        self.outcome_writes(self._outcome_writes)

    @property
    def fetcher_name(self) -> str:
        return self._fetcher_name or settings.title_fetcher()

    @property
    def fixture(self) -> bool:
        return self.fetcher_name == "fixture"

    def _fetcher_now(self) -> TitleFetcher:
        # Built on first use: the API never fetches, so it never imports a fetcher.
        if self._fetcher is not None:
            return self._fetcher
        name = self.fetcher_name
        if name not in self._built:
            from leasehold_apps.reading_list.titles import fetcher_from_name

            options = {"slow_seconds": self._slow_seconds} if name == "fixture" else {}
            self._built[name] = fetcher_from_name(name, **options)
        return self._built[name]

    def fetch_plan(self, payload: dict[str, Any]) -> list[Step]:
        """The one step that fetches `payload['url']`'s title (with `title_mode`): also the
        plan of an imported URL's job (imports.py)."""
        bound = LIVE_FETCH_BOUND_MS
        if self.fixture:
            bound = int(self._slow_seconds * 1000) + 1_000
        # Planned, not declared: the bound depends on the fetcher configured.
        return [Step("fetch", self._fetch, timeout_seconds=bound / 1000)]

    def _fetch(self, ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
        from leasehold_apps.reading_list.titles import TitleFetchError

        try:
            title = self._fetcher_now().fetch(
                payload["url"],
                mode=payload.get("title_mode"),
                attempt=ctx.step_try,
                tick=ctx.heartbeat,
            )
        except TitleFetchError as failed:
            error = RetryableError if failed.retryable else FatalError
            raise error(str(failed), code=failed.code) from failed
        return {"title": title}

    @staticmethod
    def _result(finished: Finished) -> dict[str, Any]:
        payload = finished.job.payload
        return {
            "bookmark_id": payload["bookmark_id"],
            "source_version": payload["source_version"],
            "title": finished.output_list[-1]["title"],
        }

    @staticmethod
    def _outcome_writes(outcome: Outcome) -> list[dict[str, Any]]:
        payload, tenant, now = outcome.job.payload, outcome.job.owner.tenant, outcome.now_ms
        bookmark_id, source_version = payload["bookmark_id"], payload["source_version"]
        if outcome.state == "succeeded":
            return [title_landed(tenant, bookmark_id, source_version, outcome.result["title"], now)]
        if outcome.state in {"dead", "failed"} and outcome.error is not None:
            return [title_failed(tenant, bookmark_id, source_version, outcome.error, now)]
        if outcome.state == "cancelled":
            # A running job is asked to stop by an edit or a delete of its bookmark as well as by
            # its owner: the check lets the related-change hook name the bookmark's change.
            return [title_source_unchanged(tenant, bookmark_id, source_version)]
        return []


title = TitleKind()
"""The deployed `title` kind: its fetcher is TITLE_FETCHER's."""
