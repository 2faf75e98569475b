"""The crash matrix's bounded slice (the whole of it: `make crash-matrix`, docs/crash-matrix.md):
for each kind, its job's worker calls recorded once, then a quarter of the crash points (every
fourth, always the first and the last) — the worker killed there,
the system recovering, and every guarantee of tests/support/crash_matrix.py checked.

The workflow kinds (a fan-out, a signal by its owner or its callback) make many more store
calls than a one-job kind: `make test` crashes them after each of their commits (a transaction
or a put whose answer is lost: the spawn, a child's end with its fan-in, the signal stored) and
at the first and last call; their quarter is `long` (`make test-long`), decision CI14."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from _pytest.mark import ParameterSet

from tests.support.crash_kinds import scenarios
from tests.support.crash_matrix import Point, Scenario, record, run
from tests.support.crash_workflows import faulted_scenarios, workflow_scenarios

SCENARIOS = {scenario.name: scenario for scenario in scenarios()}
WORKFLOWS = {scenario.name for scenario in workflow_scenarios()}
COMMITS = ("dynamodb.TransactWriteItems", "dynamodb.PutItem")


def sample(points: list[Point]) -> list[Point]:
    chosen = points[::4]
    for end in (points[0], points[-1]):
        if end not in chosen:
            chosen.append(end)
    return chosen


def after_commits(points: list[Point]) -> list[Point]:
    """A crash after each commit (the write done, its answer lost), and at the first and the
    last call."""
    chosen = [p for p in points if p.operation in COMMITS and not p.before]
    return [points[0], *chosen, *([points[-1]] if points[-1] not in chosen else [])]


def cells() -> list[ParameterSet]:
    found = []
    for name in sorted(SCENARIOS):
        if name in WORKFLOWS:
            found.append(pytest.param(name, after_commits, id=f"{name}, after each commit"))
            found.append(pytest.param(name, sample, id=name, marks=pytest.mark.long))
        else:
            found.append(pytest.param(name, sample, id=name))
    return found


@pytest.mark.parametrize(("name", "chooser"), cells())
def test_a_crash_at_any_store_call_is_recovered(
    name: str, chooser: Callable[[list[Point]], list[Point]]
) -> None:
    logging.disable(logging.WARNING)
    try:
        scenario = SCENARIOS[name]
        points, clean = record(scenario)
        assert clean.ok and clean.state == "succeeded", clean.problems
        assert points, "the job made no store call"
        chosen = chooser(points)
        assert len(chosen) >= 3, f"only {chosen} of {len(points)} crash points chosen"
        failed = [
            f"{outcome.point}: {'; '.join(outcome.problems)}"
            for outcome in (run(scenario, point)[0] for point in chosen)
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
