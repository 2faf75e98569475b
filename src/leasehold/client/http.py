"""`Client`: the HTTP API of docs/openapi.yaml as Python calls, over one urllib3 pool
(connection reuse, timeouts; docs/decisions.md CL1).

What is repeated, and when (CL2): an answer 429 (throttled: not processed) and a failure to
connect (nothing was sent) are retried for every request; a 503 and a connection that broke
after the request was sent are retried only for a request that is safe to repeat — a read, a
submission with an idempotency key, and the conditional acts (cancel, approval, replay,
resolve), whose repeat can at worst be refused with a 409. A submission without a key is never
repeated by the client: its 503 may follow a commit whose answer was lost (docs/decisions.md
D28), and a second POST would make a second job. Every retry is bounded (`retries`), waits the
server's `Retry-After` when it sent one (capped by `max_retry_after`), else a backoff with full
jitter."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, urlencode, urlsplit

from leasehold.client.errors import (
    ApiError,
    Unavailable,
    Unreachable,
    WaitTimeout,
    error_for,
    retry_after_seconds,
)

if TYPE_CHECKING:
    import urllib3

SETTLED_STATES = frozenset({"succeeded", "failed", "cancelled", "dead", "unknown"})
"""Where `wait` stops: the terminal states, and `unknown`, which nothing automatic leaves either
(an operator resolves or replays it)."""
RETRIED_STATUSES = frozenset({429, 503})
BACKOFF_BASE_S = 0.25
BACKOFF_CAP_S = 5.0
USER_AGENT = "leasehold-client/1"
MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""The largest answer read (API Gateway's own limit is 10 MB): a longer one is an ApiError."""
READ_CHUNK_BYTES = 64 * 1024

TokenSource = Callable[[], str]
"""A function that answers a current bearer token (a login session refreshes it)."""


@dataclass(frozen=True)
class Reply:
    """One answer as received, whatever its status (`Client.request`): `status`, `headers`
    (names as sent), `body` (the parsed JSON, None when empty or not JSON) and `raw` bytes."""

    status: int
    headers: Mapping[str, str]
    body: Any
    raw: bytes

    def header(self, name: str) -> str | None:
        """One header, its name matched without regard to case (None when absent)."""
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)

    def error(self) -> ApiError | None:
        """The exception this answer stands for (`ApiError.NotFound` for a 404, …), or None
        for a 2xx or 3xx answer."""
        if self.status < 400:
            return None
        return error_for(self.status, self.body, self.raw, self.headers)


@dataclass(frozen=True)
class JobHandle:
    """A submitted job: its `job_id`, the `state` the API answered on acceptance (`queued`, or
    a repeated key's job's current state) and the client that submitted it."""

    client: Client
    job_id: str
    state: str

    def get(self) -> dict[str, Any]:
        """The job view now (`GET /jobs/{job_id}`)."""
        return self.client.get(self.job_id)

    def wait(self, timeout: float = 60.0) -> dict[str, Any]:
        """The job's view once it is settled; `WaitTimeout` after `timeout` seconds."""
        return self.client.wait(self.job_id, timeout=timeout)

    def cancel(self) -> dict[str, Any]:
        """Cancel the job (`POST /jobs/{job_id}/cancel`); the view the API answers."""
        return self.client.cancel(self.job_id)

    def __str__(self) -> str:
        return self.job_id


