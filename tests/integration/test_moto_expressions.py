"""leasehold_dev.local.moto.expressions against moto's own expression handling: the same updates and
conditions — a fixed list, then hypothesis-made streams of them — give the same answers and the
same items with and without the memos, the fast copy and the fast tree walk."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from leasehold_dev.local.moto import expressions as moto_expressions
from leasehold_dev.local.resources import create_table
from leasehold_dev.local.stack import REGION


def both_ways(run: Callable[[Any], list[Any]]) -> tuple[list[Any], list[Any], list[Any]]:
    """`run` through moto's own code, then twice through the patched code (the second time every
    memo is warm); moto_expressions is left installed, as the local stack has it."""

    def through_moto() -> list[Any]:
        with mock_aws():
            dynamodb = boto3.session.Session(region_name=REGION).client("dynamodb")
            create_table(dynamodb, "jobs")
            return run(dynamodb)

    moto_expressions.uninstall()
    try:
        expected = through_moto()
    finally:
        moto_expressions.install()
    return expected, through_moto(), through_moto()


BUMP = "SET #s = :s, epoch = epoch + :one, tags = list_append(if_not_exists(tags, :e), :t)"
UPDATES = [
    ("SET #s = :s, epoch = :one, tags = list_append(if_not_exists(tags, :e), :t)", None),
    (BUMP, "attribute_exists(pk)"),
    (BUMP, "attribute_exists(pk)"),  # the same expression again: from the memo once installed
    ("ADD visits :one REMOVE note", "epoch >= :one"),
    ("SET note = :s", "#s = :s"),
    ("SET note = :s", "#s = :s"),  # the state is state-0, :s is state-1: fails
    ("SET #s = :s REMOVE visits", "epoch > :one"),
    ("SET copied = #s, again = tags, epoch = epoch + :one", None),  # paths read as values
    ("SET nothing = missing + :one", None),  # refers to an attribute the item lacks
]


def _run_updates(dynamodb: Any) -> list[Any]:
    seen: list[Any] = []
    for n, (update, condition) in enumerate(UPDATES):
        request: dict[str, Any] = {
            "TableName": "jobs",
            "Key": {"pk": {"S": "JOB#1"}, "sk": {"S": "JOB"}},
            "UpdateExpression": update,
            "ExpressionAttributeValues": {
                ":s": {"S": f"state-{n % 2}"},
                ":one": {"N": "1"},
                ":e": {"L": []},
                ":t": {"L": [{"S": f"t{n}"}]},
            },
            "ReturnValues": "ALL_NEW",
        }
        if "#s" in update or (condition and "#s" in condition):
            request["ExpressionAttributeNames"] = {"#s": "state"}
        if condition:
            request["ConditionExpression"] = condition
        used = {v for v in request["ExpressionAttributeValues"] if v in update + (condition or "")}
        request["ExpressionAttributeValues"] = {
            k: v for k, v in request["ExpressionAttributeValues"].items() if k in used
        }
        try:
            seen.append(dynamodb.update_item(**request)["Attributes"])
        except ClientError as error:
            seen.append(error.response["Error"]["Code"])
    try:
        dynamodb.update_item(
            TableName="jobs",
            Key={"pk": {"S": "JOB#1"}, "sk": {"S": "JOB"}},
            UpdateExpression="SET = oops",
        )
    except ClientError as error:
        seen.append((error.response["Error"]["Code"], error.response["Error"]["Message"]))
    return seen


def test_update_expressions_give_moto_s_answers(aws_env: None) -> None:
    expected, first, again = both_ways(_run_updates)
    assert first == expected
    assert again == expected
    assert expected[2]["epoch"] == {"N": "3"} and expected[2]["tags"]["L"][-1] == {"S": "t2"}
    assert expected[5] == "ConditionalCheckFailedException"
    assert "visits" not in expected[6] and expected[6]["note"] == {"S": "state-0"}
    assert expected[7]["copied"] == {"S": "state-0"} and expected[7]["again"] == expected[7]["tags"]
    assert expected[-2] == "ValidationException"
    assert expected[-1][0] == "ValidationException"


CONDITIONS = [
    "attribute_exists(pk) AND #s = :s",
    "attribute_exists(pk) AND #s = :s",  # again: tokens from the memo once installed
    "attribute_not_exists(pk) OR epoch < :one",
    "NOT (#s IN (:s, :t)) AND size(tags) >= :one",
    "epoch BETWEEN :zero AND :one",
    "begins_with(#s, :prefix) AND contains(tags, :tag)",
    "(epoch > :zero AND (#s <> :s OR attribute_type(tags, :list)))",
    "nested.inner.#s = :s OR tags[0] = :tag",
    "epoch = :one $",  # a character no token starts with
]


def _run_conditions(dynamodb: Any) -> list[Any]:
    dynamodb.put_item(
        TableName="jobs",
        Item={
            "pk": {"S": "JOB#2"},
            "sk": {"S": "JOB"},
            "state": {"S": "running"},
            "epoch": {"N": "1"},
            "tags": {"L": [{"S": "a"}, {"S": "b"}]},
            "nested": {"M": {"inner": {"M": {"state": {"S": "queued"}}}}},
        },
    )
    values = {
        ":s": {"S": "running"},
        ":t": {"S": "queued"},
        ":one": {"N": "1"},
        ":zero": {"N": "0"},
        ":prefix": {"S": "run"},
        ":tag": {"S": "a"},
        ":list": {"S": "L"},
    }
    seen: list[Any] = []
    for condition in CONDITIONS:
        used = {k: v for k, v in values.items() if k in condition}
        request: dict[str, Any] = {
            "TableName": "jobs",
            "Key": {"pk": {"S": "JOB#2"}, "sk": {"S": "JOB"}},
            "UpdateExpression": "SET probe = :probe",
            "ConditionExpression": condition,
            "ExpressionAttributeValues": {**used, ":probe": {"S": condition}},
        }
        if "#s" in condition:
            request["ExpressionAttributeNames"] = {"#s": "state"}
        try:
            seen.append(dynamodb.update_item(**request, ReturnValues="UPDATED_NEW")["Attributes"])
        except ClientError as error:
            seen.append((error.response["Error"]["Code"], error.response["Error"]["Message"]))
        except ValueError as error:  # what moto's lexer raises in-process for a bad character
            seen.append(("ValueError", str(error)))
    return seen


def test_condition_expressions_give_moto_s_answers(aws_env: None) -> None:
    expected, first, again = both_ways(_run_conditions)
    assert first == expected
    assert again == expected
    outcomes = ["ok" if isinstance(answer, dict) else answer[0] for answer in expected]
    assert outcomes.count("ok") >= 4, expected
    assert "ConditionalCheckFailedException" in outcomes
    assert outcomes[-1] == "ValueError", expected


values = st.fixed_dictionaries(
    {
        ":s": st.sampled_from(["running", "queued", "run"]).map(lambda s: {"S": s}),
        ":t": st.sampled_from(["queued", "done"]).map(lambda s: {"S": s}),
        ":one": st.integers(0, 3).map(lambda n: {"N": str(n)}),
        ":zero": st.integers(0, 2).map(lambda n: {"N": str(n)}),
        ":prefix": st.sampled_from(["run", "q", ""]).map(lambda s: {"S": s or "x"}),
        ":tag": st.sampled_from(["a", "b", "z"]).map(lambda s: {"S": s}),
        ":list": st.sampled_from(["L", "S", "M"]).map(lambda s: {"S": s}),
        ":e": st.just({"L": []}),
        ":probe": st.text(max_size=4).map(lambda s: {"S": s}),
    }
)
requests = st.lists(
    st.tuples(
        st.sampled_from([u for u, _ in UPDATES] + ["SET probe = :probe"]),
        st.sampled_from([None, *CONDITIONS[:-1], *(c for _, c in UPDATES if c)]),
        values,
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(stream=requests)
def test_streams_of_updates_and_conditions_give_moto_s_answers(
    aws_env: None, stream: list[tuple[str, str | None, dict[str, Any]]]
) -> None:
    def run(dynamodb: Any) -> list[Any]:
        dynamodb.put_item(
            TableName="jobs",
            Item={
                "pk": {"S": "JOB#1"},
                "sk": {"S": "JOB"},
                "state": {"S": "running"},
                "epoch": {"N": "1"},
                "tags": {"L": [{"S": "a"}]},
                "nested": {"M": {"inner": {"M": {"state": {"S": "queued"}}}}},
            },
        )
        seen: list[Any] = []
        for update, condition, given_values in stream:
            text = update + " " + (condition or "")
            request: dict[str, Any] = {
                "TableName": "jobs",
                "Key": {"pk": {"S": "JOB#1"}, "sk": {"S": "JOB"}},
                "UpdateExpression": update,
                "ExpressionAttributeValues": {
                    k: v for k, v in given_values.items() if _uses(text, k)
                },
                "ReturnValues": "ALL_NEW",
            }
            if "#s" in text:
                request["ExpressionAttributeNames"] = {"#s": "state"}
            if condition:
                request["ConditionExpression"] = condition
            try:
                seen.append(dynamodb.update_item(**request)["Attributes"])
            except ClientError as error:
                seen.append((error.response["Error"]["Code"], error.response["Error"]["Message"]))
        seen.append(dynamodb.scan(TableName="jobs")["Items"])
        return seen

    expected, first, again = both_ways(run)
    assert first == expected
    assert again == expected


def _uses(text: str, placeholder: str) -> bool:
    import re

    return re.search(re.escape(placeholder) + r"(?![A-Za-z0-9_])", text) is not None


INVALID_UPDATES = [
    "SET a = :one SET b = :one",
    "REMOVE a REMOVE b",
    "ADD visits :one ADD more :one",
    "SET a = :one REMOVE b SET c = :one ADD d :one ADD e :one",
    "ADD a :one SET b = :one ADD c :one SET d = :one",  # moto refuses the SETs, deepest first
    "SET a = :one, a = :one",
    "SET nested.inner = :one, nested = :one",
    "SET #s = :one REMOVE #s",
    "SET a = :one, b = list_append(tags, :e), a = :one",
    "REMOVE tags[0], tags[0]",
]


def test_invalid_updates_are_refused_with_moto_s_errors(aws_env: None) -> None:
    def run(dynamodb: Any) -> list[Any]:
        dynamodb.put_item(
            TableName="jobs",
            Item={"pk": {"S": "JOB#3"}, "sk": {"S": "JOB"}, "tags": {"L": [{"S": "a"}]}},
        )
        seen: list[Any] = []
        for update in INVALID_UPDATES:
            request: dict[str, Any] = {
                "TableName": "jobs",
                "Key": {"pk": {"S": "JOB#3"}, "sk": {"S": "JOB"}},
                "UpdateExpression": update,
            }
            used = {k: v for k, v in {":one": {"N": "1"}, ":e": {"L": []}}.items() if k in update}
            if used:
                request["ExpressionAttributeValues"] = used
            if "#s" in update:
                request["ExpressionAttributeNames"] = {"#s": "state"}
            try:
                dynamodb.update_item(**request)
                seen.append("accepted")
            except ClientError as error:
                seen.append((error.response["Error"]["Code"], error.response["Error"]["Message"]))
        return seen

    expected, first, again = both_ways(run)
    assert first == expected
    assert again == expected
    assert all(answer[0] == "ValidationException" for answer in expected), expected
    assert len({answer[1] for answer in expected}) >= 4, expected  # several kinds of refusal


def _many_sets(count: int) -> str:
    return "SET " + ",".join(f"a{n}=:v" for n in range(count))


def _transact_update(dynamodb: Any, expression: str) -> Any:
    try:
        dynamodb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": "jobs",
                        "Key": {"pk": {"S": "JOB#4"}, "sk": {"S": "JOB"}},
                        "UpdateExpression": expression,
                        "ExpressionAttributeValues": {":v": {"N": "1"}},
                    }
                }
            ]
        )
        return "accepted"
    except ClientError as error:
        return (error.response["Error"]["Code"], error.response["Error"]["Message"])
    except RecursionError:  # what moto raises in-process where its copy of the tree is too deep
        return "RecursionError"


RECURSION_LIMIT = 1000
"""CPython's default, the limit the local stack's moto server runs under."""


def with_known_stack(
    run: Callable[[Any], list[Any]],
) -> tuple[list[Any], list[Any], list[Any]]:
    """`both_ways(run)` where a recursion error depends on the tree alone: in a fresh thread (a
    stack a few frames deep, not the pytest/xdist/pluggy frames of whichever worker runs the test)
    under the default recursion limit (not one another test left raised, e.g. hypothesis's while a
    @given test runs). Where RecursionError strikes depends on limit minus depth: in a deep worker
    stack or under a raised limit the window the strict xfail pins moves off its 120-204 range
    (an XPASS) and 250 SET actions no longer overflow moto's deepcopy."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(both_ways(run))
        except BaseException as error:  # noqa: BLE001 - re-raised in the test's own thread
            outcome.append(error)

    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(RECURSION_LIMIT)
    try:
        thread = threading.Thread(target=target, name="known-stack")
        thread.start()
        thread.join(timeout=120)
    finally:
        sys.setrecursionlimit(previous)
    assert outcome, "the comparison did not finish in 120 s"
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    result: tuple[list[Any], list[Any], list[Any]] = outcome[0]
    return result


