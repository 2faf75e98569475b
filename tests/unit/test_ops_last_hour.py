"""The last hour's figures behind the console's chart (OpsService.summary's `last_hour`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from leasehold.service.ops import BUCKET_MS, CHART_SERIES, HOUR_MS, last_hour
from leasehold.store.history import entry

NOW = 1_800_000_000_000


@dataclass
class _Listed:
    job_id: str
    history: list[dict[str, Any]] = field(default_factory=list)


def test_entries_fall_in_their_five_minute_bucket_and_nothing_outside_the_hour_counts() -> None:
    # Given one job's history: an hour and a bit ago, the hour's first moment, its last minute
    job = _Listed(
        "j_1",
        [
            entry("retry", at=NOW - HOUR_MS - 1, state="queued"),  # before the hour: not counted
            entry("retry", at=NOW - HOUR_MS, state="queued"),  # the first bucket
            entry("stopped", at=NOW - BUCKET_MS - 1, state="dead", reason="attempts_exhausted"),
            entry("replayed", at=NOW - 1000, state="queued", by="ops", note="n"),
            entry("succeeded", at=NOW - 10, state="succeeded"),
            entry("succeeded", at=NOW, state="succeeded"),  # now is past the last bucket
        ],
    )
    # When the hour is counted, the job listed twice (two states' pages may both hold it)
    hour = last_hour([job, job], NOW)
    # Then each entry is in its bucket, once
    buckets = hour["buckets"]
    assert hour["series"] == list(CHART_SERIES) and len(buckets) == 12
    assert buckets[0]["retries"] == 1 and buckets[0]["start"] == "2027-01-15T07:00:00.000Z"
    assert buckets[10]["dead"] == 1
    assert (buckets[11]["operator"], buckets[11]["succeeded"]) == (1, 1)
    assert sum(b[name] for b in buckets for name in CHART_SERIES) == 4


def test_an_operator_act_counts_as_one_even_when_it_names_a_state() -> None:
    # A resolve names the state it set, an operator's cancel its reason: each is an operator act
    job = _Listed(
        "j_2",
        [
            entry("resolved", at=NOW - 5, state="succeeded", by="ops", note="checked"),
            entry("cancelled", at=NOW - 4, state="cancelled", reason="cancelled_by_operator"),
            entry("cancelled", at=NOW - 3, state="cancelled", reason="cancelled_by_user"),
        ],
    )
    last = last_hour([job], NOW)["buckets"][-1]
    assert (last["operator"], last["cancelled"], last["succeeded"]) == (2, 1, 0)
