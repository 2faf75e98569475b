"""The resources a testbed creates on moto — the jobs table, the work queue, its dead-letter
queue and the relay-failure queue — and the deployment settings the functions run with.

There is one definition inside the package (`PACKAGED`), a copy of what leasehold's
template.yaml deploys, so a user's project needs no template to test its kinds. When a template
is at hand (leasehold's own source checkout, `LEASEHOLD_TEMPLATE`, or `template=` given to the
testbed) the definitions are read from it instead: a deployment's own parameter defaults (a
shorter lease, another backoff) are then what the tests run with. leasehold's test suite
checks that the packaged copy and template.yaml say the same
(tests/integration/test_testing_definitions.py)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leasehold.domain.errors import LeaseholdError
from leasehold.handlers.settings import SettingsError, sweep_interval_seconds
from leasehold.testing.packaged_roles import PACKAGED_ROLES

TEMPLATE_ENV = "LEASEHOLD_TEMPLATE"
"""An environment variable naming a SAM template to read the definitions from."""

PACKAGED_NAME = "packaged"
"""`template=` / `LEASEHOLD_TEMPLATE` value that picks the packaged copy even in a checkout."""

SOURCE_TEMPLATE = Path(__file__).resolve().parents[3] / "template.yaml"
"""Where leasehold's template is in a source checkout (absent from an installed package)."""

SETTINGS_FROM_ENVIRONMENT = {
    "LEASE_SECONDS": "lease_seconds",
    "MAX_ATTEMPTS": "max_attempts",
    "BACKOFF_BASE_MS": "backoff_base_ms",
    "BACKOFF_CAP_MS": "backoff_cap_ms",
    "USER_CONCURRENCY_LIMIT": "user_concurrency_limit",
    "SLOT_WAIT_SECONDS": "slot_wait_seconds",
    "SWEEP_ACTIVE_RATE": "sweep_active_rate",
    "SWEEP_DUE_RATE": "sweep_due_rate",
    "SWEEP_SCHEDULE_RATE": "sweep_schedule_rate",
    "SWEEP_SEGMENTS": "sweep_segments",
    "LOST_WAKEUP_GRACE_SECONDS": "lost_wakeup_grace_seconds",
    "WORKER_TIMEOUT_SECONDS": "worker_timeout_seconds",
    "MAX_STEP_SECONDS": "max_step_seconds",
    "VISIBILITY_TIMEOUT_SECONDS": "visibility_timeout_seconds",
    "SCHEDULES_PER_OWNER": "schedules_per_owner",
    "TENANT_SUBMIT_RATE": "tenant_submit_rate",
    "INDEX_SHARDS": "index_shards",
}
"""The functions' environment variables (template Globals) that are engine settings, and the
`TestbedSettings` field each becomes."""


class TemplateError(LeaseholdError, RuntimeError):
    """A template the definitions cannot be read from (missing, not YAML, no JobsTable…)."""


def _s(name: str) -> dict[str, str]:
    return {"AttributeName": name, "AttributeType": "S"}


def _keys(hash_key: str, range_key: str) -> list[dict[str, str]]:
    return [
        {"AttributeName": hash_key, "KeyType": "HASH"},
        {"AttributeName": range_key, "KeyType": "RANGE"},
    ]


@dataclass(frozen=True)
class Definitions:
    """What a testbed creates and runs with, and where that came from (`source`)."""

    table: Mapping[str, Any]
    """CreateTable's arguments: billing mode, attributes, keys, GSIs and stream."""
    queues: Mapping[str, Mapping[str, int]]
    """`work`, `dlq`, `relay_failures`: retention, and the work queue's `maxReceiveCount` (its
    shards, `WorkQueueShard1`…, are WorkQueue again: the template is refused otherwise)."""
    settings: Mapping[str, int]
    """The engine settings at their defaults, by `TestbedSettings` field name."""
    relay: Mapping[str, int]
    """The relay's stream mapping: `batch_size`, `max_retries`."""
    source: str = PACKAGED_NAME
    """`packaged`, or the template's path."""
    roles: Mapping[str, Any] = field(default_factory=dict)
    """The functions' execution roles as the template writes them (`Parameters`, `Conditions`
    and `Resources`: each role, each `AWS::IAM::Policy`, each function's `Role`), intrinsics
    unresolved: leasehold.testing.roles resolves them against a testbed's resources."""

    def content(self) -> dict[str, Any]:
        """Everything but `source`: what two definitions must agree on."""
        return {
            "table": self.table,
            "queues": self.queues,
            "settings": self.settings,
            "relay": self.relay,
            "roles": self.roles,
        }

    @staticmethod
    def from_template(path: str | Path) -> Definitions:
        """Read the definitions from a SAM template (leasehold's, or a deployment's copy)."""
        return _read_template(Path(path))

    @staticmethod
    def find(template: str | Path | None = None) -> Definitions:
        """`template` if given, else `LEASEHOLD_TEMPLATE`, else leasehold's own template.yaml
        in a source checkout, else the packaged copy (`"packaged"` asks for it outright)."""
        chosen = template or os.environ.get(TEMPLATE_ENV)
        if chosen == PACKAGED_NAME:
            return PACKAGED
        if chosen:
            return Definitions.from_template(chosen)
        if SOURCE_TEMPLATE.is_file():
            return Definitions.from_template(SOURCE_TEMPLATE)
        return PACKAGED


