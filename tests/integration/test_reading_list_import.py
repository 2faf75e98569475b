"""Importing a list into the reading list (issue 31 item 9), on `leasehold.testing`: one
`reading_list_import` parent whose children fetch the titles and save the bookmarks, its progress
read through `GET /bookmark-imports/{id}` while the testbed runs it a round at a time."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold import Owner
from leasehold.testing import LeaseholdTestbed, NotIdleError
from leasehold_apps.reading_list import importing, routes
from leasehold_apps.reading_list.imports import (
    IMPORT_CONCURRENCY,
    MAX_IMPORT_URLS,
    ImportedTitleKind,
    bookmark_id_of,
)
from leasehold_apps.reading_list.kinds import TitleKind
from leasehold_apps.reading_list.titles import TitleFetchError
from tests.support.harness import HookedFetcher

URLS = [f"https://example.org/articles/post-{n}" for n in range(18)] + [
    "https://broken.example.net/a",
    "https://broken.example.net/b",
]


@pytest.fixture(autouse=True)
def reading_list_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TITLE_FETCHER", "fixture")
    monkeypatch.setenv("ENRICHMENT_PROVIDER_CAPABILITY", "none")


class Fetches:
    """The fixture fetcher, failing (not retryably) every URL on broken.example.net, and
    counting the fetches in flight at once."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    def __call__(self, url: str, mode: Any, attempt: int, tick: Any) -> None:
        self.urls.append(url)
        if "broken.example.net" in url:
            raise TitleFetchError("http_status", f"{url} answered 404", retryable=False)


def _testbed(fetches: Fetches, **settings: Any) -> LeaseholdTestbed:
    title = TitleKind("fixture", slow_seconds=0, fetcher=HookedFetcher(fetches))
    return LeaseholdTestbed([title, ImportedTitleKind(title), importing, routes], settings=settings)


def _start(tb: LeaseholdTestbed, body: Any, key: str | None = None) -> dict[str, Any]:
    headers = {"Idempotency-Key": key} if key else None
    status, answer, location = tb.request("POST", "/bookmark-imports", body, headers=headers)
    assert status == 202, answer
    assert location["Location"] == f"/bookmark-imports/{answer['import_id']}"
    return dict(answer)


def _progress(tb: LeaseholdTestbed, import_id: str) -> dict[str, Any]:
    status, view, _ = tb.request("GET", f"/bookmark-imports/{import_id}")
    assert status == 200, view
    return dict(view)


def test_an_import_of_20_urls_with_2_bad_pages_saves_them_all_and_says_how_it_went() -> None:
    fetches = Fetches()
    with _testbed(fetches) as tb:
        import_id = _start(tb, {"urls": URLS})["import_id"]
        assert _progress(tb, import_id)["progress"] == {"done": 0, "total": 20}
        seen: list[tuple[str, int]] = []
        for _ in range(100):  # one delivery round at a time, reading the progress after each
            try:
                tb.run_until_idle(max_rounds=1)
                break
            except NotIdleError:
                view = _progress(tb, import_id)
                seen.append((view["state"], view["progress"]["done"]))
        else:
            pytest.fail("the import never went idle")
        # progress was seen mid-way: children ended while others had not
        assert any(0 < done < 20 for _, done in seen), seen
        dones = [done for _, done in seen]
        assert dones == sorted(dones), seen  # it never goes back
        final = _progress(tb, import_id)
        assert final["state"] == "succeeded", final
        assert final["progress"] == {"done": 20, "total": 20}
        summary = final["summary"]
        assert summary["total"] == 20 and summary["imported"] == 18 and summary["failed"] == 2
        assert summary["outcomes"] == ["titled"] * 18 + ["http_status"] * 2
        assert sorted(fetches.urls) == sorted(URLS)  # each URL fetched once

        status, listed, _ = tb.request("GET", "/bookmarks?limit=100")
        assert status == 200
        bookmarks = {b["url"]: b for b in listed["items"]}
        assert set(bookmarks) == set(URLS)
        titled = [b for b in bookmarks.values() if b["title_status"] == "ready"]
        assert len(titled) == 18
        assert bookmarks[URLS[3]]["title"] == "post-3 · example.org"
        for url in URLS[18:]:
            assert bookmarks[url]["title_status"] == "failed"
            assert bookmarks[url]["title_error"]["code"] == "http_status"
        # each bookmark is its child's: named by it, its title job, the child's result
        children = tb.children(import_id)
        assert len(children) == 20
        for child, url in zip(children, URLS, strict=True):
            bookmark = bookmarks[url]
            assert bookmark["id"] == bookmark_id_of(child["job_id"])
            assert bookmark["title_job"]["job_id"] == child["job_id"]
            assert bookmark["title_job"]["state"] == child["state"]


