"""F1–F3: what the infrastructure does to a job system — SQS delivers a message again, and the
DynamoDB table stops answering — on the local stack: the message really is sent again to the
moto server's work queue, and the outage is the moto server answering every DynamoDB request
503 (`leasehold_dev.local.moto.server.set_dynamodb_outage`) for every client at once."""

from __future__ import annotations

import time
from typing import Any

from leasehold.domain.job import Owner
from leasehold.store.items import OUTBOX_PREFIX, deserialize_item
from leasehold.store.queue import Wakeup
from leasehold_dev.demo.reading import EXAMPLE, save_bookmark
from leasehold_dev.demo.session import SETTLED, Session, Task, now_ms
from leasehold_dev.demo.story import log_entries, log_time
from leasehold_dev.local.moto.server import set_dynamodb_outage
from leasehold_dev.local.stack import client

_OUTAGE_LINES = {
    "claim: store unavailable",
    "wake-up handed off",
    "store unavailable; message kept",
    "heartbeat failed; retrying while the lease holds",
}


def _first_wakeup_body(s: Session, job_id: str) -> str:
    """The body the relay sent for the job's first wake-up, rebuilt from its outbox item the
    way the relay builds it (`service.relay.parse_stream_record`)."""
    assert s.stack.info is not None
    dynamodb = client("dynamodb", s.stack.info.endpoint)
    items = dynamodb.query(
        TableName=s.stack.info.outputs["JobsTable"],
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": f"{OUTBOX_PREFIX}{job_id}"}},
        Limit=1,
    )["Items"]
    doc = deserialize_item(items[0])
    owner = Owner(tenant=doc["tenant"], user_id=doc["user_id"])
    return Wakeup(doc["job_id"], owner, f"{doc['pk']}/{doc['sk']}").body()


def f1_duplicate(s: Session, task: Task) -> None:
    view = save_bookmark(s, task, "carol", f"{EXAMPLE}/at-least-once")
    job = view["title_job"]["job_id"]
    before = s.wait_job(job, "carol", lambda v: v.get("state") in SETTLED, timeout=20)
    bookmark_before = s.call("GET", f"/bookmarks/{view['id']}", user="carol").body
    body = _first_wakeup_body(s, job)
    assert s.stack.info is not None
    sent_at = now_ms()
    client("sqs", s.stack.info.endpoint).send_message(
        QueueUrl=s.stack.info.work_queue_mapping().queue_url, MessageBody=body
    )
    s.act(task, f"the job's wake-up is sent again to the work queue (SQS on moto): {body}")

    def acknowledged() -> dict[str, Any] | None:
        for who, entry in log_entries(s.log_dir):
            at = log_time(str(entry.get("timestamp")))
            if (
                entry.get("job_id") == job
                and entry.get("message") in {"claim rejected", "claimed"}
                and at is not None
                and at >= sent_at
            ):
                return {"who": who, **entry}
        return None

    seen = s.wait(acknowledged, timeout=15, every=0.25) or {}
    time.sleep(0.5)
    after = s.job(job, "carol")
    bookmark_after = s.call("GET", f"/bookmarks/{view['id']}", user="carol").body
    s.check(
        task,
        "F1",
        "a completed job's message delivered again is acknowledged with no second result",
        f"{seen.get('who')} logged {seen.get('message')!r} ({seen.get('reason')}); job "
        f"{after.get('state')}, version {before.get('version')} → {after.get('version')}, "
        f"result unchanged {after.get('result') == before.get('result')}; bookmark updated_at "
        f"unchanged {bookmark_after.get('updated_at') == bookmark_before.get('updated_at')}",
        before.get("state") == "succeeded"
        and seen.get("message") == "claim rejected"
        and seen.get("reason") == "terminal"
        and after.get("version") == before.get("version")
        and after.get("updated_at") == before.get("updated_at")
        and after.get("result") == before.get("result")
        and bookmark_after.get("updated_at") == bookmark_before.get("updated_at"),
    )


