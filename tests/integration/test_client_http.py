"""`leasehold.client.Client` against a scripted HTTP server on 127.0.0.1: the error envelope as
exceptions, which answers and failures it repeats (bounded, honouring `Retry-After`) and which
it must not, `wait`'s bounded polling, and paging. The client's sleeps are recorded instead of
slept wherever the test is about how long it would wait."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold import Debounce, JobOptions
from leasehold.client import ApiError, Client, JobHandle, WaitTimeout
from leasehold.client.http import MAX_ANSWER_BYTES
from leasehold.service.tracing import span_under
from tests.support.local_http import Connection, LocalServer
from tests.support.scripted_api import DROP, Answer, Script, ScriptedApi, Seen, envelope

pytestmark = pytest.mark.integration


@pytest.fixture
def api() -> Iterator[ScriptedApi]:
    server = ScriptedApi()
    yield server
    server.close()


def _client(api: ScriptedApi, **options: Any) -> tuple[Client, list[float]]:
    """A client of `api` whose sleeps are recorded, not slept."""
    client = Client(api.url, user="alice", timeout=5, **options)
    slept: list[float] = []
    client._sleep = slept.append
    return client, slept


VIEW = {"job_id": "j_1", "kind": "synthetic", "state": "queued", "version": 1}


# ----------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, ApiError.InvalidInput),
        (401, ApiError.Unauthenticated),
        (403, ApiError.Forbidden),
        (404, ApiError.NotFound),
        (409, ApiError.Conflict),
        (503, ApiError.Unavailable),
    ],
)
def test_each_error_status_is_its_own_exception_carrying_theenvelope(
    api: ScriptedApi, status: int, expected: type[ApiError]
) -> None:
    api.answers = [(status, {"Retry-After": "2"}, envelope("some_code", "what went wrong"))]
    client, _ = _client(api, retries=0)
    with pytest.raises(expected) as raised:
        client.get("j_1")
    error = raised.value
    assert type(error) is expected
    assert (error.status, error.code, error.message) == (status, "some_code", "what went wrong")
    assert str(error) == f"{status} some_code: what went wrong"
    others = {ApiError.InvalidInput, ApiError.Unauthenticated, ApiError.Forbidden,
              ApiError.NotFound, ApiError.Conflict, ApiError.Unavailable} - {expected}  # fmt: skip
    assert not any(isinstance(error, other) for other in others)


def test_an_unavailable_error_says_when_to_come_back(api: ScriptedApi) -> None:
    api.answers = [(503, {"Retry-After": "7"}, envelope("store_unavailable", "nothing promised"))]
    client, _ = _client(api, retries=0)
    with pytest.raises(ApiError.Unavailable) as raised:
        client.get("j_1")
    assert raised.value.retry_after == 7.0


def test_another_status_is_a_plain_api_error_and_a_foreign_body_still_reads(
    api: ScriptedApi,
) -> None:
    api.answers = [(500, {}, envelope("internal_error", "nothing is promised"))]
    client, _ = _client(api, retries=0)
    with pytest.raises(ApiError) as raised:
        client.get("j_1")
    assert type(raised.value) is ApiError
    assert (raised.value.status, raised.value.code) == (500, "internal_error")
    # API Gateway's own 401 has no envelope: {"message": "Unauthorized"}
    api.answers = [(401, {}, {"message": "Unauthorized"})]
    with pytest.raises(ApiError.Unauthenticated) as unauthenticated:
        client.ops.summary()
    assert (unauthenticated.value.code, unauthenticated.value.message) == (
        "unauthorized",
        "Unauthorized",
    )


def test_the_low_level_request_returns_any_status_without_raising(api: ScriptedApi) -> None:
    api.answers = [(409, {"X-Thing": "1"}, envelope("conflict", "no"))]
    client, slept = _client(api)
    reply = client.request("POST", "/jobs/j_1/cancel")
    assert (reply.status, reply.body["error"]["code"], reply.header("x-thing")) == (
        409,
        "conflict",
        "1",
    )
    assert isinstance(reply.error(), ApiError.Conflict)
    assert len(api.seen) == 1 and slept == []


# ----------------------------------------------------------------------- identity


def test_the_identity_is_the_demo_user_locally_and_a_bearer_token_deployed(
    api: ScriptedApi,
) -> None:
    api.answers = [(200, {}, VIEW)]
    Client(api.url, user="bob").get("j_1")
    Client(api.url, token="tok-1").get("j_1")
    tokens = iter(["tok-2", "tok-3"])
    refreshing = Client(api.url, token=lambda: next(tokens))
    refreshing.get("j_1")
    refreshing.get("j_1")
    first, second, third, fourth = api.seen
    assert first.headers["x-demo-user"] == "bob" and "authorization" not in first.headers
    assert second.headers["authorization"] == "Bearer tok-1" and "x-demo-user" not in second.headers
    assert [third.headers["authorization"], fourth.headers["authorization"]] == [
        "Bearer tok-2",
        "Bearer tok-3",
    ]
    with pytest.raises(ValueError, match="not both"):
        Client(api.url, user="bob", token="t")
    with pytest.raises(ValueError, match="http"):
        Client("localhost:8080", user="bob")


# ----------------------------------------------------------------------- repeats


def test_a_503_is_retried_a_bounded_number_of_times_waiting_retry_after(
    api: ScriptedApi,
) -> None:
    # Given an API that answers 503 (Retry-After: 1) twice, then the view
    api.answers = [
        (503, {"Retry-After": "1"}, envelope("store_unavailable", "x")),
        (503, {"Retry-After": "1"}, envelope("store_unavailable", "x")),
        (200, {}, VIEW),
    ]
    client, slept = _client(api, retries=3)
    # When a read is made, Then it is repeated after the server's pause, and answers the view
    assert client.get("j_1") == VIEW
    assert slept == [1.0, 1.0]
    assert len(api.seen) == 3


def test_a_503_that_persists_ends_after_the_retries_as_unavailable(api: ScriptedApi) -> None:
    # (after ten 503s the view: a client that kept retrying would get it, and fail here)
    api.answers = [(503, {"Retry-After": "3600"}, envelope("store_unavailable", "x"))] * 10
    api.answers.append((200, {}, VIEW))
    client, slept = _client(api, retries=2, max_retry_after=4)
    with pytest.raises(ApiError.Unavailable):
        client.get("j_1")
    assert len(api.seen) == 3  # the request and two repeats, no more
    assert slept == [4, 4]  # an hour's Retry-After is capped


def test_without_retry_after_the_pause_is_a_bounded_full_jitter_backoff(api: ScriptedApi) -> None:
    api.answers = [(503, {}, envelope("store_unavailable", "x"))] * 10 + [(200, {}, VIEW)]
    client, slept = _client(api, retries=6)
    with pytest.raises(ApiError.Unavailable):
        client.get("j_1")
    assert len(slept) == 6
    caps = [min(5.0, 0.25 * 2**n) for n in range(6)]
    assert all(0 <= pause <= cap for pause, cap in zip(slept, caps, strict=True))


def test_a_real_retry_after_is_really_waited(api: ScriptedApi) -> None:
    api.answers = [
        (503, {"Retry-After": "1"}, envelope("store_unavailable", "x")),
        (200, {}, VIEW),
    ]
    started = time.monotonic()
    assert Client(api.url, user="alice").get("j_1") == VIEW
    assert 1.0 <= time.monotonic() - started < 3.0


def test_a_submission_without_a_key_is_not_repeated_after_a_503(api: ScriptedApi) -> None:
    # A 503 on POST /jobs may follow a commit whose answer was lost: a repeat could be a 2nd job
    api.answers = [(503, {"Retry-After": "1"}, envelope("store_unavailable", "x"))]
    client, slept = _client(api, retries=3)
    with pytest.raises(ApiError.Unavailable):
        client.submit("synthetic", {"steps": [{"name": "a"}]})
    assert len(api.seen) == 1 and slept == []


def test_a_submission_with_a_key_is_repeated_with_the_same_key_and_body(
    api: ScriptedApi,
) -> None:
    accepted = {"job_id": "j_9", "state": "queued", "status_url": "/jobs/j_9"}
    api.answers = [(503, {"Retry-After": "1"}, envelope("store_unavailable", "x")), DROP,
                   (202, {"Location": "/jobs/j_9"}, accepted)]  # fmt: skip
    client, slept = _client(api, retries=3)
    handle = client.submit(
        "synthetic",
        {"steps": [{"name": "a"}]},
        idempotency_key="k-1",
        budget={"max_cost": 3},
        deadline_seconds=60,
        max_attempts=2,
    )
    assert isinstance(handle, JobHandle)
    assert (handle.job_id, handle.state, str(handle)) == ("j_9", "queued", "j_9")
    assert len(api.seen) == 3 and slept[0] == 1.0
    assert {seen.headers["idempotency-key"] for seen in api.seen} == {"k-1"}
    assert all(seen.body == api.seen[0].body for seen in api.seen)
    assert api.seen[0].body == {
        "kind": "synthetic",
        "payload": {"steps": [{"name": "a"}]},
        "budget": {"max_cost": 3},
        "deadline_seconds": 60,
        "max_attempts": 2,
    }


def test_submit_sends_a_delay_as_the_api_takes_it(api: ScriptedApi) -> None:
    accepted = {"job_id": "j_9", "state": "queued", "status_url": "/jobs/j_9"}
    api.answers = [(202, {}, accepted), (202, {}, accepted)]
    client, _ = _client(api)
    client.submit("synthetic", {"steps": [{"name": "a"}]}, delay_seconds=3600)
    client.submit("synthetic", {"steps": [{"name": "a"}]}, run_at="2026-12-24T09:00:00+01:00")
    assert api.seen[0].body["delay_seconds"] == 3600 and "run_at" not in api.seen[0].body
    assert api.seen[1].body["run_at"] == "2026-12-24T09:00:00+01:00"
    assert "delay_seconds" not in api.seen[1].body


def test_submit_sends_a_debounce_and_reads_the_answers_debounced(api: ScriptedApi) -> None:
    accepted = {"job_id": "j_9", "state": "queued", "status_url": "/jobs/j_9"}
    api.answers = [(202, {}, accepted), (202, {}, {**accepted, "debounced": True})]
    client, _ = _client(api)
    rule = Debounce(by=["payload.account"], seconds=30, keep="first")
    first = client.submit("shout", {"account": "a"}, options=JobOptions(debounce=rule))
    again = client.submit("shout", {"account": "a"}, options=JobOptions(debounce=rule))
    assert api.seen[0].body["debounce"] == {
        "by": ["payload.account"],
        "seconds": 30,
        "keep": "first",
    }
    assert "idempotency-key" not in api.seen[0].headers
    assert (first.job_id, first.debounced) == ("j_9", False)
    assert (again.job_id, again.debounced) == ("j_9", True)


def test_submit_sends_the_trace_given_else_the_current_spans_as_traceparent(
    api: ScriptedApi,
) -> None:
    # Given a caller with a trace of its own, and one inside an OpenTelemetry span
    accepted = {"job_id": "j_9", "state": "queued", "status_url": "/jobs/j_9"}
    api.answers = [(202, {}, accepted)] * 3
    client, _ = _client(api)
    given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    current = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    # When each submits (and one submits outside any span)
    client.submit("synthetic", {"steps": [{"name": "a"}]}, traceparent=given)
    with span_under("caller", current):
        client.submit("synthetic", {"steps": [{"name": "a"}]})
    client.submit("synthetic", {"steps": [{"name": "a"}]})
    # Then the header carries the given one, else the current span's, else none (the API
    # starts the trace); never the body
    assert [seen.headers.get("traceparent") for seen in api.seen] == [given, current, None]
    assert all("traceparent" not in seen.body for seen in api.seen)


def test_a_broken_connection_after_an_unkeyed_submission_is_not_repeated(
    api: ScriptedApi,
) -> None:
    api.answers = [DROP, (202, {}, {"job_id": "j_2", "state": "queued", "status_url": "/"})]
    client, slept = _client(api, retries=3)
    with pytest.raises(ApiError.Unreachable) as raised:
        client.submit("synthetic", {"steps": [{"name": "a"}]})
    assert raised.value.sent is True and raised.value.status == 0
    assert len(api.seen) == 1 and slept == []


def test_a_broken_connection_on_a_read_is_repeated(api: ScriptedApi) -> None:
    api.answers = [DROP, DROP, (200, {}, VIEW)]
    client, slept = _client(api, retries=3)
    assert client.get("j_1") == VIEW
    assert len(api.seen) == 3 and len(slept) == 2


def test_a_refused_connection_is_repeated_for_any_request_then_unreachable() -> None:
    # Nothing was sent, so even an unkeyed submission may be tried again
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = Client(f"http://127.0.0.1:{port}", user="alice", retries=2)
    slept: list[float] = []
    client._sleep = slept.append
    with pytest.raises(ApiError.Unreachable) as raised:
        client.submit("synthetic", {"steps": [{"name": "a"}]})
    assert raised.value.sent is False
    assert len(slept) == 2


def test_a_429_is_retried_even_for_an_unkeyed_submission(api: ScriptedApi) -> None:
    # API Gateway throttles before the function runs: nothing was done
    accepted = {"job_id": "j_3", "state": "queued", "status_url": "/jobs/j_3"}
    api.answers = [(429, {}, {"message": "Too Many Requests"}), (202, {}, accepted)]
    client, slept = _client(api, retries=3)
    assert client.submit("synthetic", {"steps": [{"name": "a"}]}).job_id == "j_3"
    assert len(api.seen) == 2 and len(slept) == 1


# ----------------------------------------------------------------------- wait


def test_wait_polls_with_a_growing_jittered_pause_and_returns_the_settled_view(
    api: ScriptedApi,
) -> None:
    states = ["queued", "running", "running", "running", "running", "running", "succeeded"]
    api.answers = [(200, {}, {**VIEW, "state": state}) for state in states]
    client, slept = _client(api)
    view = client.wait("j_1", timeout=60, poll=0.5, max_poll=2.0)
    assert view["state"] == "succeeded"
    assert len(api.seen) == 7 and len(slept) == 6
    caps = [min(2.0, 0.5 * 2**n) for n in range(6)]
    assert all(0 < pause <= cap for pause, cap in zip(slept, caps, strict=True))


def test_wait_rides_out_a_503_and_a_lost_answer(api: ScriptedApi) -> None:
    api.answers = [
        (503, {"Retry-After": "2"}, envelope("store_unavailable", "x")),
        DROP,
        (200, {}, {**VIEW, "state": "unknown"}),
    ]
    client, _ = _client(api)
    assert client.wait("j_1", timeout=60)["state"] == "unknown"  # at rest: an operator's turn


def test_wait_gives_up_at_its_timeout_with_the_last_view(api: ScriptedApi) -> None:
    api.answers = [(200, {}, {**VIEW, "state": "running"})]
    client = Client(api.url, user="alice")
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as raised:
        client.wait("j_1", timeout=0.6, poll=0.05, max_poll=0.2)
    took = time.monotonic() - started
    assert isinstance(raised.value, TimeoutError)
    assert 0.6 <= took < 1.5
    assert raised.value.view is not None and raised.value.view["state"] == "running"
    assert "j_1" in str(raised.value) and "running" in str(raised.value)
    assert len(api.seen) >= 3


def test_wait_stops_at_an_answer_that_will_not_change(api: ScriptedApi) -> None:
    api.answers = [(404, {}, envelope("not_found", "no job j_1"))]
    client, _ = _client(api)
    with pytest.raises(ApiError.NotFound):
        client.wait("j_1", timeout=60)
    assert len(api.seen) == 1


def test_a_handle_reads_waits_and_cancels_its_own_job(api: ScriptedApi) -> None:
    def script(seen: Seen) -> Answer:
        if seen.method == "POST" and seen.path == "/jobs":
            return 202, {}, {"job_id": "j/1", "state": "queued", "status_url": "/jobs/j%2F1"}
        if seen.path.endswith("/cancel"):
            return 202, {}, {**VIEW, "state": "cancelled"}
        return 200, {}, {**VIEW, "state": "succeeded"}

    api.script = script
    client, _ = _client(api)
    handle = client.submit("synthetic", {"steps": [{"name": "a"}]})
    assert handle.get()["state"] == "succeeded"
    assert handle.wait(timeout=5)["state"] == "succeeded"
    assert handle.cancel()["state"] == "cancelled"
    assert [seen.path for seen in api.seen[1:]] == [
        "/jobs/j%2F1",
        "/jobs/j%2F1",
        "/jobs/j%2F1/cancel",
    ]


@pytest.mark.parametrize(
    ("status", "body", "act"),
    [
        (200, b"<html>sign in to the Wi-Fi</html>", lambda c: c.get("j_1")),
        (202, b"accepted, probably", lambda c: c.submit("synthetic", {})),
        (202, b'{"state": "queued"}', lambda c: c.submit("synthetic", {})),
        (200, b"[1, 2]", lambda c: c.ops.summary()),
        (200, b"", lambda c: c.cancel("j_1")),
        (200, b'{"next_cursor": null}', lambda c: list(c.list())),
        (200, b"<html/>", lambda c: c.wait("j_1", timeout=5)),
        (200, b"<html/>", lambda c: c.call("GET", "/bookmarks")),
    ],
)
def test_a_success_answer_that_is_not_the_routes_json_is_an_api_error(
    status: int, body: bytes, act: Any
) -> None:
    """A proxy's page or a cut body under a 2xx is `ApiError` `invalid_response`, never a
    TypeError or KeyError from inside the client."""
    server = LocalServer(lambda connection: connection.respond(status, body))
    try:
        client = Client(f"http://127.0.0.1:{server.port}", user="alice", timeout=2, retries=0)
        with pytest.raises(ApiError) as raised:
            act(client)
        assert raised.value.code == "invalid_response"
    finally:
        server.close()


def test_an_answer_dripped_byte_by_byte_is_given_up_within_the_timeout() -> None:
    """Each byte comes well inside the read timeout, the whole body never: the client stops
    at `timeout` seconds (plus one read), not when the server is done."""

    def drip(connection: Connection) -> None:
        head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n"
        connection.send(head.encode())
        for _ in range(40):
            if connection.server.stop.is_set():
                return
            connection.send(b" ")
            time.sleep(0.2)

    server = LocalServer(drip)
    try:
        client = Client(f"http://127.0.0.1:{server.port}", user="alice", timeout=1, retries=0)
        started = time.monotonic()
        with pytest.raises(ApiError.Unreachable) as raised:
            client.get("j_1")
        assert time.monotonic() - started < 2.5
        assert raised.value.sent
    finally:
        server.close()


def test_an_answer_larger_than_any_the_api_sends_is_refused_not_read_whole() -> None:
    sent_before_refusal: list[int] = []

    def endless(connection: Connection) -> None:
        size = 1 << 30
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {size}"
        connection.send((head + "\r\n\r\n").encode())
        chunk = b" " * (1 << 20)
        try:
            for _ in range(size >> 20):
                connection.send(chunk)
        except OSError:  # the client closed the connection
            sent_before_refusal.append(connection.sent)

    server = LocalServer(endless)
    try:
        client = Client(f"http://127.0.0.1:{server.port}", user="alice", timeout=5, retries=0)
        with pytest.raises(ApiError) as raised:
            client.request("GET", "/jobs/j_1")
        assert raised.value.code == "invalid_response"
    finally:
        server.close()
    assert sent_before_refusal and sent_before_refusal[0] < 64 * MAX_ANSWER_BYTES


# ----------------------------------------------------------------------- pages and acts


def _paged(rows: list[dict[str, Any]], size: int) -> Script:
    def script(seen: Seen) -> Answer:
        start = int(seen.query.get("cursor", ["0"])[0])
        page = rows[start : start + size]
        more = start + size < len(rows)
        return 200, {}, {"jobs": page, "next_cursor": str(start + size) if more else None}

    return script


def test_list_iterates_every_page_following_the_cursor(api: ScriptedApi) -> None:
    rows = [{"job_id": f"j_{n}", "state": "succeeded"} for n in range(7)]
    api.script = _paged(rows, 3)
    client, _ = _client(api)
    jobs = client.list(state="succeeded", page_size=3)
    assert api.seen == []  # pages are read as the iterator is consumed
    assert [job["job_id"] for job in jobs] == [row["job_id"] for row in rows]
    assert [seen.query.get("cursor") for seen in api.seen] == [None, ["3"], ["6"]]
    assert {seen.query["state"][0] for seen in api.seen} == {"succeeded"}
    assert {seen.query["limit"][0] for seen in api.seen} == {"3"}


@pytest.mark.parametrize("cursors", [["same"], ["a", "b", "a"]])
def test_a_cursor_that_comes_back_ends_the_listing_instead_of_looping(
    api: ScriptedApi, cursors: list[str]
) -> None:
    """A server that answers a cursor already followed would page for ever: the iterator
    raises `invalid_response` after the rows it had, one request per distinct cursor."""
    answers = [
        (200, {}, {"jobs": [{"job_id": f"j_{n}"}], "next_cursor": c}) for n, c in enumerate(cursors)
    ]
    api.answers = list(answers)
    client, _ = _client(api)
    listed: list[str] = []
    with pytest.raises(ApiError) as raised:
        for row in client.list():
            listed.append(row["job_id"])
    assert raised.value.code == "invalid_response"
    assert len(api.seen) == len(set(cursors)) + 1  # the last answer repeats
    assert listed == [f"j_{min(n, len(cursors) - 1)}" for n in range(len(api.seen))]


def test_ops_pause_and_resume_a_kind_send_their_notes(api: ScriptedApi) -> None:
    kind = {"kind": "send_sms", "state": "paused", "paused": None, "resumed": None}
    api.script = lambda seen: (200, {}, {**kind, "changed": True})
    client, _ = _client(api)
    assert client.ops.pause_kind("send_sms", note="outage")["state"] == "paused"
    api.script = lambda seen: (200, {}, {**kind, "state": "resuming", "woken": 3, "more": False})
    assert client.ops.resume_kind("send_sms", note="back")["woken"] == 3
    api.script = lambda seen: (200, {}, {"kinds": [kind]})
    assert client.ops.kinds() == [kind]
    assert [(s.method, s.path, s.body) for s in api.seen] == [
        ("POST", "/ops/kinds/send_sms/pause", {"note": "outage"}),
        ("POST", "/ops/kinds/send_sms/resume", {"note": "back"}),
        ("GET", "/ops/kinds", None),
    ]


def test_ops_jobs_pages_and_asks_the_api_for_kind_and_tenant(api: ScriptedApi) -> None:
    # The API filters by kind and tenant (GET /ops/jobs?kind=&tenant=): the client passes them
    # on every page and yields what the pages hold
    rows = [{"job_id": f"j_{n}", "kind": "title", "tenant": "a"} for n in range(3)]
    api.script = _paged(rows, 2)
    client, _ = _client(api)
    found = client.ops.jobs("dead", kind="title", tenant="a")
    assert [row["job_id"] for row in found] == ["j_0", "j_1", "j_2"]
    assert [seen.path for seen in api.seen] == ["/ops/jobs", "/ops/jobs"]
    for seen in api.seen:
        assert (seen.query["state"], seen.query["kind"], seen.query["tenant"]) == (
            ["dead"],
            ["title"],
            ["a"],
        )
    client.ops.jobs("dead").__next__()
    assert "kind" not in api.seen[-1].query and "tenant" not in api.seen[-1].query


def test_ops_cancel_and_redrive_send_their_notes(api: ScriptedApi) -> None:
    api.script = lambda seen: (202, {}, {**VIEW, "state": "cancelled"})
    client, _ = _client(api)
    assert client.ops.cancel("j_1", note="asked")["state"] == "cancelled"
    api.script = lambda seen: (200, {}, {"redrive": "done", "moved": 2, "dead_letter_after": 0})
    assert client.ops.redrive(note="fixed", max_messages=5)["moved"] == 2
    assert [(s.method, s.path, s.body) for s in api.seen] == [
        ("POST", "/ops/jobs/j_1/cancel", {"note": "asked"}),
        ("POST", "/ops/dlq/redrive", {"note": "fixed", "max": 5}),
    ]


def test_approve_reads_the_version_when_not_given_and_sends_the_decision(
    api: ScriptedApi,
) -> None:
    def script(seen: Seen) -> Answer:
        if seen.method == "GET":
            return 200, {}, {**VIEW, "state": "waiting_approval", "version": 4}
        return 200, {}, {**VIEW, "state": "queued", "version": 5}

    api.script = script
    client, _ = _client(api)
    assert client.approve("j_1")["state"] == "queued"
    client.reject("j_1", version=9)
    assert [(s.method, s.path, s.body) for s in api.seen] == [
        ("GET", "/jobs/j_1", None),
        ("POST", "/jobs/j_1/approval", {"decision": "approve", "version": 4}),
        ("POST", "/jobs/j_1/approval", {"decision": "reject", "version": 9}),
    ]


def test_the_operator_acts_send_what_the_routes_take(api: ScriptedApi) -> None:
    api.answers = [(202, {}, VIEW)]
    client, _ = _client(api)
    client.ops.replay("j_1")
    client.ops.replay("j_1", note="checked", checked_provider=True)
    client.ops.replay("j_1", note="kind v2", from_start=True)
    client.ops.resolve("j_1", "succeeded", note="charged", receipt="r-1")
    client.ops.show("j_1")
    assert [(s.method, s.path, s.body) for s in api.seen] == [
        ("POST", "/ops/jobs/j_1/replay", {}),
        ("POST", "/ops/jobs/j_1/replay", {"note": "checked", "checked_provider": True}),
        ("POST", "/ops/jobs/j_1/replay", {"note": "kind v2", "from": "start"}),
        (
            "POST",
            "/ops/jobs/j_1/resolve",
            {"outcome": "succeeded", "note": "charged", "receipt": "r-1"},
        ),
        ("GET", "/ops/jobs/j_1", None),
    ]


# ----------------------------------------------------------------------- schedules


def test_schedules_create_sends_the_body_and_is_not_repeated_after_a_503(api: ScriptedApi) -> None:
    api.answers = [(503, {"Retry-After": "1"}, envelope("store_unavailable", "x"))]
    client, slept = _client(api, retries=3)
    with pytest.raises(ApiError.Unavailable):
        client.schedules.create(
            "synthetic", {"steps": [{"name": "a"}]}, "cron(0 9 ? * MON *)", timezone="Europe/Paris"
        )
    assert len(api.seen) == 1 and slept == []
    assert api.seen[0].method == "POST" and api.seen[0].path == "/schedules"
    assert api.seen[0].body == {
        "kind": "synthetic",
        "payload": {"steps": [{"name": "a"}]},
        "expression": "cron(0 9 ? * MON *)",
        "timezone": "Europe/Paris",
        "missed": "skip",
    }


def test_schedules_list_pages_get_and_delete_address_one_schedule(api: ScriptedApi) -> None:
    rows = [{"schedule_id": f"s_{n}"} for n in range(5)]

    def script(seen: Seen) -> Answer:
        if seen.path == "/schedules":
            start = int(seen.query.get("cursor", ["0"])[0])
            more = start + 2 < len(rows)
            page = {"schedules": rows[start : start + 2], "next_cursor": str(start + 2)}
            return 200, {}, {**page, "next_cursor": page["next_cursor"] if more else None}
        return 200, {}, {"schedule_id": seen.path.rsplit("/", 1)[1], "method": seen.method}

    api.script = script
    client, _ = _client(api)
    assert [s["schedule_id"] for s in client.schedules.list(page_size=2)] == [
        r["schedule_id"] for r in rows
    ]
    assert client.schedules.get("s_1") == {"schedule_id": "s_1", "method": "GET"}
    assert client.schedules.delete("s_1") == {"schedule_id": "s_1", "method": "DELETE"}


# ----------------------------------------------------------------------- workflows (DESIGN §19)


def test_signal_callback_and_children_use_their_routes(api: ScriptedApi) -> None:
    children = [{"job_id": f"j_{n}", "step": 0, "state": "succeeded"} for n in range(5)]

    def script(seen: Seen) -> Answer:
        if seen.path.endswith("/children"):
            start = int(seen.query.get("cursor", ["0"])[0])
            more = start + 2 < len(children)
            page = children[start : start + 2]
            return 200, {}, {"items": page, "next_cursor": str(start + 2) if more else None}
        if seen.path.startswith("/callbacks/"):
            return 202, {}, {"job_id": "j_1", "accepted": True}
        return 202, {}, VIEW

    api.script = script
    client, _ = _client(api)
    assert client.signal("j_1", "reviewed", {"ok": True}) == VIEW
    assert client.callback("tok/en with space", [1, 2]) == {"job_id": "j_1", "accepted": True}
    assert list(client.children("j_1", page_size=2)) == children
    calls = [(seen.method, seen.path, seen.body) for seen in api.seen]
    assert calls[:2] == [
        ("POST", "/jobs/j_1/signals/reviewed", {"ok": True}),
        ("POST", "/callbacks/tok%2Fen%20with%20space", [1, 2]),
    ]
    assert [seen.path for seen in api.seen[2:]] == ["/jobs/j_1/children"] * 3
    # The operator's: any tenant's job, the note beside the body
    del api.seen[:]
    assert client.ops.signal("j_1", "go", {"ok": True}, note="by phone") == VIEW
    assert list(client.ops.children("j_1", page_size=2)) == children
    assert (api.seen[0].path, api.seen[0].body) == (
        "/ops/jobs/j_1/signals/go",
        {"note": "by phone", "body": {"ok": True}},
    )
    assert [seen.path for seen in api.seen[1:]] == ["/ops/jobs/j_1/children"] * 3


# ----------------------------------------------------------------------- large results


def test_get_and_wait_read_a_large_result_whole_from_its_url(api: ScriptedApi) -> None:
    # DESIGN §20: a view with `result_url` instead of `result` is completed by the client, by
    # following the route — and the 303 to a presigned URL it answers past 5 MiB
    large = {"rows": ["r" * 100] * 50}
    settled = {**VIEW, "state": "succeeded", "result_url": "/jobs/j_1/result", "result_size": 1}

    def script(seen: Seen) -> Answer:
        if seen.path == "/jobs/j_1":
            return (200, {}, settled)
        if seen.path == "/jobs/j_1/result":
            return (303, {"Location": f"{api.url}/presigned/j_1?sig=abc"}, None)
        if seen.path == "/presigned/j_1":
            assert "authorization" not in seen.headers and "x-demo-user" not in seen.headers
            return (200, {}, large)
        return (404, {}, envelope("not_found", seen.path))

    api.script = script
    client, _ = _client(api)
    assert client.get("j_1")["result"] == large
    assert client.wait("j_1", timeout=1)["result"] == large
    assert [s.path for s in api.seen].count("/presigned/j_1") == 2
    # up to 5 MiB the route answers {"job_id", "result"} itself
    api.script = lambda seen: (
        (200, {}, settled)
        if seen.path == "/jobs/j_1"
        else (200, {}, {"job_id": "j_1", "result": large})
    )
    assert client.get("j_1")["result"] == large
    # a small result is inline: nothing more is read
    api.seen.clear()
    api.script = lambda seen: (200, {}, {**VIEW, "state": "succeeded", "result": 3})
    assert client.get("j_1")["result"] == 3 and len(api.seen) == 1


def test_a_result_url_that_answers_404_is_the_callers_not_found(api: ScriptedApi) -> None:
    settled = {**VIEW, "state": "succeeded", "result_url": "/jobs/j_1/result", "result_size": 9}
    api.script = lambda seen: (
        (200, {}, settled) if seen.path == "/jobs/j_1" else (404, {}, envelope("not_found", "no"))
    )
    client, _ = _client(api, retries=0)
    with pytest.raises(ApiError.NotFound):
        client.get("j_1")
