"""Title jobs (arch §5) on moto with a manual clock, on the repository's harness: a redelivery
writes nothing again; an edit racing the fetch wins and the new title lands; jobs run out of
order; a dead fetch says why in the operators' list and a replay can still fill the title; a
change seen at a heartbeat; and the strict lease rule of the reading list's seed, generation by
generation. What a user of the testbed can check through the routes (the title lands, a delete
racing the fetch, a refused address) is in test_reading_list.py, on `leasehold.testing`."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.domain.errors import StaleEpochError, StepInterruptedError
from leasehold.domain.states import JobState
from leasehold.store.items import deserialize_item
from leasehold_apps.reading_list.codec import bookmark_key
from tests.support.harness import ALICE, Harness

URL = "https://example.org/articles/durable-jobs"


def _save(harness: Harness, url: str = URL, **extra: Any) -> dict[str, Any]:
    view, created = harness.bookmarks().create(ALICE, {"url": url, **extra}, None)
    assert created
    return view


def _bookmark(harness: Harness, bookmark_id: str) -> dict[str, Any]:
    item = harness.dynamodb.get_item(
        TableName=harness.table, Key=bookmark_key(ALICE.tenant, bookmark_id)
    ).get("Item")
    return deserialize_item(item) if item else {}


def _fetch(harness: Harness, job_id: str, hook: Any = None, worker: str = "w1") -> str:
    kinds = harness.kinds_with_title(hook or (lambda *_: None))
    return harness.worker(worker, kinds=kinds).handle(harness.wakeup(job_id)).outcome


def test_a_redelivered_message_after_success_writes_nothing_again(harness: Harness) -> None:
    view = _save(harness)
    job_id = view["title_job"]["job_id"]
    assert _fetch(harness, job_id) == "succeeded"
    before = _bookmark(harness, view["id"])
    harness.clock.advance(5_000)
    assert _fetch(harness, job_id, worker="w2") == "terminal"
    after = _bookmark(harness, view["id"])
    assert after == before  # version and updated_at unchanged


def test_an_edit_between_the_fetch_and_the_write_wins_and_the_new_title_lands(
    harness: Harness,
) -> None:
    view = _save(harness)
    old_job = view["title_job"]["job_id"]
    edited: dict[str, Any] = {}

    def edit_meanwhile(url: str, mode: Any, attempt: int, tick: Any) -> None:
        edited.update(
            harness.bookmarks().edit(
                ALICE, view["id"], {"version": 1, "url": "https://example.org/articles/leases"}
            )
        )

    assert _fetch(harness, old_job, edit_meanwhile) == "cancelled"
    job = harness.store.get(old_job)
    assert job is not None and job.stop_reason == "superseded"
    assert _bookmark(harness, view["id"])["title_status"] == "pending"  # the old title refused
    assert _fetch(harness, edited["title_job"]["job_id"]) == "succeeded"
    stored = _bookmark(harness, view["id"])
    assert stored["title"] == "leases · example.org" and stored["source_version"] == 2


def test_two_edits_in_a_row_only_the_last_sources_title_lands(harness: Harness) -> None:
    view = _save(harness)
    first = harness.bookmarks().edit(ALICE, view["id"], {"version": 1, "url": URL + "/one"})
    second = harness.bookmarks().edit(ALICE, view["id"], {"version": 2, "url": URL + "/two"})
    # Every title job runs (as duplicates and late messages would make them), in any order
    outcomes = {
        job_id: _fetch(harness, job_id)
        for job_id in (
            second["title_job"]["job_id"],
            view["title_job"]["job_id"],
            first["title_job"]["job_id"],
        )
    }
    assert outcomes[second["title_job"]["job_id"]] == "succeeded"
    assert outcomes[view["title_job"]["job_id"]] == "terminal"  # cancelled while queued
    assert outcomes[first["title_job"]["job_id"]] == "terminal"
    stored = _bookmark(harness, view["id"])
    assert stored["title"] == "two · example.org" and stored["source_version"] == 3


def test_a_fetch_that_keeps_timing_out_ends_dead_and_the_bookmark_says_why(
    harness: Harness,
) -> None:
    view = _save(harness, title_mode="timeout")
    job_id = view["title_job"]["job_id"]
    for _ in range(3):
        outcome = _fetch(harness, job_id)
        harness.clock.advance(60_000)
    assert outcome == "dead"
    stored = _bookmark(harness, view["id"])
    assert stored["title_status"] == "failed" and stored["title_error"]["code"] == "timeout"
    # The operator's view lists the dead title job with the bookmark it belongs to
    rows = harness.ops().jobs("dead", None, None)["jobs"]
    assert [(r["job_id"], r["kind"], r["bookmark_id"]) for r in rows] == [
        (job_id, "title", view["id"])
    ]
    assert rows[0]["last_error"]["code"] == "timeout" and rows[0]["tenant"] == "study-group"
    # An operator replays it under the same id; this time the page answers
    harness.ops().replay(job_id, harness.operator, {"note": "the site is back"})
    assert _fetch(harness, job_id, lambda *_: "Durable jobs, explained") == "succeeded"
    stored = _bookmark(harness, view["id"])
    assert stored["title"] == "Durable jobs, explained" and stored["title_status"] == "ready"
    assert "title_error" not in stored
    job = harness.store.get(job_id)
    assert job is not None and [e["ev"] for e in job.history][-2:] == ["replayed", "succeeded"]


def test_the_summary_shows_the_oldest_queued_job_of_each_kind(harness: Harness) -> None:
    harness.submit(payload={"steps": [{"name": "s"}]})
    harness.clock.advance(1_000)
    view = _save(harness)
    harness.clock.advance(1_000)
    _save(harness, "https://example.org/later")
    harness.clock.advance(3_000)
    by_kind = harness.ops().summary()["oldest_queued_by_kind"]
    assert set(by_kind) == {"synthetic", "title"}
    assert by_kind["title"]["job_id"] == view["title_job"]["job_id"]
    assert by_kind["title"]["age_seconds"] == 4.0 and by_kind["title"]["attempts"] == 0


# ------------------------------------------------------------------ strict lease expiry


def _at_epoch(harness: Harness, job_id: str, epoch: int) -> None:
    """Bring a job to `epoch` claims so far, queued and due (setup for the seed's example)."""
    harness.dynamodb.update_item(
        TableName=harness.table,
        Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}},
        UpdateExpression="SET epoch = :e",
        ExpressionAttributeValues={":e": {"N": str(epoch)}},
    )


