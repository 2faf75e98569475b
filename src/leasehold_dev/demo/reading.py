"""R1–R8: the reading list, the application leasehold was built for. Titles come from the
fixture fetcher (local stack only): `ok`, `timeout` (every attempt), `slow` (3 s, heartbeating)."""

from __future__ import annotations

import signal
import time
from typing import Any

from leasehold_apps.reading_list.titles.fixture import fixture_title
from leasehold_dev.demo.session import SETTLED, Session, Task

EXAMPLE = "https://example.org/articles"


def save_bookmark(
    s: Session,
    task: Task,
    user: str,
    url: str,
    mode: str | None = None,
    key: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"url": url, **({"title_mode": mode} if mode else {})}
    headers = {"Idempotency-Key": key} if key else None
    answer = s.call("POST", "/bookmarks", body, user=user, headers=headers)
    if answer.status != 201:
        raise RuntimeError(f"POST /bookmarks answered {answer.status} {answer.body}")
    view: dict[str, Any] = answer.body
    s.track(task, view["title_job"]["job_id"])
    s.act(
        task,
        f"{user} saves {url}{f' (title_mode {mode})' if mode else ''}"
        f"{f', Idempotency-Key {key}' if key else ''} → 201 {view['id']}, "
        f"title job {view['title_job']['job_id']}",
    )
    return view


def _bookmark(s: Session, bookmark_id: str, user: str) -> tuple[int, dict[str, Any]]:
    answer = s.call("GET", f"/bookmarks/{bookmark_id}", user=user)
    return answer.status, answer.body