def _carol_jobs(s: Session) -> set[str]:
    answer = s.call("GET", "/jobs?limit=100", user="carol")
    return {j["job_id"] for j in answer.body.get("jobs", answer.body.get("items", []))}


def f2_outage(s: Session, task: Task) -> None:
    """F2 an outage of the table: `POST /jobs` is a 503 with nothing promised; F3 workers keep
    their messages, and once the table is back every accepted job finishes."""
    assert s.stack.info is not None
    endpoint = s.stack.info.endpoint
    steps = [{"name": "load", "duration_ms": 1500}, {"name": "save", "cost": 1}]
    accepted = [
        s.submit(
            task,
            f"job {n} (1.5 s, then save)",
            {"kind": "synthetic", "payload": {"steps": steps}},
            user="carol",
        )
        for n in ("A", "B")
    ]
    s.wait_job(accepted[0], "carol", lambda v: v.get("state") == "running", timeout=20)
    accepted.append(
        s.submit(
            task,
            "job C just before the outage",
            {"kind": "synthetic", "payload": {"steps": steps}},
            user="alice",
        )
    )
    known = _carol_jobs(s)
    on_at = now_ms()
    outage = set_dynamodb_outage(endpoint, True)
    s.act(task, f"the table stops answering (every DynamoDB request → 503): outage {outage}")
    started = time.monotonic()
    refused = s.call(
        "POST",
        "/jobs",
        {"kind": "synthetic", "payload": {"steps": steps}},
        user="carol",
        headers={"Idempotency-Key": "during-the-outage"},
    )
    took = time.monotonic() - started
    s.act(
        task,
        f"carol submits job D → {refused.status} {refused.body.get('error', {}).get('code')}, "
        f"Retry-After {refused.headers.get('Retry-After')} (after {took:.1f} s)",
    )

    def met_outage() -> list[tuple[str, dict[str, Any]]] | None:
        found = [
            (who, e)
            for who, e in log_entries(s.log_dir)
            if who.startswith("worker-")
            and e.get("message") in {"claim: store unavailable", "store unavailable; message kept"}
            and (log_time(str(e.get("timestamp"))) or 0) >= on_at
        ]
        return found or None

    s.wait(met_outage, timeout=10, every=0.25)
    off = set_dynamodb_outage(endpoint, False)
    off_at = now_ms()
    s.act(task, f"the table answers again: outage {off}")
    during = [
        (who, e)
        for who, e in log_entries(s.log_dir)
        if e.get("message") in _OUTAGE_LINES
        and on_at <= (log_time(str(e.get("timestamp"))) or 0) <= off_at
    ]
    for job in accepted:
        s.track(task, job)
    users = {accepted[0]: "carol", accepted[1]: "carol", accepted[2]: "alice"}
    finished = {j: s.wait_settled(j, users[j], timeout=40).get("state") for j in accepted}
    after = _carol_jobs(s)
    code = refused.body.get("error", {}).get("code")
    s.check(
        task,
        "F2",
        "during a table outage POST /jobs answers 503 with nothing promised",
        f"{refused.status} {code}, Retry-After {refused.headers.get('Retry-After')}; carol's jobs "
        f"{len(known)} before → {len(after)} after (new: {sorted(after - known) or 'none'})",
        outage is True
        and refused.status == 503
        and refused.headers.get("Retry-After") is not None
        and after == known,
    )
    kept = sorted(
        {
            f"{who}: {e.get('message')}" + (f" ({e['why']})" if e.get("why") else "")
            for who, e in during
        }
    )
    s.check(
        task,
        "F3",
        "workers keep or hand back their messages; after the outage every accepted job finishes",
        f"during the outage: {kept}; after it: {finished}",
        off is False
        and any("claim: store unavailable" in k or "message kept" in k for k in kept)
        and set(finished.values()) == {"succeeded"},
    )
