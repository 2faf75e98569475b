"""leasehold_dev.local.moto.durable through the embedded server: every item write and every
document write it acknowledges comes back after a restart (with every attribute type, after
compactions), restored items make no stream records, a journal that cannot sync answers 503
from then on, and PartiQL is refused while journaling."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from leasehold_dev.local import journal as journal_module
from leasehold_dev.local.journal import Journal
from leasehold_dev.local.moto.durable import Durability
from leasehold_dev.local.moto.server import start_moto
from leasehold_dev.local.stack import client, restore_data


@dataclass
class Served:
    endpoint: str
    tables: dict[str, str]
    buckets: dict[str, str]
    journal: Journal
    restored: dict[str, Any]


def _make_resources(endpoint: str) -> tuple[dict[str, str], dict[str, str]]:
    """A new table and bucket each start, as the stack's template makes them (new names)."""
    suffix = uuid.uuid4().hex[:8]
    table, bucket = f"jobs-{suffix}", f"docs-{suffix}"
    client("dynamodb", endpoint).create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    client("s3", endpoint).create_bucket(Bucket=bucket)
    return {"JobsTable": table}, {"DocumentsBucket": bucket}


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    """`serve(compact_min_bytes)`: a server on tmp_path's data directory, restored into new
    resources; the previous one is stopped first without a clean close (as after SIGKILL)."""
    running: list[Any] = []

    def start(compact_min_bytes: int = journal_module.COMPACT_MIN_BYTES) -> Served:
        for server, journal in running:
            server.stop()
            journal._release_lock()  # the process "died": its flock goes with it
        running.clear()
        journal = Journal(tmp_path / "data", compact_min_bytes=compact_min_bytes)
        journal.lock()
        server, endpoint = start_moto(Durability(journal))
        running.append((server, journal))
        tables, buckets = _make_resources(endpoint)
        restored = restore_data(endpoint, {"tables": tables, "buckets": buckets})
        return Served(endpoint, tables, buckets, journal, restored)

    yield start
    for server, journal in running:
        server.stop()
        journal.close(compact=False)


EVERY_TYPE = {
    "s": {"S": "text with \u00e9 and \U0001f600"},
    "n": {"N": "-12.50"},
    "b": {"B": b"\x00\x01binary"},
    "t": {"BOOL": True},
    "z": {"NULL": True},
    "m": {"M": {"inner": {"L": [{"N": "1"}, {"S": "two"}, {"M": {"x": {"BOOL": False}}}]}}},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2.5"]},
    "bs": {"BS": [b"x", b"y"]},
}


def _key(pk: str, sk: str = "JOB") -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _scan(endpoint: str, table: str) -> list[dict[str, Any]]:
    items = client("dynamodb", endpoint).scan(TableName=table, ConsistentRead=True)["Items"]
    return sorted(items, key=lambda item: (item["pk"]["S"], item["sk"]["S"]))


def _write_everything(endpoint: str, table: str) -> None:
    dynamodb = client("dynamodb", endpoint)
    dynamodb.put_item(TableName=table, Item={**_key("all-types"), **EVERY_TYPE})
    for n in range(40):  # enough records to compact a few times at 2 KiB
        dynamodb.put_item(TableName=table, Item={**_key(f"job-{n}"), "state": {"S": "queued"}})
    dynamodb.update_item(
        TableName=table,
        Key=_key("job-1"),
        UpdateExpression="SET #s = :r, attempts = :one",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":r": {"S": "running"}, ":one": {"N": "1"}},
    )
    dynamodb.delete_item(TableName=table, Key=_key("job-2"))
    dynamodb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": table, "Item": {**_key("job-40"), "state": {"S": "queued"}}}},
            {"Update": {
                "TableName": table, "Key": _key("job-3"), "UpdateExpression": "REMOVE #s",
                "ExpressionAttributeNames": {"#s": "state"}}},
            {"Delete": {"TableName": table, "Key": _key("job-4")}},
            {"ConditionCheck": {
                "TableName": table, "Key": _key("job-5"),
                "ConditionExpression": "attribute_exists(pk)"}},
        ]
    )  # fmt: skip
    dynamodb.batch_write_item(
        RequestItems={
            table: [
                {"PutRequest": {"Item": {**_key("job-41"), "state": {"S": "queued"}}}},
                {"DeleteRequest": {"Key": _key("job-6")}},
            ]
        }
    )
    with pytest.raises(ClientError, match="ConditionalCheckFailed"):  # changes nothing
        dynamodb.put_item(
            TableName=table,
            Item={**_key("job-7"), "state": {"S": "lost"}},
            ConditionExpression="attribute_not_exists(pk)",
        )