def _tenant_bookmarks(s: Session, user: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = ""
    for _ in range(20):  # bounded: the demo's tenant holds a handful
        answer = s.call("GET", f"/bookmarks?limit=100{cursor}", user=user)
        items += answer.body.get("items", [])
        if not answer.body.get("next_cursor"):
            break
        cursor = f"&cursor={answer.body['next_cursor']}"
    return items


def r1_basics(s: Session, task: Task) -> None:
    """R1 a title lands; R2 a duplicate create reuses the bookmark and job; R8 a stale note
    version is a 409."""
    url = f"{EXAMPLE}/durable-jobs"
    first = save_bookmark(s, task, "alice", url, key="save-durable-jobs")
    again = save_bookmark(s, task, "alice", url, key="save-durable-jobs")
    job = first["title_job"]["job_id"]
    s.wait_settled(job, "alice")
    status, seen = _bookmark(s, first["id"], "bob")
    expected = fixture_title(url)
    s.check(
        task,
        "R1",
        "a saved bookmark's title is fetched in the background and lands",
        f"bob (same tenant) sees {status} title {seen.get('title')!r}, "
        f"{seen.get('title_status')}; title job {seen.get('title_job', {}).get('state')}",
        status == 200
        and seen.get("title") == expected
        and seen.get("title_status") == "ready"
        and seen.get("title_job", {}).get("state") == "succeeded",
    )
    same_url = [b["id"] for b in _tenant_bookmarks(s, "bob") if b["url"] == url]
    ops = s.ops_job(job)
    s.check(
        task,
        "R2",
        "the same Idempotency-Key and body reuse the bookmark and its job",
        f"repeat → {again['id']} / {again['title_job']['job_id']} (first {first['id']} / {job}); "
        f"bookmarks with this URL: {len(same_url)}; the title job ran {ops.get('attempts')} "
        f"attempt(s)",
        again["id"] == first["id"]
        and again["title_job"]["job_id"] == job
        and same_url == [first["id"]]
        and ops.get("attempts") == 1,
    )
    edit = s.call("PATCH", f"/bookmarks/{first['id']}", {"version": 1, "note": "for Friday"})
    s.act(
        task, f"alice sets a note at version 1 → {edit.status}, version {edit.body.get('version')}"
    )
    stale = s.call("PATCH", f"/bookmarks/{first['id']}", {"version": 1, "note": "stale tab"})
    s.act(task, f"alice's other tab sends version 1 again → {stale.status}")
    _, after = _bookmark(s, first["id"], "alice")
    code = stale.body.get("error", {}).get("code")
    s.check(
        task,
        "R8",
        "an edit with a stale version is refused (409), the newer note stays",
        f"{stale.status} {code}; note {after.get('note')!r} at version {after.get('version')}",
        edit.status == 200
        and stale.status == 409
        and code == "stale_version"
        and after.get("note") == "for Friday"
        and after.get("version") == 2,
    )


def r3_dead_and_replay(s: Session, task: Task) -> None:
    """R3 a page that never answers ends `failed` (job `dead`) and the operator finds it; R4 the
    operator replays it under the same job id — and, the page still not answering, it is dead
    again: a replay is a new chance, not a promise."""
    view = save_bookmark(s, task, "carol", f"{EXAMPLE}/never-answers", mode="timeout")
    job = view["title_job"]["job_id"]
    dead = s.wait_job(job, "carol", lambda v: v.get("state") in SETTLED, timeout=40)
    _, bookmark = _bookmark(s, view["id"], "carol")
    rows = s.call("GET", "/ops/jobs?state=dead&limit=100", user="ops").body.get("jobs", [])
    row: dict[str, Any] = next((r for r in rows if r["job_id"] == job), {})
    s.act(task, f"ops lists dead jobs: {job} names bookmark {row.get('bookmark_id')}")
    s.check(
        task,
        "R3",
        "a title that times out every attempt ends failed; the operator's dead list names it",
        f"job {dead.get('state')}/{dead.get('stop_reason')} after {dead.get('attempts')}; bookmark "
        f"{bookmark.get('title_status')} ({bookmark.get('title_error', {}).get('code')}); "
        f"dead row → bookmark {row.get('bookmark_id')}",
        dead.get("state") == "dead"
        and dead.get("stop_reason") == "attempts_exhausted"
        and dead.get("attempts") == 3
        and bookmark.get("title_status") == "failed"
        and bookmark.get("title_error", {}).get("code") == "timeout"
        and row.get("bookmark_id") == view["id"],
    )
    note = "the site says it is back"
    replay = s.call("POST", f"/ops/jobs/{job}/replay", {"note": note}, user="ops")
    s.act(task, f"ops replays {job} ({note!r}) → {replay.status} {replay.body.get('state')}")
    again = s.wait_job(
        job, "carol", lambda v: v.get("state") == "dead" and v.get("replays") == 1, timeout=40
    )
    history = s.ops_job(job).get("history") or []
    replayed = [e for e in history if e.get("event") == "replayed"]
    _, bookmark = _bookmark(s, view["id"], "carol")
    s.check(
        task,
        "R4",
        "the operator replays it under the same job id (the page still times out: dead again)",
        f"replay {replay.status}, same id {replay.body.get('job_id') == job}, replays "
        f"{again.get('replays')}; history: replayed by {[e.get('by') for e in replayed]}; then "
        f"{again.get('state')} after {again.get('attempts')} more attempts; bookmark "
        f"{bookmark.get('title_status')}",
        replay.status == 202
        and replay.body.get("job_id") == job
        and again.get("state") == "dead"
        and again.get("replays") == 1
        and again.get("attempts") == 3
        and [(e.get("by"), e.get("note")) for e in replayed] == [("ops", note)]
        and bookmark.get("title_status") == "failed",
    )


def _wait_fetching(s: Session, job: str, user: str) -> dict[str, Any]:
    """The title job once a worker holds it and the slow fetch is under way."""
    view = s.wait_job(job, user, lambda v: v.get("state") == "running", timeout=20)
    time.sleep(0.5)
    return view


def r5_edit_mid_fetch(s: Session, task: Task) -> None:
    view = save_bookmark(s, task, "bob", f"{EXAMPLE}/slow-page", mode="slow")
    old_job = view["title_job"]["job_id"]
    _wait_fetching(s, old_job, "bob")
    new_url = f"{EXAMPLE}/leases"
    edit = s.call("PATCH", f"/bookmarks/{view['id']}", {"version": 1, "url": new_url}, user="bob")
    new_job = edit.body.get("title_job", {}).get("job_id", "")
    s.track(task, new_job)
    s.act(
        task,
        f"bob changes the URL to {new_url} while the old fetch runs → {edit.status}, "
        f"source_version {edit.body.get('source_version')}, new title job {new_job}",
    )
    old = s.wait_settled(old_job, "bob", timeout=20)
    new = s.wait_settled(new_job, "bob", timeout=30) if new_job else {}
    _, bookmark = _bookmark(s, view["id"], "bob")
    s.check(
        task,
        "R5",
        "a URL edit during a slow fetch: the old title is refused, the new one lands",
        f"old job {old.get('state')}/{old.get('stop_reason')}; new job {new.get('state')}; "
        f"bookmark title {bookmark.get('title')!r} at source_version "
        f"{bookmark.get('source_version')}",
        edit.status == 200
        and old.get("state") == "cancelled"
        and old.get("stop_reason") == "superseded"
        and new.get("state") == "succeeded"
        and bookmark.get("title") == fixture_title(new_url)
        and bookmark.get("source_version") == 2,
    )


def r6_delete_mid_fetch(s: Session, task: Task) -> None:
    view = save_bookmark(s, task, "bob", f"{EXAMPLE}/soon-deleted", mode="slow")
    job = view["title_job"]["job_id"]
    _wait_fetching(s, job, "bob")
    deleted = s.call("DELETE", f"/bookmarks/{view['id']}", user="bob")
    s.act(task, f"bob deletes {view['id']} while its title is fetched → {deleted.status}")
    ended = s.wait_settled(job, "bob", timeout=20)
    first, _ = _bookmark(s, view["id"], "bob")
    time.sleep(1.5)
    later, _ = _bookmark(s, view["id"], "bob")
    s.check(
        task,
        "R6",
        "a delete during a slow fetch: the job ends source_deleted, the bookmark stays gone",
        f"DELETE {deleted.status}; job {ended.get('state')}/{ended.get('stop_reason')}; "
        f"GET after the job ended {first}, 1.5 s later {later}",
        deleted.status == 204
        and ended.get("state") == "cancelled"
        and ended.get("stop_reason") == "source_deleted"
        and first == later == 404,
    )


def r7_killed_mid_fetch(s: Session, task: Task) -> None:
    url = f"{EXAMPLE}/crash-safe"
    view = save_bookmark(s, task, "bob", url, mode="slow")
    job = view["title_job"]["job_id"]
    _wait_fetching(s, job, "bob")
    victim = s.signal_holder(task, job, signal.SIGKILL, "killed mid-fetch")
    done = s.wait_settled(job, "bob", timeout=40)
    history = s.ops_job(job).get("history") or []
    finisher = next(
        (
            str(e.get("worker", "")).partition("@")[0]
            for e in history
            if e.get("event") == "succeeded"
        ),
        None,
    )
    _, bookmark = _bookmark(s, view["id"], "bob")
    s.check(
        task,
        "R7",
        "a worker killed mid-fetch: another worker finishes and the title lands",
        f"killed {victim}; job {done.get('state')} at epoch {done.get('epoch')} by {finisher}; "
        f"title {bookmark.get('title')!r}",
        victim is not None
        and done.get("state") == "succeeded"
        and done.get("epoch") == 2
        and finisher not in (None, victim)
        and bookmark.get("title") == fixture_title(url),
    )
