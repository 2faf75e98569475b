"""The fault injector's crash rules (`service.Operation:crash-before@N` / `crash-after@N`):
read from LEASEHOLD_FAULTS's syntax beside the error rules, fired at the N-th call of the
operation — before it is sent (nothing applied) or after its answer arrived (applied, the answer
discarded) — and, by default, the process exits as a kill would."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import boto3
import pytest

from leasehold.store.faults import (
    CRASH_EXIT_CODE,
    FaultPlan,
    FaultRule,
    FaultSpecError,
    install_faults,
)


class Died(BaseException):
    pass


def test_crash_rules_parse_beside_the_error_rules() -> None:
    plan = FaultPlan.parse(
        "dynamodb.TransactWriteItems:crash-before@3, sqs.*:crash-after,"
        "dynamodb.UpdateItem:ThrottlingException=0.5@2"
    )
    before, after, throttle = plan.rules
    assert before == FaultRule("dynamodb", "TransactWriteItems", "crash-before", 1.0, 1, 3)
    assert (after.operation, after.code, after.nth, after.is_crash) == ("*", "crash-after", 1, True)
    assert (throttle.probability, throttle.limit, throttle.nth, throttle.is_crash) == (
        0.5,
        2,
        None,
        False,
    )


@pytest.mark.parametrize(
    "spec",
    [
        "dynamodb.PutItem:crash-before@0",
        "dynamodb.PutItem:crash-during@1",
        "dynamodb.PutItem:crash-after=0.5",
        "dynamodb.PutItem:crash-after@x",
        "PutItem:crash-after@1",
    ],
)
def test_unreadable_crash_rules_are_refused(spec: str) -> None:
    with pytest.raises(FaultSpecError):
        FaultPlan.parse(spec)


def _table(client: Any) -> None:
    client.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def _put(client: Any, key: str) -> None:
    client.put_item(TableName="t", Item={"k": {"S": key}})


def _keys(client: Any) -> set[str]:
    return {item["k"]["S"] for item in client.scan(TableName="t")["Items"]}


@pytest.mark.parametrize(
    ("code", "applied"), [("crash-before", {"1"}), ("crash-after", {"1", "2"})]
)
def test_the_nth_call_crashes_before_or_after_the_store_applied_it(
    moto: None, code: str, applied: set[str]
) -> None:
    session = boto3.session.Session(region_name="us-east-1")
    client, plain = session.client("dynamodb"), session.client("dynamodb")
    _table(plain)
    seen: list[str] = []

    def die(where: str) -> None:
        seen.append(where)
        raise Died

    injector = install_faults(client, FaultPlan.parse(f"dynamodb.PutItem:{code}@2"), crash=die)
    client.describe_table(TableName="t")  # another operation: not counted for PutItem
    _put(client, "1")
    with pytest.raises(Died):
        _put(client, "2")
    assert seen == [f"{code} dynamodb.PutItem #2"]
    assert _keys(plain) == applied
    _put(client, "3")  # a crash rule fires once
    assert injector.injected == {f"PutItem:{code}": 1}


SCRIPT = """
import boto3, sys
from moto import mock_aws
from leasehold.store.faults import FaultPlan, install_faults
with mock_aws():
    session = boto3.session.Session(region_name="us-east-1")
    client, plain = session.client("dynamodb"), session.client("dynamodb")
    plain.create_table(TableName="t", KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST")
    install_faults(client, FaultPlan.parse(sys.argv[1]))
    try:
        for key in "123":
            client.put_item(TableName="t", Item={"k": {"S": key}})
            print("put", key, flush=True)
    finally:
        print("finally ran", flush=True)
"""


@pytest.mark.parametrize("code", ["crash-before", "crash-after"])
def test_by_default_the_process_exits_as_a_kill_would(aws_env: None, code: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), f"dynamodb.PutItem:{code}@2"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == CRASH_EXIT_CODE, done.stderr
    assert done.stdout.split("\n")[:-1] == ["put 1"]  # no `finally`: the process just ended
    assert f"injected crash {code} dynamodb.PutItem #2" in done.stderr