def test_an_update_too_deep_to_copy_is_refused_as_moto_refuses_it(aws_env: None) -> None:
    # Each SET action nests the tree one level deeper: ~250 of them are too deep for moto's
    # deepcopy of the tree (RecursionError), which its transaction reports as the item's
    # cancellation reason. The patched parse must not fail sooner, in the handler, where a
    # pickle of the tree is too deep as well.
    def run(dynamodb: Any) -> list[Any]:
        return [_transact_update(dynamodb, _many_sets(250)) for _ in range(2)]

    expected, first, again = with_known_stack(run)
    assert expected[0][0] == "TransactionCanceledException", expected
    assert "RecursionError" in expected[0][1]
    assert first == expected
    assert again == expected


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="known: an unpickled copy of the tree needs no recursion, so the patch accepts some "
    "updates a little too deep for moto's deepcopy (moto answers RecursionError; DynamoDB, whose "
    "limit is 4 KB of expression, accepts them)",
)
def test_updates_near_moto_s_recursion_limit_give_moto_s_answers(aws_env: None) -> None:
    def run(dynamodb: Any) -> list[Any]:
        return [_transact_update(dynamodb, _many_sets(count)) for count in range(120, 204, 6)]

    expected, first, again = with_known_stack(run)
    assert first == expected
    assert again == expected


