"""`leasehold smoke`: the same successful and failing operations against any deployment — the
local stack or a deployed stack — printing what it observed and the states it left stored.

One job that succeeds and one that fails for good; a bookmark whose title lands and one whose
title fails (locally `title_mode: timeout`; deployed, a URL the live fetcher must refuse, since
`title_mode` is local only); and an operator's replay of the failed job under the same id."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from leasehold.client import ApiError, Client, WaitTimeout

AT_REST = {"succeeded", "failed", "cancelled", "dead", "unknown"}


class SmokeError(RuntimeError):
    """The deployment did not answer as the contract says (printed, exit code 1)."""


@dataclass
class Smoke:
    url: str
    token: str | None = None
    ops_token: str | None = None
    user: str = "alice"
    timeout_s: float = 90.0
    lines: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @cached_property
    def client(self) -> Client:
        """The user's client: the token's caller, else the local gateway's demo user."""
        if self.token:
            return Client(self.url, token=self.token, timeout=20)
        return Client(self.url, user=self.user, timeout=20)

    @cached_property
    def operator(self) -> Client:
        """The operator's client (X-Demo-User: ops on the local gateway)."""
        if self.ops_token:
            return self.client.with_identity(token=self.ops_token)
        return self.client.with_identity(user="ops")

    def call(
        self, method: str, path: str, body: Any = None, *, operator: bool = False
    ) -> tuple[int, Any]:
        """One request, its status and JSON body ({} when it had none) whatever the status."""
        try:
            reply = (self.operator if operator else self.client).request(method, path, body)
        except ApiError as error:
            raise SmokeError(f"cannot reach {self.url}: {error.message}") from error
        if reply.body is None and reply.raw:
            return reply.status, {"raw": reply.raw[:200].decode(errors="replace")}
        return reply.status, reply.body if reply.body is not None else {}

    def wait_job(self, job_id: str) -> dict[str, Any]:
        """The job once settled (`Client.wait`), or the last view read when time ran out."""
        try:
            return self.client.wait(job_id, timeout=self.timeout_s, max_poll=1.0)
        except WaitTimeout as timeout:
            return timeout.view or {}
        except ApiError as error:
            return {"state": f"unreadable ({error})"}

    def say(self, text: str) -> None:
        self.lines.append(text)
        print(text, flush=True)

    def expect(self, what: str, ok: bool, observed: str) -> None:
        self.say(f"  {'ok  ' if ok else 'FAIL'} {what}: {observed}")
        if not ok:
            self.failures.append(what)

    def wait(self, path: str, until: Any, *, operator: bool = False) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        view: dict[str, Any] = {}
        while time.monotonic() < deadline:
            status, view = self.call("GET", path, operator=operator)
            if status == 200 and until(view):
                return view
            time.sleep(0.5)
        return view

    # ------------------------------------------------------------------ the scenario

    def run(self) -> int:
        status, health = self.call("GET", "/health")
        self.expect("the API answers", status == 200, f"{status} {health}")
        self.jobs()
        self.reading_list()
        print()
        if self.failures:
            print(f"smoke: {len(self.failures)} check(s) failed: {', '.join(self.failures)}")
            return 1
        print("smoke: every check passed")
        return 0

    def jobs(self) -> None:
        self.say("jobs:")
        good = {"kind": "synthetic", "payload": {"steps": [{"name": "hello", "cost": 1}]}}
        status, accepted = self.call("POST", "/jobs", good)
        self.expect("a job is accepted", status == 202, f"{status} {accepted.get('job_id')}")
        if status != 202:
            return
        view = self.wait_job(accepted["job_id"])
        self.expect(
            "it succeeds",
            view.get("state") == "succeeded",
            f"{view.get('state')} after {view.get('attempts')} attempt(s), result "
            f"{json.dumps(view.get('result'))}",
        )
        bad = {"kind": "synthetic", "payload": {"steps": [{"name": "broken", "fatal": True}]}}
        status, accepted = self.call("POST", "/jobs", bad)
        failed = self.wait_job(accepted.get("job_id", "-")) if status == 202 else accepted
        self.expect(
            "a job that fails for good is failed, not retried",
            failed.get("state") == "failed" and failed.get("attempts") == 1,
            f"{failed.get('state')}/{failed.get('stop_reason')} after "
            f"{failed.get('attempts')} attempt(s): {failed.get('error', {}).get('message')}",
        )
        job_id = accepted.get("job_id", "")
        status, replayed = self.call(
            "POST", f"/ops/jobs/{job_id}/replay", {"note": "smoke test replay"}, operator=True
        )
        self.expect(
            "an operator replays it under the same id",
            status == 202 and replayed.get("job_id") == job_id,
            f"{status} state {replayed.get('state')}, replays {replayed.get('replays')}",
        )
        again = self.wait_job(job_id)
        status, shown = self.call("GET", f"/ops/jobs/{job_id}", operator=True)
        events = [e.get("event") for e in shown.get("history", [])]
        self.expect(
            "the replay ran and the history keeps both attempts",
            again.get("state") == "failed"
            and events.count("stopped") == 2
            and "replayed" in events,
            f"stored: {again.get('state')}, history {events}",
        )

    def reading_list(self) -> None:
        self.say("reading list:")
        status, saved = self.call("POST", "/bookmarks", {"url": "https://example.org/smoke"})
        self.expect(
            "a bookmark is saved, its title pending",
            status == 201,
            f"{status} {saved.get('id')} {saved.get('title_status')}",
        )
        if status == 201:
            view = self.wait(f"/bookmarks/{saved['id']}", lambda v: v["title_status"] != "pending")
            self.expect(
                "its title lands",
                view.get("title_status") == "ready",
                f"{view.get('title_status')}: {view.get('title')!r} (job "
                f"{view.get('title_job', {}).get('state')})",
            )
        failing = {"url": "https://example.org/smoke-timeout", "title_mode": "timeout"}
        status, saved = self.call("POST", "/bookmarks", failing)
        if status == 400:  # deployed: title_mode is local only; a URL the fetcher must refuse
            failing = {"url": "http://localhost:8080/smoke"}
            status, saved = self.call("POST", "/bookmarks", failing)
        self.expect(
            "a bookmark whose title cannot be fetched is saved",
            status == 201,
            f"{status} {saved.get('id')} ({json.dumps(failing)})",
        )
        if status == 201:
            view = self.wait(f"/bookmarks/{saved['id']}", lambda v: v["title_status"] != "pending")
            self.expect(
                "its title fails, saying why",
                view.get("title_status") == "failed" and bool(view.get("title_error")),
                f"{view.get('title_status')}: {view.get('title_error')} (job "
                f"{view.get('title_job', {}).get('state')})",
            )
