"""The reading list as its user tests it, on `leasehold.testing`: bookmarks saved and deleted
through its own routes (`tb.request`), the title jobs those routes make run by the testbed, and
what the bookmark says afterwards. Moved from test_title_jobs.py, where the races that need a
worker of the harness's (a redelivery, jobs run out of order, the lease generations, a
heartbeat's timing) stay; the HTTP contract checked against docs/openapi.yaml is in
test_bookmarks.py, through the real API handler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from leasehold.testing import LeaseholdTestbed
from leasehold_apps.reading_list import routes
from leasehold_apps.reading_list.kinds import TitleKind
from leasehold_apps.reading_list.titles import TitleFetchError
from tests.support.harness import HookedFetcher

URL = "https://example.org/articles/durable-jobs"


@pytest.fixture(autouse=True)
def reading_list_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The functions' environment as the local stack sets it: titles from the fixture fetcher
    (the routes read it to check a bookmark), no enrichment provider."""
    monkeypatch.setenv("TITLE_FETCHER", "fixture")
    monkeypatch.setenv("ENRICHMENT_PROVIDER_CAPABILITY", "none")


def title_kind(hook: Callable[..., str | None]) -> TitleKind:
    """The title kind with the fixture fetcher; `hook(url, mode, attempt, tick)` runs inside the
    fetch (act while a fetch is in flight) and may return the title to use."""
    return TitleKind("fixture", slow_seconds=0, fetcher=HookedFetcher(hook))


def _save(tb: LeaseholdTestbed, url: str = URL, **extra: Any) -> dict[str, Any]:
    made = tb.telemetry.counts["BookmarksCreated"]
    status, view, headers = tb.request("POST", "/bookmarks", {"url": url, **extra})
    assert status == 201, view
    assert headers["Location"] == f"/bookmarks/{view['id']}"
    assert tb.telemetry.counts["BookmarksCreated"] == made + 1  # a new one
    return dict(view)


def _bookmark(tb: LeaseholdTestbed, bookmark_id: str) -> dict[str, Any]:
    status, view, _ = tb.request("GET", f"/bookmarks/{bookmark_id}")
    assert status == 200, view
    return dict(view)


@pytest.mark.leasehold_kinds("leasehold_apps.reading_list")
def test_the_title_lands_without_moving_the_version(leasehold_testbed: LeaseholdTestbed) -> None:
    tb = leasehold_testbed
    view = _save(tb)
    job_id = view["title_job"]["job_id"]
    assert tb.run_until_idle().outcomes(job_id) == ["succeeded"]
    stored = _bookmark(tb, view["id"])
    assert stored["title"] == "durable-jobs · example.org" and stored["title_status"] == "ready"
    assert stored["version"] == 1 and stored["source_version"] == 1
    assert tb.view(job_id)["result"] == {
        "bookmark_id": view["id"],
        "source_version": 1,
        "title": "durable-jobs · example.org",
    }


def test_a_delete_between_the_fetch_and_the_write_wins() -> None:
    def delete_meanwhile(url: str, mode: Any, attempt: int, tick: Any) -> None:
        assert tb.request("DELETE", f"/bookmarks/{view['id']}")[0] == 204

    with LeaseholdTestbed([title_kind(delete_meanwhile), routes]) as tb:
        view = _save(tb)
        job_id = view["title_job"]["job_id"]
        assert tb.run_until_idle().outcomes(job_id) == ["cancelled"]
        job = tb.view(job_id)
        assert job["state"] == "cancelled"
        assert job["stop_reason"] == "source_deleted"
        status, _, _ = tb.request("GET", f"/bookmarks/{view['id']}")
        assert status == 404  # never brought back


def test_a_refused_address_fails_the_title_at_once() -> None:
    def refused(*_: Any) -> None:
        raise TitleFetchError(
            "blocked_address", "example.org resolves to 10.0.0.1", retryable=False
        )

    with LeaseholdTestbed([title_kind(refused), routes]) as tb:
        view = _save(tb)
        assert tb.run_until_idle().outcomes(view["title_job"]["job_id"]) == ["failed"]
        stored = _bookmark(tb, view["id"])
        assert stored["title_status"] == "failed"
        assert stored["title_error"]["code"] == "blocked_address"