MORE_UPDATES = [
    "SET m.inr.x = :one, l[1] = :s",
    "SET l[5] = :s",
    "REMOVE l[0], l[2]",
    "REMOVE l[2], l[0]",
    "SET n = if_not_exists(n, :zero) + :one",
    "SET n = absent + :one",
    "SET l = list_append(:t, l)",
    "SET l = list_append(absent, :t)",
    "ADD ss :aa DELETE ss :dd",
    "SET a = :one REMOVE b ADD c :one DELETE ss :dd",
    "DELETE ss :dd DELETE ss :dd",
    "SET a = :one DELETE ss :dd SET b = :one",
    "SET\ta = :one",
    "  SET   a=:one  ,b =  :one  \nREMOVE c",
    "SET #n = :one, n = :one",
    "SET m.inr = :one, m.inr.x = :one",
    "SET m = :one, #m.x = :one",
    "SET #pk = :s",
    "SET #undefined = :one",
    "SET m.absent.x = :one",
    "SET l[0] = l[1], l[1] = l[0]",
    "SET l[0] = :one, l[00] = :one",
]


def test_more_update_shapes_give_moto_s_answers_alone_and_in_a_transaction(
    aws_env: None,
) -> None:
    values = {
        ":one": {"N": "1"},
        ":zero": {"N": "0"},
        ":s": {"S": "v"},
        ":t": {"L": [{"S": "t"}]},
        ":aa": {"SS": ["x", "y"]},
        ":dd": {"SS": ["x"]},
    }
    names = {"#n": "n", "#m": "m", "#pk": "pk"}
    key = {"pk": {"S": "JOB#5"}, "sk": {"S": "JOB"}}

    def run(dynamodb: Any) -> list[Any]:
        seen: list[Any] = []
        for in_transaction in (False, True):
            for update in MORE_UPDATES * 2:  # the second time from the memos
                dynamodb.put_item(
                    TableName="jobs",
                    Item={
                        **key,
                        "l": {"L": [{"S": "a"}, {"M": {"x": {"N": "2"}}}, {"S": "c"}]},
                        "m": {"M": {"inr": {"M": {"x": {"N": "3"}}}}},
                        "ss": {"SS": ["x"]},
                        "b": {"S": "b"},
                    },
                )
                request: dict[str, Any] = {"TableName": "jobs", "Key": key}
                request["UpdateExpression"] = update
                used = {k: v for k, v in values.items() if _uses(update, k)}
                if used:
                    request["ExpressionAttributeValues"] = used
                if "#" in update:
                    request["ExpressionAttributeNames"] = {
                        k: v for k, v in names.items() if _uses(update, k)
                    }
                try:
                    if in_transaction:
                        dynamodb.transact_write_items(TransactItems=[{"Update": request}])
                    else:
                        dynamodb.update_item(**request)
                    seen.append(dynamodb.get_item(TableName="jobs", Key=key)["Item"])
                except ClientError as error:
                    seen.append(
                        (error.response["Error"]["Code"], error.response["Error"]["Message"])
                    )
                except KeyError as error:  # moto's path check, in-process, on an undefined name
                    seen.append(("KeyError", str(error)))
        return seen

    expected, first, again = both_ways(run)
    assert first == expected
    assert again == expected
    outcomes = ["ok" if isinstance(answer, dict) else answer[0] for answer in expected]
    assert outcomes.count("ok") >= 20, expected
    assert outcomes.count("ValidationException") >= 20, expected
