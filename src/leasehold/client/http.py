"""`leasehold.client.Client`: the HTTP API of docs/openapi.yaml as Python calls (the routes; what is
repeated and when is `leasehold.client.transport`'s, docs/decisions.md CL1–CL2)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, Unpack

from leasehold.client.errors import ApiError, Unavailable, Unreachable, WaitTimeout, error_for
from leasehold.client.replay import Replays
from leasehold.client.transport import (
    MAX_ANSWER_BYTES,
    Reply,
    Transport,
    invalid_answer,
    pages,
    segment,
)
from leasehold.client.uploads import payload_fields
from leasehold.domain.batch import MAX_BATCH_JOBS
from leasehold.domain.errors import ValidationError
from leasehold.domain.options import JobOptions, OptionKeywords, Submission
from leasehold.domain.types import JsonObject
from leasehold.service.tracing import active_traceparent

SETTLED_STATES = frozenset({"succeeded", "failed", "cancelled", "dead", "unknown"})
"""Where `wait` stops: the terminal states, and `unknown`, which nothing automatic leaves either
(an operator resolves or replays it)."""


@dataclass(frozen=True)
class JobHandle:
    """A submitted job: its `job_id`, the `state` the API answered on acceptance (`queued`, or
    a repeated key's job's current state) and the client that submitted it."""

    client: Client
    job_id: str
    state: str
    debounced: bool = False
    """The submission collapsed into its debounce key's pending job, this one (decision DB2)."""
    duplicate: bool = False
    """True when no job was made: another job holds the request's unique key, and this is it
    (`POST /jobs` answered 200 `"duplicate": true`, decision UQ2)."""

    def get(self) -> JsonObject:
        """The job view now (`GET /jobs/{job_id}`)."""
        return self.client.get(self.job_id)

    def wait(self, timeout: float = 60.0) -> JsonObject:
        """The job's view once it is settled; `WaitTimeout` after `timeout` seconds."""
        return self.client.wait(self.job_id, timeout=timeout)

    def cancel(self) -> JsonObject:
        """Cancel the job (`POST /jobs/{job_id}/cancel`); the view the API answers."""
        return self.client.cancel(self.job_id)

    def __str__(self) -> str:
        return self.job_id


