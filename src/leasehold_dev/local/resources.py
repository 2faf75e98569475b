"""Resources made from template.yaml's own definitions (no second, hand-written copy), fast
enough to create per test or per benchmark in moto's in-process mock. Never imported by a
Lambda handler."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import boto3

from leasehold.store.queue import MAX_QUEUE_SHARDS
from leasehold.testing.iam import Role
from leasehold_dev.local.buckets import apply_bucket_settings
from leasehold_dev.local.roles import function_roles as resolve_roles
from leasehold_dev.local.roles import resource_attributes, shared_translated_template
from leasehold_dev.local.rules import condition_values, evaluate
from leasehold_dev.local.stack import QueueMapping, StreamMapping
from leasehold_dev.local.template import load_template

ROOT = Path(__file__).resolve().parents[3]
TEMPLATE = ROOT / "template.yaml"
REGION = "us-east-1"
DOCUMENTS_BUCKET = "documents"
DATA_BUCKET = "leasehold-data"
"""The data bucket's name in tests (large values, DESIGN §20; the testbed's is the same)."""
"""The documents bucket's name in tests (created in moto by `create_documents_bucket`)."""


@cache
def template() -> dict[str, Any]:
    return load_template(TEMPLATE)


def _resource(logical_id: str) -> dict[str, Any]:
    return template()["Resources"][logical_id]["Properties"]


def parameter_defaults() -> dict[str, str]:
    return {name: str(p.get("Default", "")) for name, p in template()["Parameters"].items()}


