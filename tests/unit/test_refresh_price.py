"""The console's refresh interval is priced (issue 34 item 5, decision OS4): the overview's
period is one the summary bench prices, and the docs' "$ a month per open tab" is the bench's
figure for it at the template's 64 index shards — an interval changed in one place fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from bench.ops_summary import MONTH_SECONDS, POLL_SECONDS

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
OVERVIEW = ROOT / "src" / "leasehold" / "console" / "static" / "overview.js"


def _interval_seconds() -> int:
    match = re.search(r"export const OVERVIEW_REFRESH_MS = (\d+);", OVERVIEW.read_text())
    assert match, "overview.js no longer names OVERVIEW_REFRESH_MS"
    return int(match.group(1)) // 1000


def test_the_overviews_interval_is_priced_by_the_bench_and_the_docs_quote_it() -> None:
    interval = _interval_seconds()
    assert interval in POLL_SECONDS
    bench = json.loads((ROOT / "bench" / "ops_summary.json").read_text())
    worst = max(bench["runs"], key=lambda run: run["read_units"])  # 64 shards, 1,000 jobs
    assert worst["index_shards"] == 64
    dollars = worst["month_per_tab_usd"][f"every_{interval}_s"]
    refreshes = MONTH_SECONDS // interval
    units = worst["read_units"] * refreshes
    # "cents a month per open tab"
    assert dollars < 1
    said = f"${dollars:.2f} a month"
    arithmetic = f"{worst['read_units']:g} × {refreshes:,} = {units / 1e6:.2f} M read units"
    for doc in (ROOT / "docs" / "guide" / "console.md", ROOT / "docs" / "capacity.md"):
        text = " ".join(doc.read_text().replace("**", "").split())
        assert said in text, (doc, said)
        assert arithmetic in text, (doc, arithmetic)
    assert f"${dollars:.2f}" in OVERVIEW.read_text()  # the code's own comment
