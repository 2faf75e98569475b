"""doc_prep through the real handlers (arch §7), as deployed: POST /jobs with the sample
event, the worker handler with an SQS wake-up, the documents bucket in moto — and every log
line they write, checked for the document's content."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold.handlers import worker as worker_handler
from leasehold_dev.local.invoke import LocalContext
from tests.support.api import Call, acting_as_function, load_event
from tests.support.documents import s3, sample
from tests.support.resources import create_documents_bucket

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


def test_a_document_over_the_payload_limit_is_a_413_that_says_so(call: Call) -> None:
    # 16 KiB of text is a document the kind accepts; a payload past the kind's 20 KiB is not
    status, body = _submit(call, {"document": {"text": "a" * (16 * 1024)}})
    assert status == 202, body
    status, body = _submit(call, {"document": {"text": "a" * (21 * 1024)}})
    # a payload past its kind's limit is 413 `payload_too_large`, as every body too large (LD2)
    assert status == 413 and body["error"]["code"] == "payload_too_large"
    assert "20480" in body["error"]["message"] or "20 KiB" in body["error"]["message"], body


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


def test_an_inline_document_of_16_kib_is_accepted_whatever_its_script(call: Any) -> None:
    # 16 KiB of UTF-8 text (German umlauts escape to 6 bytes each in ASCII JSON): accepted
    text = ("Rechnungsnummer: Ü-2026-17 Gesamtbetrag: 1.234,56 EUR äöü\n" * 400)[: 16 * 1024 - 64]
    while len(text.encode()) > 16 * 1024:
        text = text[:-1]
    body = {"kind": "doc_prep", "payload": {"document": {"text": text}}}
    status, answer, _ = call("api-submit-job.json", body=body)
    assert status == 202, answer
    # and more than 16 KiB of text is refused by the kind's own rule
    body["payload"]["document"]["text"] = text + "ü" * 40
    status, answer, _ = call("api-submit-job.json", body=body)
    assert status == 400
