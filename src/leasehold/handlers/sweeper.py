"""Sweeper Lambda (schedule): rescue expired leases and lost wake-ups; end jobs past deadline;
bring delayed jobs due; delete the blobs of jobs whose item is gone (LD11); fire the schedules
whose tick has come (decision FS5). Each pass reads at its rate from where the last run stopped
(decisions SP1–SP4); the segments run in threads, or one segment per invocation when the event
names it (`{"segment": k, "segments": S}`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from leasehold.domain.errors import StoreUnavailableError
from leasehold.domain.types import JsonObject
from leasehold.handlers.wiring import function_handler, runtime
from leasehold.service.passes import Segment
from leasehold.service.sweeper import sweep_passes
from leasehold.service.tracing import span_under
from leasehold.store.sharded import record_shard_count

logger = Logger(service="leasehold")
_declared_synced: list[bool] = []
"""Whether this process made the kinds' declared schedules stored (once per cold start)."""


class SweepEventError(ValueError):
    """An event that names a segment the deployment does not have."""


def event_segment(event: JsonObject, segments: int) -> Segment | None:
    """The one segment an event asks for (None: every segment, the schedule's plain event). An
    event whose count is not the deployment's `SweepSegments` is refused: its shards would
    overlap another segment's."""
    if not isinstance(event, dict) or "segment" not in event:
        return None
    index, count = event.get("segment"), event.get("segments", segments)
    if not isinstance(index, int) or isinstance(index, bool) or count != segments:
        raise SweepEventError(
            f"segment {index!r} of {count!r}: this deployment sweeps {segments} segment(s); "
            f"give an integer segment below {segments} and segments={segments}"
        )
    try:
        return Segment(index, segments)
    except ValueError as exc:
        raise SweepEventError(str(exc)) from exc


@function_handler(logger)
def handler(event: JsonObject, context: LambdaContext) -> JsonObject:
    runtime()  # the engine first: a trace file's provider is installed with it
    # One span a run, the root of a trace of its own; a tick's job links to it (decision TR1).
    with span_under(
        "leasehold.sweep", None, new_trace=True, attributes={"leasehold.function": "sweeper"}
    ):
        return _sweep(event, context)


def _sweep(event: JsonObject, context: LambdaContext) -> JsonObject:
    rt = runtime()
    # IndexShards recorded as the highest used, or a lowered count refused (decision SH3)
    record_shard_count(rt.stores.table)
    settings = rt.sweep_settings()
    only = event_segment(event, settings.segments)
    time_left: Callable[[], int] | None = getattr(context, "get_remaining_time_in_millis", None)
    result = sweep_passes(
        rt.stores, rt.clock, settings, rt.telemetry, rt.kinds, segment=only, time_left=time_left
    )
    schedules = rt.schedules()
    synced: dict[str, int] = {}
    if not _declared_synced:
        try:
            synced = schedules.sync_declared()
            _declared_synced.append(True)
        except StoreUnavailableError as unavailable:  # the next run tries again
            logger.warning("declared schedules not synced", extra={"detail": str(unavailable)})
    parts = [only] if only else [Segment(k, settings.segments) for k in range(settings.segments)]
    budget = settings.budget(settings.schedule_rate)

    def fire(part: Segment) -> tuple[dict[str, int], Counter[str]]:
        walked: Counter[str] = Counter()
        report = schedules.fire_due(
            limit=budget, segment=part, time_left=time_left, progress=walked
        )
        return report, walked

    fired: Counter[str] = Counter()
    progress = Counter(result.progress)
    with ThreadPoolExecutor(max_workers=len(parts)) as pool:
        for report, walked in pool.map(fire, parts):
            fired.update(report)
            progress.update(walked)
    return {**result.report, **synced, **fired, "passes": dict(+progress)}
