"""What `local up` says about its data directory: how much it restored, that it is empty, and —
loudly — that `--fresh` set the old state aside."""

from __future__ import annotations

from pathlib import Path

from leasehold_dev.local.datadir import RestoreSummary


def test_a_restore_says_how_much_came_back_from_where_and_how_fast() -> None:
    said = RestoreSummary(Path(".leasehold/data"), 10_000, 1, 12, 1, 2.06).lines()
    assert said == [
        "  restored 10,000 items in 1 table, 12 documents, 1 charge from .leasehold/data in 2.1 s"
    ]


def test_an_empty_directory_says_there_was_nothing_to_restore() -> None:
    assert RestoreSummary(Path("d"), 0, 0, 0, 0, 0.0).lines() == [
        "  state: d (empty: nothing to restore)"
    ]


def test_fresh_says_it_starts_empty_and_where_the_old_state_went() -> None:
    said = RestoreSummary(Path("d"), 0, 0, 0, 0, 0.0, set_aside_to=Path("d.previous")).lines()
    assert "--fresh: starting EMPTY" in said[0] and "d.previous" in said[0]
