"""The operator view's link to a job's trace (service/trace_links.py, decision TR7): X-Ray's
trace list filtered by the job's trace id deployed, the local gateway's route locally."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from urllib.parse import unquote

import pytest
from scripts.build_sizes import FUNCTION_ENV

from leasehold.handlers.settings import Settings
from leasehold.service.trace_links import (
    LOCAL_TRACE_ROUTE,
    MARGIN_MS,
    XRAY_RETENTION_MS,
    XRAY_WINDOW_MS,
    TraceLinks,
)

pytestmark = pytest.mark.unit

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CREATED = int(datetime(2026, 12, 3, 22, 0, tzinfo=UTC).timestamp() * 1000)
HOUR = 3600 * 1000


def _window(url: str) -> tuple[int, int]:
    match = re.search(r"timeRange=([0-9T:-]+)~([0-9T:-]+)$", url)
    assert match, url
    start, end = (
        int(datetime.strptime(t, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp() * 1000)
        for t in match.groups()
    )
    return start, end


def test_deployed_the_link_is_xray_filtered_by_the_jobs_trace_id_over_its_life() -> None:
    link = TraceLinks("eu-west-1").link(
        TRACE, created_at=CREATED, updated_at=CREATED + HOUR, now=CREATED + 2 * HOUR
    )
    assert link is not None and link["trace_source"] == "xray"
    url = link["trace_url"]
    assert url.startswith(
        "https://console.aws.amazon.com/xray/home?region=eu-west-1#/traces?filter="
    )
    expression = unquote(url.split("filter=", 1)[1].split("&", 1)[0])
    assert expression == f'annotation.leasehold_trace_id = "{TRACE}"'
    # the window holds the job's accept and its last update, with a margin each side
    assert _window(url) == (CREATED - MARGIN_MS, CREATED + HOUR + MARGIN_MS)


def test_a_job_longer_than_six_hours_links_its_last_six() -> None:
    updated = CREATED + 30 * HOUR
    link = TraceLinks("us-east-1").link(TRACE, created_at=CREATED, updated_at=updated, now=updated)
    assert link is not None
    start, end = _window(link["trace_url"])
    assert end == updated + MARGIN_MS and end - start == XRAY_WINDOW_MS  # the console's most


def test_the_partition_picks_the_console_host() -> None:
    china = TraceLinks("cn-north-1").link(
        TRACE, created_at=CREATED, updated_at=CREATED, now=CREATED
    )
    gov = TraceLinks("us-gov-west-1").link(
        TRACE, created_at=CREATED, updated_at=CREATED, now=CREATED
    )
    assert china is not None and china["trace_url"].startswith("https://console.amazonaws.cn/")
    assert gov is not None and gov["trace_url"].startswith("https://console.amazonaws-us-gov.com/")


def test_no_link_where_nothing_records_the_trace() -> None:
    times = {"created_at": CREATED, "updated_at": CREATED, "now": CREATED}
    assert TraceLinks().link(TRACE, **times) is None  # tracing off, no trace file
    assert TraceLinks("eu-west-1").link(None, **times) is None  # a job from before traces
    assert TraceLinks("not a region").link(TRACE, **times) is None
    assert TraceLinks("eu-west-1").link("Z" * 32, **times) is None
    # X-Ray has deleted a trace after 30 days
    late = {**times, "now": CREATED + XRAY_RETENTION_MS + 1}
    assert TraceLinks("eu-west-1").link(TRACE, **late) is None


def test_locally_with_a_trace_file_the_link_is_the_gateways_route() -> None:
    link = TraceLinks(trace_file=True).link(TRACE, created_at=0, updated_at=0, now=10**13)
    assert link == {"trace_url": f"{LOCAL_TRACE_ROUTE}{TRACE}", "trace_source": "trace_file"}


def test_the_settings_know_the_region_only_where_xray_records() -> None:
    env = {**FUNCTION_ENV, "AWS_REGION": "eu-west-1"}
    assert Settings.from_env(env).xray_region == ""  # outside Lambda
    in_lambda = {**env, "LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "false"}
    assert Settings.from_env(in_lambda).xray_region == "eu-west-1"
    off = {**in_lambda, "POWERTOOLS_TRACE_DISABLED": "true"}  # template `Tracing: PassThrough`
    assert Settings.from_env(off).xray_region == ""
