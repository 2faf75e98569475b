"""The IAM evaluator (leasehold.testing.iam): the policy language as IAM reads it, and each
call's action and resource as AWS authorises them. Pure: no AWS, no moto."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.testing.iam import Request, Role, UnjudgedCallError, judge, requests_of

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/jobs"
QUEUE_URL = "http://localhost:5000/123456789012/work"


def role(*statements: dict[str, Any]) -> Role:
    return Role.of("TestRole", "123456789012", "us-east-1", [{"Statement": list(statements)}])


def allow(action: Any, resource: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource}


def test_allow_needs_a_matching_action_and_resource() -> None:
    r = role(allow(["dynamodb:GetItem"], TABLE))
    assert r.allows("dynamodb:GetItem", TABLE)
    assert not r.allows("dynamodb:PutItem", TABLE)  # the implicit deny
    assert not r.allows("dynamodb:GetItem", TABLE + "/index/by_state")  # an index is its own


def test_wildcards_in_actions_ignore_case_and_in_resources_do_not() -> None:
    r = role(allow("DynamoDB:Get*", "arn:aws:s3:::documents/tenants/*/documents/*"))
    assert r.allows("dynamodb:GetItem", "arn:aws:s3:::documents/tenants/a/documents/x.pdf")
    assert not r.allows("dynamodb:GetItem", "arn:aws:s3:::documents/Tenants/a/documents/x")
    assert role(allow("sqs:?eceiveMessage", "*")).allows("sqs:ReceiveMessage", "anything")


def test_an_explicit_deny_wins_over_any_allow() -> None:
    r = role(
        allow("dynamodb:*", "*"),
        {"Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": TABLE},
    )
    assert r.allows("dynamodb:PutItem", TABLE)
    assert not r.allows("dynamodb:DeleteItem", TABLE)


def test_not_action_and_not_resource() -> None:
    r = role({"Effect": "Allow", "NotAction": "dynamodb:DeleteItem", "NotResource": "arn:x"})
    assert r.allows("dynamodb:PutItem", TABLE)
    assert not r.allows("dynamodb:DeleteItem", TABLE)
    assert not r.allows("dynamodb:PutItem", "arn:x")


def test_an_empty_action_list_allows_nothing() -> None:
    assert not role(allow([], "*")).allows("dynamodb:GetItem", TABLE)


def test_a_condition_that_would_decide_is_refused_never_guessed() -> None:
    conditioned = {
        "Effect": "Allow",
        "Action": "kms:Decrypt",
        "Resource": "*",
        "Condition": {"StringEquals": {"kms:ViaService": "dynamodb.us-east-1.amazonaws.com"}},
    }
    with pytest.raises(UnjudgedCallError, match="kms:ViaService"):
        role(conditioned).allows("kms:Decrypt", "arn:aws:kms:us-east-1:1:key/k")
    # a condition that cannot change the answer (an unconditioned allow holds) is no matter
    assert role(conditioned, allow("kms:Decrypt", "*")).allows("kms:Decrypt", "k")
    # nor one on another action
    assert role(conditioned, allow("dynamodb:GetItem", TABLE)).allows("dynamodb:GetItem", TABLE)


@pytest.mark.parametrize(
    "statement", [{"Effect": "Allow", "Action": "x:y", "Resource": "*", "Principal": "*"}]
)
def test_a_policy_feature_not_evaluated_is_refused(statement: dict[str, Any]) -> None:
    with pytest.raises(UnjudgedCallError, match="Principal"):
        role(statement)


def test_dynamodb_calls_name_their_table_index_and_transaction_items() -> None:
    r = role()
    assert requests_of("dynamodb", "Query", {"TableName": "jobs", "IndexName": "by_state"}, r) == [
        Request("dynamodb:Query", TABLE + "/index/by_state")
    ]
    assert requests_of("dynamodb", "BatchGetItem", {"RequestItems": {"jobs": {}}}, r) == [
        Request("dynamodb:BatchGetItem", TABLE)
    ]
    items = [{"Put": {"TableName": "jobs"}}, {"ConditionCheck": {"TableName": "jobs"}}]
    assert requests_of("dynamodb", "TransactWriteItems", {"TransactItems": items}, r) == [
        Request("dynamodb:PutItem", TABLE),
        Request("dynamodb:ConditionCheckItem", TABLE),
    ]


def test_sqs_batches_are_authorised_by_their_single_message_action() -> None:
    r = role(allow("sqs:SendMessage", "arn:aws:sqs:us-east-1:123456789012:work"))
    assert judge("sqs", "SendMessageBatch", {"QueueUrl": QUEUE_URL}, r) is None
    assert judge("sqs", "DeleteMessageBatch", {"QueueUrl": QUEUE_URL}, r) == Request(
        "sqs:DeleteMessage", "arn:aws:sqs:us-east-1:123456789012:work"
    )


def test_s3_and_secrets_manager_resources() -> None:
    r = role()
    assert requests_of("s3", "HeadObject", {"Bucket": "b", "Key": "k/1"}, r) == [
        Request("s3:GetObject", "arn:aws:s3:::b/k/1")
    ]
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:key-AbCdEf"
    assert requests_of("secretsmanager", "GetSecretValue", {"SecretId": arn}, r) == [
        Request("secretsmanager:GetSecretValue", arn)
    ]


def test_a_call_no_rule_knows_is_refused_loudly() -> None:
    with pytest.raises(UnjudgedCallError, match="cloudwatch.PutMetricData"):
        requests_of("cloudwatch", "PutMetricData", {}, role())
