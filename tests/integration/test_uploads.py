"""Presigned uploads (DESIGN §20, decisions LD7–LD9): an input past the API's body limit goes by
`POST /uploads` and a PUT, and a job names it; the caller's own only, expiring, its bytes checked
against the declared hash — on moto, the API function's real handler under its role, behind the
local stack's own gateway (its `PUT /local/uploads/<token>` route), the job run by a testbed
over the same table, queues and bucket."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from leasehold import Kind, Owner, StepContext
from leasehold.client import ApiError, Client
from leasehold.domain import sizes
from leasehold.handlers import api, wiring
from leasehold.handlers import worker as worker_function
from leasehold.store.blobs import REF
from leasehold.store.uploads import UPLOAD_USE_SECONDS, UploadStore
from leasehold.testing import LeaseholdTestbed, iam
from leasehold.testing.testbed import DATA_BUCKET
from leasehold_dev.local.gateway import Gateway
from leasehold_dev.local.invoke import acting_as
from leasehold_dev.local.resources import template_environment
from leasehold_dev.local.template import http_routes, load_template
from leasehold_dev.local.uploads import LocalUploads

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
ALICE = Owner("study-group", "alice")
"""The caller the local gateway's `alice` is."""
UPLOAD_KEY = "test-local-upload-key"
TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"

seen: list[dict[str, Any]] = []
"""What the step saw of its payload: its size and hash."""

bulky = Kind("bulky", max_payload_bytes=sizes.UPLOAD_LIMIT)