def test_every_write_comes_back_after_a_restart_with_every_attribute_type(serve: Any) -> None:
    # Given a server that compacts past 2 KiB, and every kind of item write
    first = serve(compact_min_bytes=2048)
    _write_everything(first.endpoint, first.tables["JobsTable"])
    before = _scan(first.endpoint, first.tables["JobsTable"])
    assert first.journal.compactions >= 1
    # When it dies and another starts on the same data directory, with a new table
    second = serve()
    # Then the new table holds exactly what the first acknowledged
    assert second.restored["items"] == len(before) == 40
    assert _scan(second.endpoint, second.tables["JobsTable"]) == before
    # ... and the restore wrote no stream record (no wake-up is sent again for old outbox items)
    streams = client("dynamodbstreams", second.endpoint)
    arn = client("dynamodb", second.endpoint).describe_table(TableName=second.tables["JobsTable"])[
        "Table"
    ]["LatestStreamArn"]
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        assert streams.get_records(ShardIterator=iterator)["Records"] == []
    # ... and a third start after a clean close still has it all
    second.journal.close()
    third = serve()
    assert _scan(third.endpoint, third.tables["JobsTable"]) == before


def test_an_item_near_the_size_limit_in_binary_comes_back_and_can_still_be_updated(
    serve: Any,
) -> None:
    """moto counts a binary value by its bytes; the image holds it as base64 text, a third
    larger. An item of 390 KiB of binary that moto accepted must not stop the next start."""
    big = bytes(range(256)) * (390 * 4)  # 390 KiB
    item = {**_key("big"), "blob": {"B": big}, "m": {"M": {"l": {"L": [{"B": b"\x00\xff"}]}}}}
    first = serve()
    client("dynamodb", first.endpoint).put_item(TableName=first.tables["JobsTable"], Item=item)
    again = serve()
    dynamodb = client("dynamodb", again.endpoint)
    table = again.tables["JobsTable"]
    assert again.restored["items"] == 1
    assert dynamodb.get_item(TableName=table, Key=_key("big"), ConsistentRead=True)["Item"] == item
    dynamodb.update_item(  # as moto would have allowed before the restart
        TableName=table,
        Key=_key("big"),
        UpdateExpression="SET n = :n",
        ExpressionAttributeValues={":n": {"S": "x" * 1000}},
    )


def test_a_delete_in_a_bucket_made_versioned_is_journaled_not_a_journal_failure(
    serve: Any,
) -> None:
    """A client may turn versioning on: a delete then leaves a delete marker, which is the
    object's absence — not an image that cannot be read, failing every later write."""
    first = serve()
    s3 = client("s3", first.endpoint)
    bucket = first.buckets["DocumentsBucket"]
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=bucket, Key="gone", Body=b"1")
    s3.put_object(Bucket=bucket, Key="kept", Body=b"1")
    s3.put_object(Bucket=bucket, Key="kept", Body=b"2")
    s3.delete_object(Bucket=bucket, Key="gone")
    assert first.journal.failure is None
    again = serve()
    s3 = client("s3", again.endpoint)
    bucket = again.buckets["DocumentsBucket"]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["kept"]
    assert s3.get_object(Bucket=bucket, Key="kept")["Body"].read() == b"2"


def test_documents_come_back_after_a_restart(serve: Any) -> None:
    first = serve()
    s3 = client("s3", first.endpoint)
    bucket = first.buckets["DocumentsBucket"]
    s3.put_object(Bucket=bucket, Key="tenants/t/documents/a.txt", Body=b"alpha",
                  ContentType="text/plain", Metadata={"owner": "alice"})  # fmt: skip
    for name in ("b.txt", "c.txt", "d.txt"):
        s3.put_object(Bucket=bucket, Key=f"tenants/t/documents/{name}", Body=name.encode())
    s3.delete_object(Bucket=bucket, Key="tenants/t/documents/b.txt")
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "tenants/t/documents/c.txt"}]})
    second = serve()
    s3 = client("s3", second.endpoint)
    bucket = second.buckets["DocumentsBucket"]
    assert second.restored["documents"] == 2
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert listed == ["tenants/t/documents/a.txt", "tenants/t/documents/d.txt"]
    kept = s3.get_object(Bucket=bucket, Key="tenants/t/documents/a.txt")
    assert kept["Body"].read() == b"alpha"
    assert (kept["ContentType"], kept["Metadata"]) == ("text/plain", {"owner": "alice"})


def test_a_document_key_with_control_characters_comes_back_and_breaks_nothing(
    serve: Any,
) -> None:
    """An S3 key may hold any character, the journal's own separators (RS, US) included: the
    record keeps it whole, the records after it too, through a replay and a snapshot."""
    keys = ["rs\x1ekey", "us\x1fkey", "tab\tkey", '"quoted"', '"half', "plain"]
    first = serve()
    s3 = client("s3", first.endpoint)
    for name in keys:
        s3.put_object(Bucket=first.buckets["DocumentsBucket"], Key=name, Body=name.encode())
    for replay_or_snapshot in ("replayed", "snapshot"):
        again = serve()
        s3 = client("s3", again.endpoint)
        bucket = again.buckets["DocumentsBucket"]
        listed = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
        assert listed == sorted(keys), replay_or_snapshot
        assert s3.get_object(Bucket=bucket, Key="rs\x1ekey")["Body"].read() == b"rs\x1ekey"
        again.journal.close()  # the next start reads a snapshot alone