PACKAGED = Definitions(
    table={
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            _s(n) for n in ("pk", "sk", "gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk")
        ],
        "KeySchema": _keys("pk", "sk"),
        "GlobalSecondaryIndexes": [
            {
                "IndexName": "by_state",
                "KeySchema": _keys("gsi1pk", "gsi1sk"),
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
            {
                "IndexName": "by_owner",
                "KeySchema": _keys("gsi2pk", "gsi2sk"),
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
        ],
        "StreamSpecification": {"StreamViewType": "NEW_IMAGE"},
    },
    queues={
        "work": {"MessageRetentionPeriod": 345_600, "maxReceiveCount": 5},
        "dlq": {"MessageRetentionPeriod": 1_209_600},
        "relay_failures": {"MessageRetentionPeriod": 1_209_600},
    },
    settings={
        "lease_seconds": 60,
        "max_attempts": 3,
        "backoff_base_ms": 2000,
        "backoff_cap_ms": 300_000,
        "user_concurrency_limit": 5,
        "slot_wait_seconds": 10,
        "sweep_active_rate": 10,
        "sweep_due_rate": 10,
        "sweep_schedule_rate": 10,
        "sweep_segments": 1,
        "sweep_interval_seconds": 60,
        "lost_wakeup_grace_seconds": 120,
        "worker_timeout_seconds": 120,
        "max_step_seconds": 60,
        "visibility_timeout_seconds": 720,
        "worker_batch_size": 5,
        "schedules_per_owner": 25,
        "tenant_submit_rate": 0,
        "queue_shards": 1,
        "index_shards": 64,
    },
    relay={"batch_size": 100, "max_retries": 10},
    roles=PACKAGED_ROLES,
)
"""The copy of template.yaml's definitions that ships with the package."""


# ----------------------------------------------------------------------------- template.yaml


def _load_yaml(path: Path) -> dict[str, Any]:
    """YAML with CloudFormation's short tags (`!Ref X` → `{"Ref": "X"}`, `!Sub` → `Fn::Sub`)."""
    import yaml

    # libyaml's parser when PyYAML has it: ~5× faster on the 115 KB template (decision CI16)
    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _Loader(base):
        pass

    def tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
        value: Any
        if isinstance(node, yaml.ScalarNode):
            value = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {"Ref" if suffix == "Ref" else f"Fn::{suffix}": value}

    _Loader.add_multi_constructor("!", tagged)
    if not path.is_file():
        raise TemplateError(f"template not found: {path}")
    try:
        loaded = yaml.load(path.read_text(), Loader=_Loader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        raise TemplateError(f"template {path} is not valid YAML: {exc}") from exc
    if not isinstance(loaded, dict):
        raise TemplateError(f"template {path} is not a mapping")
    return loaded


def _read_template(path: Path) -> Definitions:
    doc = _load_yaml(path)
    resources = doc.get("Resources") or {}
    parameters = doc.get("Parameters") or {}
    defaults = {name: spec.get("Default") for name, spec in parameters.items()}

    def resolved(value: Any) -> Any:
        if isinstance(value, dict) and set(value) == {"Ref"}:
            if value["Ref"] not in defaults:
                raise TemplateError(f"{path}: {value['Ref']} is not a parameter with a default")
            return defaults[value["Ref"]]
        return value

    def props(logical_id: str) -> dict[str, Any]:
        try:
            return dict(resources[logical_id]["Properties"])
        except (KeyError, TypeError) as exc:
            raise TemplateError(f"{path}: no {logical_id} resource with Properties") from exc

    jobs = props("JobsTable")
    table = {
        "BillingMode": jobs["BillingMode"],
        "AttributeDefinitions": jobs["AttributeDefinitions"],
        "KeySchema": jobs["KeySchema"],
        "GlobalSecondaryIndexes": jobs["GlobalSecondaryIndexes"],
        "StreamSpecification": {"StreamViewType": jobs["StreamSpecification"]["StreamViewType"]},
    }
    work = props("WorkQueue")
    queues = {
        "work": {
            "MessageRetentionPeriod": int(work["MessageRetentionPeriod"]),
            "maxReceiveCount": int(work["RedrivePolicy"]["maxReceiveCount"]),
        },
        "dlq": {"MessageRetentionPeriod": int(props("DeadLetterQueue")["MessageRetentionPeriod"])},
        "relay_failures": {
            "MessageRetentionPeriod": int(props("RelayFailureQueue")["MessageRetentionPeriod"])
        },
    }
    function = (doc.get("Globals") or {}).get("Function") or {}
    environment = (function.get("Environment") or {}).get("Variables") or {}
    settings: dict[str, int] = {}
    for variable, name in SETTINGS_FROM_ENVIRONMENT.items():
        if variable not in environment:
            raise TemplateError(f"{path}: Globals sets no {variable}")
        settings[name] = int(resolved(environment[variable]))
    if "SWEEP_SCHEDULE" not in environment:
        raise TemplateError(f"{path}: Globals sets no SWEEP_SCHEDULE")
    try:
        settings["sweep_interval_seconds"] = sweep_interval_seconds(
            str(resolved(environment["SWEEP_SCHEDULE"]))
        )
    except SettingsError as refused:
        raise TemplateError(f"{path}: {refused}") from refused
    if int(resolved(work["VisibilityTimeout"])) != settings["visibility_timeout_seconds"]:
        raise TemplateError(f"{path}: WorkQueue's VisibilityTimeout is not the functions' own")
    for logical_id, resource in resources.items():  # the normal queue's shards (QS1)
        if logical_id.startswith("WorkQueueShard") and resource.get("Properties") != work:
            raise TemplateError(f"{path}: {logical_id} is not WorkQueue's copy")
    settings["queue_shards"] = int(defaults.get("QueueShards") or 1)
    wakeups = props("WorkerFunction")["Events"]["Wakeups"]["Properties"]
    settings["worker_batch_size"] = int(resolved(wakeups["BatchSize"]))
    outbox = props("RelayFunction")["Events"]["Outbox"]["Properties"]
    relay = {
        "batch_size": int(resolved(outbox["BatchSize"])),
        "max_retries": int(resolved(outbox["MaximumRetryAttempts"])),
    }
    return Definitions(table, queues, settings, relay, source=str(path), roles=iam_subset(doc))


def iam_subset(doc: Mapping[str, Any]) -> dict[str, Any]:
    """What of a template decides the functions' permissions: every role and IAM policy, each
    function's `Role`, and the conditions and parameters (with their defaults) they use."""
    resources = doc.get("Resources") or {}
    kept: dict[str, Any] = {}
    for logical_id, resource in resources.items():
        kind = resource.get("Type")
        if kind in {"AWS::IAM::Role", "AWS::IAM::Policy"}:
            kept[logical_id] = resource
        elif kind in {"AWS::Serverless::Function", "AWS::Lambda::Function"}:
            role = (resource.get("Properties") or {}).get("Role")
            kept[logical_id] = {"Type": kind, "Properties": {"Role": role}}
    for name in sorted(_refs(kept)):  # the types of what they name (the table, queues…)
        if name in resources and name not in kept:
            kept[name] = {"Type": resources[name].get("Type")}
    conditions = doc.get("Conditions") or {}
    named = {str(r["Condition"]) for r in kept.values() if "Condition" in r} | _conditions_in(kept)
    while True:  # and the conditions those conditions name
        more = _conditions_in([conditions[n] for n in named if n in conditions]) - named
        if not more:
            break
        named |= more
    used_conditions = {name: conditions[name] for name in sorted(named) if name in conditions}
    parameters = doc.get("Parameters") or {}
    referenced = _refs([kept, used_conditions])
    used_parameters = {
        name: {"Default": parameters[name].get("Default", "")}
        for name in sorted(referenced)
        if name in parameters
    }
    return {"Parameters": used_parameters, "Conditions": used_conditions, "Resources": kept}


def _pairs(node: Any, opaque: frozenset[str] = frozenset()) -> Iterator[tuple[str, Any]]:
    """Every key and value of every mapping in `node`, depth first (the value under a key in
    `opaque` is yielded but not looked into)."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield key, value
            if key not in opaque:
                yield from _pairs(value, opaque)
    elif isinstance(node, list):
        for item in node:
            yield from _pairs(item, opaque)


def _conditions_in(node: Any) -> set[str]:
    """Every condition an `Fn::If` or a `Condition` in `node` names."""
    found: set[str] = set()
    for key, value in _pairs(node):
        if key == "Fn::If" and isinstance(value, list) and value:
            found.add(str(value[0]))
        elif key == "Condition" and isinstance(value, str):
            found.add(value)
    return found


def _refs(node: Any) -> set[str]:
    """Every name a `Ref` (or a `${Name}` in an `Fn::Sub`) in `node` points at."""
    found: set[str] = set()
    for key, value in _pairs(node, opaque=frozenset({"Fn::GetAtt"})):
        if key == "Ref" and isinstance(value, str):
            found.add(value)
        elif key == "Fn::GetAtt":
            found.add(str(value[0] if isinstance(value, list) else value).split(".")[0])
        elif key == "Fn::Sub":
            text = value if isinstance(value, str) else value[0]
            found |= {m.split(".")[0] for m in re.findall(r"\$\{([^}!][^}]*)\}", text)}
    return found


# ----------------------------------------------------------------------------- creating them


def create_table(dynamodb: Any, definitions: Definitions, name: str) -> dict[str, Any]:
    """The jobs table, with its stream; returns CreateTable's TableDescription."""
    spec = definitions.table
    answer = dynamodb.create_table(
        TableName=name,
        BillingMode=spec["BillingMode"],
        AttributeDefinitions=spec["AttributeDefinitions"],
        KeySchema=spec["KeySchema"],
        GlobalSecondaryIndexes=spec["GlobalSecondaryIndexes"],
        StreamSpecification={"StreamEnabled": True, **spec["StreamSpecification"]},
    )
    return dict(answer["TableDescription"])


def create_queues(
    sqs: Any,
    definitions: Definitions,
    prefix: str,
    visibility_timeout_seconds: int,
    shards: int = 1,
) -> dict[str, str]:
    """The work queue, its other `shards - 1` shards (QueueShards) and the high- and
    low-priority queues (redriven to the DLQ as deployed), the DLQ and the relay-failure queue;
    returns their URLs by `work`, `work_1`…, `high`, `low`, `dlq`, `relay_failures`."""
    queues = definitions.queues

    def retention(name: str) -> dict[str, str]:
        return {"MessageRetentionPeriod": str(queues[name]["MessageRetentionPeriod"])}

    dlq = sqs.create_queue(QueueName=f"{prefix}dlq", Attributes=retention("dlq"))["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    redrive = json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": queues["work"]["maxReceiveCount"]}
    )
    work = sqs.create_queue(
        QueueName=f"{prefix}work",
        Attributes={
            **retention("work"),
            "VisibilityTimeout": str(visibility_timeout_seconds),
            "RedrivePolicy": redrive,
        },
    )["QueueUrl"]
    high, low, *more = (
        sqs.create_queue(
            QueueName=f"{prefix}{name}",
            Attributes={
                **retention("work"),
                "VisibilityTimeout": str(visibility_timeout_seconds),
                "RedrivePolicy": redrive,
            },
        )["QueueUrl"]
        for name in ("high", "low", *(f"work-{n}" for n in range(1, shards)))
    )
    failures = sqs.create_queue(
        QueueName=f"{prefix}relay-failures", Attributes=retention("relay_failures")
    )["QueueUrl"]
    sharded = {f"work_{n}": url for n, url in enumerate(more, start=1)}
    return {
        "work": work,
        **sharded,
        "high": high,
        "low": low,
        "dlq": dlq,
        "relay_failures": failures,
    }


__all__ = [
    "PACKAGED",
    "PACKAGED_NAME",
    "SOURCE_TEMPLATE",
    "TEMPLATE_ENV",
    "Definitions",
    "TemplateError",
    "create_queues",
    "create_table",
]
