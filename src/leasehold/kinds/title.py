"""The `title` kind (arch §5): fetch a bookmark's page title. Made by the bookmarks API (never
submitted directly). Its last write commits with the job's outcome and is fenced by the
bookmark's `source_version`: a bookmark deleted meanwhile ends the job `cancelled` /
`source_deleted`, a newer URL `cancelled` / `superseded` — and no title is written."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from leasehold.domain.errors import FatalStepError, TransientStepError
from leasehold.domain.states import JobState, StopReason
from leasehold.kinds import BookmarkKindBase, StepPlan
from leasehold.store.bookmarks import title_failed, title_landed, title_source_unchanged

if TYPE_CHECKING:
    from leasehold.domain.errors import RelatedItemChangedError
    from leasehold.domain.job import Checkpoint, Job
    from leasehold.titles import TitleFetcher

LIVE_FETCH_BOUND_MS = 6_000
"""The live fetcher's whole-fetch bound (5 s) plus its thread hand-off: the step's duration for
the engine's time checks."""


class TitleKind(BookmarkKindBase):
    name = "title"
    noun = "a title job"

    def __init__(self, fetcher_name: str, *, slow_seconds: float = 3.0) -> None:
        self._fetcher_name = fetcher_name
        self._slow_seconds = slow_seconds
        self._fetcher: TitleFetcher | None = None

    @property
    def fixture(self) -> bool:
        return self._fetcher_name == "fixture"

    def _fetcher_now(self) -> TitleFetcher:
        # Built on first use: the API never fetches, so it never imports a fetcher.
        if self._fetcher is None:
            from leasehold.titles import fetcher_from_name

            options = {"slow_seconds": self._slow_seconds} if self.fixture else {}
            self._fetcher = fetcher_from_name(self._fetcher_name, **options)
        return self._fetcher

    def plan(self, payload: dict[str, Any]) -> list[StepPlan]:
        bound = LIVE_FETCH_BOUND_MS
        if self.fixture:
            bound = int(self._slow_seconds * 1000) + 1_000
        return [
            StepPlan("fetch", cost=0, duration_ms=bound, needs_approval=False, has_effect=False)
        ]

    def run_step(
        self, payload: dict[str, Any], index: int, attempt: int, tick: Callable[[], bool]
    ) -> Any:
        from leasehold.titles import TitleFetchError

        try:
            title = self._fetcher_now().fetch(
                payload["url"], mode=payload.get("title_mode"), attempt=attempt, tick=tick
            )
        except TitleFetchError as failed:
            error = TransientStepError if failed.retryable else FatalStepError
            raise error(str(failed), error_code=failed.code) from failed
        return {"title": title}

    def result(self, job: Job, checkpoint: Checkpoint) -> Any:
        return {
            "bookmark_id": job.payload["bookmark_id"],
            "source_version": job.payload["source_version"],
            "title": checkpoint.outputs[-1]["title"],
        }

    def outcome_writes(
        self, job: Job, target: JobState, result: Any, error: dict[str, str] | None, now: int
    ) -> list[dict[str, Any]]:
        payload, tenant = job.payload, job.owner.tenant
        if target is JobState.SUCCEEDED:
            return [
                title_landed(
                    tenant, payload["bookmark_id"], payload["source_version"], result["title"], now
                )
            ]
        if target in {JobState.DEAD, JobState.FAILED} and error is not None:
            return [
                title_failed(tenant, payload["bookmark_id"], payload["source_version"], error, now)
            ]
        if target is JobState.CANCELLED:
            # A running job is asked to stop by an edit or a delete of its bookmark as well as by
            # its owner: the check lets `when_related_changed` name the bookmark's change.
            return [
                title_source_unchanged(tenant, payload["bookmark_id"], payload["source_version"])
            ]
        return []

    def when_related_changed(
        self, job: Job, changed: RelatedItemChangedError
    ) -> tuple[StopReason, dict[str, str]]:
        if changed.old_item is None:
            return StopReason.SOURCE_DELETED, {
                "code": StopReason.SOURCE_DELETED.value,
                "message": "the bookmark was deleted while its title was being fetched",
            }
        return StopReason.SUPERSEDED, {
            "code": StopReason.SUPERSEDED.value,
            "message": "the bookmark's URL changed; a newer job fetches the new title",
        }
