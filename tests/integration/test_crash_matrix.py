"""The crash matrix's bounded slice (the whole of it: `make crash-matrix`, docs/crash-matrix.md):
for each kind, its job's worker calls recorded once, then a quarter of the crash points (every
fourth, always the first and the last) — the worker killed there,
the system recovering, and every guarantee of tests/support/crash_matrix.py checked."""

from __future__ import annotations

import logging

import pytest

from tests.support.crash_kinds import scenarios
from tests.support.crash_matrix import Point, Scenario, record, run
from tests.support.crash_workflows import faulted_scenarios

SCENARIOS = {scenario.name: scenario for scenario in scenarios()}


def sample(points: list[Point]) -> list[Point]:
    chosen = points[::4]
    for end in (points[0], points[-1]):
        if end not in chosen:
            chosen.append(end)
    return chosen


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_crash_at_any_store_call_is_recovered(name: str) -> None:
    logging.disable(logging.WARNING)
    try:
        scenario = SCENARIOS[name]
        points, clean = record(scenario)
        assert clean.ok and clean.state == "succeeded", clean.problems
        assert points, "the job made no store call"
        failed = [
            f"{outcome.point}: {'; '.join(outcome.problems)}"
            for outcome in (run(scenario, point)[0] for point in sample(points))
            if not outcome.ok
        ]
        assert not failed, "\n".join(failed)
    finally:
        logging.disable(logging.NOTSET)


@pytest.mark.parametrize("scenario", faulted_scenarios(), ids=lambda s: s.name)
def test_workflows_hold_under_injected_conflicts_and_throttles(scenario: Scenario) -> None:
    """Spawn, child ends, fan-in, the parent's wake and a signal under TransactionConflicts
    and throttles (store/faults.py): no lost child, no second set, woken once, never stuck."""
    logging.disable(logging.WARNING)
    try:
        outcome, _ = run(scenario, None)
        assert outcome.ok and outcome.state == "succeeded", outcome.problems
    finally:
        logging.disable(logging.NOTSET)
