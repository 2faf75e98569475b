"""What an AWS account enforces at deploy, checked here because moto enforces none of it: the
defaults fit a fresh account's 10 concurrent executions, the production profile fits the
account docs/capacity.md assumes, parameters that must agree are refused together (the
template's Rules, which `leasehold local up` evaluates as CloudFormation does), the operators'
pool and the jobs table can be protected, and the stream carries what its readers read."""

from __future__ import annotations

import itertools
import re
import shlex
import tomllib
from dataclasses import replace
from typing import Any

import pytest

from leasehold.handlers.settings import Settings, SettingsError
from leasehold_dev.local.rules import condition_values, evaluate, parameter_values, rule_problems
from leasehold_dev.local.stack import LOCAL_PARAMETERS, StackError, client, create_stack
from leasehold_dev.local.template import translate
from tests.support.resources import ROOT, TEMPLATE, template

pytestmark = pytest.mark.integration

REGION = "us-east-1"
NEW_ACCOUNT_LIMIT = 10
"""A new account's concurrent executions (Lambda quotas: raised with use or on request)."""
UNRESERVED_MINIMUM = 100
"""Lambda refuses a reservation that leaves fewer unreserved executions than this."""
PRODUCTION_ACCOUNT_LIMIT = 2000
"""The account docs/capacity.md sizes the production profile for: 1,000 jobs a second needs
more than Lambda's usual 1,000 (a quota increase)."""
SQS_MAPPING_MINIMUM = 2
"""An SQS event source mapping's smallest MaximumConcurrency."""


def _translated() -> dict[str, Any]:
    return translate(template(), REGION)


def _deployed(values: dict[str, str]) -> tuple[dict[str, int], dict[str, int]]:
    """From the template as the local stack translates it: each function's reserved
    concurrency (absent: none) and each SQS mapping's MaximumConcurrency, with `values` (a
    resource whose Condition is false is not made: the normal queue's other shards)."""
    translated = _translated()
    conditions = condition_values(translated, values)
    reserved: dict[str, int] = {}
    mappings: dict[str, int] = {}
    for logical_id, resource in translated["Resources"].items():
        if "Condition" in resource and not conditions[resource["Condition"]]:
            continue
        props = resource.get("Properties") or {}
        if resource["Type"] == "AWS::Lambda::Function":
            given = evaluate(props.get("ReservedConcurrentExecutions"), values, conditions.get)
            if given is not None:
                reserved[logical_id] = int(given)
        if resource["Type"] == "AWS::Lambda::EventSourceMapping" and "ScalingConfig" in props:
            scaling = evaluate(props["ScalingConfig"], values, conditions.get)
            mappings[logical_id] = int(scaling["MaximumConcurrency"])
    return reserved, mappings


def _production_overrides() -> dict[str, str]:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    overrides = config["production"]["deploy"]["parameters"]["parameter_overrides"]
    return dict(item.partition("=")[::2] for item in shlex.split(overrides))


def _reservable(limit: int) -> int:
    return max(0, limit - UNRESERVED_MINIMUM)


# ----------------------------------------------------------------------------- concurrency


def test_the_defaults_deploy_on_a_fresh_account_of_10_executions() -> None:
    # Given the template's defaults, translated as the local stack translates them
    reserved, mappings = _deployed(parameter_values(template(), {}))
    # Then nothing is reserved (Lambda keeps 100 unreserved: an account of 10 can reserve none)
    assert sum(reserved.values()) <= _reservable(NEW_ACCOUNT_LIMIT), reserved
    # and the worker's three queues together run at most the account's 10 at once
    assert len(mappings) == 3
    assert all(m >= SQS_MAPPING_MINIMUM for m in mappings.values())
    assert sum(mappings.values()) <= NEW_ACCOUNT_LIMIT, mappings
    # leaving some of the 10 to the API, the relay and the sweeper (docs/capacity.md)
    assert NEW_ACCOUNT_LIMIT - sum(mappings.values()) >= 3


