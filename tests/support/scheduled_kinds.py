"""A user's kinds module that declares a schedule on its kind (named in `LEASEHOLD_KINDS`): the
sweeper creates the schedule at its cold start."""

from __future__ import annotations

from typing import Any

from leasehold import Kind, Schedule, StepContext

nightly = Kind("nightly", schedules=[Schedule("rate(1 hour)", payload={"report": "daily"})])


@nightly.step()
def report(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"report": payload.get("report")}
