"""The template's sharded normal queue and the relay's stream mapping (issue 30 item 3,
decisions QS1, QS2): each shard is the work queue again, with its mapping, its alarm and its
place in every role that names the work queue, made by conditions from `QueueShards`; the
relay's concurrency follows the stream's shards. Checked on the template, on its translation,
and on the embedded local stack (moto's CloudFormation) that builds from it."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.store.queue import MAX_QUEUE_SHARDS
from leasehold_dev.local.rules import condition_values, evaluate, parameter_values
from leasehold_dev.local.stack import client, create_stack
from leasehold_dev.local.template import translate
from tests.support.resources import TEMPLATE, template

pytestmark = pytest.mark.integration

NO_VALUE = {"Ref": "AWS::NoValue"}
LAMBDA_ENVIRONMENT_LIMIT = 4096
"""Lambda's limit on a function's environment variables: 4 KB, names and values together."""


def _resources() -> dict[str, Any]:
    return dict(template()["Resources"])


def _condition(shard: int) -> str:
    """The condition that makes WorkQueueShard<shard>: at least shard + 1 normal queues."""
    at_least = 2
    while at_least <= shard:
        at_least *= 2
    return f"QueueShards{at_least}"


def _shards() -> range:
    return range(1, MAX_QUEUE_SHARDS)


def test_queue_shards_takes_the_counts_the_conditions_make() -> None:
    spec = template()["Parameters"]["QueueShards"]
    assert spec["AllowedValues"] == [1, 2, 4, 8, 16]
    assert spec["Default"] == 1  # a fresh account: one normal queue (AW1)
    assert max(spec["AllowedValues"]) == MAX_QUEUE_SHARDS


def test_each_shard_is_the_work_queue_again_with_its_mapping_and_alarm() -> None:
    resources = _resources()
    work = resources["WorkQueue"]
    wakeups = resources["WorkerFunction"]["Properties"]["Events"]["Wakeups"]["Properties"]
    # what the Wakeups event sets, each carried over to every shard's mapping below
    assert set(wakeups) == {"Queue", "BatchSize", "FunctionResponseTypes", "ScalingConfig"}
    age = resources["OldestMessageAgeAlarm"]["Properties"]
    shard_ids = {name for name in resources if "Shard" in name}
    expected_ids = set()
    for n in _shards():
        queue, mapping, alarm = (
            f"WorkQueueShard{n}",
            f"WorkerWakeupsShard{n}",
            f"OldestMessageAgeAlarmShard{n}",
        )
        expected_ids |= {queue, mapping, alarm}
        condition = _condition(n)
        assert resources[queue]["Condition"] == condition
        assert resources[queue]["Type"] == work["Type"]
        assert resources[queue]["Properties"] == work["Properties"], queue
        assert resources[mapping] == {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Condition": condition,
            "Properties": {
                "FunctionName": {"Ref": "WorkerFunction"},
                "EventSourceArn": {"Fn::GetAtt": [queue, "Arn"]},
                "BatchSize": wakeups["BatchSize"],
                "FunctionResponseTypes": wakeups["FunctionResponseTypes"],
                "ScalingConfig": wakeups["ScalingConfig"],
            },
        }, mapping
        assert resources[alarm]["Condition"] == condition
        props = resources[alarm]["Properties"]
        assert props["Dimensions"] == [
            {"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}
        ]
        drop = {"Dimensions", "AlarmDescription"}
        assert {k: v for k, v in props.items() if k not in drop} == {
            k: v for k, v in age.items() if k not in drop
        }, alarm
    assert shard_ids == expected_ids


def test_every_role_that_names_the_work_queue_names_each_shard_under_its_condition() -> None:
    work = {"Fn::GetAtt": ["WorkQueue", "Arn"]}
    naming = []
    for name, resource in _resources().items():
        if resource["Type"] != "AWS::IAM::Role":
            continue
        for policy in resource["Properties"]["Policies"]:
            for statement in policy["PolicyDocument"]["Statement"]:
                listed = statement["Resource"]
                if not isinstance(listed, list) or work not in listed:
                    continue
                naming.append((name, statement["Action"]))
                for n in _shards():
                    arn = {"Fn::GetAtt": [f"WorkQueueShard{n}", "Arn"]}
                    assert {"Fn::If": [_condition(n), arn, NO_VALUE]} in listed, (name, n)
    # the API (queue stats, redrive), the relay (sends) and the worker (polls, hand-offs)
    assert {role for role, _ in naming} == {"ApiRole", "RelayRole", "WorkerRole"}


@pytest.mark.parametrize("shards", [1, 2, 4, 8, 16])
def test_each_count_makes_that_many_queues_mappings_alarms_and_urls(shards: int) -> None:
    translated = translate(template(), "us-east-1")
    values = parameter_values(translated, {"QueueShards": str(shards)})
    conditions = condition_values(translated, values)
    made = [
        name
        for name, resource in translated["Resources"].items()
        if "Shard" in name and conditions[resource.get("Condition", "")]
    ]
    assert sorted(made) == sorted(
        f"{prefix}{n}"
        for prefix in ("WorkQueueShard", "WorkerWakeupsShard", "OldestMessageAgeAlarmShard")
        for n in range(1, shards)
    )
    refs = {**values, **{f"WorkQueueShard{n}": f"url-{n}" for n in _shards()}}
    environment = translated["Resources"]["WorkerFunction"]["Properties"]["Environment"]
    urls = _text(evaluate(environment["Variables"]["QUEUE_SHARD_URLS"], refs, conditions.get))
    assert urls == ",".join(f"url-{n}" for n in range(1, shards))
    output = translated["Outputs"]["QueueShardUrls"]
    assert conditions[output["Condition"]] == (shards > 1)
    if shards > 1:
        assert _text(evaluate(output["Value"], refs, conditions.get)) == urls


def _text(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"Fn::Join"}:
        separator, items = value["Fn::Join"]
        return str(separator).join(items)
    assert isinstance(value, str), value
    return value


def test_sixteen_shards_keep_the_functions_environment_within_lambdas_4_kb() -> None:
    # Given the Globals environment with 16 shards and long real names: a long stack name, a
    # long region, CloudFormation's 12-character suffixes, and a bucket name of 63 characters
    stack = "leasehold-production-eu"
    base = f"https://sqs.ap-southeast-2.amazonaws.com/123456789012/{stack}"

    def url(logical_id: str) -> str:
        return f"{base}-{logical_id}-ABCDEFGHIJKL"

    translated = translate(template(), "us-east-1")
    values = parameter_values(translated, {"QueueShards": "16"})
    conditions = condition_values(translated, values)
    refs = {
        **values,
        **{
            name: url(name)
            for name, resource in translated["Resources"].items()
            if resource["Type"] == "AWS::SQS::Queue"
        },
        "JobsTable": f"{stack}-JobsTable-ABCDEFGHIJKL",
        "DocumentsBucket": "d" * 63,
        "DataBucket": "b" * 63,
    }
    variables = translated["Resources"]["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    environment = {name: _text(evaluate(v, refs, conditions.get)) for name, v in variables.items()}
    assert environment["QUEUE_SHARD_URLS"].count(",") == 14
    size = sum(len(name) + len(value) for name, value in environment.items())
    # Then it fits, with room left for a list of high-priority tenants and planner settings
    print(f"environment with 16 shards: {size} bytes of {LAMBDA_ENVIRONMENT_LIMIT}")
    assert size + 1024 <= LAMBDA_ENVIRONMENT_LIMIT, size


def test_the_relay_follows_the_streams_shards_with_no_reservation_by_default() -> None:
    params = template()["Parameters"]
    spec = params["RelayParallelization"]
    assert (spec["Type"], spec["MinValue"], spec["MaxValue"], spec["Default"]) == (
        "Number",
        1,
        10,
        1,
    )
    assert params["ReservedConcurrencyRelay"]["Default"] == 0
    translated = translate(template(), "us-east-1")
    (stream,) = [
        r["Properties"]
        for r in translated["Resources"].values()
        if r["Type"] == "AWS::Lambda::EventSourceMapping"
        and "Stream" in str(r["Properties"].get("EventSourceArn"))
    ]
    assert stream["ParallelizationFactor"] == {"Ref": "RelayParallelization"}


def test_the_local_stack_makes_maps_and_permits_four_shards(moto: None) -> None:
    # Given the local stack made from the template with QueueShards=4 and RelayParallelization=3
    info = create_stack("", TEMPLATE, {"QueueShards": "4", "RelayParallelization": "3"})
    shards = [info.outputs[f"WorkQueueShard{n}"] for n in (1, 2, 3)]
    assert "WorkQueueShard4" not in info.outputs
    # Then the worker has a mapping on each queue, the normal shards after high, before low
    assert [m.queue_url for m in info.worker_mappings()] == [
        info.outputs["HighPriorityQueue"],
        info.outputs["WorkQueue"],
        *shards,
        info.outputs["LowPriorityQueue"],
    ]
    lam, sqs = client("lambda", ""), client("sqs", "")
    caps = {
        m["EventSourceArn"].rsplit(":", 1)[1]: m
        for m in lam.list_event_source_mappings()["EventSourceMappings"]
    }
    work = sqs.get_queue_attributes(QueueUrl=info.outputs["WorkQueue"], AttributeNames=["All"])
    for url in shards:
        name = url.rsplit("/", 1)[1]
        assert caps[name]["ScalingConfig"] == {"MaximumConcurrency": 2}  # WorkerConcurrencyNormal
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
        for attribute in ("RedrivePolicy", "VisibilityTimeout", "MessageRetentionPeriod"):
            assert attributes["Attributes"][attribute] == work["Attributes"][attribute], attribute
    (stream,) = [m for m in caps.values() if ":dynamodb:" in m["EventSourceArn"]]
    assert stream["ParallelizationFactor"] == 3
    # every function is told the shards, in order
    for function in info.functions.values():
        assert function.environment["QUEUE_SHARD_URLS"] == ",".join(shards)
    # and the roles the local stack judges calls by let the relay send to them, the worker
    # poll them, and nobody else either
    for url in shards:
        arn = f"arn:aws:sqs:us-east-1:123456789012:{url.rsplit('/', 1)[1]}"
        assert info.role("RelayFunction").allows("sqs:SendMessage", arn)
        assert info.role("WorkerFunction").allows("sqs:ReceiveMessage", arn)
        assert info.role("WorkerFunction").allows("sqs:SendMessage", arn)
        assert not info.role("RelayFunction").allows("sqs:ReceiveMessage", arn)
        assert not info.role("SweeperFunction").allows("sqs:SendMessage", arn)