class Client(Transport):
    """The leasehold HTTP API. Locally `Client(url, user="alice")` acts as one of the local
    gateway's demo users (`X-Demo-User`); deployed, `Client(url, token=id_token)` (or
    `Client.from_login()`) sends `Authorization: Bearer`. `timeout` bounds connecting, the
    wait for an answer and the reading of its body, each, in seconds; `retries` bounds the
    repeats of one request (module docstring). Thread-safe: one client may serve many
    threads (urllib3's pool is)."""

    @cached_property
    def ops(self) -> Ops:
        """The operator's routes (`client.ops.summary()`, …)."""
        return Ops(self)

    @cached_property
    def schedules(self) -> Schedules:
        """The caller's schedules (`client.schedules.create(…)`, …)."""
        return Schedules(self)

    @classmethod
    def from_login(
        cls, base_url: str | None = None, *, session_file: str | None = None, **options: Any
    ) -> Client:
        """A client with the ID token of `leasehold login`, refreshed whenever it is about to
        expire (to the login's API URL unless `base_url` is given). `session_file` overrides
        where the session is kept (default: `$LEASEHOLD_SESSION`, else
        `~/.config/leasehold/session.json`). When there is no session, or it has expired for
        good, an `ApiError.Unauthenticated` says to run `leasehold login` (again)."""
        from pathlib import Path

        from leasehold.client.login import LoginSession

        session = LoginSession.load(Path(session_file) if session_file else None)
        return cls(base_url or session.api_url, token=session.fresh_id_token, **options)

    def with_identity(self, *, user: str | None = None, token: str | None = None) -> Client:
        """The same client (URL, timeouts, connection pool) acting as another caller; with
        neither argument, as no one (only `/health` answers)."""
        other = Client(
            self.base_url,
            user=user,
            token=token,
            timeout=self.timeout,
            retries=self.retries,
            max_retry_after=self.max_retry_after,
            pool=self._pool,
        )
        other._sleep = self._sleep
        return other

    # ------------------------------------------------------------------ the low level

    def health(self) -> JsonObject:
        """`GET /health`: `{"status": "ok"}` when the API function answers."""
        return self._object("GET", "/health")

    def submit(
        self,
        kind: str,
        payload: Any,
        *,
        options: JobOptions | None = None,
        **keywords: Unpack[OptionKeywords],
    ) -> JobHandle:
        """Submit a job (`POST /jobs`) and return its handle once the API accepted it (202:
        the job and its wake-up are committed). `options`: a `JobOptions` (the keyword
        arguments of the same names build one); an option out of range is the API's own
        `ApiError.InvalidInput`, raised before anything is sent. With an idempotency key the
        same key and body answer the same job, so the client may repeat the request after a
        503 or a broken connection; without one it never repeats it (an `Unavailable` or
        `Unreachable` then means the job may or may not exist). `run_at` (ISO 8601 with an
        offset) or `delay_seconds` (up to 365 days): the job does not start before then.
        `priority` (default: the kind's, normal unless it declares one): a high job does not
        wait behind a backlog of normal ones; a low one runs on its own small share of
        workers. `traceparent` (a W3C one; default: the current OpenTelemetry span's) is sent
        as the `traceparent` header: the job's spans join that trace. A payload too large for
        a request body (past 5 MiB of JSON) is uploaded first, up to 32 MiB (`POST /uploads`)."""
        chosen = _options(options, **keywords)
        # a payload too large for a body goes by a presigned upload first (decision LD7)
        request = {"kind": kind, **payload_fields(self, payload), **chosen.body_fields()}
        key = chosen.idempotency_key
        headers = {"Idempotency-Key": key} if key is not None else {}
        traceparent = chosen.traceparent or active_traceparent()
        if traceparent is not None:
            headers["traceparent"] = traceparent
        accepted = self._object("POST", "/jobs", request, headers=headers)
        if not isinstance(accepted.get("job_id"), str):
            raise invalid_answer(202, json.dumps(accepted).encode(), "names no job_id")
        return JobHandle(
            self,
            str(accepted["job_id"]),
            str(accepted.get("state", "queued")),
            debounced=accepted.get("debounced") is True,
            duplicate=accepted.get("duplicate") is True,
        )

    def submit_many(self, jobs: Iterable[Submission]) -> list[JobHandle | ApiError]:
        """Submit many jobs (`POST /jobs/batch`, 100 a request, decisions BA1-BA6): one answer
        a job, in order — its handle, or the `ApiError` `POST /jobs` would have raised for it
        (`InvalidInput`, `Forbidden`, `Conflict` for a key reused with another request,
        `Unavailable` for a job not committed when the store stopped answering).

            client.submit_many([Submission("shout", {"text": t}, JobOptions(idempotency_key=t))
                                for t in texts])

        Each `Submission` carries its kind, payload and `JobOptions` (its own idempotency key
        among them). A request refused as a whole (401, 429, or a 503 with nothing committed)
        raises when it is the first; after a request whose jobs went in, it becomes the answer
        of each job it and the later ones carried, and nothing more is sent. A request is
        repeated after a 503 or a lost answer only when every job in it has a key."""
        items = list(jobs)
        answers: list[JobHandle | ApiError] = []
        for start in range(0, len(items), MAX_BATCH_JOBS):
            chunk = items[start : start + MAX_BATCH_JOBS]
            body = {"jobs": [_batch_item(item) for item in chunk]}
            keyed = all(item.options.idempotency_key is not None for item in chunk)
            try:
                answer = self._object("POST", "/jobs/batch", body, repeat_safe=keyed)
                results = answer.get("results")
                if not isinstance(results, list) or len(results) != len(chunk):
                    raise invalid_answer(200, json.dumps(answer).encode(), "is not one per job")
            except ApiError as refused:
                if not answers:
                    raise
                answers += [refused] * (len(items) - len(answers))
                return answers
            answers += [self._batch_answer(result) for result in results]
        return answers

    def _batch_answer(self, result: Any) -> JobHandle | ApiError:
        if isinstance(result, dict) and isinstance(result.get("job_id"), str):
            state = str(result.get("state", "queued"))
            return JobHandle(self, result["job_id"], state, result.get("duplicate") is True)
        error = result.get("error") if isinstance(result, dict) else None
        code = str(error.get("code", "")) if isinstance(error, dict) else ""
        status = ITEM_STATUS_BY_CODE.get(code, 400)
        return error_for(status, result, json.dumps(result).encode(), {})

    def get(self, job_id: str) -> JsonObject:
        """One of the caller's jobs (`GET /jobs/{job_id}`), a large result read in whole from
        its `result_url`; `ApiError.NotFound` when it is unknown or not the caller's."""
        return self._whole(self._object("GET", f"/jobs/{segment(job_id)}"))

    def wait(
        self,
        job_id: str,
        timeout: float = 60.0,
        *,
        poll: float = 0.2,
        max_poll: float = 5.0,
    ) -> JsonObject:
        """Poll the job until it is settled (succeeded, failed, cancelled, dead, or unknown —
        which waits for an operator) and return that view. The pause between reads grows from
        `poll` to `max_poll` seconds (doubling, full jitter) and never runs past `timeout`; a
        503 or a lost answer meanwhile is one more read to try, not the end. `WaitTimeout`
        (a `TimeoutError`) when `timeout` seconds pass first, with the last view read; a job
        waiting for approval waits for a person, so it times out unless someone decides."""
        if timeout < 0 or poll <= 0 or max_poll < poll:
            raise ValueError("timeout ≥ 0, poll > 0 and max_poll ≥ poll")
        deadline = time.monotonic() + timeout
        path = f"/jobs/{segment(job_id)}"
        view: JsonObject | None = None
        last_error: ApiError | None = None
        attempt = 0
        while True:
            try:
                reply = self.request("GET", path)
            except Unreachable as exc:
                last_error = exc
            else:
                error = reply.error()
                if error is None and not isinstance(reply.body, dict):
                    raise invalid_answer(reply.status, reply.raw, "is not a JSON object")
                if error is None:
                    view = dict(reply.body)
                    if view.get("state") in SETTLED_STATES:
                        return self._whole(view)  # a large result read in whole
                elif isinstance(error, Unavailable) or error.status == 429:
                    last_error = error
                else:
                    raise error
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(job_id, timeout, view) from last_error
            pause = self._random.uniform(0.0, min(max_poll, poll * 2**attempt))
            self._sleep(min(max(pause, 0.01), left))
            attempt += 1

    def cancel(self, job_id: str) -> JsonObject:
        """Cancel one of the caller's jobs (`POST /jobs/{job_id}/cancel`): queued or waiting
        for approval it is cancelled at once, running it stops before its next step; the view
        the API answers. `ApiError.Conflict` when the job already ended."""
        return self._object("POST", f"/jobs/{segment(job_id)}/cancel", repeat_safe=True)

    def approve(self, job_id: str, version: int | None = None) -> JsonObject:
        """Approve a job waiting for approval (`POST /jobs/{job_id}/approval`): it resumes at
        the paused step. `version` is the job view's (None: read it first); the API refuses
        a stale one with `ApiError.Conflict`, so an approval never lands on a changed job."""
        return self._decide(job_id, "approve", version)

    def reject(self, job_id: str, version: int | None = None) -> JsonObject:
        """Reject a job waiting for approval: it ends `cancelled` / `approval_rejected`."""
        return self._decide(job_id, "reject", version)

    def _decide(
        self, job_id: str, decision: Literal["approve", "reject"], version: int | None
    ) -> JsonObject:
        if version is None:
            version = int(self.get(job_id)["version"])
        body = {"decision": decision, "version": version}
        return self._object("POST", f"/jobs/{segment(job_id)}/approval", body, repeat_safe=True)

    def signal(self, job_id: str, name: str, body: Any = None) -> JsonObject:
        """Send the signal `name` to one of the caller's jobs (`POST /jobs/{job_id}/signals/
        {name}`) with a JSON body (≤ 5 MiB): a job waiting for it resumes. The view the API
        answers. `ApiError.Conflict` (`signal_exists`) for a second signal of that name, or one
        after its wait timed out; `ApiError.NotFound` for another's job."""
        path = f"/jobs/{segment(job_id)}/signals/{segment(name)}"
        return self._object("POST", path, body)

    def callback(self, token: str, body: Any = None) -> JsonObject:
        """Complete a wait with its callback token (`POST /callbacks/{token}`), as the third
        party a step handed `SignalWait.token` to would; needs no identity. `ApiError.NotFound`
        for a used, expired or unknown token."""
        return self._object("POST", f"/callbacks/{segment(token)}", body)

    def children(self, job_id: str, *, page_size: int | None = None) -> Iterator[JsonObject]:
        """One of the caller's jobs' children (`GET /jobs/{job_id}/children`), every set in
        order, every page: `job_id`, `step`, `state`, `result`, `error` each."""
        path = f"/jobs/{segment(job_id)}/children"
        return pages(self, path, {"limit": page_size}, items="items")

    def list(
        self, *, state: str | None = None, page_size: int | None = None
    ) -> Iterator[JsonObject]:
        """The caller's jobs, newest first (`GET /jobs`), every page: the pages are read as
        the iterator is consumed, following `next_cursor`, so an error answer is raised then.
        `state` filters; `page_size` is the API's `limit` (≤ 100)."""
        return pages(self, "/jobs", {"state": state, "limit": page_size})


