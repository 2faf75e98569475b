"""One trace per job on the embedded local stack: `local up --traces FILE` writes every span of
every function as OTLP JSON lines, and one job — across a retry — is one trace from its
`POST /jobs` to its outcome (docs/trace-walkthrough.md, decisions TR1–TR5); the console's job
page leads an operator to that trace, drawn from the file (decision TR7). One stack serves
every test here (CI has 2 cores): each test follows jobs of its own."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.localstack import LocalStackProcess

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
FLAKY = {
    "kind": "synthetic",
    "payload": {"steps": [{"name": "flaky", "fail_times": 1}, {"name": "after"}]},
}
PLAIN = {"kind": "synthetic", "payload": {"steps": [{"name": "only"}]}}


def read_spans(path: Path) -> list[dict[str, Any]]:
    """Every span in the file: each line one OTLP JSON `ExportTraceServiceRequest`."""
    spans: list[dict[str, Any]] = []
    if not path.exists():
        return spans
    for line in path.read_text().splitlines():
        doc = json.loads(line)
        for resource_spans in doc["resourceSpans"]:
            for scope_spans in resource_spans["scopeSpans"]:
                spans.extend(scope_spans["spans"])
    return spans


def attribute(span: dict[str, Any], key: str) -> Any:
    for entry in span["attributes"]:
        if entry["key"] == key:
            value = entry["value"]
            return value.get("stringValue", value.get("intValue"))
    return None


def of_job(spans: list[dict[str, Any]], job_id: str, name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name and attribute(s, "leasehold.job_id") == job_id]


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalStackProcess, Path]]:
    tmp_path = tmp_path_factory.mktemp("traced")
    traces = tmp_path / "traces.jsonl"
    running = LocalStackProcess(tmp_path, workers=1, extra=("--traces", str(traces)))
    try:
        yield running, traces
    finally:
        running.stop()
    assert running.process.returncode == 0, running.log.read_text()[-2000:]


def test_one_job_across_a_retry_is_one_trace_of_api_relay_and_worker_spans(
    traced: tuple[LocalStackProcess, Path],
) -> None:
    stack, traces = traced
    # Given a job whose first step fails once, submitted under the caller's trace
    status, accepted = stack.request("POST", "/jobs", FLAKY, headers={"traceparent": TRACEPARENT})
    assert status == 202
    job_id = accepted["job_id"]
    # When it runs to its end, over a retry
    view = stack.wait_for(job_id, {"succeeded", "failed", "dead"}, timeout=120)
    assert (view["state"], view["attempts"]) == ("succeeded", 2)
    # Then the job view names the caller's trace
    assert view["trace_id"] == CALLER_TRACE
    # ...and the trace file holds the whole path in that trace: the request's span (a child
    # of the caller's), a relay span per dispatch, a span per attempt under the relay span
    # that sent its message, and a span per step try under its attempt
    deadline = time.monotonic() + 30
    while len(of_job(read_spans(traces), job_id, "leasehold.attempt")) < 2:
        assert time.monotonic() < deadline, "the attempts' spans were never written"
        time.sleep(0.2)
    spans = read_spans(traces)
    in_trace = [s for s in spans if s["traceId"] == CALLER_TRACE]
    (api,) = [s for s in in_trace if s["name"] == "POST /jobs"]
    assert api["parentSpanId"] == CALLER_SPAN and api["kind"] == 2  # SERVER
    assert attribute(api, "leasehold.function") == "api"
    relays = of_job(spans, job_id, "leasehold.relay")
    attempts = of_job(spans, job_id, "leasehold.attempt")
    steps = [s for s in spans if s["name"].startswith("leasehold.step ")]
    steps = [s for s in steps if attribute(s, "leasehold.job_id") == job_id]
    assert {s["traceId"] for s in relays + attempts + steps} == {CALLER_TRACE}
    # every dispatch (accept, retry) is relayed as a child of the job's span, the request's
    assert len(relays) >= 2 and {r["parentSpanId"] for r in relays} == {api["spanId"]}
    # each attempt's parent is a relay span: the message carried the relay's context
    relay_ids = {r["spanId"] for r in relays}
    assert all(a["parentSpanId"] in relay_ids for a in attempts), (attempts, relay_ids)
    assert sorted(
        (attribute(a, "leasehold.attempt"), attribute(a, "leasehold.epoch")) for a in attempts
    ) == [("1", "1"), ("2", "2")]
    assert {attribute(a, "leasehold.function") for a in attempts} == {"worker"}
    by_attempt = {a["spanId"]: attribute(a, "leasehold.attempt") for a in attempts}
    tries = sorted((by_attempt[s["parentSpanId"]], s["name"]) for s in steps)
    assert tries == [
        ("1", "leasehold.step flaky"),
        ("2", "leasehold.step after"),
        ("2", "leasehold.step flaky"),
    ]
    for span in [api, *relays, *attempts, *steps]:
        assert int(span["endTimeUnixNano"]) >= int(span["startTimeUnixNano"]) > 0
    # and the sweeper's runs are spans of the same file (each run a trace of its own)
    assert any(attribute(s, "leasehold.function") == "sweeper" for s in spans)


def test_a_job_without_a_valid_traceparent_gets_a_trace_of_its_own(
    traced: tuple[LocalStackProcess, Path],
) -> None:
    stack, traces = traced
    # Given one job submitted without a traceparent and one with a malformed one
    _, plain = stack.request("POST", "/jobs", PLAIN)
    _, malformed = stack.request(
        "POST", "/jobs", PLAIN, headers={"traceparent": f"00-{'z' * 32}-{CALLER_SPAN}-01"}
    )
    # When both have run
    views = [
        stack.wait_for(job["job_id"], {"succeeded", "failed", "dead"}, timeout=60)
        for job in (plain, malformed)
    ]
    # Then each has a new trace id of its own (the malformed header was ignored, not a 400)
    ids = [view["trace_id"] for view in views]
    assert all(re.fullmatch(r"[0-9a-f]{32}", trace_id) for trace_id in ids), ids
    assert len(set(ids)) == 2 and CALLER_TRACE not in ids
    # ...and its request's span is the root of that trace
    deadline = time.monotonic() + 30
    while len({s["traceId"] for s in read_spans(traces) if s["name"] == "leasehold.attempt"}) < 2:
        assert time.monotonic() < deadline, "the attempts' spans were never written"
        time.sleep(0.2)
    spans = read_spans(traces)
    for trace_id in ids:
        roots = [s for s in spans if s["traceId"] == trace_id and "parentSpanId" not in s]
        assert [s["name"] for s in roots] == ["POST /jobs"], roots


def test_the_console_leads_from_a_job_to_its_trace_drawn_from_the_file(
    traced: tuple[LocalStackProcess, Path], browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    from tests.support.browser import sign_in, text_of, wait_until

    stack, traces = traced
    # Given a job that ran to its end over a retry, on a stack started with --traces
    _, accepted = stack.request("POST", "/jobs", FLAKY)
    job_id = accepted["job_id"]
    view = stack.wait_for(job_id, {"succeeded", "failed", "dead"}, timeout=120)
    assert view["state"] == "succeeded"
    deadline = time.monotonic() + 30
    while len(of_job(read_spans(traces), job_id, "leasehold.attempt")) < 2:
        assert time.monotonic() < deadline, "the attempts' spans were never written"
        time.sleep(0.2)
    # When the operator opens its page
    sign_in(browser, stack.url, "ops")
    browser.get(f"{stack.url}/console#/job/{job_id}")
    # Then it names the trace and links to its spans in the file
    wait_until(lambda: text_of(browser, "#trace-id") == view["trace_id"], what="the trace id")
    link = browser.find_element(By.CSS_SELECTOR, "#trace-link")
    assert link.get_attribute("data-source") == "trace_file"
    # When they follow the link
    link.click()
    # Then the trace is drawn as a tree: the request, a relay span per dispatch under it, an
    # attempt under each relay span, the step tries under their attempts
    root = "#spans > li[data-span='POST /jobs'][data-function='api']"
    relays = f"{root} > ul > li[data-span='leasehold.relay'][data-function='relay']"
    attempts = f"{relays} > ul > li[data-span='leasehold.attempt'][data-function='worker']"
    found = wait_until(
        lambda: len(browser.find_elements(By.CSS_SELECTOR, attempts)) == 2, what="the attempts"
    )
    assert found
    assert len(browser.find_elements(By.CSS_SELECTOR, relays)) >= 2
    tries = browser.find_elements(By.CSS_SELECTOR, f"{attempts} > ul > li.mine")
    assert sorted(t.get_attribute("data-span") for t in tries) == [
        "leasehold.step after",
        "leasehold.step flaky",
        "leasehold.step flaky",
    ]
    assert "retry_scheduled" in text_of(browser, attempts) or "succeeded" in text_of(
        browser, attempts
    )
    assert str(traces) in text_of(browser, "#trace-source")
    # And the trace's spans are no one else's to read: a non-operator gets a 403 from the
    # gateway's own route (not in docs/openapi.yaml: no API Gateway route)
    request = urllib.request.Request(
        f"{stack.url}/local/traces/{view['trace_id']}", headers={"X-Demo-User": "alice"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403
