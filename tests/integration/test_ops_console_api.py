"""What the operator console needs from the API (arch §14), through the real Api handler on moto:
the console's shell and its headers, the operator's cancel and DLQ redrive, the jobs list by
kind and tenant, the last hour's figures, and each attempt's start on the timeline."""

from __future__ import annotations

import copy
import json
import logging
import re
import tomllib
from glob import iglob
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from leasehold import console
from leasehold.domain.job import Owner
from leasehold.handlers import api, wiring
from leasehold.store.queue import Wakeup
from leasehold_dev.local.invoke import LocalContext
from tests.conftest import load_event
from tests.support.api import Call, _exchange
from tests.support.contract import check_exchange

ROOT = Path(__file__).resolve().parents[2]
QUEUED = {"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}


def _get_console(asset: str | None) -> dict[str, Any]:
    event = copy.deepcopy(load_event("api-console-asset.json" if asset else "api-console.json"))
    if asset:
        event["pathParameters"] = {"asset": asset}
        event["rawPath"] = event["requestContext"]["http"]["path"] = f"/console/{asset}"
    answer = api.handler(event, LocalContext("api"))
    check_exchange(_exchange(event, answer))
    return answer


def _run_worker(job_id: str, user: str = "alice") -> None:
    from leasehold.handlers.worker import worker

    worker.cache_clear()
    worker().handle(Wakeup(job_id, Owner("study-group", user), "test"))
    worker.cache_clear()


class _Markup(HTMLParser):
    """Every element of a page, for the checks a CSP without 'unsafe-inline' relies on."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text = ""
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.script_text += data.strip()


def test_the_console_is_served_without_identity_with_a_strict_csp(call: Call) -> None:
    # Given the API (the call fixture sets its environment)
    # When a browser navigates to /console (no bearer token: navigations cannot carry one)
    page = _get_console(None)
    # Then the page comes with the CSP and the hardening headers
    assert page["statusCode"] == 200
    headers = page["headers"]
    assert headers["Content-Type"].startswith("text/html")
    csp = headers["Content-Security-Policy"]
    assert csp == console.CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in csp and "style-src 'self'" in csp and "unsafe" not in csp
    assert "frame-ancestors 'none'" in csp and "connect-src 'self'" in csp
    assert headers["X-Content-Type-Options"] == "nosniff"
    # And the page holds no inline script, no inline style and no inline handler
    markup = _Markup()
    markup.feed(page["body"])
    scripts = [attrs for tag, attrs in markup.tags if tag == "script"]
    assert scripts == [{"type": "module", "src": "/console/console.js"}]
    assert markup.script_text == ""
    assert not [tag for tag, _ in markup.tags if tag == "style"]
    for tag, attrs in markup.tags:
        assert "style" not in attrs, tag
        assert not [name for name in attrs if name.startswith("on")], tag
    # And its scripts and style sheet come from the package, with the same headers
    assert {"console.js", "console.css"} <= set(console.ASSETS)
    for asset, media in console.ASSETS.items():
        answer = _get_console(asset)
        assert answer["statusCode"] == 200 and answer["headers"]["Content-Type"] == media
        assert answer["headers"]["Content-Security-Policy"] == csp
        assert answer["body"] == console.asset(asset)
    # And nothing else under the package is reachable
    for name in ("__init__.py", "..%2F__init__.py", "static", "secrets.json"):
        assert _get_console(name)["statusCode"] == 404


def test_the_console_script_never_writes_markup() -> None:
    # Job strings reach the page as text only (the browser test proves it end to end), in every
    # module of the console's script
    scripts = [name for name in console.ASSETS if name.endswith(".js")]
    assert "console.js" in scripts
    for name in scripts:
        script = console.asset(name)
        assert script is not None, name
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in script, (name, sink)
        assert "localStorage" not in script, name  # the credential lives in sessionStorage only


_IMPORT = re.compile(r'^\s*(?:import|export)\b[^;]*?\bfrom\s+"([^"]+)"', re.MULTILINE)


def test_every_module_the_console_imports_is_served_as_a_script_and_shipped() -> None:
    # Given the console's scripts: the page loads console.js as a module, which imports the rest
    static = Path(console.__file__).parent / "static"
    on_disk = {path.name for path in static.glob("*.js")}
    scripts = {name for name in console.ASSETS if name.endswith(".js")}
    # Then every script in the package is served (none is left out of the route's list)...
    assert on_disk == scripts
    # ...and every module one of them imports is one of them, by a same-origin relative path
    # (the CSP allows `script-src 'self'` only), and is served as JavaScript (a module served
    # with another type is refused by the browser)
    imported: set[str] = set()
    for name in sorted(scripts):
        for target in _IMPORT.findall(console.asset(name) or ""):
            assert target.startswith("./") and "/" not in target[2:], (name, target)
            imported.add(target[2:])
    assert imported, "console.js imports its modules"
    assert imported <= scripts, imported - scripts
    assert scripts - imported == {"console.js"}  # every module is reachable from the entry
    for name in scripts:
        assert console.ASSETS[name].startswith("text/javascript"), name
    # And the wheel ships every asset: each matches a package-data glob of leasehold.console
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["leasehold.console"]
    package = Path(console.__file__).parent  # the globs as setuptools expands them (** recurses)
    shipped = {path for glob in globs for path in iglob(glob, root_dir=package, recursive=True)}
    for name in console.ASSETS:
        assert f"static/{name}" in shipped, name


def test_an_operator_cancels_any_tenants_job_with_a_note(call: Call) -> None:
    # Given a queued job of bob's
    job_id = call("api-submit-job.json", body=QUEUED, user="bob")[1]["job_id"]
    # When a non-operator asks: 403; without a note: 400
    assert call("api-ops-cancel.json", path_id=job_id, body={"note": "x"}, user="alice")[0] == 403
    status, body, _ = call("api-ops-cancel.json", path_id=job_id, body={}, user="ops")
    assert status == 400 and body["error"]["code"] == "invalid_request"
    # When the operator cancels it
    status, view, _ = call(
        "api-ops-cancel.json", path_id=job_id, body={"note": "tenant asked"}, user="ops"
    )
    # Then it is cancelled by the operator, and the history says who, when and why
    assert status == 202 and view["state"] == "cancelled"
    assert view["stop_reason"] == "cancelled_by_operator"
    shown = call("api-ops-show-job.json", path_id=job_id, user="ops")[1]
    (entry,) = shown["history"]
    assert (entry["event"], entry["by"], entry["note"]) == ("cancelled", "ops", "tenant asked")
    # And a second cancel is a 409 with its reason
    status, body, _ = call("api-ops-cancel.json", path_id=job_id, body={"note": "y"}, user="ops")
    assert status == 409 and body["error"]["code"] == "not_cancellable"
    assert "cancelled" in body["error"]["message"]


def test_ops_jobs_filter_by_kind_and_tenant(call: Call) -> None:
    # Given queued jobs of two tenants
    alices = call("api-submit-job.json", body=QUEUED, user="alice")[1]["job_id"]
    carols = call("api-submit-job.json", body=QUEUED, user="carol")[1]["job_id"]

    def listed(**query: str) -> list[str]:
        status, page, _ = call("api-ops-jobs.json", user="ops", query={"state": "queued", **query})
        assert status == 200, page
        return [row["job_id"] for row in page["jobs"]]

    assert listed() == [alices, carols]
    assert listed(tenant="other-group") == [carols]
    assert listed(tenant="study-group", kind="synthetic") == [alices]
    assert listed(kind="title") == []
    status, body, _ = call("api-ops-jobs.json", user="ops", query={"state": "queued", "kind": "<"})
    assert status == 400 and "kind" in body["error"]["message"]


def test_the_summary_counts_the_last_hours_retries_and_outcomes(call: Call) -> None:
    # Given a job that failed once (a retry) and one that failed for good
    flaky = {"kind": "synthetic", "payload": {"steps": [{"name": "a", "fail_times": 1}]}}
    fatal = {"kind": "synthetic", "payload": {"steps": [{"name": "b", "fatal": True}]}}
    flaky_id = call("api-submit-job.json", body=flaky)[1]["job_id"]
    fatal_id = call("api-submit-job.json", body=fatal)[1]["job_id"]
    _run_worker(flaky_id)
    _run_worker(fatal_id)
    # When the operator reads the summary
    status, summary, _ = call("api-ops-summary.json", user="ops")
    # Then the last hour shows one retry and one failure, in the newest minute
    assert status == 200
    hour = summary["last_hour"]
    assert hour["bucket_seconds"] == 60 and len(hour["buckets"]) == 60
    totals = {name: sum(b[name] for b in hour["buckets"]) for name in hour["series"]}
    assert totals["retried"] == 1 and totals["failed"] == 1 and totals["dead"] == 0
    newest = hour["buckets"][-2:]  # this minute, or the one before if a minute turned meanwhile
    assert sum(b["retried"] for b in newest) == 1 and sum(b["failed"] for b in newest) == 1
    assert summary["totals"]["retries"] == 1
    # And each attempt on the timeline says when it started as well as when it ended
    (entry,) = call("api-ops-show-job.json", path_id=fatal_id, user="ops")[1]["history"]
    assert entry["started"].endswith("Z") and entry["started"] <= entry["at"]


def test_the_operator_redrives_the_dlq_over_http_and_poison_is_kept(call: Call) -> None:
    # Given a job whose wake-up sits in the DLQ, and a message that is no wake-up
    job_id = call("api-submit-job.json", body=QUEUED)[1]["job_id"]
    rt = wiring.runtime()
    rt.queue.send_to_dead_letters(Wakeup(job_id, Owner("study-group", "alice"), "dlq-test").body())
    rt.queue.send_to_dead_letters("not a wake-up <script>")
    assert call("api-ops-redrive.json", body={"note": "n"}, user="alice")[0] == 403
    status, body, _ = call("api-ops-redrive.json", body={"note": "n", "max": 101}, user="ops")
    assert status == 400
    # When the operator redrives it
    status, report, _ = call(
        "api-ops-redrive.json", body={"note": "rolled back", "max": 10}, user="ops"
    )
    # Then the wake-up went back, the job's history names the operator, the poison was set aside
    assert status == 200, report
    assert (report["moved"], report["by"], report["note"]) == (1, "ops", "rolled back")
    assert report["history_recorded"] == [job_id] and report["dead_letter_after"] == 0
    (poison,) = report["set_aside"]
    history = call("api-ops-show-job.json", path_id=job_id, user="ops")[1]["history"]
    assert [(e["event"], e["by"], e["note"]) for e in history] == [
        ("redriven", "ops", "rolled back")
    ]
    kept = rt.stores.table.get(
        {"pk": {"S": f"SETASIDE#{poison['message_id']}"}, "sk": {"S": "SETASIDE"}}
    )
    assert kept is not None and kept["body"]["S"] == "not a wake-up <script>"
    assert kept["by"]["S"] == "ops" and "expires_at" in kept
    # And the work queue has the wake-up again
    sqs, work_queue = rt.queue._sqs, rt.queue._url
    messages = sqs.receive_message(QueueUrl=work_queue, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"])["job_id"] for m in messages] == [job_id]


def test_a_doc_prep_job_names_its_stored_document_for_operators(call: Call) -> None:
    # Given a doc_prep job that reads a stored document and one sent inline
    stored = {
        "kind": "doc_prep",
        "payload": {"document": {"s3_key": "tenants/study-group/documents/a.txt"}},
    }
    inline = {"kind": "doc_prep", "payload": {"document": {"text": "Supplier: ACME"}}}
    stored_id = call("api-submit-job.json", body=stored)[1]["job_id"]
    inline_id = call("api-submit-job.json", body=inline)[1]["job_id"]
    # When the operator opens them
    shown = call("api-ops-show-job.json", path_id=stored_id, user="ops")[1]
    # Then the first names its document (the key, for the console's "belongs to") and the
    # second names none; neither shows the payload
    assert shown["document_key"] == "tenants/study-group/documents/a.txt"
    assert shown["payload"] is None
    assert "document_key" not in call("api-ops-show-job.json", path_id=inline_id, user="ops")[1]


def test_the_operators_token_reaches_no_log_line(call: Call) -> None:
    # Given every record the leasehold loggers write, formatted as Powertools writes it
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    leasehold_logger = logging.getLogger("leasehold")
    (powertools_handler,) = leasehold_logger.handlers
    keep = Keep(logging.DEBUG)
    leasehold_logger.addHandler(keep)
    # And the console's requests, each carrying the operator's token as a header
    token = "eyJhbGciOiJSUzI1NiJ9.console-secret-claims.signature"
    headers = {"authorization": f"Bearer {token}"}
    try:
        job_id = call("api-submit-job.json", body=QUEUED)[1]["job_id"]
        # When it reads and acts (a 400 and a 409 among them: warnings are logged too)
        call("api-ops-summary.json", user="ops", headers=headers)
        call("api-ops-show-job.json", path_id=job_id, user="ops", headers=headers)
        call("api-ops-cancel.json", path_id=job_id, body={}, user="ops", headers=headers)
        for _ in range(2):
            call("api-ops-cancel.json", path_id=job_id, body={"note": "n"}, user="ops",
                 headers=headers)  # fmt: skip
    finally:
        leasehold_logger.removeHandler(keep)
    lines = [powertools_handler.format(record) for record in records]
    # Then the API logged what it did, and never the token
    assert any('"operator cancel"' in line for line in lines), lines
    assert not [line for line in lines if "console-secret-claims" in line]


def test_a_worker_batch_counts_its_outcomes_in_one_write(
    call: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    from leasehold.handlers import worker as worker_handler
    from leasehold.store.counters import OutcomeCounters
    from tests.support.api import acting_as_function

    # Given three queued jobs, their wake-ups delivered to the worker function in one batch
    ids = [call("api-submit-job.json", body=QUEUED)[1]["job_id"] for _ in range(3)]
    event = copy.deepcopy(load_event("worker-wakeup.json"))
    (record,) = event["Records"]
    event["Records"] = [
        {
            **record,
            "messageId": f"m-{job_id}",
            "body": json.dumps(
                {"job_id": job_id, "tenant": "study-group", "user_id": "alice", "dispatch_id": "t"}
            ),
        }
        for job_id in ids
    ]
    writes: list[dict[str, int]] = []
    add_many = OutcomeCounters.add_many

    def counted(self: OutcomeCounters, at_ms: int, counts: dict[str, int]) -> None:
        writes.append(dict(counts))
        add_many(self, at_ms, counts)

    monkeypatch.setattr(OutcomeCounters, "add_many", counted)
    worker_handler.worker.cache_clear()
    # When the worker function runs the batch
    with acting_as_function(call, "WorkerFunction"):
        answer = worker_handler.handler(event, LocalContext("worker", timeout_ms=120_000))
    worker_handler.worker.cache_clear()
    # Then the three succeeded and their counts went out in one write, at the batch's end
    assert answer == {"batchItemFailures": []}
    assert writes == [{"succeeded": 3}]
    status, summary, _ = call("api-ops-summary.json", user="ops")
    assert status == 200 and summary["outcomes_last_hour"]["succeeded"] == 3
