"""The embedded moto server keeps what it acknowledged: every committed DynamoDB write and every
document put or delete is in the data directory's journal (leasehold_dev.local.journal) before
the answer leaves, and a restart loads it back (decision L15).

`Durability` sits in the server's WSGI chain, inside the DynamoDB lock of L2:
- a mutating DynamoDB request (PutItem, UpdateItem, DeleteItem, TransactWriteItems,
  BatchWriteItem) that moto answered 200 is followed, still under the lock, by a read of every
  item it named, and the images it left (or their absence) are appended as one record; the
  answer is held back until `wait_durable` says the record is on disk, then sent. A refused
  request (a condition that failed, a cancelled transaction) changed nothing and appends
  nothing. Any other DynamoDB request also waits until every record appended before it is on
  disk, so nobody reads a write that a crash could still take back;
- a PUT, POST or DELETE on an object of a journaled bucket does the same with the object (its
  body, metadata and time) under the same lock — signed in a header, presigned, unsigned, a
  form POST, by path or by virtual host: moto acknowledges them all;
- PartiQL (ExecuteStatement, BatchExecuteStatement, ExecuteTransaction) cannot be journaled
  item by item here and is refused with a 400 while journaling is on; nothing in leasehold
  sends it;
- if the journal cannot be written or synced, that request and every DynamoDB and document
  request after it is answered 503 `ServiceUnavailable` (fail-stop: what is in memory but not
  on disk is never shown to anyone).

Only the stack's own tables and buckets are journaled, named by logical id (`JobsTable`,
`DocumentsBucket`, and any table or bucket the template adds), so a physical name that changes
between runs does not matter. `restore` puts the loaded entries straight into moto's tables
and buckets: a restored item makes no stream record (the relay would otherwise re-send a
wake-up for every outbox item ever written), so what was in flight is found by the sweeper.
Queues are not journaled: wake-ups may be lost (docs/architecture.md "Shape").
"""

from __future__ import annotations

import base64
import io
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import parse_qs, unquote
from xml.etree import ElementTree

from leasehold_dev.local.journal import Journal
from leasehold_dev.local.journal_format import Change, JournalError
from leasehold_dev.local.moto.transactions import require_pinned_moto

RESTORE_PATH = "/_leasehold/restore"
"""Local only: `POST {"tables": {logical: physical}, "buckets": {logical: physical}}` loads the
data directory into the stack's new tables and buckets and starts journaling them."""

DYNAMODB = "dynamodb"
S3 = "s3"
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
PARTIQL = frozenset({"ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction"})
ACCOUNT = "123456789012"
REGION = "us-east-1"

_SIGNED_FOR = re.compile(r"/([a-z0-9-]+)/aws4_request")
"""A SigV4 credential scope (`Credential=AK/20260101/us-east-1/s3/aws4_request`, in the
Authorization header or a presigned URL's `X-Amz-Credential`): its service."""

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@dataclass(frozen=True)
class Restored:
    """What `restore` put back, for `local up` to print."""

    items: int
    tables: int
    documents: int
    kept_aside: int
    """Entries of tables or buckets the template no longer has: kept in the data, not loaded."""
    seconds: float
    load_seconds: float
    records_replayed: int
    torn_tail_dropped: bool


def _key_text(value: dict[str, Any]) -> str:
    """A key attribute's value as text that equal DynamoDB values share (`1.0` and `1` are one
    number)."""
    kind, raw = next(iter(value.items()))
    if kind == "N":
        try:
            return json.dumps({"N": str(Decimal(raw).normalize())})
        except InvalidOperation:
            pass
    return json.dumps({kind: raw})


