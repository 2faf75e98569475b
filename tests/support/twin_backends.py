"""Two moto DynamoDB backends with the same tables and seed items, one running moto's own
transact_write_items and one running leasehold_dev.local.moto.transactions', so a test can send the
same requests to both through boto3 and compare everything a client or a stream reader sees."""

from __future__ import annotations

import types
from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3
from botocore.exceptions import ClientError
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends

from leasehold_dev.local.moto import transactions as moto_transactions
from leasehold_dev.local.resources import create_table

MOTO_REGION = "us-east-1"
PATCHED_REGION = "us-west-2"
JOBS = "jobs"
OTHER = "other"  # a hash-key-only table with its own stream view type

JOB_KEYS = [("job#1", "job"), ("job#2", "job"), ("job#3", "job"), ("job#9", "job")]
OUTBOX_KEYS = [("job#1", "outbox#1"), ("job#2", "outbox#7")]
OTHER_KEYS = ["a", "b", "z"]


def _seed_items() -> dict[str, list[dict[str, Any]]]:
    jobs = [
        {
            "pk": {"S": pk},
            "sk": {"S": sk},
            "state": {"S": state},
            "version": {"N": str(version)},
            "gsi1pk": {"S": f"state#{state}"},
            "gsi1sk": {"S": f"{version:04d}#{pk}"},
            "gsi2pk": {"S": "owner#alice"},
            "gsi2sk": {"S": f"{version:04d}"},
        }
        for (pk, sk), state, version in zip(
            JOB_KEYS[:3], ["queued", "running", "succeeded"], [1, 4, 7], strict=True
        )
    ]
    jobs.append({"pk": {"S": "job#1"}, "sk": {"S": "outbox#1"}, "deliver_at": {"N": "5"}})
    other = [
        {"id": {"S": "a"}, "state": {"S": "queued"}, "version": {"N": "2"}},
        {"id": {"S": "b"}, "state": {"S": "running"}, "version": {"N": "9"}},
    ]
    return {JOBS: jobs, OTHER: other}


@cache
def dynamodb_client(region: str) -> Any:
    """One client per region for the whole run: moto intercepts clients made after it was
    imported whenever a mock is active, and making a client is most of a fresh backend's cost."""
    return boto3.session.Session(region_name=region).client("dynamodb")


@dataclass(frozen=True)
class Outcome:
    """What a client sees of one TransactWriteItems call."""

    ok: bool
    code: str | None = None
    message: str | None = None
    reasons: list[dict[str, Any]] | None = None


class TwinBackends:
    """Create inside an active `mock_aws()`."""

    def __init__(self) -> None:
        self.clients: dict[str, Any] = {}
        for region in (MOTO_REGION, PATCHED_REGION):
            client = dynamodb_client(region)
            create_table(client, JOBS)
            client.create_table(
                TableName=OTHER,
                BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
            )
            for table, items in _seed_items().items():
                for item in items:
                    client.put_item(TableName=table, Item=item)
            self.clients[region] = client
        # Bound on the instances, so the comparison holds whether or not install() has run.
        moto_backend = self.backend(MOTO_REGION)
        moto_backend.transact_write_items = types.MethodType(
            moto_transactions.moto_original(), moto_backend
        )
        patched_backend = self.backend(PATCHED_REGION)
        patched_backend.transact_write_items = types.MethodType(
            moto_transactions.transact_write_items, patched_backend
        )

    @staticmethod
    def backend(region: str) -> Any:
        return dynamodb_backends[DEFAULT_ACCOUNT_ID][region]

    def transact(self, region: str, items: list[dict[str, Any]]) -> Outcome:
        try:
            self.clients[region].transact_write_items(TransactItems=items)
        except ClientError as exc:
            return Outcome(
                ok=False,
                code=exc.response["Error"]["Code"],
                message=exc.response["Error"].get("Message"),
                reasons=exc.response.get("CancellationReasons"),
            )
        return Outcome(ok=True)

    def both(self, items: list[dict[str, Any]]) -> tuple[Outcome, Outcome]:
        """(moto's outcome, the patch's outcome) of the same transaction."""
        return self.transact(MOTO_REGION, items), self.transact(PATCHED_REGION, items)

    def state(self, region: str, *, through_api: bool = True) -> dict[str, Any]:
        """Everything observable: each table's raw item dict (hash buckets included), its items
        and stream records and — `through_api` — a scan and every GSI's answer for the
        partitions in play (moto derives both from the items on each call)."""
        client = self.clients[region]
        backend = self.backend(region)
        seen: dict[str, Any] = {}
        for name in (JOBS, OTHER):
            table = backend.tables[name]
            if table.has_range_key:
                raw = {
                    str(hk.to_json()): sorted(str(rk.to_json()) for rk in bucket)
                    for hk, bucket in table.items.items()
                }
            else:
                raw = {str(hk.to_json()): None for hk in table.items}
            seen[f"{name}:raw"] = dict(sorted(raw.items()))
            seen[f"{name}:items"] = [item.to_json() for item in table.all_items()]
            if through_api:
                seen[f"{name}:scan"] = client.scan(TableName=name, ConsistentRead=True)["Items"]
            seen[f"{name}:stream"] = [
                _timeless(record.to_json()) for record in table.stream_shard.items
            ]
        if not through_api:
            return seen
        for index, partition_attr in (("by_state", "gsi1pk"), ("by_owner", "gsi2pk")):
            for partition in ("state#queued", "state#running", "state#succeeded", "owner#alice"):
                answer = client.query(
                    TableName=JOBS,
                    IndexName=index,
                    KeyConditionExpression=f"{partition_attr} = :p",
                    ExpressionAttributeValues={":p": {"S": partition}},
                )
                seen[f"{index}:{partition}"] = answer["Items"]
        return seen


def _timeless(record: dict[str, Any]) -> dict[str, Any]:
    """A stream record without what depends on the clock: its creation time and SizeBytes (moto
    counts the time's text in it). eventID is random in moto and left out too."""
    ddb = {
        k: v
        for k, v in record["dynamodb"].items()
        if k not in {"ApproximateCreationDateTime", "SizeBytes"}
    }
    return {"eventName": record["eventName"], "dynamodb": ddb}