def test_at_most_the_import_concurrency_fetch_at_once() -> None:
    """Every child's worker dies inside its fetch, so each keeps holding its lease (`running`):
    only `IMPORT_CONCURRENCY` of them get to start; the rest wait `queued` for a free place.
    One wake-up per invocation, so a crash loses only its own."""
    with _testbed(Fetches(), worker_batch_size=1) as tb:
        crashes = tb.crash(in_step="fetch", times=len(URLS))
        import_id = _start(tb, {"urls": URLS})["import_id"]
        for _ in range(50):
            try:
                tb.run_until_idle(max_rounds=20)
                break
            except NotIdleError:
                continue
        states = [child["state"] for child in tb.children(import_id)]
        assert states.count("running") == IMPORT_CONCURRENCY, states
        assert states.count("queued") == len(URLS) - IMPORT_CONCURRENCY, states
        assert len(crashes.fired) == IMPORT_CONCURRENCY
        assert _progress(tb, import_id)["progress"] == {"done": 0, "total": 20}


def test_a_url_already_saved_is_saved_again_as_a_single_save_would() -> None:
    with _testbed(Fetches()) as tb:
        status, first, _ = tb.request("POST", "/bookmarks", {"url": URLS[0]})
        assert status == 201
        import_id = _start(tb, {"urls": [URLS[0], URLS[0]]})["import_id"]
        tb.run_until_idle()
        assert _progress(tb, import_id)["summary"]["outcomes"] == ["titled", "titled"]
        _, listed, _ = tb.request("GET", "/bookmarks")
        same = [b for b in listed["items"] if b["url"] == URLS[0]]
        assert len(same) == 3 and len({b["id"] for b in same}) == 3
        assert all(b["title_status"] == "ready" for b in same)
        assert first["id"] in {b["id"] for b in same}


def test_the_same_key_and_list_is_the_same_import() -> None:
    with _testbed(Fetches()) as tb:
        first = _start(tb, {"urls": URLS[:3]}, key="import-1")
        again = _start(tb, {"urls": URLS[:3]}, key="import-1")
        assert again["import_id"] == first["import_id"]
        other = _start(tb, {"urls": URLS[:3]}, key="import-2")
        assert other["import_id"] != first["import_id"]
        status, answer, _ = tb.request(
            "POST",
            "/bookmark-imports",
            {"urls": URLS[:4]},
            headers={"Idempotency-Key": "import-1"},
        )
        assert status == 409 and answer["error"]["code"] == "idempotency_key_reused"
        tb.run_until_idle()
        _, listed, _ = tb.request("GET", "/bookmarks?limit=100")
        assert len(listed["items"]) == 6  # two imports of three, not three


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        ({"urls": []}, "invalid_request", "1 to 500"),
        ({"urls": "https://example.org/"}, "invalid_request", "list"),
        ({}, "invalid_request", "'urls'"),
        ({"urls": ["https://example.org/"] * (MAX_IMPORT_URLS + 1)}, "invalid_request", "500"),
        ({"urls": ["https://example.org/", "ftp://example.org/x"]}, "invalid_url", "urls[1]"),
        ({"urls": ["https://example.org/", 7]}, "invalid_url", "urls[1]"),
        ({"urls": ["https://example.org/"], "note": "x"}, "invalid_request", "unknown field"),
        ({"urls": ["https://example.org/"], "title_mode": "nope"}, "invalid_request", "title_mode"),
        ([1, 2], "invalid_request", "JSON object"),
        (
            {"urls": [f"https://example.org/{'x' * 1900}/{n}" for n in range(30)]},
            "too_large",
            "split the list",
        ),
    ],
)
def test_bad_imports_are_400_with_what_is_wrong(body: Any, code: str, says: str) -> None:
    with _testbed(Fetches()) as tb:
        status, answer, _ = tb.request("POST", "/bookmark-imports", body)
        assert status == 400, answer
        assert answer["error"]["code"] == code, answer
        assert says in answer["error"]["message"], answer
        assert tb.run_until_idle().deliveries == ()  # nothing was started


def test_an_import_is_its_owners_and_only_an_import() -> None:
    with _testbed(Fetches()) as tb:
        import_id = _start(tb, {"urls": URLS[:1]})["import_id"]
        status, _, _ = tb.request(
            "GET", f"/bookmark-imports/{import_id}", owner=Owner(tb.owner.tenant, "mallory")
        )
        assert status == 404
        status, saved, _ = tb.request("POST", "/bookmarks", {"url": URLS[0]})
        status, _, _ = tb.request("GET", f"/bookmark-imports/{saved['title_job']['job_id']}")
        assert status == 404  # a title job is not an import
        status, _, _ = tb.request("GET", "/bookmark-imports/j_nothing")
        assert status == 404
