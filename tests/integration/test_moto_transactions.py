"""leasehold_dev.local.moto.transactions against moto's own transact_write_items: the same
transactions through both give the same responses and errors (CancellationReasons in order, with
their items), the same tables, GSI answers and stream records — and the patch's cost does not
grow with the table."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from leasehold_dev.local.moto import transactions as moto_transactions
from tests.support.twin_backends import (
    JOB_KEYS,
    JOBS,
    MOTO_REGION,
    OTHER,
    OTHER_KEYS,
    OUTBOX_KEYS,
    PATCHED_REGION,
    TwinBackends,
)

# ------------------------------------------------------------------ request builders


def key(table: str, which: Any) -> dict[str, Any]:
    if table == JOBS:
        pk, sk = which
        return {"pk": {"S": pk}, "sk": {"S": sk}}
    return {"id": {"S": which}}


CONDITIONS: dict[str, tuple[str, dict[str, str], dict[str, Any]]] = {
    "exists": ("attribute_exists(version)", {}, {}),
    "absent": ("attribute_not_exists(version)", {}, {}),
    "queued": ("#cs = :cs", {"#cs": "state"}, {":cs": {"S": "queued"}}),
    "young": ("version < :cv", {}, {":cv": {"N": "5"}}),
}

UPDATES: dict[str, tuple[str, dict[str, str], dict[str, Any]]] = {
    "run": ("SET #us = :us", {"#us": "state"}, {":us": {"S": "running"}}),
    # `version + :one` on an item without `version` is a ValidationException from inside moto's
    # update, after the condition passed: the transaction stops there and rolls back.
    "bump": ("SET version = version + :one", {}, {":one": {"N": "1"}}),
    "index": (
        "SET gsi1pk = :gp, gsi1sk = :gs",
        {},
        {":gp": {"S": "state#queued"}, ":gs": {"S": "0000#new"}},
    ),
    "unindex": ("REMOVE gsi1pk, gsi1sk", {}, {}),
    "add": ("ADD hits :one", {}, {":one": {"N": "1"}}),
}


def operation(
    op_type: str,
    table: str,
    which: Any,
    *,
    condition: str | None = None,
    all_old: bool = False,
    update: str = "run",
    state: str = "queued",
    indexed: bool = False,
) -> dict[str, Any]:
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    body: dict[str, Any] = {"TableName": table}
    if op_type == "Put":
        item = {**key(table, which), "state": {"S": state}, "version": {"N": "3"}}
        if indexed and table == JOBS:
            item |= {"gsi1pk": {"S": f"state#{state}"}, "gsi1sk": {"S": f"0003#{which[0]}"}}
        body["Item"] = item
    else:
        body["Key"] = key(table, which)
    if op_type == "Update":
        expression, update_names, update_values = UPDATES[update]
        body["UpdateExpression"] = expression
        names |= update_names
        values |= update_values
    if op_type == "ConditionCheck" and condition is None:
        condition = "exists"
    if condition is not None:
        expression, condition_names, condition_values = CONDITIONS[condition]
        body["ConditionExpression"] = expression
        names |= condition_names
        values |= condition_values
        if all_old:
            body["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    if names:
        body["ExpressionAttributeNames"] = names
    if values:
        body["ExpressionAttributeValues"] = values
    return {op_type: body}


J1, J2, J3, J9 = JOB_KEYS
OUTBOX1 = OUTBOX_KEYS[0]

CASES: dict[str, list[list[dict[str, Any]]]] = {
    "two puts commit (accept)": [
        [
            operation("Put", JOBS, J9, condition="absent"),
            operation("Put", JOBS, ("job#9", "outbox#1"), condition="absent", indexed=True),
        ]
    ],
    "put, update, delete and check commit": [
        [
            operation("Put", JOBS, J9, condition="absent", indexed=True),
            operation("Update", JOBS, J1, condition="queued", update="run"),
            operation("Delete", JOBS, OUTBOX1),
            operation("ConditionCheck", OTHER, "a", condition="queued"),
        ]
    ],
    "last item fails, reasons without items": [
        [
            operation("Update", JOBS, J1, condition="queued", update="run"),
            operation("Put", JOBS, J2, condition="absent"),
        ]
    ],
    "first item fails with ALL_OLD, later writes undone": [
        [
            operation("Put", JOBS, J2, condition="absent", all_old=True),
            operation("Update", JOBS, J1, update="index"),
            operation("Delete", OTHER, "a"),
        ]
    ],
    "ALL_OLD on a missing item returns no item": [
        [
            operation("Update", JOBS, J9, condition="exists", all_old=True, update="add"),
            operation("Put", OTHER, "z", condition="absent"),
        ]
    ],
    "every item fails": [
        [
            operation("ConditionCheck", JOBS, J3, condition="queued", all_old=True),
            operation("Delete", JOBS, J2, condition="young", all_old=True),
            operation("Put", OTHER, "b", condition="absent"),
        ]
    ],
    "duplicate target is a ValidationException and undoes earlier writes": [
        [
            operation("Put", JOBS, J9),
            operation("Update", OTHER, "a", update="add"),
            operation("Delete", JOBS, J9),
        ]
    ],
    "duplicate target after a failed condition": [
        [
            operation("Put", JOBS, J1, condition="absent", all_old=True),
            operation("Update", OTHER, "b", update="add"),
            operation("ConditionCheck", OTHER, "b"),
        ]
    ],
    "validation error inside an update undoes earlier writes": [
        [
            operation("Put", JOBS, J9, indexed=True),
            operation("Update", OTHER, "z", update="bump"),
            operation("Put", JOBS, J2, condition="absent"),
        ]
    ],
    "update creating a new item, then a failure": [
        [
            operation("Update", JOBS, ("job#8", "job"), update="index"),
            operation("Update", OTHER, "z", update="add"),
            operation("ConditionCheck", JOBS, J1, condition="young", all_old=True),
            operation("Delete", JOBS, J3, condition="queued"),
        ]
    ],
    "condition check on an item the table lacks": [
        [operation("ConditionCheck", OTHER, "z", condition="exists", all_old=True)]
    ],
    "unknown table is a cancellation reason": [
        [
            operation("Put", JOBS, J9),
            {"Put": {"TableName": "nowhere", "Item": {"pk": {"S": "x"}}}},
        ]
    ],
    "key of the wrong type": [
        [
            operation("Put", OTHER, "z"),
            {"Put": {"TableName": OTHER, "Item": {"id": {"N": "1"}}}},
        ]
    ],
    "key missing its range part": [
        [
            operation("Put", OTHER, "z"),
            {"Delete": {"TableName": JOBS, "Key": {"pk": {"S": "job#1"}}}},
        ]
    ],
    "empty ExpressionAttributeValues is refused before the transaction": [
        [
            {
                "Update": {
                    "TableName": JOBS,
                    "Key": key(JOBS, J1),
                    "UpdateExpression": "REMOVE gsi1pk",
                    "ExpressionAttributeValues": {},
                }
            }
        ]
    ],
    "a sequence: commit, fail, commit on the same items": [
        [operation("Update", JOBS, J1, update="add"), operation("Put", OTHER, "z")],
        [
            operation("Update", JOBS, J1, update="add"),
            operation("Put", OTHER, "z", condition="absent"),
        ],
        [operation("Update", JOBS, J1, update="unindex"), operation("Delete", OTHER, "z")],
    ],
}


@pytest.fixture
def twins(aws_env: None) -> Iterator[TwinBackends]:
    with mock_aws():
        yield TwinBackends()


def assert_same(twins: TwinBackends, transactions: list[list[dict[str, Any]]]) -> None:
    for items in transactions:
        theirs, ours = twins.both(items)
        assert ours == theirs, f"moto answered {theirs}, the patch {ours}"
        ours_now = twins.state(PATCHED_REGION, through_api=False)
        assert ours_now == twins.state(MOTO_REGION, through_api=False)
    assert twins.state(PATCHED_REGION) == twins.state(MOTO_REGION)


@pytest.mark.parametrize("transactions", list(CASES.values()), ids=list(CASES))
def test_the_patch_answers_and_writes_as_moto_does(
    twins: TwinBackends, transactions: list[list[dict[str, Any]]]
) -> None:
    # Given the same seeded tables in both backends
    # When each transaction goes to both
    # Then every answer and everything a reader can see afterwards is the same
    assert_same(twins, transactions)


def test_the_cases_reach_every_outcome(twins: TwinBackends) -> None:
    # The table above is only worth something if it exercises commits, cancellations with and
    # without items, and raised validation errors.
    outcomes = [twins.transact(PATCHED_REGION, items) for case in CASES.values() for items in case]
    codes = {o.code for o in outcomes}
    assert None in codes and {"TransactionCanceledException", "ValidationException"} <= codes
    reasons = [r for o in outcomes for r in o.reasons or []]
    assert any("Item" in r for r in reasons)
    assert {r["Code"] for r in reasons} >= {"None", "ConditionalCheckFailed"}


TABLE_KEYS = st.one_of(
    st.tuples(st.just(JOBS), st.sampled_from([*JOB_KEYS, *OUTBOX_KEYS])),
    st.tuples(st.just(OTHER), st.sampled_from(OTHER_KEYS)),
)


@st.composite
def transact_items(draw: st.DrawFn) -> dict[str, Any]:
    table, which = draw(TABLE_KEYS)
    return operation(
        draw(st.sampled_from(["Put", "Update", "Delete", "ConditionCheck"])),
        table,
        which,
        condition=draw(st.none() | st.sampled_from(sorted(CONDITIONS))),
        all_old=draw(st.booleans()),
        update=draw(st.sampled_from(sorted(UPDATES))),
        state=draw(st.sampled_from(["queued", "running"])),
        indexed=draw(st.booleans()),
    )


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(transactions=st.lists(st.lists(transact_items(), min_size=1, max_size=5), max_size=4))
def test_random_transactions_match_moto(
    aws_env: None, transactions: list[list[dict[str, Any]]]
) -> None:
    with mock_aws():
        assert_same(TwinBackends(), transactions)


# ------------------------------------------------------------------ where the patch differs


def test_two_operations_in_one_item_leave_no_partial_write(twins: TwinBackends) -> None:
    # Given a transaction whose second item names two operations (moto raises after writing
    # the first item, and never undoes it)
    bad = {**operation("Put", OTHER, "z"), **operation("Delete", JOBS, J3)}
    items = [operation("Put", JOBS, J9, indexed=True), bad]
    before = twins.state(PATCHED_REGION)
    # When it is sent (the shape passes boto3's checks)
    theirs, ours = twins.both(items)
    # Then both refuse it, but only the patch leaves the tables as they were
    assert ours == theirs and ours.code == "ValidationException"
    assert twins.state(PATCHED_REGION) == before
    assert twins.state(MOTO_REGION) != before


def test_a_kept_stream_iterator_survives_a_rolled_back_transaction(twins: TwinBackends) -> None:
    # Given a shard iterator taken before a transaction that rolls back
    # (moto swaps the table for its backup then, orphaning the iterator: decision L3)
    streams = boto3.session.Session(region_name=PATCHED_REGION).client("dynamodbstreams")
    arn = (
        twins.backend(PATCHED_REGION).tables[JOBS].describe()["TableDescription"]["LatestStreamArn"]
    )
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="LATEST")
    iterator = iterator["ShardIterator"]
    failing = [operation("Put", JOBS, J9), operation("Put", JOBS, J1, condition="absent")]
    assert twins.transact(PATCHED_REGION, failing).code == "TransactionCanceledException"
    # When a later transaction commits
    assert twins.transact(PATCHED_REGION, [operation("Put", JOBS, J9)]).ok
    # Then the old iterator reads its record, and only its record (none from the rollback)
    records = streams.get_records(ShardIterator=iterator)["Records"]
    assert [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in records] == [
        ("INSERT", "job#9")
    ]


# ------------------------------------------------------------------ install and cost


def test_install_is_idempotent_and_refuses_another_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.dynamodb.models import DynamoDBBackend

    moto_transactions.install()
    moto_transactions.install()
    assert DynamoDBBackend.transact_write_items is moto_transactions.transact_write_items
    assert moto_transactions.moto_original() is not moto_transactions.transact_write_items
    monkeypatch.setattr(moto_transactions, "_moto_version", lambda: "5.2.6")
    with pytest.raises(moto_transactions.MotoVersionError, match=r"5\.2\.6 is installed"):
        moto_transactions.install()


def test_the_moto_fixture_runs_the_patch(moto: None) -> None:
    assert moto_transactions.installed()


def test_a_transaction_costs_the_same_at_any_table_size(moto: None) -> None:
    # Given a table that grows from 200 to 4,000 items (moto's own method would cost ~20x more)
    client = boto3.session.Session(region_name="us-east-1").client("dynamodb")
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    from leasehold_dev.local.resources import create_table

    create_table(client, JOBS)
    backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]

    def fill(count: int) -> None:
        for n in range(len(backend.tables[JOBS]), count):
            backend.put_item(JOBS, {"pk": {"S": f"fill#{n}"}, "sk": {"S": "job"}})

    def cost() -> float:
        best = float("inf")
        for n in range(15):
            items = [
                operation("Put", JOBS, (f"t#{time.monotonic_ns()}#{n}", "job"), condition="absent"),
                operation("Put", JOBS, (f"t#{time.monotonic_ns()}#{n}", "outbox#1")),
            ]
            started = time.perf_counter()
            client.transact_write_items(TransactItems=items)
            best = min(best, time.perf_counter() - started)
        return best

    fill(200)
    small = cost()
    fill(4000)
    large = cost()
    # Then the best-of-15 cost at 20x the items stays within 3x (noise on a shared machine)
    assert large < 3 * small, f"{small * 1000:.2f} ms at 200 items, {large * 1000:.2f} ms at 4,000"


def test_the_local_stacks_moto_server_runs_the_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given moto's own method in place (as in a fresh `leasehold local up` process)
    from moto.dynamodb.models import DynamoDBBackend

    from leasehold_dev.local.moto.server import start_moto

    monkeypatch.setattr(DynamoDBBackend, "transact_write_items", moto_transactions.moto_original())
    assert not moto_transactions.installed()
    # When the embedded server starts
    server, _ = start_moto()
    server.stop()
    # Then its DynamoDB backends run the patched transactions
    assert moto_transactions.installed()
