"""The requests under `leasehold.Client`: one urllib3 pool (connection reuse, timeouts;
docs/decisions.md CL1), the caller's identity headers, and the retries.

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
from typing import TYPE_CHECKING, Any, TypedDict, Unpack
from urllib.parse import quote, urlencode, urlsplit

from leasehold.client.errors import ApiError, Unreachable, error_for, retry_after_seconds
from leasehold.domain.types import JsonObject

if TYPE_CHECKING:
    import urllib3

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


class Sending(TypedDict, total=False):
    """How one request is sent, beside its method, path and body: the keyword arguments
    `Transport.request` and `Transport.call` both take."""

    headers: Mapping[str, str] | None
    """Headers beside the identity and agent ones (the same name: this value wins)."""
    query: Mapping[str, Any] | None
    """The query string's parameters (those that are None are left out)."""
    repeat_safe: bool | None
    """Whether the request may be repeated after a 503 or a broken connection; None: guess
    (a GET, or a request with `Idempotency-Key`, is)."""


class Transport:
    """One API's requests: its URL, the caller's identity, the timeouts and the retries (the
    module docstring), over one urllib3 pool. `Client` is the API's routes on top of it."""

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
        retry: bool = False,
        **sending: Unpack[Sending],
    ) -> Reply:
        """One request to `path` (relative to the base URL) with `body` as JSON (bytes: sent
        as they are; None: no body); the answer whatever its status — nothing is raised for an
        error status. With `retry`, throttling, 503s and connection failures are retried as
        the module docstring says. `headers`, `query`, `repeat_safe`: `Sending`.
        `ApiError.Unreachable` when no answer came."""
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/', not {path!r}")
        sent = self.headers()
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        sent.update(sending.get("headers") or {})
        repeat_safe = sending.get("repeat_safe")
        if repeat_safe is None:
            repeat_safe = method.upper() in {"GET", "HEAD", "OPTIONS"} or any(
                k.lower() == "idempotency-key" for k in sent
            )
        url = self.base_url + path
        query = sending.get("query")
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

        try:
            status, answer_headers, raw = self._exchange(method, url, data, headers)
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
        return Reply(status, answer_headers, parsed, raw)

    def _exchange(
        self, method: str, url: str, data: bytes | None, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        """One request, no retry and no redirect, and its answer read whole within `timeout`
        (`_read_answer`): status, headers, body. urllib3's errors reach the caller."""
        import urllib3

        timeout = urllib3.Timeout(connect=min(self.timeout, 10.0), read=self.timeout)
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
        return answer.status, dict(answer.headers.items()), raw

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
                    raise invalid_answer(answer.status, bytes(body[:200]), "is too large to read")
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

    def call(self, method: str, path: str, body: Any = None, **sending: Unpack[Sending]) -> Any:
        """`request` with retries, the answer's JSON body on success; the matching `ApiError`
        subclass for an error answer. For an application's own routes (`/bookmarks`)."""
        reply = self.request(method, path, body, retry=True, **sending)
        error = reply.error()
        if error is not None:
            raise error
        if reply.raw.strip() and reply.body is None:
            raise invalid_answer(reply.status, reply.raw, "is not JSON")
        return reply.body

    def _whole(self, view: JsonObject) -> JsonObject:
        """A job view with its large result read in (`result_url`, DESIGN §20): the route
        answers the JSON, or a 303 to a presigned URL, which is read without our headers."""
        url = view.get("result_url")
        if "result" in view or not isinstance(url, str) or not url.startswith("/"):
            return view
        reply = self.request("GET", url, retry=True)
        location = reply.header("Location")
        if reply.status == 303 and location:  # the bare result, at a presigned URL
            answer = self._pool.request("GET", location, retries=False, preload_content=False)
            reply = Reply(answer.status, {}, None, self._read_answer(answer))
            wrapped = False
        else:  # {"job_id": …, "result": …}
            wrapped = True
        error = reply.error()
        if error is not None:
            raise error
        try:
            answer_body = json.loads(reply.raw)
        except ValueError:
            raise invalid_answer(reply.status, reply.raw, "is not JSON") from None
        if wrapped and not (isinstance(answer_body, dict) and "result" in answer_body):
            raise invalid_answer(reply.status, reply.raw, "has no 'result'")
        result = answer_body["result"] if wrapped else answer_body
        return {**view, "result": result}

    def _object(
        self, method: str, path: str, body: Any = None, **sending: Unpack[Sending]
    ) -> JsonObject:
        """`call` for a route that answers a JSON object: `ApiError` `invalid_response` when
        the answer is anything else (a proxy's page, an empty body, a list)."""
        answer = self.call(method, path, body, **sending)
        if not isinstance(answer, dict):
            raise invalid_answer(200, json.dumps(answer).encode(), "is not a JSON object")
        return answer

    # ------------------------------------------------------------------ jobs


def segment(job_id: str) -> str:
    """A path segment of an id, every reserved character escaped."""
    return quote(job_id, safe="")


def pages(
    client: Transport, path: str, query: JsonObject, items: str = "jobs"
) -> Iterator[JsonObject]:
    cursor: str | None = None
    followed: set[str] = set()
    while True:
        page = client._object("GET", path, query={**query, "cursor": cursor})
        if not isinstance(page.get(items), list):
            raise invalid_answer(200, json.dumps(page).encode(), f"has no list of {items}")
        yield from page[items]
        cursor = page.get("next_cursor")
        if not cursor:
            return
        if cursor in followed:  # the same pages again, for ever: stop rather than loop
            raise invalid_answer(200, str(cursor).encode(), "repeats a cursor already followed")
        followed.add(str(cursor))


def invalid_answer(status: int, raw: bytes, what: str) -> ApiError:
    """A success answer that is not what the route promises (a proxy's login page, a cut
    body): nothing the caller can use, so an error rather than a TypeError later."""
    shown = raw[:200].decode(errors="replace").strip()
    return ApiError(status, "invalid_response", f"the answer {what}: {shown!r}")