def test_a_document_written_however_it_is_signed_or_addressed_comes_back(serve: Any) -> None:
    """moto acknowledges an object write presigned (a query, no Authorization header), as a
    form POST, unsigned, or to a virtual host `bucket.localhost`: each is journaled too."""
    import http.client
    from urllib.parse import urlsplit

    served = serve()
    bucket = served.buckets["DocumentsBucket"]
    s3 = client("s3", served.endpoint)
    where = urlsplit(served.endpoint)

    def send(method: str, url: str, body: bytes, headers: dict[str, str] | None = None) -> int:
        target = urlsplit(url)
        connection = http.client.HTTPConnection(where.hostname or "", where.port)
        path = target.path + (f"?{target.query}" if target.query else "")
        connection.request(method, path, body=body, headers=headers or {})
        status = connection.getresponse().status
        connection.close()
        return status

    presigned = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "pre"})
    assert send("PUT", presigned, b"presigned") == 200
    form = s3.generate_presigned_post(bucket, "form")
    boundary = "leasehold-boundary"
    parts = [*form["fields"].items(), ("file", "posted")]
    body = (
        "".join(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"'
            + ('; filename="form"' if name == "file" else "")
            + f"\r\n\r\n{value}\r\n"
            for name, value in parts
        )
        + f"--{boundary}--\r\n"
    )
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    assert send("POST", form["url"], body.encode(), headers) in {200, 204}
    assert send("PUT", f"{served.endpoint}/{bucket}/unsigned", b"unsigned") == 200
    virtual = {"Host": f"{bucket}.localhost:{where.port}"}
    assert send("PUT", f"{served.endpoint}/virtual", b"virtual", virtual) == 200
    written = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
    assert written == ["form", "pre", "unsigned", "virtual"]
    again = serve()
    s3 = client("s3", again.endpoint)
    bucket = again.buckets["DocumentsBucket"]
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]) == written
    assert s3.get_object(Bucket=bucket, Key="form")["Body"].read() == b"posted"


def test_a_journal_that_cannot_sync_answers_503_from_then_on(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from botocore.config import Config

    served = serve()
    dynamodb = boto3.session.Session().client(
        "dynamodb",
        endpoint_url=served.endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "max_attempts": 1}),  # see the 503 itself
    )
    table = served.tables["JobsTable"]

    def disk_gone(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(journal_module.os, "fdatasync", disk_gone)
    with pytest.raises(ClientError) as refused:
        dynamodb.put_item(TableName=table, Item=_key("never-acknowledged"))
    assert refused.value.response["Error"]["Code"] == "ServiceUnavailable"
    monkeypatch.undo()
    with pytest.raises(ClientError) as still:  # nobody may read what is not on disk
        dynamodb.get_item(TableName=table, Key=_key("never-acknowledged"))
    assert still.value.response["Error"]["Code"] == "ServiceUnavailable"


def test_partiql_is_refused_while_journaling(serve: Any) -> None:
    served = serve()
    with pytest.raises(ClientError) as refused:
        client("dynamodb", served.endpoint).execute_statement(
            Statement=f"INSERT INTO \"{served.tables['JobsTable']}\" VALUE {{'pk': 'a', 'sk': 'b'}}"
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "PartiQL" in refused.value.response["Error"]["Message"]


def test_nobody_reads_a_write_before_it_is_on_disk(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    # Given a write whose sync is held up
    served = serve()
    table = served.tables["JobsTable"]
    release = threading.Event()
    real = journal_module.os.fdatasync

    def slow_disk(fd: int) -> None:
        release.wait(timeout=10)
        real(fd)

    monkeypatch.setattr(journal_module.os, "fdatasync", slow_disk)
    answers: dict[str, Any] = {}

    def put() -> None:
        answers["put"] = client("dynamodb", served.endpoint).put_item(
            TableName=table, Item={**_key("held"), "state": {"S": "queued"}}
        )

    def get() -> None:
        answers["get"] = client("dynamodb", served.endpoint).get_item(
            TableName=table, Key=_key("held"), ConsistentRead=True
        )

    writer = threading.Thread(target=put)
    writer.start()
    deadline = time.monotonic() + 10
    while served.journal.appended == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    # When another client reads the item while the sync waits
    reader = threading.Thread(target=get)
    reader.start()
    reader.join(timeout=0.5)
    # Then neither has its answer until the record is on disk; then both do
    assert answers == {} and reader.is_alive()
    release.set()
    writer.join(timeout=10)
    reader.join(timeout=10)
    assert answers["get"]["Item"]["state"] == {"S": "queued"}


def test_an_entry_moto_refuses_at_restore_is_named_not_an_html_page(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from leasehold_dev.local.moto import durable as moto_durable
    from leasehold_dev.local.stack import StackError

    first = serve()
    client("dynamodb", first.endpoint).put_item(
        TableName=first.tables["JobsTable"], Item={**_key("j"), "v": {"S": "x"}}
    )

    def refused(value: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("an attribute moto cannot take")

    monkeypatch.setattr(moto_durable, "_binary_as_bytes", refused)
    with pytest.raises(StackError, match=r"could not be loaded \(ValueError\('an attribute"):
        serve()