class Durability:
    """The journal's place in the server's WSGI chain (see the module's docstring). Made with a
    locked journal, it loads the directory's state at once (JournalError when it cannot); the
    tables and buckets are filled, and journaling begins, at `restore`."""

    def __init__(self, journal: Journal) -> None:
        require_pinned_moto("durable", "item and object images")
        self.journal = journal
        self.loaded = journal.load()
        self.tables: dict[str, str] = {}
        """physical table name → logical id, once `restore` has run."""
        self.buckets: dict[str, str] = {}
        self.journaling = False

    # ---------------------------------------------------------------- restoring

    def restore(self, tables: dict[str, str], buckets: dict[str, str]) -> Restored:
        """Load every entry into the named tables and buckets (logical → physical) and start
        journaling them. Raises JournalError when an item does not fit its table's keys."""
        from moto.dynamodb.models import dynamodb_backends
        from moto.dynamodb.models.dynamo_type import DynamoType, Item
        from moto.s3.models import s3_backends

        started = time.monotonic()
        dynamodb = dynamodb_backends[ACCOUNT][REGION]
        s3 = s3_backends[ACCOUNT]["aws"]
        moto_tables = {logical: dynamodb.get_table(name) for logical, name in tables.items()}
        items = documents = aside = 0
        filled: set[str] = set()
        for (space, resource, key), image in self.journal.entries.items():
            if space == DYNAMODB and resource in moto_tables:
                table = moto_tables[resource]
                attrs = {name: _binary_as_bytes(value) for name, value in json.loads(image).items()}
                try:
                    hash_key = DynamoType(attrs[table.hash_key_attr])
                    range_attr = table.range_key_attr
                    range_key = DynamoType(attrs[range_attr]) if range_attr else None
                except KeyError as exc:
                    raise JournalError(
                        f"an item of {resource} in {self.journal.directory} lacks the table's "
                        f"key {exc}: the template changed its keys; start with `--fresh` (the "
                        "old state is kept aside) or another `--data DIR`"
                    ) from exc
                item = Item(hash_key, range_key, attrs)
                if range_key is None:
                    table.items[hash_key] = item  # type: ignore[assignment]
                else:
                    table.items[hash_key][range_key] = item
                items += 1
                filled.add(resource)
            elif space == S3 and resource in buckets:
                _restore_object(s3, buckets[resource], key, json.loads(image))
                documents += 1
            else:
                aside += 1
        self.tables = {name: logical for logical, name in tables.items()}
        self.buckets = {name: logical for logical, name in buckets.items()}
        self.journal.start()
        self.journaling = True
        return Restored(
            items=items,
            tables=len(filled),
            documents=documents,
            kept_aside=aside,
            seconds=round(time.monotonic() - started, 3),
            load_seconds=round(self.loaded.seconds, 3),
            records_replayed=self.loaded.records_replayed,
            torn_tail_dropped=self.loaded.torn_tail_dropped,
        )

    def restore_endpoint(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        try:
            asked = json.loads(environ["wsgi.input"].read(length) or b"{}")
            tables, buckets = dict(asked["tables"]), dict(asked.get("buckets", {}))
        except (ValueError, KeyError, TypeError):
            start_response("400 Bad Request", [("Content-Type", "application/json")])
            return [b'{"error": "send {\\"tables\\": {...}, \\"buckets\\": {...}}"}']
        if self.journaling:
            start_response("409 Conflict", [("Content-Type", "application/json")])
            return [b'{"error": "already restored"}']
        try:
            restored = self.restore(tables, buckets)
        except (JournalError, OSError) as exc:
            start_response("500 Internal Server Error", [("Content-Type", "application/json")])
            return [json.dumps({"error": str(exc)}).encode()]
        except Exception as exc:  # an entry moto refuses: say which, not werkzeug's HTML page
            start_response("500 Internal Server Error", [("Content-Type", "application/json")])
            said = (
                f"an entry of {self.journal.directory} could not be loaded ({exc!r}); move the "
                "data directory aside (`--fresh` keeps it as DIR.previous) or report it"
            )
            return [json.dumps({"error": said}).encode()]
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(asdict(restored)).encode()]

    # ---------------------------------------------------------------- serving

    def dynamodb(
        self, app: WsgiApp, environ: dict[str, Any], start_response: Any, lock: Any
    ) -> list[bytes]:
        """One DynamoDB request: moto's answer, sent only once what it shows is on disk."""
        if not self.journaling:
            with lock:
                return list(app(environ, start_response))
        if self.journal.failure is not None:
            return _unavailable(environ, start_response, self.journal.failure)
        operation = str(environ.get("HTTP_X_AMZ_TARGET", "")).rsplit(".", 1)[-1]
        if operation in PARTIQL:
            return _partiql_refused(environ, start_response)
        body = _read_body(environ) if operation in WRITES else b""
        held = _HeldResponse()
        try:
            with lock:
                answer = list(app(environ, held.start_response))
                sequence = self.journal.appended
                if operation in WRITES and held.status.startswith("200"):
                    sequence = self._append(lambda: self._item_changes(operation, json.loads(body)))
            self.journal.wait_durable(sequence)
        except JournalError as exc:
            return _unavailable(environ, start_response, exc)
        return held.send(start_response, answer)

    def _append(self, changes: Callable[[], list[Change]]) -> int:
        """Append what a write moto applied left; if its images cannot even be read, memory now
        holds a write the disk does not, so the journal fails (fail-stop) rather than go on."""
        try:
            found = changes()
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self.journal.fail(exc)
            raise JournalError(f"the images of a write could not be read: {exc!r}") from exc
        return self.journal.append(found) if found else self.journal.appended

    def is_object_write(self, environ: dict[str, Any]) -> bool:
        """A PUT, POST or DELETE naming a journaled bucket (while journaling) — however it is
        signed (a header, a presigned URL's query, not at all: moto serves them all) and
        addressed (the path's first segment, or a virtual host `bucket.host`). One that is
        not an object write after all is journaled harmlessly: the image read back is the
        object as it already was."""
        if not self.journaling or environ.get("REQUEST_METHOD") not in {"PUT", "POST", "DELETE"}:
            return False
        scope = _SIGNED_FOR.search(
            f"{environ.get('HTTP_AUTHORIZATION', '')} {unquote(environ.get('QUERY_STRING', ''))}"
        )
        if scope is not None and scope.group(1) != "s3":
            return False
        return self._object_target(environ)[0] in self.buckets

    def _object_target(self, environ: dict[str, Any]) -> tuple[str, str]:
        """(bucket, key) as moto reads them: from a virtual host `bucket.…`, else the path."""
        path = unquote(str(environ.get("PATH_INFO", ""))).lstrip("/")
        host = str(environ.get("HTTP_HOST", "")).rsplit(":", 1)[0]
        for bucket in self.buckets:
            if host.startswith(bucket + "."):
                return bucket, path
        bucket, _, key = path.partition("/")
        return bucket, key

    def object_write(
        self, app: WsgiApp, environ: dict[str, Any], start_response: Any, lock: Any
    ) -> list[bytes]:
        """One object write, answered once the object (or its absence) is on disk."""
        if self.journal.failure is not None:
            return _unavailable(environ, start_response, self.journal.failure, s3=True)
        body = _read_body(environ)
        bucket, key = self._object_target(environ)
        query = parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
        keys = [key] if key else []
        if not key and environ["REQUEST_METHOD"] == "POST" and "delete" in query:
            keys = _deleted_keys(body)
        held = _HeldResponse()
        try:
            with lock:
                # A POST to the bucket itself that is not a DeleteObjects is a form upload
                # (a presigned POST): its key is in the form, so compare the bucket instead.
                before = None if key or "delete" in query else self._objects(bucket)
                answer = list(app(environ, held.start_response))
                sequence = self.journal.appended
                if before is not None:
                    after = self._objects(bucket)
                    keys = sorted(
                        k for k in before.keys() | after.keys() if before.get(k) is not after.get(k)
                    )
                if keys and held.status[:1] == "2":
                    sequence = self._append(lambda: self._object_changes(bucket, keys))
            self.journal.wait_durable(sequence)
        except JournalError as exc:
            return _unavailable(environ, start_response, exc, s3=True)
        return held.send(start_response, answer)

    # ---------------------------------------------------------------- images

    def _item_changes(self, operation: str, request: dict[str, Any]) -> list[Change]:
        """The image each item named by the request has now (None: it is gone)."""
        named: list[tuple[str, dict[str, Any]]] = []  # (table name or ARN, item or key)
        if operation == "PutItem":
            named.append((request["TableName"], request["Item"]))
        elif operation in {"UpdateItem", "DeleteItem"}:
            named.append((request["TableName"], request["Key"]))
        elif operation == "TransactWriteItems":
            for action in request.get("TransactItems", []):
                for verb, detail in action.items():
                    if verb == "Put":
                        named.append((detail["TableName"], detail["Item"]))
                    elif verb in {"Update", "Delete"}:
                        named.append((detail["TableName"], detail["Key"]))
        elif operation == "BatchWriteItem":
            for table_name, writes in request.get("RequestItems", {}).items():
                for write in writes:
                    if "PutRequest" in write:
                        named.append((table_name, write["PutRequest"]["Item"]))
                    elif "DeleteRequest" in write:
                        named.append((table_name, write["DeleteRequest"]["Key"]))
        return [change for name, item in named if (change := self._item_change(name, item))]

    def _item_change(self, table_name: str, item: dict[str, Any]) -> Change | None:
        from moto.dynamodb.models import dynamodb_backends
        from moto.dynamodb.models.dynamo_type import DynamoType

        table = dynamodb_backends[ACCOUNT][REGION].get_table(table_name)
        logical = self.tables.get(table.name)
        if logical is None:
            return None
        hash_value = item[table.hash_key_attr]
        range_attr = table.range_key_attr
        range_value = item[range_attr] if range_attr else None
        key = "[" + _key_text(hash_value)
        key += "," + _key_text(range_value) + "]" if range_value is not None else "]"
        current = table.get_item(
            DynamoType(hash_value), DynamoType(range_value) if range_value is not None else None
        )
        image = None
        if current is not None:  # binary values as the wire has them: base64 text
            image = json.dumps(current.to_json()["Attributes"], default=_base64_text)
        return Change(DYNAMODB, logical, key, image)

    def _objects(self, bucket: str) -> dict[str, Any]:
        """The bucket's objects now, by key (kept alive, so compared by identity)."""
        from moto.s3.models import s3_backends

        stored = s3_backends[ACCOUNT]["aws"].buckets.get(bucket)
        return {} if stored is None else dict(stored.keys.items())

    def _object_changes(self, bucket: str, keys: list[str]) -> list[Change]:
        from moto.s3.models import FakeDeleteMarker, s3_backends

        stored = s3_backends[ACCOUNT]["aws"].get_bucket(bucket)
        logical = self.buckets[bucket]
        changes = []
        for key in keys:
            found = stored.keys.get(key)
            image = None
            # In a bucket someone made versioned, a delete leaves a marker as the latest
            # version: the object is gone (its older versions are not kept across a restart).
            if found is not None and not isinstance(found, FakeDeleteMarker):
                image = json.dumps(
                    {
                        "body": base64.b64encode(found.value).decode(),
                        "metadata": dict(found.metadata),
                        "last_modified": found.last_modified.isoformat(),
                    }
                )
            changes.append(Change(S3, logical, key, image))
        return changes


