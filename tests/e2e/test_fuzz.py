"""A bounded `make fuzz` (arch §8): schemathesis against one local stack, from the document the
stack serves at /openapi.yaml, every route, as alice, carol and ops — no server error and no
answer that breaks the document. The full run (the coverage phase too, a larger budget) is
`make fuzz`."""

from __future__ import annotations

from pathlib import Path

from tests.support.contract import contract
from tests.support.fuzz import CHECKS, USERS, fuzz
from tests.support.localstack import LocalStackProcess

SEED = 20261129  # fixed: the same requests on every CI run (`make fuzz` draws a new seed)
ROOT = Path(__file__).resolve().parents[2]
KINDS = "leasehold_apps.synthetic,leasehold_apps.reading_list,leasehold_apps.doc_agent"
HOSTILE = ("raising_view", "garbage_view", "checked")
"""tests/support/contained_kinds.py: a view that raises, a view that returns what no answer can
carry, a check that raises KeyError — mixed into the bodies that name a kind (arch §23)."""


STATEFUL_BUDGET = 100
"""Stateful requests a user's run may send before it ends (at the end of that scenario): the
phase learns links from the answers and ran to 626 requests in one run and 2,312 in another;
bounded, a run is the examples and fuzzing phases (~270 requests) + 3 x (100 + one scenario's
20 steps at most) ≤ 630."""


def test_a_bounded_fuzz_finds_no_server_error_and_no_broken_answer(tmp_path: Path) -> None:
    stack = LocalStackProcess(
        tmp_path, kinds=f"{KINDS},tests.support.contained_kinds", python_path=ROOT
    )
    try:
        report = fuzz(
            stack.url,
            users=USERS,
            max_examples=2,
            seed=SEED,
            phases=("examples", "fuzzing", "stateful"),
            hostile=HOSTILE,
            stateful_budget=STATEFUL_BUDGET,
        )
    finally:
        stack.stop()
    print(report.render())
    assert report.errors == [], report.errors
    # It ran: every route, as every user, a few hundred requests, links followed
    routes = {f"{route.method} {route.path}" for route in contract().routes}
    assert set(report.requests) == routes
    assert set(report.by_user) == set(USERS)
    assert 150 <= report.total <= 640
    assert report.by_phase["stateful"] <= len(USERS) * (STATEFUL_BUDGET + 20)
    assert sum(report.links.values()) >= 5
    assert report.lone_surrogates >= 10  # bodies no store can hold were sent too (a 400 each)
    assert report.hostile_kinds >= 5  # and kinds whose own hooks raise
    # And found nothing
    assert report.server_errors == []
    assert {name: report.failures.get(name, 0) for name in CHECKS} == dict.fromkeys(CHECKS, 0)
    assert sum(report.failures.values()) == 0, report.render()
