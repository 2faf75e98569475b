"""Title latency on the local stack: bookmarks saved one at a time on an otherwise idle stack,
each polled closely until its title lands (the `fixture` fetcher, mode `ok`: no network).

Two figures per bookmark: accept → title ready as the client saw it (from sending `POST
/bookmarks` to the first `GET /bookmarks/{id}` that shows `title_status: ready`), and from the
title job's own timestamps (`created_at` → `updated_at` of the job once `succeeded`)."""

from __future__ import annotations

import statistics
import time
from typing import Any

from leasehold.client import Client


class TitleBenchError(RuntimeError):
    pass


def _seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


def measure_titles(client: Client, bookmarks: int, poll_seconds: float = 0.01) -> dict[str, Any]:
    seen: list[float] = []
    by_job: list[float] = []
    for n in range(bookmarks):
        time.sleep(0.5)  # nothing in flight before each one
        sent = time.time()
        reply = client.request(
            "POST", "/bookmarks", {"url": f"https://example.org/bench/title-{n}-{sent:.0f}"}
        )
        status, body = reply.status, reply.body
        if status != 201:
            raise TitleBenchError(f"POST /bookmarks answered {status}: {body}")
        bookmark_id, job_id = body["id"], body["title_job"]["job_id"]
        deadline = time.monotonic() + 30
        while True:
            reply = client.request("GET", f"/bookmarks/{bookmark_id}")
            status, view = reply.status, reply.body or {}
            if status == 200 and view.get("title_status") == "ready":
                seen.append(time.time() - sent)
                break
            if status != 200 or view.get("title_status") == "failed":
                raise TitleBenchError(f"bookmark {bookmark_id}: {status} {view}")
            if time.monotonic() > deadline:
                raise TitleBenchError(f"bookmark {bookmark_id}: no title after 30 s")
            time.sleep(poll_seconds)
        reply = client.request("GET", f"/jobs/{job_id}")
        status, job = reply.status, reply.body or {}
        if status != 200 or job.get("state") != "succeeded":
            raise TitleBenchError(f"title job {job_id}: {status} {job}")
        by_job.append(_seconds(job["updated_at"]) - _seconds(job["created_at"]))
    return {
        "bookmarks": bookmarks,
        "fetcher": "fixture (mode ok)",
        "client_seen_p50_s": round(statistics.median(seen), 3),
        "client_seen_p95_s": round(_percentile(seen, 0.95), 3),
        "job_timestamps_p50_s": round(statistics.median(by_job), 3),
        "job_timestamps_p95_s": round(_percentile(by_job, 0.95), 3),
        "poll_seconds": poll_seconds,
    }
