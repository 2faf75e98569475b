"""What checkov asked of template.yaml and the template keeps, checked without checkov: reserved
concurrency on every function, encryption on every queue, retention and an optional key on every
log group, an optional customer-managed key for the table, and a written reason for every check
skipped (docs/decisions.md, "checkov")."""

from __future__ import annotations

import re
import shlex
import tomllib
import warnings
from typing import Any

import boto3

from leasehold_dev.local.stack import STACK_NAME, create_stack
from tests.support.resources import ROOT, TEMPLATE, template

NO_VALUE = {"Ref": "AWS::NoValue"}
ACCOUNT_CONCURRENCY = 2000
"""The account the production profile is sized for (1,000 jobs a second: docs/capacity.md; a
new account's 10 can reserve nothing, so the template's defaults reserve nothing: decision AW1,
tests/integration/test_template_account.py)."""
UNRESERVED_MINIMUM = 100
"""Lambda refuses a reservation that leaves fewer unreserved executions than this."""
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555"


def _of_type(kind: str) -> dict[str, dict[str, Any]]:
    return {n: r for n, r in template()["Resources"].items() if r["Type"] == kind}


def _production() -> dict[str, int]:
    """samconfig.toml's production profile's numeric overrides (`sam deploy --config-env
    production`): where the reservations checkov asks for are made."""
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    given = config["production"]["deploy"]["parameters"]["parameter_overrides"]
    pairs = (item.partition("=")[::2] for item in shlex.split(given))
    return {name: int(value) for name, value in pairs if value.isdigit()}


def _optional(condition: str, parameter: str) -> dict[str, Any]:
    """`!If [condition, !Ref parameter, !Ref AWS::NoValue]`."""
    return {"Fn::If": [condition, {"Ref": parameter}, NO_VALUE]}


def test_every_function_reserves_concurrency_from_its_own_parameter() -> None:
    tpl = template()
    functions = _of_type("AWS::Serverless::Function")
    assert len(functions) == 4
    reserved = 0
    for name, function in functions.items():
        parameter = "ReservedConcurrency" + name.removesuffix("Function")
        condition = "Reserves" + name.removesuffix("Function")
        assert function["Properties"]["ReservedConcurrentExecutions"] == _optional(
            condition, parameter
        ), name
        # 0 = none reserved: the condition drops the property. The 0 is a number: CloudFormation
        # compares a Number parameter with it as strings, moto as numbers (a "0" never matches).
        assert tpl["Conditions"][condition] == {
            "Fn::Not": [{"Fn::Equals": [{"Ref": parameter}, 0]}]
        }
        spec = tpl["Parameters"][parameter]
        assert spec["Type"] == "Number" and spec["MinValue"] == 0, parameter
        assert spec["Default"] == 0, parameter  # a fresh account can reserve nothing (AW1)
        if name == "RelayFunction":  # a reservation would cap it below its shards (QS2)
            assert _production()[parameter] == 0
        else:
            assert _production()[parameter] >= 1, parameter  # the production profile reserves
        reserved += _production()[parameter]
    assert ACCOUNT_CONCURRENCY - reserved >= UNRESERVED_MINIMUM


def test_the_workers_reservation_covers_its_queues_maximum_concurrency() -> None:
    # Below the event sources' MaximumConcurrency Lambda throttles the pollers' invocations and
    # the wake-ups return to their queue, a receive spent each time, towards the DLQ; and one
    # priority's pollers could take the concurrency another's need (decision F4).
    tpl = template()
    worker = _of_type("AWS::Serverless::Function")["WorkerFunction"]["Properties"]
    sqs_events = {
        name: event["Properties"]
        for name, event in worker["Events"].items()
        if event["Type"] == "SQS"
    }
    assert {props["Queue"]["Fn::GetAtt"][0] for props in sqs_events.values()} == {
        "WorkQueue",
        "HighPriorityQueue",
        "LowPriorityQueue",
    }
    total = 0
    production_total = 0
    for props in sqs_events.values():
        maximum = props["ScalingConfig"]["MaximumConcurrency"]
        parameter = tpl["Parameters"][maximum["Ref"]]
        assert parameter["MinValue"] >= 2  # Lambda's floor for MaximumConcurrency
        assert parameter["MaxValue"] <= 1000  # and its ceiling: more is another shard
        total += parameter["Default"]
        production_total += _production()[maximum["Ref"]]
    # the normal queue's other shards, each mapped at WorkerConcurrencyNormal (QS1)
    shards = _of_type("AWS::Lambda::EventSourceMapping")
    assert {
        m["Properties"]["ScalingConfig"]["MaximumConcurrency"]["Ref"] for m in shards.values()
    } == {"WorkerConcurrencyNormal"}
    production_total += (_production()["QueueShards"] - 1) * _production()[
        "WorkerConcurrencyNormal"
    ]
    # The defaults reserve none (the pollers share the account's pool, nothing throttles them
    # below it); a reservation, the production profile's, covers the three mappings.
    assert tpl["Parameters"]["ReservedConcurrencyWorker"]["Default"] in (0, *range(total, 1001))
    assert _production()["ReservedConcurrencyWorker"] >= production_total


