"""The in-process part of `make bench-local`: one PutItem against one 2-item TransactWriteItems
(an accept: two conditional Puts) through boto3 on moto's in-process mock, as the table fills,
with leasehold_dev.local.moto.transactions and — for the small sizes — with moto's own method."""

from __future__ import annotations

import json
import os
import statistics
import time
from typing import Any

PAYLOAD = json.dumps({"steps": [{"name": "s"}]})


def _job_like_item(n: int) -> dict[str, Any]:
    """About the size and shape of a job item (keys, state, index keys, a small payload)."""
    job = f"job#{n:08d}"
    return {
        "pk": {"S": job},
        "sk": {"S": "job"},
        "state": {"S": "succeeded"},
        "kind": {"S": "synthetic"},
        "tenant": {"S": "study-group"},
        "user_id": {"S": "alice"},
        "payload": {"S": PAYLOAD * 4},
        "attempts": {"N": "1"},
        "max_attempts": {"N": "3"},
        "epoch": {"N": "1"},
        "version": {"N": "4"},
        "created_at": {"N": str(1_700_000_000_000 + n)},
        "updated_at": {"N": str(1_700_000_000_500 + n)},
        "deadline_at": {"N": str(1_700_086_400_000 + n)},
        "gsi2pk": {"S": "owner#study-group#alice"},
        "gsi2sk": {"S": f"{1_700_000_000_000 + n}#{job}"},
    }


def measure_transactions(
    sizes: list[int], unpatched_sizes: set[int], repeats: int
) -> list[dict[str, Any]]:
    """Median cost of one PutItem and one 2-item TransactWriteItems (an accept: two conditional
    Puts) through boto3 on moto's in-process mock, as the table is filled to each size."""
    import types

    from moto import mock_aws
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    from leasehold_dev.local.moto import transactions as moto_transactions
    from leasehold_dev.local.resources import clients, create_table

    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    )
    os.environ.pop("AWS_ENDPOINT_URL", None)
    moto_transactions.install()
    rows = []
    with mock_aws():
        dynamodb, _ = clients()
        create_table(dynamodb, "jobs")
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        serial = iter(range(10**9))

        def one_put() -> None:
            item = _job_like_item(10**8 + next(serial))
            dynamodb.put_item(TableName="jobs", Item=item)

        def one_transaction() -> None:
            n = 10**8 + next(serial)
            first, second = _job_like_item(n), _job_like_item(n) | {"sk": {"S": "outbox#1"}}
            condition = "attribute_not_exists(pk)"
            dynamodb.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": "jobs", "Item": first, "ConditionExpression": condition}},
                    {
                        "Put": {
                            "TableName": "jobs",
                            "Item": second,
                            "ConditionExpression": condition,
                        }
                    },
                ]
            )

        def median_ms(action: Any, times: int) -> float:
            spent = []
            for _ in range(times):
                started = time.perf_counter()
                action()
                spent.append(time.perf_counter() - started)
            return round(statistics.median(spent) * 1000, 2)

        def interleaved_ms(times: int) -> tuple[float, float]:
            """PutItem and transaction taken in turns, so both see the same load."""
            puts, transactions = [], []
            for _ in range(times):
                puts.append(median_ms(one_put, 1))
                transactions.append(median_ms(one_transaction, 1))
            return round(statistics.median(puts), 2), round(statistics.median(transactions), 2)

        filled = 0
        for size in sorted(sizes):
            for n in range(filled, size):
                backend.put_item("jobs", _job_like_item(n))
            filled = size
            one_put(), one_transaction()  # warm
            put_ms, transaction_ms = interleaved_ms(repeats)
            row: dict[str, Any] = {
                "items": len(backend.tables["jobs"]),
                "put_item_ms": put_ms,
                "transaction_ms": transaction_ms,
            }
            row["transaction_over_put"] = round(row["transaction_ms"] / row["put_item_ms"], 2)
            if size in unpatched_sizes:
                backend.transact_write_items = types.MethodType(
                    moto_transactions.moto_original(), backend
                )
                row["unpatched_transaction_ms"] = median_ms(one_transaction, 3)
                del backend.transact_write_items
            rows.append(row)
            print(f"  transaction cost at {row['items']} items: {row}", flush=True)
    return rows