@bulky.step()
def measure(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    text: str = payload["text"]
    seen.append({"chars": len(text), "sha256": hashlib.sha256(text.encode()).hexdigest()})
    return {"sha256": seen[-1]["sha256"]}


def _text(size: int) -> str:
    # not one repeated character: a slice or a compressor could hide a bug
    unit = "".join(chr(0x61 + (i * 7) % 26) for i in range(1024))
    return (unit * (size // len(unit) + 1))[:size]


class Stack:
    """The API handler (this module's kind, template.yaml's environment) behind the local
    gateway, over a testbed's resources: what `leasehold local up` runs, in one process."""

    def __init__(self, tb: LeaseholdTestbed, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tb = tb
        env = template_environment(
            tb.table_name,
            tb.queue_urls,
            LEASEHOLD_KINDS=__name__,
            LEASEHOLD_LOCAL_UPLOADS=UPLOAD_KEY,
        )
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        for cached in (wiring.runtime, api.jobs, api.mounted):
            cached.cache_clear()
        role = tb.roles["ApiFunction"]
        s3 = tb.client("s3")
        self.puts: list[str] = []

        def put_object(**params: Any) -> Any:
            self.puts.append(params["Key"])
            with iam.acting_as(role):  # a presigned PUT acts with its signer's permissions
                return s3.put_object(**params)

        self.now_ms: int | None = None  # the upload route's clock (None: the wall clock)
        uploads = LocalUploads(UPLOAD_KEY, DATA_BUCKET, put_object, now_ms=self._now)
        routes = http_routes(load_template(TEMPLATE))
        handler = acting_as(role, api.handler)
        self.gateway = Gateway(0, routes, {"ApiFunction": handler}, uploads=uploads)
        self.gateway.start()
        self.url = f"http://127.0.0.1:{self.gateway.port}"

    def _now(self) -> int:
        import time

        return self.now_ms if self.now_ms is not None else int(time.time() * 1000)

    def client(self, user: str = "alice") -> Client:
        client = Client(self.url, user=user, timeout=30, retries=1)
        client._sleep = lambda _: None
        return client

    def run(self) -> None:
        """Run what the API accepted (on the wall clock) with the testbed's worker."""
        self.tb.advance(5)
        self.tb.run_until_idle()

    def uploads(self) -> list[str]:
        return self.blobs("uploads/")

    def blobs(self, prefix: str) -> list[str]:
        listed = self.tb.client("s3").list_objects_v2(Bucket=DATA_BUCKET, Prefix=prefix)
        return sorted(o["Key"] for o in listed.get("Contents", []))


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    import time

    seen.clear()
    with LeaseholdTestbed([bulky], owner=ALICE, start_ms=int(time.time() * 1000)) as tb:
        running = Stack(tb, monkeypatch)
        yield running
        running.gateway.stop()
    for cached in (wiring.runtime, worker_function.worker, api.jobs, api.mounted):
        cached.cache_clear()


def _grant(client: Client, data: bytes) -> dict[str, Any]:
    body = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return client._object("POST", "/uploads", body)


def _put(stack: Stack, grant: dict[str, Any], data: bytes) -> tuple[int, Any]:
    import urllib3

    answer = urllib3.request(
        grant["method"], stack.url + grant["url"], body=data, headers=grant["headers"]
    )
    return answer.status, (json.loads(answer.data) if answer.data else None)


def _job(client: Client, upload_id: str, key: str | None = None) -> Any:
    headers = {"Idempotency-Key": key} if key else {}
    body = {"kind": "bulky", "payload_upload": upload_id}
    return client._object("POST", "/jobs", body, headers=headers)


# ------------------------------------------------------------------ the Client, end to end


def test_a_12_mib_payload_through_the_client_arrives_whole_at_the_step(stack: Stack) -> None:
    # Given a payload whose JSON is past the API's 5 MiB body limit
    text = _text(12 * MIB)
    expected = hashlib.sha256(text.encode()).hexdigest()
    client = stack.client()
    # When the Client submits it as any other payload
    handle = client.submit("bulky", {"text": text})
    stack.run()
    # Then the step saw it whole, and the job's payload blob lives under the job's own prefix
    assert seen == [{"chars": 12 * MIB, "sha256": expected}]
    view = client.get(handle.job_id)
    assert view["state"] == "succeeded" and view["result"] == {"sha256": expected}, view
    job = stack.tb._reads.jobs.get(handle.job_id)
    assert job is not None and set(job.payload) == {REF}
    ref = job.payload[REF]
    assert ref["key"].startswith(f"jobs/{handle.job_id}/payload/") and ref["size"] > 12 * MIB
    # ...written by the upload route once, and the upload removed once the job took it
    assert len(stack.puts) == 1 and stack.puts[0].startswith("uploads/study-group/alice/u_")
    assert stack.uploads() == []


def test_a_small_payload_is_not_uploaded(stack: Stack) -> None:
    handle = stack.client().submit("bulky", {"text": "short"})
    stack.run()
    assert stack.puts == [] and seen[0]["chars"] == 5
    assert handle.get()["state"] == "succeeded"


def test_a_body_past_the_limit_is_still_a_413_with_no_upload(stack: Stack) -> None:
    import urllib3

    big = json.dumps({"kind": "bulky", "payload": {"text": "x" * (6 * MIB)}}).encode()
    answer = urllib3.request(
        "POST", stack.url + "/jobs", body=big, headers={"X-Demo-User": "alice"}
    )
    assert answer.status == 413 and json.loads(answer.data)["error"]["code"] == "payload_too_large"


def test_leasehold_submit_uploads_a_large_payload_from_a_request_file(
    stack: Stack, tmp_path: Path
) -> None:
    from tests.support.cli import run_cli

    text = _text(6 * MIB)
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"kind": "bulky", "payload": {"text": text}}))
    out = run_cli("submit", str(request), "--url", stack.url, cwd=tmp_path,
                  env={"HOME": str(tmp_path)})  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["state"] == "queued"
    stack.run()
    assert seen == [{"chars": 6 * MIB, "sha256": hashlib.sha256(text.encode()).hexdigest()}]
    assert len(stack.puts) == 1


# ------------------------------------------------------------------ owner scope and expiry


def test_another_callers_upload_is_refused_and_its_bytes_never_read(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = json.dumps({"text": "alice's secret " * 1000}).encode()
    alice = stack.client("alice")
    grant = _grant(alice, data)
    assert _put(stack, grant, data)[0] == 200
    read: list[str] = []
    real_read = UploadStore.read

    def counted(self: UploadStore, key: str) -> Any:  # every upload the API reads
        read.append(key)
        return real_read(self, key)

    monkeypatch.setattr(UploadStore, "read", counted)
    # Another tenant (carol) and another user of the same tenant (bob) name alice's upload
    for user in ("carol", "bob"):
        with pytest.raises(ApiError.InvalidInput) as refused:
            _job(stack.client(user), grant["upload_id"])
        assert refused.value.code == "upload_not_found"
    # ...and only keys under their own prefixes were looked for: alice's bytes were never read
    assert read == [
        f"uploads/other-group/carol/{grant['upload_id']}",
        f"uploads/study-group/bob/{grant['upload_id']}",
    ]
    # alice's own job takes it
    assert _job(alice, grant["upload_id"])["state"] == "queued"


def test_an_expired_url_and_an_expired_upload_are_refused(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    data = json.dumps({"text": "late"}).encode()
    client = stack.client()
    grant = _grant(client, data)
    # the URL is good for 15 minutes: a PUT after that is S3's 403
    stack.now_ms = int(time.time() * 1000) + 16 * 60 * 1000
    status, answer = _put(stack, grant, data)
    assert (status, answer["error"]["code"]) == (403, "upload_expired")
    stack.now_ms = None
    assert _put(stack, grant, data)[0] == 200
    # a job must name the upload within the hour
    later = time.time() + UPLOAD_USE_SECONDS + 60
    monkeypatch.setattr(time, "time", lambda: later)
    with pytest.raises(ApiError.InvalidInput) as refused:
        _job(client, grant["upload_id"])
    assert refused.value.code == "upload_expired"
    assert stack.uploads() != []  # refused: the upload left for a retry...
    assert stack.blobs("jobs/") == []  # ...and nothing copied, so nothing a job could reference
    items = stack.tb.client("dynamodb").scan(TableName=stack.tb.table_name)["Items"]
    assert not [i for i in items if i["pk"]["S"].startswith("JOB#")]  # and no job was made


def test_a_missing_upload_and_a_malformed_id_are_clear_400s(stack: Stack) -> None:
    client = stack.client()
    grant = _grant(client, b'{"text": "never sent"}')
    for upload_id, code in [(grant["upload_id"], "upload_not_found"), ("../x", "upload_not_found")]:
        with pytest.raises(ApiError.InvalidInput) as refused:
            _job(client, upload_id)
        assert refused.value.code == code


# ------------------------------------------------------------------ the declared hash and size


def test_a_body_not_matching_its_declared_hash_or_size_is_refused_at_the_put(stack: Stack) -> None:
    data = json.dumps({"text": "the real one"}).encode()
    client = stack.client()
    grant = _grant(client, data)
    forged = data.replace(b"real", b"fake")  # the same length, another hash
    assert _put(stack, grant, forged) == (
        400,
        {"error": {"code": "upload_mismatch", "message": "the body does not match its signed "
                   "sha256 (S3's BadDigest)"}},
    )  # fmt: skip
    longer = {**grant, "headers": {**grant["headers"], "Content-Length": str(len(data) + 1)}}
    assert _put(stack, longer, data + b" ")[0] == 400  # another size than the signed one
    headers = {**grant["headers"], "x-amz-checksum-sha256": "AAAA"}
    assert _put(stack, {**grant, "headers": headers}, data)[0] == 400
    token = grant["url"].rsplit("/", 1)[1]
    tampered = {**grant, "url": grant["url"].replace(token, token[:-2] + "xx")}
    assert _put(stack, tampered, data)[0] == 403  # not a token the API signed
    assert stack.puts == []
    with pytest.raises(ApiError.InvalidInput):  # nothing was stored: the submit is a 400
        _job(client, grant["upload_id"])


def test_the_client_raises_the_puts_refusal(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    import leasehold.client.uploads as client_uploads

    real = client_uploads._put

    def corrupting(transport: Any, method: str, url: str, data: bytes, headers: Any) -> Any:
        return real(transport, method, url, data[:-2] + b"!}", headers)

    monkeypatch.setattr(client_uploads, "_put", corrupting)
    with pytest.raises(ApiError.InvalidInput) as refused:
        stack.client().submit("bulky", {"text": _text(6 * MIB)})
    assert refused.value.code == "upload_mismatch"
    assert stack.puts == []


def test_an_upload_over_the_limit_is_a_413_and_bad_declarations_400s(stack: Stack) -> None:
    client = stack.client()
    with pytest.raises(ApiError) as refused:
        client._object("POST", "/uploads", {"size": sizes.UPLOAD_LIMIT + 1, "sha256": "a" * 64})
    assert (refused.value.status, refused.value.code) == (413, "payload_too_large")
    for body in ({"size": 0, "sha256": "a" * 64}, {"size": 10, "sha256": "A" * 64},
                 {"size": 10}, {"size": True, "sha256": "a" * 64}, [1]):  # fmt: skip
        with pytest.raises(ApiError.InvalidInput):
            client._object("POST", "/uploads", body)
    with pytest.raises(ApiError) as too_big:  # the Client says so before sending anything
        client.submit("bulky", {"text": "x" * (sizes.UPLOAD_LIMIT + 1)})
    assert too_big.value.code == "payload_too_large"


def test_an_upload_past_the_kinds_limit_or_not_json_is_refused(stack: Stack) -> None:
    client = stack.client()
    for data, status, code in [
        (b"[1, 2, 3]", 400, "upload_not_json"),
        (b"\xff\xfe not text", 400, "upload_not_json"),
    ]:
        grant = _grant(client, data)
        assert _put(stack, grant, data)[0] == 200
        with pytest.raises(ApiError) as refused:
            _job(client, grant["upload_id"])
        assert (refused.value.status, refused.value.code) == (status, code)


# ------------------------------------------------------------------ idempotency


def test_the_same_key_and_upload_answer_the_same_job_after_the_upload_is_gone(
    stack: Stack,
) -> None:
    data = json.dumps({"text": _text(8 * 1024)}).encode()
    client = stack.client()
    grant = _grant(client, data)
    assert _put(stack, grant, data)[0] == 200
    first = _job(client, grant["upload_id"], key="k-upload")
    assert stack.uploads() == []  # taken by the job
    again = _job(client, grant["upload_id"], key="k-upload")
    assert again["job_id"] == first["job_id"]
    other = _grant(client, data)
    assert _put(stack, other, data)[0] == 200
    with pytest.raises(ApiError.Conflict):  # the key with another upload
        _job(client, other["upload_id"], key="k-upload")
    stack.run()
    assert len(seen) == 1


# ------------------------------------------------------------------ deployed: S3's presigned PUT


def test_deployed_the_url_is_an_s3_presigned_put_signing_size_hash_and_use_by(
    call: Any,
) -> None:
    import requests

    data = json.dumps({"steps": [{"name": "fetch"}, {"name": "report"}]}).encode()
    sha = hashlib.sha256(data).hexdigest()
    status, grant, _ = call("api-create-upload.json", body={"size": len(data), "sha256": sha})
    assert status == 201 and grant["method"] == "PUT"
    url = urlsplit(grant["url"])
    query = parse_qs(url.query)
    assert url.path.startswith("/uploads/study-group/alice/u_")
    assert query["X-Amz-Expires"] == ["900"]  # 15 minutes
    signed = query["X-Amz-SignedHeaders"][0].split(";")
    assert {"content-length", "x-amz-checksum-sha256", "x-amz-meta-sha256"} <= set(signed)
    assert "x-amz-meta-use-by" in signed
    assert grant["headers"]["Content-Length"] == str(len(data))
    # moto checks no signature, so a forged body lands; the API's own check refuses it
    forged = data.replace(b"fetch", b"fetcH")
    assert requests.put(grant["url"], data=forged, headers=grant["headers"]).status_code == 200
    body = {"kind": "synthetic", "payload_upload": grant["upload_id"]}
    status, answer, _ = call("api-submit-job.json", body=body)
    assert (status, answer["error"]["code"]) == (400, "upload_mismatch")
    # the right body is taken: the job's payload is the upload's, copied under its prefix
    assert requests.put(grant["url"], data=data, headers=grant["headers"]).status_code == 200
    status, answer, _ = call("api-submit-job.json", body=body)
    assert status == 202, answer
    status, view, _ = call("api-get-job.json", path_id=answer["job_id"])
    assert status == 200 and view["progress"]["steps_total"] == 2
    # the upload was taken: naming it again without a key finds nothing
    status, answer, _ = call("api-submit-job.json", body=body)
    assert (status, answer["error"]["code"]) == (400, "upload_not_found")


def test_a_batch_item_may_not_name_an_upload(call: Any) -> None:
    jobs = [{"kind": "synthetic", "payload_upload": "u_0123"}]
    status, answer, _ = call("api-submit-batch.json", body={"jobs": jobs})
    assert status == 200
    assert answer["results"][0]["error"]["code"] == "invalid_request"
    assert "payload_upload" in answer["results"][0]["error"]["message"]


def test_the_sample_event_is_a_valid_request(call: Any) -> None:
    status, grant, _ = call("api-create-upload.json")
    assert status == 201 and grant["headers"]["Content-Length"] == "12582912"


def test_the_data_bucket_expires_uploads_after_a_day() -> None:
    # an upload is named by a job within the hour or never: the bucket drops it after a day
    bucket = load_template(TEMPLATE)["Resources"]["DataBucket"]["Properties"]
    rules = {r["Prefix"]: r for r in bucket["LifecycleConfiguration"]["Rules"] if "Prefix" in r}
    assert rules["uploads/"]["Status"] == "Enabled"
    assert rules["uploads/"]["ExpirationInDays"] == 1
    assert UPLOAD_USE_SECONDS < 24 * 3600


def test_an_upload_past_the_kinds_max_payload_bytes_is_a_413(call: Any) -> None:
    import requests

    # synthetic takes 16 KiB: an upload of 20 KiB within the upload limit is still too much
    data = json.dumps({"steps": [{"name": "a"}], "pad": "p" * 20_000}).encode()
    body = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    status, grant, _ = call("api-create-upload.json", body=body)
    assert status == 201
    assert requests.put(grant["url"], data=data, headers=grant["headers"]).status_code == 200
    job = {"kind": "synthetic", "payload_upload": grant["upload_id"]}
    status, answer, _ = call("api-submit-job.json", body=job)
    assert (status, answer["error"]["code"]) == (413, "payload_too_large")
    assert "kind's 16384" in answer["error"]["message"]
