"""doc_prep through the real handlers (arch §7), as deployed: POST /jobs with the sample
event, the worker handler with an SQS wake-up, the documents bucket in moto — and every log
line they write, checked for the document's content."""

from __future__ import annotations

import copy
import json
import logging
import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from leasehold.handlers import worker as worker_handler
from leasehold.testing.testbed import DATA_BUCKET
from leasehold_apps.doc_agent.kind import MAX_PAYLOAD_BYTES
from leasehold_apps.doc_agent.spec import MAX_DOCUMENT_BYTES
from leasehold_dev.local.invoke import LocalContext
from tests.support.api import Call, acting_as_function, load_event
from tests.support.documents import s3, sample
from tests.support.resources import REGION, create_documents_bucket

MARKER = "ZQXMARKER7731"
ALICE_KEY = "tenants/study-group/documents/marked.txt"


@pytest.fixture
def run_worker(call: Call) -> Iterator[Any]:
    """The worker handler over the same table and queues as `call`'s API handler."""
    create_documents_bucket(s3())
    worker_handler.worker.cache_clear()

    def deliver(job_id: str) -> dict[str, Any]:
        event = copy.deepcopy(load_event("worker-wakeup.json"))
        wakeup = {"job_id": job_id, "tenant": "study-group", "user_id": "alice"}
        event["Records"][0]["body"] = json.dumps({**wakeup, "dispatch_id": "test"})
        context = LocalContext("worker", timeout_ms=120_000)  # the template's worker timeout
        with acting_as_function(call, "WorkerFunction"):
            answer: dict[str, Any] = worker_handler.handler(event, context)
        return answer

    yield deliver
    worker_handler.worker.cache_clear()


def _submit(call: Call, payload: dict[str, Any], user: str = "alice") -> tuple[int, Any]:
    job = {"kind": "doc_prep", "payload": payload}
    status, body, _ = call("api-submit-doc-prep.json", body=job, user=user)
    return status, body


def test_the_sample_event_submits_a_job_a_worker_completes(call: Call, run_worker: Any) -> None:
    status, accepted, headers = call("api-submit-doc-prep.json")
    assert status == 202 and headers["Location"] == f"/jobs/{accepted['job_id']}"
    assert run_worker(accepted["job_id"]) == {"batchItemFailures": []}
    status, view, _ = call("api-get-job.json", path_id=accepted["job_id"])
    assert status == 200 and view["state"] == "succeeded"
    assert view["result"]["fields"]["supplier_name"] == "Northwind Office Supplies Ltd"
    assert view["result"]["problems"] == []
    assert view["result"]["tools_run"] == ["extract", "validate", "draft"]
    assert view["result"]["draft_note"].startswith("Review note: supplier document")
    assert view["agent"]["steps_started"] == 3


@pytest.mark.parametrize(
    ("payload", "user", "fragment"),
    [
        ({"document": {"s3_key": ALICE_KEY}}, "carol", "under tenants/other-group/documents/"),
        ({"document": {"text": "x"}, "planner": {"kind": "hosted"}}, "alice", "model endpoint"),
        ({"document": {"text": "x", "s3_key": ALICE_KEY}}, "alice", "exactly one of"),
        ({"document": {"text": "x"}, "required_fields": ["pin"]}, "alice", "may name only"),
        (
            {"document": {"text": "x"}, "planner": {"kind": "fixture", "step_delay_ms": 60_000}},
            "alice",
            "step_delay_ms",
        ),
    ],
)
def test_an_input_that_could_never_run_is_a_400(
    call: Call, payload: dict[str, Any], user: str, fragment: str
) -> None:
    status, body = _submit(call, payload, user)
    assert status == 400 and body["error"]["code"] == "invalid_request"
    assert fragment in body["error"]["message"]