def test_every_queue_is_encrypted() -> None:
    queues = _of_type("AWS::SQS::Queue")
    assert set(queues) == {
        "WorkQueue",
        "HighPriorityQueue",
        "LowPriorityQueue",
        "DeadLetterQueue",
        "RelayFailureQueue",
        *(f"WorkQueueShard{n}" for n in range(1, 16)),
    }
    for name, queue in queues.items():
        props = queue["Properties"]
        assert props.get("SqsManagedSseEnabled") is True or props.get("KmsMasterKeyId"), name


def test_every_log_group_keeps_14_days_and_takes_the_optional_key() -> None:
    groups = _of_type("AWS::Logs::LogGroup")
    assert len(groups) == 5
    for name, group in groups.items():
        assert group["Properties"]["RetentionInDays"] == 14, name
        assert group["Properties"]["KmsKeyId"] == _optional("HasLogsKey", "LogsKmsKeyArn"), name
    assert template()["Parameters"]["LogsKmsKeyArn"]["Default"] == ""


def test_the_table_is_encrypted_and_takes_the_optional_customer_key() -> None:
    sse = template()["Resources"]["JobsTable"]["Properties"]["SSESpecification"]
    assert sse["SSEEnabled"] is True  # aws/dynamodb without a key of the stack's own
    assert sse["SSEType"] == {"Fn::If": ["HasTableKey", "KMS", NO_VALUE]}
    assert sse["KMSMasterKeyId"] == _optional("HasTableKey", "TableKmsKeyArn")
    assert template()["Parameters"]["TableKmsKeyArn"]["Default"] == ""


def _skips() -> dict[str, list[dict[str, Any]]]:
    return {
        name: resource["Metadata"]["checkov"]["skip"]
        for name, resource in template()["Resources"].items()
        if "checkov" in (resource.get("Metadata") or {})
    }


def test_every_checkov_skip_has_a_reason_here_and_in_the_decisions() -> None:
    text = (ROOT / "docs" / "decisions.md").read_text()
    section = text.split("\n## checkov\n", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\*\*S\d+\. (CKV_AWS_\d+) ", section, flags=re.MULTILINE))
    skipped: set[str] = set()
    for name, skips in _skips().items():
        for skip in skips:
            assert re.fullmatch(r"CKV_AWS_\d+", skip["id"]), (name, skip)
            assert len(skip.get("comment", "")) > 40, (name, skip)
            skipped.add(skip["id"])
    assert skipped == documented
    # Reserved concurrency is a fix, never a skip.
    assert "CKV_AWS_115" not in skipped


def test_the_deploy_guide_names_every_new_parameter() -> None:
    readme = (ROOT / "docs" / "guide" / "deploying.md").read_text()
    for parameter in (
        "ReservedConcurrencyApi",
        "ReservedConcurrencyRelay",
        "ReservedConcurrencyWorker",
        "ReservedConcurrencySweeper",
        "LogsKmsKeyArn",
        "TableKmsKeyArn",
    ):
        assert f"`{parameter}`" in readme, parameter


def _reservations(functions: dict[str, Any]) -> dict[str, int | None]:
    lambda_client = boto3.client("lambda", region_name="us-east-1")
    return {
        name: lambda_client.get_function_concurrency(FunctionName=f.name).get(
            "ReservedConcurrentExecutions"
        )
        for name, f in functions.items()
    }


def test_moto_creates_the_stack_with_its_reservations(moto: None) -> None:
    reservations = {k: str(v) for k, v in _production().items() if k.startswith("Reserved")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = create_stack("", TEMPLATE, reservations)
    assert _reservations(info.functions) == {
        "ApiFunction": _production()["ReservedConcurrencyApi"],
        "RelayFunction": None,  # none: it follows the stream's shards (decision QS2)
        "WorkerFunction": _production()["ReservedConcurrencyWorker"],
        "SweeperFunction": _production()["ReservedConcurrencySweeper"],
    }


def test_moto_creates_the_stack_with_keys_and_nothing_reserved(moto: None) -> None:
    parameters = {
        "LogsKmsKeyArn": KEY_ARN,
        "TableKmsKeyArn": KEY_ARN,
        **{f"ReservedConcurrency{n}": "0" for n in ("Api", "Relay", "Worker", "Sweeper")},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info = create_stack("", TEMPLATE, parameters)
    assert set(_reservations(info.functions).values()) == {None}
    cloudformation = boto3.client("cloudformation", region_name="us-east-1")
    made = {
        r["LogicalResourceId"]
        for r in cloudformation.list_stack_resources(StackName=STACK_NAME)["StackResourceSummaries"]
    }
    assert "TableKeyUsePolicy" in made