def _read_body(environ: dict[str, Any]) -> bytes:
    """The request's body, read whole and put back for moto: by its Content-Length, or to its
    end when the server already framed it (a chunked body)."""
    length = str(environ.get("CONTENT_LENGTH") or "")
    if length.isdigit():
        body: bytes = environ["wsgi.input"].read(int(length))
    elif environ.get("wsgi.input_terminated"):
        body = environ["wsgi.input"].read()
    else:
        return b""
    environ["wsgi.input"] = io.BytesIO(body)
    return body


def _binary_as_bytes(value: dict[str, Any]) -> dict[str, Any]:
    """An attribute value of an image as moto keeps a written one: binary as bytes, not the
    image's base64 text (which moto would also count a third larger against the 400 KB item
    limit, so a large binary item it had accepted could not be restored)."""
    kind, raw = next(iter(value.items()))
    if kind == "B":
        return {kind: base64.b64decode(raw)}
    if kind == "BS":
        return {kind: [base64.b64decode(item) for item in raw]}
    if kind == "M":
        return {kind: {name: _binary_as_bytes(item) for name, item in raw.items()}}
    if kind == "L":
        return {kind: [_binary_as_bytes(item) for item in raw]}
    return value


def _base64_text(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} in an item image")


def _restore_object(s3: Any, bucket: str, key: str, image: dict[str, Any]) -> None:
    stored = s3.put_object(bucket, key, base64.b64decode(image["body"]), disable_notification=True)
    stored.set_metadata(dict(image["metadata"]), replace=True)
    stored.last_modified = datetime.fromisoformat(image["last_modified"])