class Ops(Replays):
    """The operator's routes (`/ops`, docs/runbook.md) as `client.ops`: the caller must be an
    operator (`ApiError.Forbidden` otherwise). Every act records the operator, the time and
    the note in the job's history."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def summary(self) -> JsonObject:
        """`GET /ops/summary`: counts by state, queue depths (`sqs.dead_letter` is the DLQ's),
        the oldest queued job, retry and budget totals."""
        return self._client._object("GET", "/ops/summary")

    def jobs(
        self,
        state: str,
        *,
        kind: str | None = None,
        tenant: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[JsonObject]:
        """Every tenant's jobs in `state`, oldest first (`GET /ops/jobs`), of one `kind`
        and/or one `tenant` when given (the API filters them), every page as the iterator is
        consumed."""
        query = {"state": state, "kind": kind, "tenant": tenant, "limit": page_size}
        yield from pages(self._client, "/ops/jobs", query)

    def show(self, job_id: str) -> JsonObject:
        """`GET /ops/jobs/{job_id}`: one job, whole — view, owner, history, operations, lease."""
        return self._client._object("GET", f"/ops/jobs/{segment(job_id)}")

    def _send_replay(self, job_id: str, body: JsonObject) -> JsonObject:
        path = f"/ops/jobs/{segment(job_id)}/replay"
        return self._client._object("POST", path, body, repeat_safe=True)

    def resolve(
        self,
        job_id: str,
        outcome: Literal["succeeded", "failed"],
        *,
        note: str,
        receipt: str | None = None,
    ) -> JsonObject:
        """Settle an unknown job as `succeeded` or `failed` (`POST /ops/jobs/{job_id}/resolve`)
        with a note and, when the provider shows the charge, its receipt."""
        body: JsonObject = {"outcome": outcome, "note": note}
        if receipt is not None:
            body["receipt"] = receipt
        path = f"/ops/jobs/{segment(job_id)}/resolve"
        return self._client._object("POST", path, body, repeat_safe=True)

    def cancel(self, job_id: str, *, note: str) -> JsonObject:
        """An operator's cancel of any tenant's job (`POST /ops/jobs/{job_id}/cancel`): queued
        or waiting for approval, it is cancelled at once; running, it is asked to stop.
        `ApiError.Conflict` (`not_cancellable`) once it has finished."""
        path = f"/ops/jobs/{segment(job_id)}/cancel"
        return dict(self._client.call("POST", path, {"note": note}))

    def children(self, job_id: str, *, page_size: int | None = None) -> Iterator[JsonObject]:
        """Any tenant's job's children (`GET /ops/jobs/{job_id}/children`), every set in
        order, every page: the owner's fields and each child's `waiting_for` and `children`
        (how many it started itself)."""
        path = f"/ops/jobs/{segment(job_id)}/children"
        return pages(self._client, path, {"limit": page_size}, items="items")

    def signal(self, job_id: str, name: str, body: Any = None, *, note: str) -> JsonObject:
        """An operator's signal to any tenant's job (`POST /ops/jobs/{job_id}/signals/{name}`),
        recorded in its history with the note: a job waiting for it resumes. `ApiError.Conflict`
        (`signal_exists`) for a second signal of that name."""
        path = f"/ops/jobs/{segment(job_id)}/signals/{segment(name)}"
        return self._client._object("POST", path, {"note": note, "body": body})

    def dead_letters(self) -> int:
        """How many wake-ups wait in the dead-letter queue (the summary's `sqs.dead_letter`)."""
        return int(self.summary()["sqs"]["dead_letter"])

    def redrive(self, *, note: str, max_messages: int = 100) -> JsonObject:
        """Move up to `max_messages` (≤ 100) dead letters back to the work queue (`POST
        /ops/dlq/redrive`): each moved job's history names the operator; a message that cannot
        wake a job is set aside in the table. The report's `dead_letter_after` > 0: call again.
        Repeating it is safe: it moves only what is still in the DLQ."""
        body = {"note": note, "max": max_messages}
        return dict(self._client.call("POST", "/ops/dlq/redrive", body, repeat_safe=True))

    def kinds(self) -> list[JsonObject]:
        """Every kind, `running`, `paused` or `resuming`, with who paused it and why
        (`GET /ops/kinds`)."""
        return list(self._client._object("GET", "/ops/kinds")["kinds"])

    def pause_kind(self, kind: str, *, note: str) -> JsonObject:
        """Pause a kind (`POST /ops/kinds/{kind}/pause`): its jobs wait, `queued` with
        `waiting_for: {"paused": …}`, until `resume_kind`. Repeating it is safe: a paused kind
        stays as it was paused (`changed: false`)."""
        path = f"/ops/kinds/{segment(kind)}/pause"
        return self._client._object("POST", path, {"note": note}, repeat_safe=True)

    def resume_kind(self, kind: str, *, note: str) -> JsonObject:
        """Resume a kind (`POST /ops/kinds/{kind}/resume`): its waiting jobs are woken, the
        first 100 by this call (`woken`), the sweeper the rest (`more`). Repeating it is safe."""
        path = f"/ops/kinds/{segment(kind)}/resume"
        return self._client._object("POST", path, {"note": note}, repeat_safe=True)


class Schedules:
    """The caller's schedules (`/schedules`, docs/schedules.md) as `client.schedules`: each tick
    of a `cron(…)` or `rate(…)` expression makes one job, however often the trigger fires."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(
        self,
        kind: str,
        payload: Any,
        expression: str,
        *,
        timezone: str = "UTC",
        missed: Literal["skip", "run_once"] = "skip",
        budget: Mapping[str, Any] | None = None,
        deadline_seconds: int | None = None,
        max_attempts: int | None = None,
        priority: Literal["high", "normal", "low"] | None = None,
    ) -> JsonObject:
        """Create a schedule (`POST /schedules`) and return its view (`next_tick_at` is the
        first tick). Everything is checked now, the job as `POST /jobs` would check it:
        `ApiError.InvalidInput` says what is wrong. Never repeated by the client (there is no
        key): after an `Unavailable` list the schedules before creating it again."""
        job = _options(
            None,
            budget=budget,
            deadline_seconds=deadline_seconds,
            max_attempts=max_attempts,
            priority=priority,
        )
        body: JsonObject = {
            "kind": kind,
            "payload": payload,
            "expression": expression,
            "timezone": timezone,
            "missed": missed,
            **job.body_fields(),
        }
        return dict(self._client.call("POST", "/schedules", body))

    def list(self, *, page_size: int | None = None) -> Iterator[JsonObject]:
        """The caller's schedules, newest first (`GET /schedules`), every page as the iterator
        is consumed; deleted ones are listed (`state: deleted`) until they expire."""
        return pages(self._client, "/schedules", {"limit": page_size}, items="schedules")

    def get(self, schedule_id: str) -> JsonObject:
        """One of the caller's schedules with its history (`GET /schedules/{schedule_id}`);
        `ApiError.NotFound` when it is unknown or not the caller's."""
        return dict(self._client.call("GET", f"/schedules/{segment(schedule_id)}"))

    def delete(self, schedule_id: str) -> JsonObject:
        """Stop a schedule for good (`DELETE /schedules/{schedule_id}`) and return it as
        deleted; `ApiError.NotFound` when it is unknown, not the caller's or already deleted
        (so after a lost answer, a `NotFound` on a retry means the first delete committed)."""
        return dict(self._client.call("DELETE", f"/schedules/{segment(schedule_id)}"))


ITEM_STATUS_BY_CODE = {
    "idempotency_key_reused": 409,
    "conflict": 409,
    "priority_not_allowed": 403,
    "forbidden": 403,
    "store_unavailable": 503,
}
"""The status `POST /jobs` answers an item's error code with (any other code: 400), so a batch
item's error is the same `ApiError` subclass the single request raises."""


def _batch_item(item: Submission) -> JsonObject:
    """One `POST /jobs/batch` item: a `POST /jobs` body with the key in it."""
    if not isinstance(item, Submission):
        raise TypeError("submit_many takes Submission(kind, payload, options) values")
    body: JsonObject = {"kind": item.kind, "payload": item.payload, **item.options.body_fields()}
    if item.options.idempotency_key is not None:
        body["idempotency_key"] = item.options.idempotency_key
    return body


def _options(options: JobOptions | None, **keywords: Any) -> JobOptions:
    """`JobOptions.of`, its ValidationError as the API's own answer to the same request (a 400
    `ApiError.InvalidInput` with the API's code and message), so a caller handles one error."""
    try:
        return JobOptions.of(options, **keywords)
    except ValidationError as invalid:
        envelope = {"error": {"code": invalid.code, "message": str(invalid)}}
        raise error_for(400, envelope, b"", {}) from invalid


# Reply and MAX_ANSWER_BYTES live in leasehold.client.transport; this is their old path too.
__all__ = ["MAX_ANSWER_BYTES", "SETTLED_STATES", "Client", "JobHandle", "Ops", "Reply", "Schedules"]