def test_the_production_profile_fits_the_account_capacity_md_assumes() -> None:
    # Given samconfig.toml's production profile over the defaults
    overrides = _production_overrides()
    values = parameter_values(template(), overrides)
    reserved, mappings = _deployed(values)
    # Then every function but the relay is reserved (a reservation caps it too, and the relay
    # must follow the stream's shards: decision QS2), and the reservations leave Lambda its 100
    assert set(reserved) == {"ApiFunction", "WorkerFunction", "SweeperFunction"}
    assert sum(reserved.values()) <= _reservable(PRODUCTION_ACCOUNT_LIMIT), reserved
    # and the worker's reservation covers every queue's pollers: high, low and each normal shard
    assert len(mappings) == 2 + int(values["QueueShards"]), mappings
    assert reserved["WorkerFunction"] >= sum(mappings.values()), (reserved, mappings)
    # and the operators are protected, the parameters agree
    assert values["OperatorMfa"] == "ON"
    assert values["DeletionProtection"] == "protected"
    assert rule_problems(template(), values) == []
    # and docs/capacity.md states the account and the figures the profile uses
    capacity = (ROOT / "docs" / "capacity.md").read_text()
    assert f"{PRODUCTION_ACCOUNT_LIMIT:,}" in capacity
    for name in (
        "ReservedConcurrencyApi",
        "ReservedConcurrencyRelay",
        "ReservedConcurrencyWorker",
        "ReservedConcurrencySweeper",
        "WorkerConcurrencyHigh",
        "WorkerConcurrencyNormal",
        "WorkerConcurrencyLow",
        "QueueShards",
        "RelayParallelization",
        "ApiThrottlingRateLimit",
    ):
        assert re.search(rf"`{name}`[^|\n]*\|[^|\n]*\b{overrides[name]}\b", capacity), name


def test_the_defaults_create_no_reservation_in_the_local_stack(moto: None) -> None:
    # Given the local stack made from the template with its concurrency defaults
    info = create_stack("", TEMPLATE)
    lam = client("lambda", "")
    # Then no function has reserved concurrency, and the mappings' caps sum to at most 10
    for function in info.functions.values():
        assert "ReservedConcurrentExecutions" not in lam.get_function_concurrency(
            FunctionName=function.name
        )
    caps = [
        m["ScalingConfig"]["MaximumConcurrency"]
        for m in lam.list_event_source_mappings()["EventSourceMappings"]
        if m.get("ScalingConfig")
    ]
    assert len(caps) == 3 and sum(caps) <= NEW_ACCOUNT_LIMIT


# ----------------------------------------------------------------------------- agreement


def _settings(timeout: str, lease: str, step: str, visibility: str) -> Settings:
    base = Settings(
        table_name="t",
        queue_url="q",
        dlq_url="d",
        lease_seconds=1,
        default_max_attempts=3,
        backoff_base_ms=1,
        backoff_cap_ms=1,
        user_concurrency_limit=0,
        slot_wait_seconds=1,
        sweep_active_rate=1,
        sweep_due_rate=1,
        sweep_schedule_rate=1,
        sweep_segments=1,
        sweep_interval_seconds=60,
        lost_wakeup_grace_seconds=1,
        worker_timeout_seconds=1,
        max_step_seconds=1,
        visibility_timeout_seconds=1,
        metrics_namespace="n",
    )
    return replace(
        base,
        worker_timeout_seconds=int(timeout),
        lease_seconds=int(lease),
        max_step_seconds=int(step),
        visibility_timeout_seconds=int(visibility),
    )


def test_the_rules_refuse_exactly_what_the_functions_settings_check_refuses() -> None:
    # Given every combination of the four parameters that must agree that their AllowedValues
    # let through one by one
    params = template()["Parameters"]
    names = ("WorkerTimeoutSeconds", "LeaseSeconds", "MaxStepSeconds", "QueueVisibilitySeconds")
    allowed = [[str(v) for v in params[name]["AllowedValues"]] for name in names]
    defaults = parameter_values(template(), {})
    accepted = 0
    for combination in itertools.product(*allowed):
        values = {**defaults, **dict(zip(names, combination, strict=True))}
        # When CloudFormation evaluates the Rules and a function checks its settings
        refused = rule_problems(template(), values) != []
        try:
            _settings(*combination).check()
            fails_at_cold_start = False
        except SettingsError:
            fails_at_cold_start = True
        # Then a stack deploys exactly when its functions would start
        assert refused == fails_at_cold_start, combination
        accepted += not refused
    assert accepted > 0


