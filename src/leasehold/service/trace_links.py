"""Where an operator sees a job's trace (the operator view's `trace_url`, decision TR7).

- **Deployed, `Tracing: Active`**: X-Ray records Lambda's own traces, annotated with the job's
  W3C trace id (decision TR6); the job's spans are not exported to X-Ray, so the id converted
  to X-Ray's form (`1-<8 hex>-<24 hex>`) names no X-Ray trace. The link is X-Ray's trace list
  filtered by `annotation.leasehold_trace_id = "<trace id>"` (the console's documented deep
  link: `xray/home?region=…#/traces?filter=…&timeRange=start~end`, at most 6 hours, UTC),
  over the hours in which the job last moved.
- **Locally, `leasehold local up --traces FILE`**: the local gateway's operator-only
  `GET /local/traces/{trace_id}` answers that trace's spans from the file (the console draws
  them as a tree).
- Otherwise (tracing off, or a local stack without a trace file): no link; the logs carry the
  trace id."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, TypedDict
from urllib.parse import quote

LOCAL_TRACE_ROUTE = "/local/traces/"
"""The local gateway's route for one trace's spans (`/local/traces/<32 hex>`): local only, like
`/openapi.yaml`, never an API Gateway route."""
TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
XRAY_WINDOW_MS = 6 * 3600 * 1000
"""The X-Ray console's longest time range (6 hours)."""
XRAY_RETENTION_MS = 30 * 24 * 3600 * 1000
"""X-Ray keeps a trace 30 days after it was recorded: an older job's link would find nothing."""
MARGIN_MS = 5 * 60 * 1000
"""Around the job's times: an invocation starts before its write and may end after it."""
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")


class TraceLink(TypedDict):
    """The operator view's link to a job's trace."""

    trace_url: str
    trace_source: Literal["xray", "trace_file"]


def console_host(region: str) -> str:
    """The AWS console's host for `region`'s partition."""
    if region.startswith("cn-"):
        return "console.amazonaws.cn"
    if region.startswith("us-gov-"):
        return "console.amazonaws-us-gov.com"
    return "console.aws.amazon.com"


def _xray_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


def xray_url(region: str, trace_id: str, created_at: int, updated_at: int) -> str:
    """X-Ray's list of the traces annotated with the job's trace id, in `region`, over the job's
    life up to its last update (its last 6 hours for a longer one)."""
    end = updated_at + MARGIN_MS
    start = max(created_at - MARGIN_MS, end - XRAY_WINDOW_MS)
    expression = f'annotation.leasehold_trace_id = "{trace_id}"'
    return (
        f"https://{console_host(region)}/xray/home?region={region}#/traces"
        f"?filter={quote(expression, safe='')}&timeRange={_xray_time(start)}~{_xray_time(end)}"
    )


@dataclass(frozen=True)
class TraceLinks:
    """How this deployment links a trace: `xray_region` when X-Ray records its functions,
    `trace_file` when the local stack writes one (`local up --traces`)."""

    xray_region: str = ""
    trace_file: bool = False

    def link(
        self, trace_id: str | None, *, created_at: int, updated_at: int, now: int
    ) -> TraceLink | None:
        """The link for a job's trace; None when it has no trace id or nothing records it."""
        if trace_id is None or not TRACE_ID.fullmatch(trace_id):
            return None
        if self.trace_file:
            return {"trace_url": f"{LOCAL_TRACE_ROUTE}{trace_id}", "trace_source": "trace_file"}
        if _REGION.fullmatch(self.xray_region) and now - updated_at <= XRAY_RETENTION_MS:
            url = xray_url(self.xray_region, trace_id, created_at, updated_at)
            return {"trace_url": url, "trace_source": "xray"}
        return None


__all__ = ["LOCAL_TRACE_ROUTE", "TRACE_ID", "TraceLink", "TraceLinks", "console_host", "xray_url"]
