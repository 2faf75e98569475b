"""The reading list's HTTP contract (DESIGN §7) through the real Api handler, on moto."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.api import Call, call_fixture

URL = "https://example.org/articles/durable-jobs"


def _create(call: Call, url: str = URL, user: str = "alice", **extra: Any) -> dict[str, Any]:
    headers = extra.pop("headers", None)
    status, view, answer_headers = call(
        "api-create-bookmark.json", body={"url": url, **extra}, user=user, headers=headers
    )
    assert status == 201, view
    assert answer_headers["Location"] == f"/bookmarks/{view['id']}"
    return view


def test_a_saved_bookmark_is_pending_with_its_title_job(local_call: Call) -> None:
    view = _create(local_call)
    assert view["url"] == URL and view["owner"] == "alice"
    assert view["title"] is None and view["title_status"] == "pending"
    assert (view["version"], view["source_version"], view["note"]) == (1, 1, "")
    assert view["is_read"] is False
    job = view["title_job"]
    assert job["state"] == "queued" and job["status_url"] == f"/jobs/{job['job_id']}"
    # The title job is the owner's job, visible where every job is
    status, job_view, _ = local_call("api-get-job.json", path_id=job["job_id"])
    assert status == 200 and job_view["kind"] == "title"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://example.org/x"}, "url"),
        ({"url": "https:///nohost"}, "url"),
        ({"url": "https://user:pw@example.org/"}, "url"),
        ({"url": "https://example.org/" + "a" * 2048}, "url"),
        ({"url": "javascript:alert(1)"}, "url"),
        ({"url": 42}, "url"),
        ({}, "url"),
        ({"url": URL, "colour": "red"}, "unknown field"),
        ({"url": URL, "title_mode": "sideways"}, "title_mode"),
    ],
)
def test_bad_bookmarks_are_400_with_what_is_wrong(
    local_call: Call, body: dict[str, Any], field: str
) -> None:
    status, answer, _ = local_call("api-create-bookmark.json", body=body)
    assert status == 400 and field in answer["error"]["message"]


def test_title_mode_is_refused_when_titles_are_fetched_for_real(call: Call) -> None:
    # `call` runs with the template's defaults: the live fetcher, as deployed
    status, answer, _ = call("api-create-bookmark.json", body={"url": URL, "title_mode": "slow"})
    assert status == 400 and "fixture" in answer["error"]["message"]
    assert _create(call)["title_status"] == "pending"


def test_the_same_key_and_body_is_the_same_bookmark_and_job(local_call: Call) -> None:
    first = _create(local_call, headers={"idempotency-key": "save-1"})
    again = _create(local_call, headers={"idempotency-key": "save-1"})
    assert (again["id"], again["title_job"]["job_id"]) == (
        first["id"],
        first["title_job"]["job_id"],
    )
    status, page, _ = local_call("api-list-bookmarks.json")
    assert [item["id"] for item in page["items"]] == [first["id"]]
    status, jobs, _ = local_call("api-list-jobs.json")
    assert [job["job_id"] for job in jobs["jobs"]] == [first["title_job"]["job_id"]]
    status, answer, _ = local_call(
        "api-create-bookmark.json",
        body={"url": "https://example.org/other"},
        headers={"idempotency-key": "save-1"},
    )
    assert status == 409 and answer["error"]["code"] == "idempotency_key_reused"


def test_a_key_whose_bookmark_was_deleted_is_409_not_500(local_call: Call) -> None:
    # Found by make fuzz: the repeat re-created the bookmark, met the old title job's id, and
    # the transaction's failure was "a condition it cannot explain" (500)
    first = _create(local_call, headers={"idempotency-key": "save-2"})
    assert local_call("api-delete-bookmark.json", path_id=first["id"])[0] == 204
    for body in ({"url": URL}, {"url": "https://example.org/other"}):
        status, answer, _ = local_call(
            "api-create-bookmark.json", body=body, headers={"idempotency-key": "save-2"}
        )
        assert status == 409 and answer["error"]["code"] == "idempotency_key_reused"
        assert "deleted" in answer["error"]["message"]
    # Nothing came back: no bookmark, and the title job is still the cancelled first one
    assert local_call("api-get-bookmark.json", path_id=first["id"])[0] == 404
    assert local_call("api-list-bookmarks.json")[1]["items"] == []
    _, job, _ = local_call("api-get-job.json", path_id=first["title_job"]["job_id"])
    assert job["state"] == "cancelled" and job["stop_reason"] == "source_deleted"
    # A new key saves the URL again
    assert _create(local_call, headers={"idempotency-key": "save-3"})["id"] != first["id"]


def test_the_list_is_shared_in_the_tenant_oldest_first_with_own_read_marks(
    local_call: Call,
) -> None:
    ids = [
        _create(local_call, f"https://example.org/{n}", user)["id"]
        for n, user in enumerate(["alice", "bob", "alice"])
    ]
    status, page, _ = local_call("api-list-bookmarks.json", user="bob", query={"limit": "2"})
    assert status == 200 and [i["id"] for i in page["items"]] == ids[:2]
    status, rest, _ = local_call(
        "api-list-bookmarks.json", user="bob", query={"limit": "2", "cursor": page["next_cursor"]}
    )
    assert [i["id"] for i in rest["items"]] == ids[2:] and rest["next_cursor"] is None
    # Read marks are each member's own
    status, mark, _ = local_call(
        "api-mark-bookmark-read.json", path_id=ids[0], user="bob", body={"is_read": True}
    )
    assert (status, mark) == (200, {"id": ids[0], "is_read": True})
    assert local_call("api-get-bookmark.json", path_id=ids[0], user="bob")[1]["is_read"] is True
    assert local_call("api-get-bookmark.json", path_id=ids[0])[1]["is_read"] is False
    # A mark is not an edit: the version does not move
    assert local_call("api-get-bookmark.json", path_id=ids[0])[1]["version"] == 1
    # Carol, of another tenant, sees none of it
    status, carol, _ = local_call("api-list-bookmarks.json", user="carol")
    assert (status, carol["items"]) == (200, [])
    status, answer, _ = local_call("api-get-bookmark.json", path_id=ids[0], user="carol")
    assert status == 404
    status, answer, _ = local_call(
        "api-mark-bookmark-read.json", path_id=ids[0], user="carol", body={"is_read": True}
    )
    assert status == 404
    # Another tenant's cursor is refused before the query
    status, answer, _ = local_call(
        "api-list-bookmarks.json", user="carol", query={"cursor": page["next_cursor"]}
    )
    assert status == 400 and "cursor" in answer["error"]["message"]


def test_only_the_owner_edits_with_the_current_version(local_call: Call) -> None:
    view = _create(local_call)
    edit = {"version": 1, "note": "for Friday"}
    # Another member: the same 404 as an unknown bookmark, as the starter API answers
    status, answer, _ = local_call(
        "api-edit-bookmark.json", path_id=view["id"], user="bob", body=edit
    )
    assert status == 404
    status, answer, _ = local_call("api-delete-bookmark.json", path_id=view["id"], user="bob")
    assert status == 404
    status, edited, _ = local_call("api-edit-bookmark.json", path_id=view["id"], body=edit)
    assert status == 200 and edited["note"] == "for Friday" and edited["version"] == 2
    assert edited["source_version"] == 1  # a note is not a new source: no new title job
    assert edited["title_job"]["job_id"] == view["title_job"]["job_id"]
    status, answer, _ = local_call("api-edit-bookmark.json", path_id=view["id"], body=edit)
    assert status == 409 and answer["error"]["code"] == "stale_version"


@pytest.mark.parametrize(
    "body",
    [
        {"note": "x"},
        {"version": "1", "note": "x"},
        {"version": True, "note": "x"},
        {"version": 10**38, "note": "x"},
        {"version": 1},
        {"version": 1, "note": "x" * 4001},
        {"version": 1, "note": 7},
        {"version": 1, "url": "file:///etc/passwd"},
        {"version": 1, "note": "x", "tags": []},
    ],
)
def test_bad_edits_are_400(local_call: Call, body: dict[str, Any]) -> None:
    view = _create(local_call)
    status, answer, _ = local_call("api-edit-bookmark.json", path_id=view["id"], body=body)
    assert status == 400, answer


@pytest.mark.parametrize(
    "body", [{}, {"is_read": "yes"}, {"is_read": 1}, {"is_read": True, "x": 1}]
)
def test_bad_read_marks_are_400(local_call: Call, body: dict[str, Any]) -> None:
    view = _create(local_call)
    status, _, _ = local_call("api-mark-bookmark-read.json", path_id=view["id"], body=body)
    assert status == 400


def test_a_new_url_is_a_new_source_with_a_new_title_job_and_the_old_one_cancelled(
    local_call: Call,
) -> None:
    view = _create(local_call)
    old_job = view["title_job"]["job_id"]
    status, edited, _ = local_call(
        "api-edit-bookmark.json",
        path_id=view["id"],
        body={"version": 1, "url": "https://example.org/articles/leases"},
    )
    assert status == 200 and edited["source_version"] == 2 and edited["version"] == 2
    assert edited["title_status"] == "pending" and edited["title_job"]["job_id"] != old_job
    status, old, _ = local_call("api-get-job.json", path_id=old_job)
    assert old["state"] == "cancelled" and old["stop_reason"] == "superseded"


def test_delete_removes_the_bookmark_and_cancels_its_open_title_job(local_call: Call) -> None:
    view = _create(local_call)
    status, _, _ = local_call("api-delete-bookmark.json", path_id=view["id"])
    assert status == 204
    assert local_call("api-get-bookmark.json", path_id=view["id"])[0] == 404
    status, job, _ = local_call("api-get-job.json", path_id=view["title_job"]["job_id"])
    assert job["state"] == "cancelled" and job["stop_reason"] == "source_deleted"
    assert local_call("api-delete-bookmark.json", path_id=view["id"])[0] == 404


def test_title_jobs_cannot_be_submitted_directly(local_call: Call) -> None:
    body = {"kind": "title", "payload": {"bookmark_id": "b_x", "url": URL, "source_version": 1}}
    status, answer, _ = local_call("api-submit-job.json", body=body)
    assert status == 400 and answer["error"]["code"] == "unknown_kind"


def test_malformed_bookmark_ids_are_404(local_call: Call) -> None:
    for bad in ("x" * 300, "b_zz", "../b_1"):
        assert local_call("api-get-bookmark.json", path_id=bad)[0] == 404


@pytest.fixture
def enrich_call(moto: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Call]:
    """The Api handler with a provider configured (accept never calls it)."""
    yield from call_fixture(
        monkeypatch,
        TITLE_FETCHER="fixture",
        ENRICHMENT_PROVIDER_URL="http://127.0.0.1:9",
        ENRICHMENT_PROVIDER_CAPABILITY="idempotent_key",
    )


def test_enrich_takes_no_body_or_an_empty_one(enrich_call: Call) -> None:
    # Found by make fuzz: with no body the request's fingerprint spread None into a dict (500)
    view = _create(enrich_call)
    seen = set()
    for index, raw in enumerate(("", "null", "{}", '{"budget": null}')):
        key = {"idempotency-key": f"enrich-{index}"}
        event = {"path_id": view["id"], "headers": key}
        status, accepted, headers = enrich_call("api-enrich-bookmark.json", raw_body=raw, **event)
        assert status == 202, (raw, accepted)
        assert headers["Location"] == accepted["status_url"] == f"/jobs/{accepted['job_id']}"
        again = enrich_call("api-enrich-bookmark.json", raw_body=raw, **event)
        assert again[0] == 202 and again[1]["job_id"] == accepted["job_id"]  # same key, same job
        seen.add(accepted["job_id"])
    assert len(seen) == 4