class Client:
    """The leasehold HTTP API. Locally `Client(url, user="alice")` acts as one of the local
    gateway's demo users (`X-Demo-User`); deployed, `Client(url, token=id_token)` (or
    `Client.from_login()`) sends `Authorization: Bearer`. `timeout` bounds connecting, the
    wait for an answer and the reading of its body, each, in seconds; `retries` bounds the
    repeats of one request (module docstring). Thread-safe: one client may serve many
    threads (urllib3's pool is)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | TokenSource | None = None,
        user: str | None = None,
        timeout: float = 15.0,
        retries: int = 3,
        max_retry_after: float = 20.0,
        pool: urllib3.PoolManager | None = None,
    ) -> None:
        import urllib3

        parts = urlsplit(base_url)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise ValueError(
                f"base_url must be an http(s) URL such as https://…/, not {base_url!r}"
            )
        if token is not None and user is not None:
            raise ValueError("give token= (deployed) or user= (local), not both")
        if retries < 0 or timeout <= 0 or max_retry_after < 0:
            raise ValueError("retries and max_retry_after must be ≥ 0, timeout > 0")
        self.base_url = base_url.rstrip("/")
        self.user = user
        self._token = token
        self.timeout = timeout
        self.retries = retries
        self.max_retry_after = max_retry_after
        self._pool = pool or urllib3.PoolManager(maxsize=16, retries=False)
        self._sleep: Callable[[float], None] = time.sleep
        self._random = random.Random()
        self.ops = Ops(self)
        self.schedules = Schedules(self)

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

    def headers(self) -> dict[str, str]:
        """The identity and agent headers every request of this client carries."""
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self._token is not None:
            token = self._token() if callable(self._token) else self._token
            headers["Authorization"] = f"Bearer {token}"
        elif self.user is not None:
            headers["X-Demo-User"] = self.user
        return headers

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, Any] | None = None,
        retry: bool = False,
        repeat_safe: bool | None = None,
    ) -> Reply:
        """One request to `path` (relative to the base URL) with `body` as JSON (bytes: sent
        as they are; None: no body); the answer whatever its status — nothing is raised for an
        error status. With `retry`, throttling, 503s and connection failures are retried as
        the module docstring says; `repeat_safe` overrides the guess (a GET, or a request with
        `Idempotency-Key`). `ApiError.Unreachable` when no answer came."""
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/', not {path!r}")
        sent = self.headers()
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        sent.update(headers or {})
        if repeat_safe is None:
            repeat_safe = method.upper() in {"GET", "HEAD", "OPTIONS"} or any(
                k.lower() == "idempotency-key" for k in sent
            )
        url = self.base_url + path
        if query:
            present = {k: v for k, v in query.items() if v is not None}
            if present:
                url += ("&" if "?" in path else "?") + urlencode(present)
        attempt = 0
        while True:
            try:
                reply = self._send(method, url, data, sent)
            except Unreachable as exc:
                if not retry or attempt >= self.retries or (exc.sent and not repeat_safe):
                    raise
                self._sleep(self._backoff(attempt))
            else:
                retriable = reply.status == 429 or (reply.status == 503 and repeat_safe)
                if not retry or not retriable or attempt >= self.retries:
                    return reply
                self._sleep(self._retry_delay(reply, attempt))
            attempt += 1

    def _send(self, method: str, url: str, data: bytes | None, headers: dict[str, str]) -> Reply:
        import urllib3
        from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

        timeout = urllib3.Timeout(connect=min(self.timeout, 10.0), read=self.timeout)
        try:
            answer = self._pool.request(
                method,
                url,
                body=data,
                headers=headers,
                timeout=timeout,
                retries=False,
                redirect=False,
                preload_content=False,
            )
            raw = self._read_answer(answer)
        except (NewConnectionError, ConnectTimeoutError) as exc:
            raise Unreachable(f"cannot connect to {self.base_url}: {exc}", sent=False) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise Unreachable(
                f"no answer from {self.base_url} ({type(exc).__name__}); the request may have "
                "reached it",
                sent=True,
            ) from exc
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        return Reply(answer.status, dict(answer.headers.items()), parsed, raw)

    def _read_answer(self, answer: urllib3.BaseHTTPResponse) -> bytes:
        """The body, whole, read within `timeout` seconds and at most MAX_ANSWER_BYTES long: a
        server that drips its answer or sends no end to it is refused, not waited for."""
        deadline = time.monotonic() + self.timeout
        body = bytearray()
        complete = False
        try:
            while chunk := answer.read1(READ_CHUNK_BYTES):
                body += chunk
                if len(body) > MAX_ANSWER_BYTES:
                    raise _invalid(answer.status, bytes(body[:200]), "is too large to read")
                if time.monotonic() > deadline:
                    raise Unreachable(
                        f"the answer from {self.base_url} took more than {self.timeout:g} s to "
                        "arrive; the request may have reached it",
                        sent=True,
                    )
            complete = True
        finally:
            if not complete:  # the rest of it is never read: the connection cannot be reused
                answer.close()
            answer.release_conn()
        return bytes(body)

    def _backoff(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(cap, base · 2^attempt)]."""
        return self._random.uniform(0.0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt))

    def _retry_delay(self, reply: Reply, attempt: int) -> float:
        after = retry_after_seconds(reply.headers)
        if after is None:
            return self._backoff(attempt)
        return min(after, self.max_retry_after)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, Any] | None = None,
        repeat_safe: bool | None = None,
    ) -> Any:
        """`request` with retries, the answer's JSON body on success; the matching `ApiError`
        subclass for an error answer. For an application's own routes (`/bookmarks`)."""
        reply = self.request(
            method, path, body, headers=headers, query=query, retry=True, repeat_safe=repeat_safe
        )
        error = reply.error()
        if error is not None:
            raise error
        if reply.raw.strip() and reply.body is None:
            raise _invalid(reply.status, reply.raw, "is not JSON")
        return reply.body

    def _object(self, method: str, path: str, body: Any = None, **options: Any) -> dict[str, Any]:
        """`call` for a route that answers a JSON object: `ApiError` `invalid_response` when
        the answer is anything else (a proxy's page, an empty body, a list)."""
        answer = self.call(method, path, body, **options)
        if not isinstance(answer, dict):
            raise _invalid(200, json.dumps(answer).encode(), "is not a JSON object")
        return answer

    # ------------------------------------------------------------------ jobs

    def health(self) -> dict[str, Any]:
        """`GET /health`: `{"status": "ok"}` when the API function answers."""
        return self._object("GET", "/health")

    def submit(
        self,
        kind: str,
        payload: Any,
        *,
        idempotency_key: str | None = None,
        budget: Mapping[str, Any] | None = None,
        deadline_seconds: int | None = None,
        max_attempts: int | None = None,
        run_at: str | None = None,
        delay_seconds: int | None = None,
        priority: Literal["high", "normal", "low"] | None = None,
    ) -> JobHandle:
        """Submit a job (`POST /jobs`) and return its handle once the API accepted it (202:
        the job and its wake-up are committed). With `idempotency_key` the same key and body
        answer the same job, so the client may repeat the request after a 503 or a broken
        connection; without one it never repeats it (an `Unavailable` or `Unreachable` then
        means the job may or may not exist). `run_at` (ISO 8601 with an offset) or
        `delay_seconds` (up to 365 days): the job does not start before then. `priority`
        (default: the kind's, normal unless it declares one): a high job does not wait behind
        a backlog of normal ones; a low one runs on its own small share of workers."""
        request: dict[str, Any] = {"kind": kind, "payload": payload}
        if run_at is not None:
            request["run_at"] = run_at
        if delay_seconds is not None:
            request["delay_seconds"] = delay_seconds
        if budget is not None:
            request["budget"] = dict(budget)
        if deadline_seconds is not None:
            request["deadline_seconds"] = deadline_seconds
        if max_attempts is not None:
            request["max_attempts"] = max_attempts
        if priority is not None:
            request["priority"] = priority
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else None
        accepted = self._object("POST", "/jobs", request, headers=headers)
        if not isinstance(accepted.get("job_id"), str):
            raise _invalid(202, json.dumps(accepted).encode(), "names no job_id")
        return JobHandle(self, str(accepted["job_id"]), str(accepted.get("state", "queued")))

    def get(self, job_id: str) -> dict[str, Any]:
        """One of the caller's jobs (`GET /jobs/{job_id}`); `ApiError.NotFound` when it is
        unknown or not the caller's."""
        return self._object("GET", f"/jobs/{_segment(job_id)}")

    def wait(
        self,
        job_id: str,
        timeout: float = 60.0,
        *,
        poll: float = 0.2,
        max_poll: float = 5.0,
    ) -> dict[str, Any]:
        """Poll the job until it is settled (succeeded, failed, cancelled, dead, or unknown —
        which waits for an operator) and return that view. The pause between reads grows from
        `poll` to `max_poll` seconds (doubling, full jitter) and never runs past `timeout`; a
        503 or a lost answer meanwhile is one more read to try, not the end. `WaitTimeout`
        (a `TimeoutError`) when `timeout` seconds pass first, with the last view read; a job
        waiting for approval waits for a person, so it times out unless someone decides."""
        if timeout < 0 or poll <= 0 or max_poll < poll:
            raise ValueError("timeout ≥ 0, poll > 0 and max_poll ≥ poll")
        deadline = time.monotonic() + timeout
        path = f"/jobs/{_segment(job_id)}"
        view: dict[str, Any] | None = None
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
                    raise _invalid(reply.status, reply.raw, "is not a JSON object")
                if error is None:
                    view = dict(reply.body)
                    if view.get("state") in SETTLED_STATES:
                        return view
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

    def cancel(self, job_id: str) -> dict[str, Any]:
        """Cancel one of the caller's jobs (`POST /jobs/{job_id}/cancel`): queued or waiting
        for approval it is cancelled at once, running it stops before its next step; the view
        the API answers. `ApiError.Conflict` when the job already ended."""
        return self._object("POST", f"/jobs/{_segment(job_id)}/cancel", repeat_safe=True)

    def approve(self, job_id: str, version: int | None = None) -> dict[str, Any]:
        """Approve a job waiting for approval (`POST /jobs/{job_id}/approval`): it resumes at
        the paused step. `version` is the job view's (None: read it first); the API refuses
        a stale one with `ApiError.Conflict`, so an approval never lands on a changed job."""
        return self._decide(job_id, "approve", version)

    def reject(self, job_id: str, version: int | None = None) -> dict[str, Any]:
        """Reject a job waiting for approval: it ends `cancelled` / `approval_rejected`."""
        return self._decide(job_id, "reject", version)

    def _decide(
        self, job_id: str, decision: Literal["approve", "reject"], version: int | None
    ) -> dict[str, Any]:
        if version is None:
            version = int(self.get(job_id)["version"])
        body = {"decision": decision, "version": version}
        return self._object("POST", f"/jobs/{_segment(job_id)}/approval", body, repeat_safe=True)

    def list(
        self, *, state: str | None = None, page_size: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """The caller's jobs, newest first (`GET /jobs`), every page: the pages are read as
        the iterator is consumed, following `next_cursor`, so an error answer is raised then.
        `state` filters; `page_size` is the API's `limit` (≤ 100)."""
        return _pages(self, "/jobs", {"state": state, "limit": page_size})


class Ops:
    """The operator's routes (`/ops`, docs/runbook.md) as `client.ops`: the caller must be an
    operator (`ApiError.Forbidden` otherwise). Every act records the operator, the time and
    the note in the job's history."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def summary(self) -> dict[str, Any]:
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
    ) -> Iterator[dict[str, Any]]:
        """Every tenant's jobs in `state`, oldest first (`GET /ops/jobs`), of one `kind`
        and/or one `tenant` when given (the API filters them), every page as the iterator is
        consumed."""
        query = {"state": state, "kind": kind, "tenant": tenant, "limit": page_size}
        yield from _pages(self._client, "/ops/jobs", query)

    def show(self, job_id: str) -> dict[str, Any]:
        """`GET /ops/jobs/{job_id}`: one job, whole — view, owner, history, operations, lease."""
        return self._client._object("GET", f"/ops/jobs/{_segment(job_id)}")

    def replay(
        self,
        job_id: str,
        *,
        note: str | None = None,
        checked_provider: bool = False,
        from_start: bool = False,
    ) -> dict[str, Any]:
        """A dead, failed or unknown job back to queued under the same id (`POST
        /ops/jobs/{job_id}/replay`); an unknown job needs `checked_provider=True` and a
        `note` (`ApiError.InvalidInput` without). `ApiError.Conflict` in another state.
        `from_start`: run every step again under the kind's current steps, the checkpoint
        dropped (a job stopped `kind_changed`), instead of going on from the checkpoint."""
        body: dict[str, Any] = {}
        if note is not None:
            body["note"] = note
        if checked_provider:
            body["checked_provider"] = True
        if from_start:
            body["from"] = "start"
        path = f"/ops/jobs/{_segment(job_id)}/replay"
        return self._client._object("POST", path, body, repeat_safe=True)

    def resolve(
        self,
        job_id: str,
        outcome: Literal["succeeded", "failed"],
        *,
        note: str,
        receipt: str | None = None,
    ) -> dict[str, Any]:
        """Settle an unknown job as `succeeded` or `failed` (`POST /ops/jobs/{job_id}/resolve`)
        with a note and, when the provider shows the charge, its receipt."""
        body: dict[str, Any] = {"outcome": outcome, "note": note}
        if receipt is not None:
            body["receipt"] = receipt
        path = f"/ops/jobs/{_segment(job_id)}/resolve"
        return self._client._object("POST", path, body, repeat_safe=True)

    def cancel(self, job_id: str, *, note: str) -> dict[str, Any]:
        """An operator's cancel of any tenant's job (`POST /ops/jobs/{job_id}/cancel`): queued
        or waiting for approval, it is cancelled at once; running, it is asked to stop.
        `ApiError.Conflict` (`not_cancellable`) once it has finished."""
        path = f"/ops/jobs/{_segment(job_id)}/cancel"
        return dict(self._client.call("POST", path, {"note": note}))

    def dead_letters(self) -> int:
        """How many wake-ups wait in the dead-letter queue (the summary's `sqs.dead_letter`)."""
        return int(self.summary()["sqs"]["dead_letter"])

    def redrive(self, *, note: str, max_messages: int = 100) -> dict[str, Any]:
        """Move up to `max_messages` (≤ 100) dead letters back to the work queue (`POST
        /ops/dlq/redrive`): each moved job's history names the operator; a message that cannot
        wake a job is set aside in the table. The report's `dead_letter_after` > 0: call again.
        Repeating it is safe: it moves only what is still in the DLQ."""
        body = {"note": note, "max": max_messages}
        return dict(self._client.call("POST", "/ops/dlq/redrive", body, repeat_safe=True))


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
    ) -> dict[str, Any]:
        """Create a schedule (`POST /schedules`) and return its view (`next_tick_at` is the
        first tick). Everything is checked now, the job as `POST /jobs` would check it:
        `ApiError.InvalidInput` says what is wrong. Never repeated by the client (there is no
        key): after an `Unavailable` list the schedules before creating it again."""
        body: dict[str, Any] = {
            "kind": kind,
            "payload": payload,
            "expression": expression,
            "timezone": timezone,
            "missed": missed,
        }
        if budget is not None:
            body["budget"] = dict(budget)
        if deadline_seconds is not None:
            body["deadline_seconds"] = deadline_seconds
        if max_attempts is not None:
            body["max_attempts"] = max_attempts
        if priority is not None:
            body["priority"] = priority
        return dict(self._client.call("POST", "/schedules", body))

    def list(self, *, page_size: int | None = None) -> Iterator[dict[str, Any]]:
        """The caller's schedules, newest first (`GET /schedules`), every page as the iterator
        is consumed; deleted ones are listed (`state: deleted`) until they expire."""
        return _pages(self._client, "/schedules", {"limit": page_size}, items="schedules")

    def get(self, schedule_id: str) -> dict[str, Any]:
        """One of the caller's schedules with its history (`GET /schedules/{schedule_id}`);
        `ApiError.NotFound` when it is unknown or not the caller's."""
        return dict(self._client.call("GET", f"/schedules/{_segment(schedule_id)}"))

    def delete(self, schedule_id: str) -> dict[str, Any]:
        """Stop a schedule for good (`DELETE /schedules/{schedule_id}`) and return it as
        deleted; `ApiError.NotFound` when it is unknown, not the caller's or already deleted
        (so after a lost answer, a `NotFound` on a retry means the first delete committed)."""
        return dict(self._client.call("DELETE", f"/schedules/{_segment(schedule_id)}"))


def _segment(job_id: str) -> str:
    return quote(job_id, safe="")


def _pages(
    client: Client, path: str, query: dict[str, Any], items: str = "jobs"
) -> Iterator[dict[str, Any]]:
    cursor: str | None = None
    followed: set[str] = set()
    while True:
        page = client._object("GET", path, query={**query, "cursor": cursor})
        if not isinstance(page.get(items), list):
            raise _invalid(200, json.dumps(page).encode(), f"has no list of {items}")
        yield from page[items]
        cursor = page.get("next_cursor")
        if not cursor:
            return
        if cursor in followed:  # the same pages again, for ever: stop rather than loop
            raise _invalid(200, str(cursor).encode(), "repeats a cursor already followed")
        followed.add(str(cursor))


def _invalid(status: int, raw: bytes, what: str) -> ApiError:
    """A success answer that is not what the route promises (a proxy's login page, a cut
    body): nothing the caller can use, so an error rather than a TypeError later."""
    shown = raw[:200].decode(errors="replace").strip()
    return ApiError(status, "invalid_response", f"the answer {what}: {shown!r}")