def test_a_document_over_the_limits_is_a_clear_400_or_413(call: Call) -> None:
    # 512 KiB of text is a document the kind accepts (LD14); 1 byte more is the kind's own 400
    status, body = _submit(call, {"document": {"text": "a" * MAX_DOCUMENT_BYTES}})
    assert status == 202, body
    status, body = _submit(call, {"document": {"text": "a" * (MAX_DOCUMENT_BYTES + 1)}})
    assert (status, body["error"]["code"]) == (400, "invalid_request"), body
    assert f"1 to {MAX_DOCUMENT_BYTES} bytes" in body["error"]["message"]
    # text within 512 KiB whose JSON passes the kind's payload limit (a control character escapes
    # to 6 bytes: 1.5 MiB) is a 413 `payload_too_large`, as every payload past its kind's limit
    status, body = _submit(call, {"document": {"text": "\x01" * (MAX_DOCUMENT_BYTES // 2)}})
    assert (status, body["error"]["code"]) == (413, "payload_too_large"), body
    assert str(MAX_PAYLOAD_BYTES) in body["error"]["message"], body


def test_a_512_kib_document_is_read_whole_through_the_data_bucket(
    call: Call, run_worker: Any
) -> None:
    # Given 512 KiB of text (the most, LD14) whose supplier fields are all at its very end
    invoice = sample("01-clean-invoice-en.txt")
    clause = "Terms, clause 000: the goods remain the supplier's until paid in full.\n"
    room = MAX_DOCUMENT_BYTES - len(invoice.encode())
    text = clause * (room // len(clause)) + invoice
    assert MAX_DOCUMENT_BYTES - 100 < len(text.encode()) <= MAX_DOCUMENT_BYTES
    # When it is submitted inline and a worker runs the job
    status, accepted = _submit(call, {"document": {"text": text}})
    assert status == 202, accepted
    job_id = accepted["job_id"]
    assert run_worker(job_id) == {"batchItemFailures": []}
    # Then extract found the fields at its end and validate passed them
    status, view, _ = call("api-get-job.json", path_id=job_id)
    assert status == 200 and view["state"] == "succeeded", view
    fields = view["result"]["fields"]
    assert fields["supplier_name"] == "Northwind Office Supplies Ltd"
    assert fields["iban"] == "GB29NWBK60161331926819"
    assert view["result"]["problems"] == []
    # And the document lived in the data bucket, never on a table item (each ≤ 64 KB)
    items = [
        item
        for page in boto3.client("dynamodb", region_name=REGION)
        .get_paginator("scan")
        .paginate(TableName=os.environ["TABLE_NAME"])
        for item in page["Items"]
        if job_id in json.dumps(item, default=str)
    ]
    assert items and max(len(json.dumps(i, default=str).encode()) for i in items) <= 64_000
    keys = s3().list_objects_v2(Bucket=DATA_BUCKET, Prefix=f"jobs/{job_id}/payload/")
    assert keys["KeyCount"] == 1


def test_no_log_line_carries_the_documents_content(
    call: Call, run_worker: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given documents with a marker in a field value and in free text, inline and in the bucket
    text = (
        sample("01-clean-invoice-en.txt").replace(
            "Northwind Office Supplies Ltd", f"{MARKER} Office Supplies Ltd"
        )
        + f"\nNote: {MARKER} private remark\n"
    )
    s3().put_object(Bucket="documents", Key=ALICE_KEY, Body=text.encode())
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    # Every record of the leasehold loggers (Powertools' "leasehold" and its children), at DEBUG
    leasehold_logger = logging.getLogger("leasehold")
    (powertools_handler,) = leasehold_logger.handlers  # its JSON lines go to stdout on Lambda
    keep = Keep(logging.DEBUG)
    loggers = [leasehold_logger] + [
        logger
        for name, logger in logging.root.manager.loggerDict.items()
        if name.startswith("leasehold.") and isinstance(logger, logging.Logger)
    ]
    levels = [logger.level for logger in loggers]
    leasehold_logger.addHandler(keep)
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
    try:
        # When jobs run to every kind of end: succeeded (inline, S3), a rejected tool, a budget stop
        jobs = []
        for payload in (
            {"document": {"text": text}},
            {"document": {"s3_key": ALICE_KEY}},
            {"document": {"text": text}, "planner": {"kind": "scripted", "proposals": [
                {"tool": "extract", "args": {}}, {"tool": "send_email", "args": {}}]}},
            {"document": {"s3_key": ALICE_KEY}, "planner": {"kind": "scripted", "proposals": [
                {"tool": t, "args": {}} for t in ("extract", "validate", "draft", "draft")]}},
        ):  # fmt: skip
            status, accepted = _submit(call, payload)
            assert status == 202
            run_worker(accepted["job_id"])
            jobs.append(call("api-get-job.json", path_id=accepted["job_id"])[1])
    finally:
        leasehold_logger.removeHandler(keep)
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
    out = capsys.readouterr()
    lines = [powertools_handler.format(record) for record in records]
    logs = "\n".join(
        [out.out, out.err, *lines, *(json.dumps(r.__dict__, default=str) for r in records)]
    )
    # Then the jobs did their work (the marker is in the results, where it belongs)...
    assert [job["state"] for job in jobs] == ["succeeded", "succeeded", "failed", "failed"]
    assert jobs[0]["result"]["fields"]["supplier_name"].startswith(MARKER)
    # ...the logs say what ran, for which job, attempt and operation, and how long it took...
    tool_lines = [json.loads(line) for line in lines if '"tool finished"' in line]
    assert len(tool_lines) == 3 + 3 + 1 + 3
    for line in tool_lines:
        assert {"job_id", "attempt", "tool", "operation_id", "duration_ms"} <= set(line)
        assert line["operation_id"].startswith(line["job_id"] + ":tool:")
    assert any('"tool rejected"' in line for line in lines)
    assert any('"tool budget spent"' in line for line in lines)
    # ...and not one line, at any level, carries the document's content
    assert MARKER not in logs


def test_an_inline_document_of_512_kib_is_accepted_whatever_its_script(call: Any) -> None:
    # 512 KiB of UTF-8 text (German umlauts escape to 6 bytes each in ASCII JSON): accepted
    line = "Rechnungsnummer: Ü-2026-17 Gesamtbetrag: 1.234,56 EUR äöü\n"
    data = (line * (MAX_DOCUMENT_BYTES // len(line))).encode()[:MAX_DOCUMENT_BYTES]
    text = data.decode("utf-8", errors="ignore")  # a character cut in two is left out
    assert MAX_DOCUMENT_BYTES - 2 <= len(text.encode()) <= MAX_DOCUMENT_BYTES
    body = {"kind": "doc_prep", "payload": {"document": {"text": text}}}
    status, answer, _ = call("api-submit-job.json", body=body)
    assert status == 202, answer
    # and more than 512 KiB of text is refused by the kind's own rule
    body["payload"]["document"]["text"] = text + "ü" * 40
    status, answer, _ = call("api-submit-job.json", body=body)
    assert status == 400