def test_the_defaults_and_the_local_stacks_parameters_agree() -> None:
    assert rule_problems(template(), parameter_values(template(), {})) == []
    assert rule_problems(template(), parameter_values(template(), LOCAL_PARAMETERS)) == []


def test_raising_the_timeout_alone_is_refused_with_what_to_raise() -> None:
    values = parameter_values(template(), {"WorkerTimeoutSeconds": "300"})
    assert rule_problems(template(), values) == [
        "WorkerTimeout300: With WorkerTimeoutSeconds 300, QueueVisibilitySeconds must be at "
        "least 1800: 6 x the worker's timeout."
    ]


def test_the_worker_mappings_have_no_batching_window() -> None:
    """Lambda's rule is visibility >= 6 x timeout + MaximumBatchingWindowInSeconds: the Rules
    check the first part only, which is the whole rule while no mapping has a window."""
    worker = template()["Resources"]["WorkerFunction"]["Properties"]["Events"]
    for event in worker.values():
        assert "MaximumBatchingWindowInSeconds" not in event["Properties"]
    # and a batch of more than 10 (which needs a window) is refused
    assert int(template()["Parameters"]["WorkerBatchSize"]["MaxValue"]) <= 10


def test_the_local_stack_refuses_parameters_that_do_not_agree(moto: None) -> None:
    # Given the local stack's own timeout (30 s) and a deployed stack's lease (60 s)
    # When it is made, Then it is refused before anything is created, naming the rule
    with pytest.raises(StackError, match="LeaseSeconds must be at most 20"):
        create_stack("", TEMPLATE, {"LeaseSeconds": "60"})
    assert client("cloudformation", "").describe_stacks()["Stacks"] == []


# ----------------------------------------------------------------------------- protection


def test_operator_mfa_is_a_parameter_of_the_user_pool() -> None:
    translated = _translated()
    pool = translated["Resources"]["UserPool"]["Properties"]
    for mfa, enabled in (
        ("OFF", None),
        ("OPTIONAL", ["SOFTWARE_TOKEN_MFA"]),
        ("ON", ["SOFTWARE_TOKEN_MFA"]),
    ):
        values = parameter_values(translated, {"OperatorMfa": mfa})
        conditions = condition_values(translated, values)
        assert evaluate(pool["MfaConfiguration"], values, conditions.get) == mfa
        assert evaluate(pool["EnabledMfas"], values, conditions.get) == enabled
    assert translated["Parameters"]["OperatorMfa"]["Default"] == "OFF"


def test_deletion_protection_guards_the_table_and_the_pool(moto: None) -> None:
    # Given the local stack made with DeletionProtection=protected
    info = create_stack("", TEMPLATE, {"DeletionProtection": "protected"})
    table = info.outputs["JobsTable"]
    dynamodb = client("dynamodb", "")
    # Then the table says so, and refuses to be deleted (as CloudFormation's delete would be)
    assert dynamodb.describe_table(TableName=table)["Table"]["DeletionProtectionEnabled"] is True
    with pytest.raises(dynamodb.exceptions.ClientError, match="DeletionProtectionEnabled"):
        dynamodb.delete_table(TableName=table)
    translated = _translated()
    values = parameter_values(translated, {"DeletionProtection": "protected"})
    conditions = condition_values(translated, values)
    pool = translated["Resources"]["UserPool"]["Properties"]
    assert evaluate(pool["DeletionProtection"], values, conditions.get) == "ACTIVE"


# ----------------------------------------------------------------------------- the stream


def test_the_stream_carries_the_images_its_readers_read() -> None:
    # Given every reader of stream records in the code (the relay, the local pumps, the
    # testing package, the applications and the test support)
    readers: dict[str, set[str]] = {"NewImage": set(), "OldImage": set()}
    for folder in ("src", "tests/support"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            for image, files in readers.items():
                if f'"{image}"' in text or f"'{image}'" in text:
                    files.add(str(path.relative_to(ROOT)))
    assert "src/leasehold/service/relay.py" in readers["NewImage"]
    # Then the table's stream carries the new image, and the old one only if someone reads it
    view = template()["Resources"]["JobsTable"]["Properties"]["StreamSpecification"]
    wanted = "NEW_AND_OLD_IMAGES" if readers["OldImage"] else "NEW_IMAGE"
    assert view["StreamViewType"] == wanted, readers