def _deleted_keys(body: bytes) -> list[str]:
    """The keys a DeleteObjects request names."""
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return []
    return [
        element.text or ""
        for element in root.iter()
        if element.tag.rsplit("}", 1)[-1] == "Key" and element.text
    ]


class _HeldResponse:
    """moto's status and headers, kept until the journal says the answer may go."""

    def __init__(self) -> None:
        self.status = ""
        self.headers: list[tuple[str, str]] = []

    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], None]:
        self.status, self.headers = status, headers

        def write(_: bytes) -> None:
            raise RuntimeError("moto wrote a body through start_response's write()")

        return write

    def send(self, start_response: Any, answer: list[bytes]) -> list[bytes]:
        start_response(self.status, self.headers)
        return answer


def _unavailable(
    environ: dict[str, Any], start_response: Any, cause: BaseException, *, s3: bool = False
) -> list[bytes]:
    stream = environ.get("wsgi.input")
    if stream is not None:  # keep-alive stays sane: the body is read whatever happened
        stream.read(int(environ.get("CONTENT_LENGTH") or 0))
    message = f"local journal failed: nothing more is accepted ({cause})"
    if s3:
        start_response("503 Service Unavailable", [("Content-Type", "application/xml")])
        return [
            b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>ServiceUnavailable</Code>"
            b"<Message>" + message.encode("ascii", "replace") + b"</Message></Error>"
        ]
    body = {"__type": "com.amazonaws.dynamodb.v20120810#ServiceUnavailable", "message": message}
    start_response("503 Service Unavailable", [("Content-Type", "application/x-amz-json-1.0")])
    return [json.dumps(body).encode()]


def _partiql_refused(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    body = {
        "__type": "com.amazonaws.dynamodb.v20120810#ValidationException",
        "message": "the local stack's journal does not record PartiQL statements: use the "
        "item operations (PutItem, UpdateItem, DeleteItem, TransactWriteItems, BatchWriteItem)",
    }
    start_response("400 Bad Request", [("Content-Type", "application/x-amz-json-1.0")])
    return [json.dumps(body).encode()]
