"""The benchmark's what-if pricing (bench/whatif.py) on a hand-made claim, outcome and accept:
each option must change exactly what it says — the lead chooses store changes from these
numbers, so an option that silently prices something else would mislead."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bench.meter import IndexSpec, TableSpec, WriteEvent, price_write
from bench.whatif import (
    OPTIONS,
    apply,
    key_in_job_item,
    one_active_state_key,
    sample_jobs,
    slot_release_outside_outcome,
    slots_outside_transactions,
    wakeup_on_job_stream,
)

TABLE = TableSpec(
    "jobs",
    "pk",
    "sk",
    (
        IndexSpec("by_state", "gsi1pk", "gsi1sk", "KEYS_ONLY"),
        IndexSpec("by_owner", "gsi2pk", "gsi2sk", "INCLUDE", ("state",)),
    ),
)


def job(state: str, **extra: Any) -> dict[str, Any]:
    return {
        "pk": {"S": "JOB#j1"},
        "sk": {"S": "JOB"},
        "gsi1pk": {"S": f"STATE#{state}"},
        "gsi1sk": {"S": "1#j1"},
        "gsi2pk": {"S": "OWNER#t#u"},
        "gsi2sk": {"S": "1#j1"},
        "state": {"S": state},
        **extra,
    }


def event(kind: str, old: Any, new: Any, kinds: tuple[str, ...], request: int) -> WriteEvent:
    key = {"pk": {"S": f"{kind}#j1"}, "sk": {"S": kind}}
    return WriteEvent(
        phase="p", operation="TransactWriteItems", key=key, old=old, new=new,
        transactional=True, failed=False, transaction_kinds=kinds, request=request,
    )  # fmt: skip


SLOT = {"pk": {"S": "SLOTS#t#u"}, "sk": {"S": "SLOTS"}, "holders": {"SS": ["j1"]}}
IDEMP = {"pk": {"S": "IDEMP#t#u#key-1"}, "sk": {"S": "IDEMP"}, "fingerprint": {"S": "f" * 64}}
OUTBOX = {"pk": {"S": "OUTBOX#j1"}, "sk": {"S": "DISPATCH#1"}, "job_id": {"S": "j1"}}

ACCEPT = [
    event("JOB", None, job("queued"), ("JOB", "OUTBOX", "IDEMP"), 1),
    event("OUTBOX", None, OUTBOX, ("JOB", "OUTBOX", "IDEMP"), 1),
    event("IDEMP", None, IDEMP, ("JOB", "OUTBOX", "IDEMP"), 1),
]
CLAIM = [
    event("JOB", job("queued"), job("running"), ("JOB", "SLOTS"), 2),
    event("SLOTS", None, SLOT, ("JOB", "SLOTS"), 2),
]
SUCCEED = [
    event("JOB", job("running"), job("succeeded"), ("JOB", "SLOTS"), 3),
    event("SLOTS", SLOT, {**SLOT, "holders": {"SS": []}}, ("JOB", "SLOTS"), 3),
]
ALL = ACCEPT + CLAIM + SUCCEED


def total(events: list[WriteEvent], table: TableSpec = TABLE) -> int:
    return sum(price_write(table, e).total for e in events)


def test_today_hand_worked() -> None:
    # accept: 3 items x 2 + by_state put 1 + by_owner put 1 = 8
    # claim: job 2 + slot 2 + by_state delete+put 2 + by_owner state 1 = 7; outcome the same
    assert (total(ACCEPT), total(CLAIM), total(SUCCEED)) == (8, 7, 7)


def test_slot_writes_outside_the_transaction_halve_claim_and_outcome_bases() -> None:
    changed = slots_outside_transactions(CLAIM + SUCCEED)
    assert not any(e.transactional for e in changed)
    # job 1 + slot 1 + indexes 3, twice
    assert total(changed) == 10
    # a retry's transaction (job + outbox + slot) keeps the job and the wake-up together
    retry = [
        event("JOB", job("running"), job("queued"), ("JOB", "OUTBOX", "SLOTS"), 4),
        event("OUTBOX", None, OUTBOX, ("JOB", "OUTBOX", "SLOTS"), 4),
        event("SLOTS", SLOT, SLOT, ("JOB", "OUTBOX", "SLOTS"), 4),
    ]
    assert [e.transactional for e in slots_outside_transactions(retry)] == [True, True, False]


def test_a_release_outside_the_outcome_keeps_the_claim_s_transaction() -> None:
    claim = [replace(e, phase="claim") for e in CLAIM]
    outcome = [replace(e, phase="outcome") for e in SUCCEED]
    changed = slot_release_outside_outcome(claim + outcome)
    assert [e.transactional for e in changed] == [True, True, False, False]
    # the claim as today (7); the outcome: job 1 + slot 1 + indexes 3
    assert (total(changed[:2]), total(changed[2:])) == (7, 5)


def test_one_active_key_moves_no_entry_on_claim_and_removes_it_on_success() -> None:
    changed = one_active_state_key(CLAIM + SUCCEED)
    costs = [price_write(TABLE, e).indexes for e in changed]
    assert costs[0] == {"by_owner": 1}  # queued -> running: same by_state key
    assert costs[2] == {"by_state": 1, "by_owner": 1}  # succeeded: the entry goes


def test_the_key_folded_into_the_job_item_drops_an_item_and_grows_the_job() -> None:
    changed = key_in_job_item(ALL)
    assert [e.kind for e in changed].count("IDEMP") == 0
    accept = [e for e in changed if e.request == 1]
    assert all(e.transaction_kinds == ("JOB", "OUTBOX") for e in accept)
    grown = [e for e in changed if e.kind == "JOB"]
    assert all("fingerprint" in (e.new or {}) for e in grown)
    assert all("fingerprint" in (e.old or {}) for e in grown if e.old is not None)


def test_no_outbox_makes_a_keyless_accept_a_single_write() -> None:
    keyless = [
        event("JOB", None, job("queued"), ("JOB", "OUTBOX"), 1),
        event("OUTBOX", None, OUTBOX, ("JOB", "OUTBOX"), 1),
    ]
    (only,) = wakeup_on_job_stream(keyless)
    assert (only.kind, only.transactional) == ("JOB", False)
    assert total([only]) == 3  # 1 + by_state 1 + by_owner 1


def test_options_compose_in_a_fixed_order_whatever_the_order_given() -> None:
    a, _ = apply(list(OPTIONS), ALL, TABLE)
    b, _ = apply(list(reversed(OPTIONS)), ALL, TABLE)
    assert a == b
    # a later option must not put a transaction back that an earlier one took apart
    assert not any(e.transactional for e in a if e.request in (2, 3))


def test_the_search_prices_a_sample_of_whole_jobs() -> None:
    def of_job(n: int) -> list[WriteEvent]:
        out = []
        for e in ALL:
            pk = str(e.key["pk"]["S"]).replace("j1", f"j{n}")
            out.append(replace(e, key={**e.key, "pk": {"S": pk}}, request=e.request + 10 * n))
        return out

    events = of_job(1) + of_job(2) + of_job(3)
    sampled, jobs = sample_jobs(events, 3, 2)
    assert jobs == 2
    assert {e.request // 10 for e in sampled} == {1, 2}
    assert total(sampled) / jobs == total(events) / 3
    # a count that does not match the job items found: nothing is left out
    assert sample_jobs(events, 4, 2) == (events, 4)