@pytest.mark.parametrize("order", ["a_reclaims", "b_claims_first"])
def test_strict_lease_expiry_generation_by_generation(harness: Harness, order: str) -> None:
    # Worker A owns generation 7 until t=100 (a lease of 100 ms from t=0)
    view = _save(harness)
    job_id = view["title_job"]["job_id"]
    _at_epoch(harness, job_id, 6)
    t0 = harness.clock.now_ms()
    a7 = harness.claimer.claim(job_id, ALICE, worker_id="A", now=t0, lease_ms=100)
    assert a7.epoch == 7 and a7.lease_expires_at == t0 + 100
    harness.clock.advance(101)  # t=101: nobody has reclaimed yet
    with pytest.raises(StaleEpochError):
        harness.complete(a7, {"title": "by A at generation 7"})
    if order == "a_reclaims":
        # A reacquires generation 8 and completes under 8
        a8 = harness.claimer.claim(
            job_id, ALICE, worker_id="A", now=harness.clock.now_ms(), lease_ms=10_000
        )
        assert a8.epoch == 8
        harness.complete(a8, {"title": "by A at generation 8"})
        final = harness.store.get(job_id)
        assert final is not None and final.result == {"title": "by A at generation 8"}
    else:
        # B acquires generation 8 first; A, still holding 7, can never overwrite it
        b8 = harness.claimer.claim(
            job_id, ALICE, worker_id="B", now=harness.clock.now_ms(), lease_ms=10_000
        )
        assert b8.epoch == 8
        with pytest.raises(StaleEpochError):
            harness.complete(a7, {"title": "by A, late"})
        harness.complete(b8, {"title": "by B at generation 8"})
        with pytest.raises(StaleEpochError):
            harness.complete(a7, {"title": "by A, later still"})
        final = harness.store.get(job_id)
        assert final is not None and final.epoch == 8
        assert final.result == {"title": "by B at generation 8"}


@pytest.mark.parametrize(
    ("change", "reason"),
    [("edit", "superseded"), ("delete", "source_deleted"), ("cancel", "cancelled_by_user")],
)
def test_a_change_seen_at_the_heartbeat_mid_fetch_ends_the_old_job_with_the_changes_reason(
    harness: Harness, change: str, reason: str
) -> None:
    # Given a fetch in progress: the edit or delete finds the job running, so it only asks it to
    # stop (cancel_requested), and the worker learns of it at its next heartbeat
    view = _save(harness)
    job_id = view["title_job"]["job_id"]

    def change_then_heartbeat(url: str, mode: Any, attempt: int, tick: Any) -> None:
        if change == "edit":
            harness.bookmarks().edit(
                ALICE, view["id"], {"version": 1, "url": "https://example.org/articles/leases"}
            )
        elif change == "delete":
            harness.bookmarks().delete(ALICE, view["id"])
        else:  # the owner's own cancel: the bookmark is as the job fetched it
            harness.jobs().cancel(ALICE, job_id)
        harness.clock.advance(1_000)
        assert tick() is False  # the heartbeat read cancel_requested: the fetch stops
        raise StepInterruptedError("stopped by the test fetcher")

    kinds = harness.kinds_with_title(change_then_heartbeat)
    worker = harness.worker("w1", kinds=kinds, heartbeat_every_ms=500)
    assert worker.handle(harness.wakeup(job_id)).outcome == "cancelled"
    # Then the old job says why it stopped: the bookmark changed, or its owner cancelled it
    job = harness.store.get(job_id)
    assert job is not None and job.state is JobState.CANCELLED
    assert job.stop_reason == reason
    if change != "cancel":
        assert (job.error or {}).get("code") == reason