def resolved(value: Any) -> Any:
    """A property as deployed with the parameters' defaults (`{"Ref": Param}` → its default)."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return parameter_defaults()[value["Ref"]]
    return value


def create_table(dynamodb: Any, name: str = "jobs") -> dict[str, Any]:
    props = _resource("JobsTable")
    answer = dynamodb.create_table(
        TableName=name,
        BillingMode=props["BillingMode"],
        AttributeDefinitions=props["AttributeDefinitions"],
        KeySchema=props["KeySchema"],
        GlobalSecondaryIndexes=props["GlobalSecondaryIndexes"],
        StreamSpecification={"StreamEnabled": True, **props["StreamSpecification"]},
    )
    return answer["TableDescription"]


def create_queues(sqs: Any, shards: int = 1) -> dict[str, str]:
    """Work queue (and its other `shards - 1` shards, `WorkQueueShard<n>`), the high- and
    low-priority queues (redrive as in the template), DLQ and relay-failure queue; returns
    their URLs (`work`, `work_1`…, `high`, `low`, `dlq`, `relay_failures`)."""
    dlq_props = _resource("DeadLetterQueue")
    dlq = sqs.create_queue(
        QueueName="dlq",
        Attributes={"MessageRetentionPeriod": str(dlq_props["MessageRetentionPeriod"])},
    )["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    urls = {}
    for key, logical_id in (
        ("work", "WorkQueue"),
        *((f"work_{n}", f"WorkQueueShard{n}") for n in range(1, shards)),
        ("high", "HighPriorityQueue"),
        ("low", "LowPriorityQueue"),
    ):
        props = _resource(logical_id)
        urls[key] = sqs.create_queue(
            QueueName=key.replace("_", "-"),
            Attributes={
                "VisibilityTimeout": str(resolved(props["VisibilityTimeout"])),
                "RedrivePolicy": json.dumps(
                    {
                        "deadLetterTargetArn": dlq_arn,
                        "maxReceiveCount": props["RedrivePolicy"]["maxReceiveCount"],
                    }
                ),
            },
        )["QueueUrl"]
    failures = sqs.create_queue(QueueName="relay-failures")["QueueUrl"]
    return {**urls, "dlq": dlq, "relay_failures": failures}


def relay_mapping(stream_arn: str, on_failure_arn: str | None = None) -> StreamMapping:
    event = _resource("RelayFunction")["Events"]["Outbox"]["Properties"]
    return StreamMapping(
        function="RelayFunction",
        stream_arn=stream_arn,
        batch_size=int(resolved(event["BatchSize"])),
        filters=[json.loads(f["Pattern"]) for f in event["FilterCriteria"]["Filters"]],
        report_item_failures="ReportBatchItemFailures" in event["FunctionResponseTypes"],
        max_retries=int(event["MaximumRetryAttempts"]),
        on_failure_arn=on_failure_arn,
    )


def worker_mapping(queue_url: str) -> QueueMapping:
    event = _resource("WorkerFunction")["Events"]["Wakeups"]["Properties"]
    return QueueMapping(
        function="WorkerFunction",
        queue_url=queue_url,
        batch_size=int(resolved(event["BatchSize"])),
        report_item_failures="ReportBatchItemFailures" in event["FunctionResponseTypes"],
    )


def template_environment(table: str, queues: dict[str, str], **overrides: str) -> dict[str, str]:
    """The Globals environment of template.yaml with its parameters at their defaults and the
    resources bound to the test's names (`work_1`… in `queues`: the normal queue's other
    shards, as `QueueShards` 2 or 4 makes them)."""
    tpl = template()
    shards = [queues[f"work_{n}"] for n in range(1, MAX_QUEUE_SHARDS) if queues.get(f"work_{n}")]
    params = {**parameter_defaults(), "QueueShards": str(1 + len(shards))}
    refs = {
        "JobsTable": table,
        "WorkQueue": queues["work"],
        **{f"WorkQueueShard{n}": url for n, url in enumerate(shards, start=1)},
        "HighPriorityQueue": queues.get("high", ""),
        "LowPriorityQueue": queues.get("low", ""),
        "DeadLetterQueue": queues["dlq"],
        "DocumentsBucket": queues.get("documents", DOCUMENTS_BUCKET),
        "DataBucket": queues.get("data", DATA_BUCKET),
        **params,
    }
    conditions = condition_values(tpl, params)
    env = {}
    for name, value in tpl["Globals"]["Function"]["Environment"]["Variables"].items():
        env[name] = _joined(evaluate(value, refs, conditions.get))
    env.update(overrides)
    return env


def _joined(value: Any) -> str:
    """An evaluated environment value: `Fn::Join` of resolved strings joined, else its text."""
    if isinstance(value, dict) and set(value) == {"Fn::Join"}:
        separator, items = value["Fn::Join"]
        return str(separator).join(str(item) for item in items)
    if isinstance(value, dict):
        raise ValueError(f"an environment value not resolved here: {value!r}")
    return str(value)


_ROLES: dict[tuple[tuple[str, str], ...], dict[str, Role]] = {}


def function_roles(
    table: Mapping[str, Any],
    queues: Mapping[str, str],
    bucket: str = DOCUMENTS_BUCKET,
    *,
    edit: Callable[[dict[str, Any]], None] | None = None,
    parameters: Mapping[str, str] | None = None,
) -> dict[str, Role]:
    """Each function's role (`ApiFunction`, `WorkerFunction`, …) from the translated template,
    resolved against a test's table (CreateTable's `TableDescription`), queues (as
    `create_queues` names them) and bucket. `edit(translated)` changes a copy of the template
    first (a test removing an action); without it the answer is cached."""
    physical = {
        "JobsTable": str(table["TableName"]),
        "DocumentsBucket": bucket,
        "DataBucket": queues.get("data", DATA_BUCKET),
        **{
            logical_id: queues[key]
            for key, logical_id in (
                ("work", "WorkQueue"),
                ("high", "HighPriorityQueue"),
                ("low", "LowPriorityQueue"),
                ("dlq", "DeadLetterQueue"),
                ("relay_failures", "RelayFailureQueue"),
            )
            if queues.get(key)
        },
        **{
            f"WorkQueueShard{n}": queues[f"work_{n}"]
            for n in range(1, MAX_QUEUE_SHARDS)
            if queues.get(f"work_{n}")
        },
    }
    shards = sum(1 for n in range(1, MAX_QUEUE_SHARDS) if queues.get(f"work_{n}"))
    parameters = {"QueueShards": str(1 + shards), **(parameters or {})}
    stream = {"JobsTable": {"StreamArn": str(table["LatestStreamArn"])}}
    key = tuple(sorted({**physical, "stream": stream["JobsTable"]["StreamArn"]}.items()))
    key += tuple(sorted((parameters or {}).items()))
    if edit is None and key in _ROLES:
        return _ROLES[key]
    # read, never changed: role_documents copies it before an `edit`
    translated = shared_translated_template(TEMPLATE, REGION)
    attributes = resource_attributes(translated, physical, region=REGION, extra=stream)
    roles = resolve_roles(translated, attributes, parameters=parameters, region=REGION, edit=edit)
    if edit is None:
        _ROLES.clear()  # one set of test resources at a time is what a test uses
        _ROLES[key] = roles
    return roles


def clients() -> tuple[Any, Any]:
    session = boto3.session.Session(region_name=REGION)
    return session.client("dynamodb"), session.client("sqs")


def create_data_bucket(name: str = DATA_BUCKET) -> str:
    """The data bucket (template.yaml's DataBucket) with the template's settings, in moto."""
    s3 = boto3.session.Session(region_name=REGION).client("s3")
    s3.create_bucket(Bucket=name)
    apply_bucket_settings(s3, name, _resource("DataBucket"))
    return name


def create_documents_bucket(s3: Any, name: str = DOCUMENTS_BUCKET) -> str:
    """The documents bucket with the template's encryption, public access block, ownership and
    lifecycle (moto's CloudFormation applies only the encryption; the local stack does the rest
    the same way, see local/stack.py)."""
    s3.create_bucket(Bucket=name)
    apply_bucket_settings(s3, name, _resource("DocumentsBucket"))
    return name
