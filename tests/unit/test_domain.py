"""Pure rules: the state machine, backoff, leases, validation. No I/O."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasehold import SettingError
from leasehold.domain.clock import ManualClock, iso
from leasehold.domain.errors import ValidationError
from leasehold.domain.job import Owner
from leasehold.domain.options import Submission
from leasehold.domain.policies import LeasePolicy, RetryPolicy, sqs_delay_seconds
from leasehold.domain.states import (
    TERMINAL_STATES,
    TRANSITIONS,
    JobState,
    can_transition,
    is_terminal,
)
from leasehold.handlers.settings import Settings, SettingsError
from leasehold.service.jobs import resolve_spec
from leasehold_apps.reading_list import settings as reading_list
from leasehold_apps.synthetic import synthetic
from leasehold_dev.local.pumps import matches
from leasehold_dev.local.template import Route


def test_every_state_has_a_transition_row_and_a_docstring_owner() -> None:
    assert set(TRANSITIONS) == set(JobState)
    for state in JobState:
        assert state.__doc__ and "Moved out by:" in state.__doc__, state


def test_terminal_states_never_change_except_by_operator_replay() -> None:
    for state in TERMINAL_STATES:
        assert is_terminal(state)
        assert TRANSITIONS[state] <= {JobState.QUEUED}
    assert not can_transition(JobState.SUCCEEDED, JobState.QUEUED)
    assert not can_transition(JobState.CANCELLED, JobState.QUEUED)
    assert not is_terminal(JobState.UNKNOWN)  # an operator must settle it


@given(
    attempt=st.integers(1, 30),
    base=st.integers(1, 10_000),
    cap=st.integers(1, 900_000),
    seed=st.integers(),
)
def test_backoff_is_full_jitter_within_the_capped_exponential(
    attempt: int, base: int, cap: int, seed: int
) -> None:
    delay = RetryPolicy(base_ms=base, cap_ms=cap).delay_ms(attempt, random.Random(seed))
    assert 0 <= delay <= min(cap, base * 2 ** (attempt - 1))


def test_backoff_spreads_retries() -> None:
    policy = RetryPolicy(base_ms=1000, cap_ms=60_000)
    delays = {policy.delay_ms(4, random.Random(seed)) for seed in range(50)}
    assert len(delays) > 40 and max(delays) <= 8000


def test_lease_safety_margin_stops_new_steps_near_expiry() -> None:
    lease = LeasePolicy(lease_ms=10_000, safety_margin_ms=1_000)
    assert lease.may_start_step(now_ms=0, lease_expires_at=10_000, step_duration_ms=5_000)
    assert not lease.may_start_step(now_ms=4_500, lease_expires_at=10_000, step_duration_ms=5_000)


@pytest.mark.parametrize(
    ("now", "due", "expected"), [(0, 0, 0), (0, 1, 1), (0, 30_500, 31), (0, 10**7, 900), (5, 0, 0)]
)
def test_sqs_delay_is_rounded_up_and_capped(now: int, due: int, expected: int) -> None:
    assert sqs_delay_seconds(now, due) == expected


def test_manual_clock_and_iso() -> None:
    clock = ManualClock(0)
    clock.advance(1500)
    assert clock.now_ms() == 1500 and iso(1500) == "1970-01-01T00:00:01.500Z" and iso(None) is None


VALID: dict[str, Any] = {"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        "x",
        {},
        {"kind": 1, "payload": {}},
        {"kind": "synthetic", "payload": []},
        {**VALID, "deadline_seconds": 0},
        {**VALID, "max_attempts": 0},
        {**VALID, "budget": []},
        {**VALID, "budget": {"max_cost": -1}},
        {**VALID, "budget": {"other": 1}},
        {**VALID, "extra": 1},
    ],
)
def test_bad_generic_fields_raise_validation_errors(body: Any) -> None:
    with pytest.raises(ValidationError):
        Submission.from_body(body, known_kinds={"synthetic"})


def test_defaults_and_fingerprint() -> None:
    kind: Any = SimpleNamespace(
        max_payload_bytes=16 * 1024, default_max_attempts=None, default_priority=None
    )
    spec = resolve_spec(kind, Submission.from_body(VALID), default_max_attempts=4)
    assert spec.max_attempts == 4 and spec.deadline_seconds == 3600
    same = resolve_spec(
        kind, Submission.from_body({"payload": {"steps": [{"name": "a"}]}, "kind": "synthetic"}), 4
    )
    assert spec.fingerprint() == same.fingerprint()


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"steps": "x"},
        {"steps": [{}]},
        {"steps": [{"name": ""}]},
        {"steps": [{"name": "a", "fatal": "yes"}]},
        {"steps": [{"name": "a", "fail_times": 11}]},
        {"steps": [{"name": "a", "bogus": 1}]},
        {"steps": [{"name": "a"}], "x": 1},
    ],
)
def test_synthetic_payload_validation(payload: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        synthetic.validate_for(payload, Owner("t", "u"))


def test_synthetic_plan_reads_every_step_field() -> None:
    plan = synthetic.plan(
        {"steps": [{"name": "a", "cost": 3, "duration_ms": 5, "approval": True, "effect": True}]}
    )
    assert (plan[0].cost, plan[0].duration_ms, plan[0].needs_approval, plan[0].has_effect) == (
        3,
        5,
        True,
        True,
    )


def test_a_planned_duration_is_the_steps_timeout_to_the_millisecond() -> None:
    # timeout_seconds is a float: 1.001 s * 1000 is 1000.9999999999999, not 1001
    durations = [1, 999, 1001, 8008, 17999, 59999]
    plan = synthetic.plan({"steps": [{"name": f"s{ms}", "duration_ms": ms} for ms in durations]})
    assert [step.duration_ms for step in plan] == durations


def test_settings_are_strict_about_missing_or_bad_values() -> None:
    with pytest.raises(SettingsError, match="TABLE_NAME"):
        Settings.from_env({})
    numbers = ("LEASE_SECONDS", "MAX_ATTEMPTS", "BACKOFF_BASE_MS", "BACKOFF_CAP_MS")
    numbers += (
        "USER_CONCURRENCY_LIMIT",
        "SLOT_WAIT_SECONDS",
        "SWEEP_ACTIVE_RATE",
        "SWEEP_DUE_RATE",
        "SWEEP_SCHEDULE_RATE",
        "SWEEP_SEGMENTS",
        "LOST_WAKEUP_GRACE_SECONDS",
    )
    env = dict.fromkeys(numbers, "1")
    env |= {
        "LEASEHOLD_KINDS": "leasehold_apps.synthetic",
        "TABLE_NAME": "t",
        "QUEUE_URL": "q",
        "HIGH_QUEUE_URL": "qh",
        "LOW_QUEUE_URL": "ql",
        "QUEUE_SHARD_URLS": "",
        "DLQ_URL": "d",
        "POWERTOOLS_METRICS_NAMESPACE": "n",
        "WORKER_TIMEOUT_SECONDS": "120",
        "MAX_STEP_SECONDS": "60",
        "VISIBILITY_TIMEOUT_SECONDS": "720",
        "TITLE_FETCHER": "live",
        "ENRICHMENT_PROVIDER_CAPABILITY": "none",
        "HIGH_PRIORITY_TENANTS": "",
        "SCHEDULES_PER_OWNER": "0",
        "TENANT_SUBMIT_RATE": "0",
        "SWEEP_SCHEDULE": "rate(1 minute)",
        "INDEX_SHARDS": "64",
        "DATA_BUCKET": "data",
    }
    assert Settings.from_env(env).data_bucket == "data"  # large values go there (LD1)
    assert (
        Settings.from_env(env | {"LEASE_SECONDS": 60}).lease_seconds == 60
    )  # moto's numbers work too
    with pytest.raises(SettingsError, match="not a number"):
        Settings.from_env(env | {"LEASE_SECONDS": "soon"})
    assert Settings.from_env(env).faults == ""  # fault injection is off unless asked for
    assert Settings.from_env(env).index_shards == 64
    for shards in ("0", "257", "-1"):
        with pytest.raises(SettingsError, match="INDEX_SHARDS"):
            Settings.from_env(env | {"INDEX_SHARDS": shards})
    assert Settings.from_env(env | {"INDEX_SHARDS": "256"}).index_shards == 256
    missing = {k: v for k, v in env.items() if k != "INDEX_SHARDS"}
    with pytest.raises(SettingsError, match="INDEX_SHARDS is not set"):
        Settings.from_env(missing)


def test_settings_refuse_a_timeout_lease_and_queue_that_do_not_fit_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = {
        "LEASEHOLD_KINDS": "leasehold_apps.synthetic",
        "TABLE_NAME": "t",
        "QUEUE_URL": "q",
        "HIGH_QUEUE_URL": "qh",
        "LOW_QUEUE_URL": "ql",
        "QUEUE_SHARD_URLS": "",
        "DLQ_URL": "d",
        "POWERTOOLS_METRICS_NAMESPACE": "n",
        "HIGH_PRIORITY_TENANTS": "",
        "SCHEDULES_PER_OWNER": "0",
        "TENANT_SUBMIT_RATE": "0",
        "INDEX_SHARDS": "64",
        "DATA_BUCKET": "data",
        "MAX_ATTEMPTS": "3",
        "BACKOFF_BASE_MS": "1",
        "BACKOFF_CAP_MS": "1",
        "USER_CONCURRENCY_LIMIT": "0",
        "SLOT_WAIT_SECONDS": "1",
        "SWEEP_ACTIVE_RATE": "1",
        "SWEEP_DUE_RATE": "1",
        "SWEEP_SCHEDULE_RATE": "1",
        "SWEEP_SEGMENTS": "1",
        "SWEEP_SCHEDULE": "rate(1 minute)",
        "LOST_WAKEUP_GRACE_SECONDS": "1",
        "LEASE_SECONDS": "60",
        "WORKER_TIMEOUT_SECONDS": "120",
        "MAX_STEP_SECONDS": "60",
        "VISIBILITY_TIMEOUT_SECONDS": "720",
        "TITLE_FETCHER": "fixture",
        "ENRICHMENT_PROVIDER_CAPABILITY": "none",
    }
    assert Settings.from_env(env).worker_timeout_seconds == 120
    # The case: a 60 s timeout with a 60 s lease, or 60 s steps, cannot work on Lambda
    with pytest.raises(SettingsError, match="LEASE_SECONDS"):
        Settings.from_env(
            env | {"WORKER_TIMEOUT_SECONDS": "60", "VISIBILITY_TIMEOUT_SECONDS": "360"}
        )
    with pytest.raises(SettingsError, match="MAX_STEP_SECONDS"):
        Settings.from_env(env | {"MAX_STEP_SECONDS": "118"})
    with pytest.raises(SettingsError, match="6 x WORKER_TIMEOUT_SECONDS"):
        Settings.from_env(env | {"VISIBILITY_TIMEOUT_SECONDS": "360"})
    # The reading list's own setting is refused where it is read, naming it
    monkeypatch.setenv("TITLE_FETCHER", "curl")
    with pytest.raises(SettingError, match="TITLE_FETCHER"):
        reading_list.title_fetcher()


def test_route_matching() -> None:
    route = Route("POST", "/jobs/{job_id}/cancel", "ApiFunction", True)
    assert route.match("POST", "/jobs/j_1/cancel") == {"job_id": "j_1"}
    assert route.match("GET", "/jobs/j_1/cancel") is None
    assert route.match("POST", "/jobs/j_1/cancel/x") is None


def test_filter_pattern_subset() -> None:
    pattern = {
        "eventName": ["INSERT"],
        "dynamodb": {"Keys": {"pk": {"S": [{"prefix": "OUTBOX#"}]}}},
    }
    assert matches(
        pattern, {"eventName": "INSERT", "dynamodb": {"Keys": {"pk": {"S": "OUTBOX#1"}}}}
    )
    assert not matches(
        pattern, {"eventName": "MODIFY", "dynamodb": {"Keys": {"pk": {"S": "OUTBOX#1"}}}}
    )
    assert not matches(
        pattern, {"eventName": "INSERT", "dynamodb": {"Keys": {"pk": {"S": "JOB#1"}}}}
    )
    assert not matches(pattern, {"eventName": "INSERT"})


def test_a_cursor_dynamodb_would_refuse_is_a_400_before_any_query() -> None:
    # moto takes these start keys; DynamoDB answers them with a ValidationException (a 500)
    import base64
    import json

    from leasehold.store.jobs import decode_cursor

    def cursor(**values: object) -> str:
        key = {"pk": {"S": "JOB#j_1"}, "sk": {"S": "JOB"}, "gsi2pk": {"S": "OWNER#t#u"}}
        key["gsi2sk"] = {"S": "0001#j_1"}
        key.update(values)  # type: ignore[arg-type]
        return base64.urlsafe_b64encode(json.dumps(key).encode()).decode()

    def decode(raw: str) -> object:
        return decode_cursor(
            raw, partition_attribute="gsi2pk", partition="OWNER#t#u", sort_attribute="gsi2sk"
        )

    assert decode(cursor()) is not None  # a well-formed one passes
    for bad in (
        {"sk": {"S": ""}},
        {"gsi2sk": {"S": "x" * 1025}},
        {"sk": {"S": "JOB", "N": "1"}},
        {"sk": {"N": "1"}},
        {"pk": {"S": "\udc00"}},
    ):
        with pytest.raises(ValidationError, match="cursor"):
            decode(cursor(**bad))
