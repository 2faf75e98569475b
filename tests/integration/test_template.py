"""template.yaml is the single source of truth: the handlers run with exactly what it sets, its
policies name resources, and the local stack is made from it."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from leasehold.handlers.settings import (
    ENV_VARIABLES,
    OPTIONAL_ENV_VARIABLES,
    Settings,
    safety_margin_seconds,
)
from leasehold_apps.doc_agent.settings import ENV_VARIABLES as AGENT_ENV_VARIABLES
from leasehold_apps.doc_agent.settings import AgentSettings
from leasehold_apps.reading_list import settings as reading_list
from leasehold_dev.local.resources import parameter_defaults, resolved
from leasehold_dev.local.stack import LOCAL_PARAMETERS, create_stack
from leasehold_dev.local.template import http_routes, translate
from tests.support.cli import run_cli
from tests.support.resources import ROOT, TEMPLATE, template

FUNCTIONS = ["ApiFunction", "RelayFunction", "WorkerFunction", "SweeperFunction"]


def _application_variables() -> set[str]:
    """Every variable the applications read at import (`leasehold.setting`, `int_setting`)."""
    read: set[str] = set()
    for path in (ROOT / "src" / "leasehold_apps").rglob("*.py"):
        read |= set(re.findall(r'\b(?:int_)?setting\(\s*"([A-Z_]+)"', path.read_text()))
    return read


REQUIRED = (
    *ENV_VARIABLES,
    *sorted(_application_variables() - set(ENV_VARIABLES) - set(reading_list.LOCAL_ENV_VARIABLES)),
)
"""What the engine's Settings and the applications the template loads require."""


def _functions() -> dict[str, dict[str, Any]]:
    return {
        name: res["Properties"]
        for name, res in template()["Resources"].items()
        if res["Type"] == "AWS::Serverless::Function"
    }


def test_every_variable_the_code_reads_is_set_for_every_function() -> None:
    # the applications' reads are found
    assert {*AGENT_ENV_VARIABLES, *reading_list.ENV_VARIABLES} <= set(REQUIRED)
    globals_env = template()["Globals"]["Function"]["Environment"]["Variables"]
    for name, props in _functions().items():
        env = {**globals_env, **((props.get("Environment") or {}).get("Variables") or {})}
        missing = [var for var in REQUIRED if var not in env]
        assert missing == [], f"{name} lacks {missing}"


def test_code_reads_no_environment_variable_outside_settings() -> None:
    # Below the handlers nothing reads os.environ; the handlers read only what Settings names.
    read = set()
    for path in (ROOT / "src" / "leasehold").rglob("*.py"):
        if "/local/" in str(path) or path.name == "cli.py":
            continue
        read |= set(re.findall(r'environ(?:\.get)?\(?\[?"([A-Z_]+)"', path.read_text()))
        read |= set(re.findall(r'_(?:required|int|optional)\(env, "([A-Z_]+)"\)', path.read_text()))
    # Lambda sets these itself (AWS_REGION: the X-Ray trace link's region, decision TR7)
    lambda_provided = {"AWS_LAMBDA_LOG_STREAM_NAME", "LAMBDA_TASK_ROOT", "AWS_REGION"}
    assert read - lambda_provided <= set(ENV_VARIABLES) | set(OPTIONAL_ENV_VARIABLES)
    assert "LEASEHOLD_FAULTS" in read  # the fault switch is read, and only through Settings
    globals_env = template()["Globals"]["Function"]["Environment"]["Variables"]
    assert not set(OPTIONAL_ENV_VARIABLES) & set(globals_env)  # never set when deployed
    # An application reads its own settings with leasehold.setting: each one the template sets
    # for every function, or a local-only switch the template never sets.
    app_reads = set()
    for path in (ROOT / "src" / "leasehold_apps").rglob("*.py"):
        app_reads |= set(re.findall(r'\b(?:int_)?setting\(\s*"([A-Z_]+)"', path.read_text()))
    local_only = set(reading_list.LOCAL_ENV_VARIABLES)
    assert {"TITLE_FETCHER", "LEASEHOLD_LOCAL_PROVIDERS"} <= app_reads
    assert app_reads <= set(REQUIRED) | local_only
    assert not local_only & set(globals_env)


@pytest.mark.parametrize("module", ["api", "relay", "worker", "sweeper"])
def test_each_handler_imports_and_configures_with_the_template_environment(module: str) -> None:
    # A cold start in a fresh interpreter, with only the template's variables (values as
    # Lambda gives them: strings) plus what Lambda itself sets.
    env_values = {
        "TABLE_NAME": "jobs",
        "QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/work",
        "HIGH_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/high",
        "LOW_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/low",
        "DLQ_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/dlq",
        "DOCUMENTS_BUCKET": "leasehold-documents",
        "DATA_BUCKET": "leasehold-data",
        "QUEUE_SHARD_URLS": "",  # QueueShards 1, the default
        "POWERTOOLS_TRACE_DISABLED": "false",  # Tracing: Active, the default
    }
    tpl = template()
    params = {name: str(p.get("Default")) for name, p in tpl["Parameters"].items()}
    env = {}
    for name, value in tpl["Globals"]["Function"]["Environment"]["Variables"].items():
        env[name] = (
            env_values[name]
            if name in env_values
            else (params[value["Ref"]] if isinstance(value, dict) else str(value))
        )
    env |= {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "PATH": "",
    }
    if os.environ.get("PYTHONPATH"):  # Lambda sets one too: this tree's code, not an installed copy
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    code = (
        f"import leasehold.handlers.{module} as m; from leasehold.handlers.wiring import runtime;"
        "rt = runtime(); assert callable(m.handler);"
        "from leasehold_apps.reading_list import settings; settings.check();"
        "print(rt.settings.lease_seconds)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == params["LeaseSeconds"]
    assert Settings.from_env(env).user_concurrency_limit == int(params["UserConcurrencyLimit"])


DOCUMENTS_READ = {"Fn::Sub": "${DocumentsBucket.Arn}/tenants/*/documents/*"}
"""The one other wildcard: the worker reads any tenant's documents by exact key (doc_prep)."""
DATA_OBJECTS = {"Fn::Sub": "${DataBucket.Arn}/jobs/*"}
"""Large values under jobs/<id>/ (DESIGN §20): by exact key, objects only, never a listing."""
DATA_ACTIONS = {
    "ApiRole": ["s3:PutObject", "s3:GetObject"],
    "WorkerRole": ["s3:PutObject", "s3:GetObject"],
    "SweeperRole": ["s3:PutObject", "s3:DeleteObject"],
}
"""Who may touch the data bucket, and how: the relay never; the sweeper writes (a tick's large
payload) and deletes (a job's blobs with its item, LD10-LD12), never reads."""
UPLOAD_OBJECTS = {"Fn::Sub": "${DataBucket.Arn}/uploads/*"}
"""Presigned uploads under uploads/<tenant>/<user>/ (decision LD9): the API alone signs the PUT
(PutObject), reads an upload a job names (GetObject, CopyObject's source) and removes it."""
UPLOAD_ACTIONS = {"ApiRole": ["s3:PutObject", "s3:GetObject", "s3:DeleteObject"]}
DATA_BUCKET_ARN = {"Fn::GetAtt": ["DataBucket", "Arn"]}
DATA_LISTING = {
    "Effect": "Allow",
    "Action": ["s3:ListBucket"],
    "Resource": DATA_BUCKET_ARN,
    "Condition": {"StringLike": {"s3:prefix": "jobs/*"}},
}
"""The one statement on the data bucket itself: the sweeper lists under jobs/ only (LD12)."""


def test_roles_are_least_privilege_with_no_wildcard_resource() -> None:
    # What CloudFormation will create (after SAM's transform): no AWS managed policy (their
    # resources are "*"), and every statement names resources of this stack. The wildcards
    # allowed are the log-stream part of the function's own log group's ARN, and the worker's
    # GetObject on tenants/*/documents/* of the documents bucket.
    translated = translate(template(), "us-east-1")
    roles = {n: r for n, r in translated["Resources"].items() if r["Type"] == "AWS::IAM::Role"}
    assert set(roles) == {"ApiRole", "RelayRole", "WorkerRole", "SweeperRole"}
    extra = {n: r for n, r in translated["Resources"].items() if r["Type"] == "AWS::IAM::Policy"}
    assert set(extra) == {"WorkerHostedPlannerKeyPolicy", "TableKeyUsePolicy", "XRayWritePolicy"}
    # Only with `Tracing: Active`: X-Ray's two write actions, whose IAM takes no resource ARN —
    # the one "*" resource of the stack (decision TR6).
    xray = extra.pop("XRayWritePolicy")
    assert xray["Condition"] == "TracingActive"
    assert sorted(r["Ref"] for r in xray["Properties"]["Roles"]) == sorted(roles)
    assert xray["Properties"]["PolicyDocument"]["Statement"] == [
        {
            "Effect": "Allow",
            "Action": ["xray:PutTraceSegments", "xray:PutTelemetryRecords"],
            "Resource": "*",
        }
    ]
    assert extra["WorkerHostedPlannerKeyPolicy"]["Properties"]["Roles"] == [{"Ref": "WorkerRole"}]
    # Only with TableKmsKeyArn: every role may use that one key, through DynamoDB only.
    table_key = extra["TableKeyUsePolicy"]
    assert table_key["Condition"] == "HasTableKey"
    assert sorted(r["Ref"] for r in table_key["Properties"]["Roles"]) == sorted(roles)
    (statement,) = table_key["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Resource"] == {"Ref": "TableKmsKeyArn"}
    assert "kms:ViaService" in statement["Condition"]["StringEquals"]
    policies = [(name, p) for name, role in roles.items() for p in role["Properties"]["Policies"]]
    policies += [("WorkerRole", {"PolicyDocument": p["Properties"]["PolicyDocument"]})
                 for p in extra.values()]  # fmt: skip
    for name, role in roles.items():
        assert not role["Properties"].get("ManagedPolicyArns"), name
    granted: list[str] = []
    for name, policy in policies:
        for statement in policy["PolicyDocument"]["Statement"]:
            resources = statement["Resource"]
            for resource in resources if isinstance(resources, list) else [resources]:
                assert resource != "*", (name, statement)
                if resource == DOCUMENTS_READ:
                    assert (name, statement["Action"]) == ("WorkerRole", ["s3:GetObject"])
                elif resource == DATA_BUCKET_ARN:
                    assert (name, statement) == ("SweeperRole", DATA_LISTING)
                elif resource == DATA_OBJECTS:
                    assert statement["Action"] == DATA_ACTIONS.get(name), name
                elif resource == UPLOAD_OBJECTS:
                    assert statement["Action"] == UPLOAD_ACTIONS.get(name), name
                    granted.append(name)
                elif "*" in json.dumps(resource):
                    log_group = name.replace("Role", "LogGroup")
                    assert resource == {"Fn::GetAtt": [log_group, "Arn"]}, (name, statement)
    assert granted == ["ApiRole"]  # the uploads' statement, the API's alone
    listings = [
        name
        for name, policy in policies
        for statement in policy["PolicyDocument"]["Statement"]
        if "s3:ListBucket" in json.dumps(statement["Action"])
    ]
    assert listings == ["SweeperRole"]  # and that statement is DATA_LISTING, checked above
    functions = {
        n: r for n, r in translated["Resources"].items() if r["Type"] == "AWS::Lambda::Function"
    }
    for name, function in functions.items():
        expected_role = name.replace("Function", "Role")
        assert function["Properties"]["Role"] == {"Fn::GetAtt": [expected_role, "Arn"]}, name


def test_worker_timeout_lease_steps_and_visibility_fit_together() -> None:
    # arch §3.9: a worker claims only when a lease's worth of work fits in its invocation, a
    # step must fit in one, and SQS must not redeliver while an invocation may still work.
    resources = template()["Resources"]
    defaults = parameter_defaults()
    worker = resources["WorkerFunction"]["Properties"]
    timeout = int(resolved(worker["Timeout"]))
    queue = resources["WorkQueue"]["Properties"]
    visibility = int(resolved(queue["VisibilityTimeout"]))
    lease, max_step = int(defaults["LeaseSeconds"]), int(defaults["MaxStepSeconds"])
    margin = safety_margin_seconds(lease)
    assert visibility == 6 * timeout
    assert timeout >= lease + margin and timeout >= max_step + margin
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 5
    assert (
        resolved(worker["Events"]["Wakeups"]["Properties"]["BatchSize"])
        == defaults["WorkerBatchSize"]
    )
    # The function's environment carries the same numbers, which the worker checks at start
    env = template()["Globals"]["Function"]["Environment"]["Variables"]
    assert env["WORKER_TIMEOUT_SECONDS"] == {"Ref": "WorkerTimeoutSeconds"}
    assert worker["Timeout"] == {"Ref": "WorkerTimeoutSeconds"}
    assert env["VISIBILITY_TIMEOUT_SECONDS"] == queue["VisibilityTimeout"]
    assert env["MAX_STEP_SECONDS"] == {"Ref": "MaxStepSeconds"}
    # And so does the local stack's configuration
    local = {**defaults, **LOCAL_PARAMETERS}
    local_lease = int(local["LeaseSeconds"])
    assert int(local["WorkerTimeoutSeconds"]) >= local_lease + safety_margin_seconds(local_lease)
    assert int(local["QueueVisibilitySeconds"]) >= 6 * int(local["WorkerTimeoutSeconds"])


def test_every_route_of_the_contract_is_in_the_template() -> None:
    routes = {(r.method, r.path) for r in http_routes(template())}
    assert routes == {
        ("GET", "/health"),
        ("POST", "/jobs"),
        ("POST", "/jobs/batch"),
        ("GET", "/jobs"),
        ("GET", "/jobs/{job_id}"),
        ("POST", "/jobs/{job_id}/cancel"),
        ("POST", "/jobs/{job_id}/approval"),
        ("POST", "/jobs/{job_id}/signals/{name}"),
        ("GET", "/jobs/{job_id}/children"),
        ("GET", "/jobs/{job_id}/result"),
        ("POST", "/uploads"),
        ("POST", "/callbacks/{token}"),
        ("GET", "/ops/summary"),
        ("GET", "/ops/jobs"),
        ("GET", "/ops/jobs/{job_id}"),
        ("POST", "/ops/jobs/{job_id}/replay"),
        ("POST", "/ops/jobs/{job_id}/resolve"),
        ("POST", "/ops/jobs/{job_id}/cancel"),
        ("GET", "/ops/jobs/{job_id}/children"),
        ("GET", "/ops/jobs/{job_id}/result"),
        ("POST", "/ops/jobs/{job_id}/signals/{name}"),
        ("POST", "/ops/dlq/redrive"),
        ("GET", "/ops/kinds"),
        ("POST", "/ops/kinds/{kind}/pause"),
        ("POST", "/ops/kinds/{kind}/resume"),
        ("GET", "/console"),
        ("GET", "/console/{asset}"),
        ("POST", "/bookmarks"),
        ("POST", "/bookmark-imports"),
        ("GET", "/bookmark-imports/{import_id}"),
        ("GET", "/bookmarks"),
        ("GET", "/bookmarks/{bookmark_id}"),
        ("PATCH", "/bookmarks/{bookmark_id}"),
        ("DELETE", "/bookmarks/{bookmark_id}"),
        ("PATCH", "/bookmarks/{bookmark_id}/read"),
        ("POST", "/bookmarks/{bookmark_id}/enrich"),
        ("POST", "/schedules"),
        ("GET", "/schedules"),
        ("GET", "/schedules/{schedule_id}"),
        ("DELETE", "/schedules/{schedule_id}"),
    }
    # Only the health check, the console's static shell and a wait's callback (whose token is
    # the authority, DESIGN §19) are open: everything else, /ops above all, goes through the
    # JWT authorizer
    open_routes = {r.path for r in http_routes(template()) if not r.needs_identity}
    assert open_routes == {"/health", "/console", "/console/{asset}", "/callbacks/{token}"}


def test_every_function_and_route_has_a_sample_event() -> None:
    events = {p.name for p in (ROOT / "events").glob("*.json")}
    assert {"relay-outbox-insert.json", "worker-wakeup.json", "sweeper-schedule.json"} <= events
    for route in http_routes(template()):
        matching = [
            e
            for e in events
            if json.loads((ROOT / "events" / e).read_text()).get("routeKey")
            == f"{route.method} {route.path}"
        ]
        assert matching, f"no sample event for {route.method} {route.path}"


def test_local_stack_is_created_from_the_template_in_moto(moto: None) -> None:
    info = create_stack("", TEMPLATE)
    assert set(info.functions) == set(FUNCTIONS)
    worker = info.functions["WorkerFunction"]
    assert worker.handler == "leasehold.handlers.worker.handler"
    assert worker.environment["LEASE_SECONDS"] == "4"  # a local override, resolved as a string
    assert worker.environment["TABLE_NAME"] == info.outputs["JobsTable"]
    (stream,) = info.stream_mappings
    assert stream.function == "RelayFunction" and stream.report_item_failures
    assert stream.filters[0]["dynamodb"]["Keys"]["pk"]["S"] == [{"prefix": "OUTBOX#"}]
    assert stream.on_failure_arn and stream.on_failure_arn.endswith(
        info.outputs["RelayFailureQueue"].rsplit("/", 1)[1]
    )
    # one mapping per priority queue (decision F4), each as the work queue's
    assert {m.queue_url for m in info.queue_mappings} == {
        info.outputs["WorkQueue"],
        info.outputs["HighPriorityQueue"],
        info.outputs["LowPriorityQueue"],
    }
    for queue in info.queue_mappings:
        assert queue.function == "WorkerFunction" and queue.batch_size == 5
        assert queue.report_item_failures
    assert [m.queue_url for m in info.worker_mappings()] == [
        info.outputs["HighPriorityQueue"],
        info.outputs["WorkQueue"],
        info.outputs["LowPriorityQueue"],
    ]
    assert worker.environment["HIGH_QUEUE_URL"] == info.outputs["HighPriorityQueue"]
    assert worker.environment["LOW_QUEUE_URL"] == info.outputs["LowPriorityQueue"]
    assert info.schedules == {"SweeperFunction": "rate(1 minute)"}
    assert len(info.routes) == len(http_routes(template()))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=ROOT)


def test_missing_template_is_a_one_line_error(tmp_path: Path) -> None:
    out = _cli("local", "up", "--template", str(tmp_path / "nope.yaml"), "--port", "0")
    assert out.returncode == 2
    assert out.stderr.strip().startswith("leasehold: template not found")
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_a_parameter_the_template_lacks_or_without_a_value_is_a_one_line_error() -> None:
    for given, says in (
        ("LostWakeupGrace=120", "--parameter LostWakeupGrace: the template has no such"),
        ("LostWakeupGraceSeconds", "give NAME=VALUE"),
    ):
        out = _cli("local", "up", "--port", "0", "--parameter", given)
        assert out.returncode == 2, out.stderr
        assert says in out.stderr and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1


def test_busy_port_is_a_one_line_error() -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = _cli("local", "up", "--port", str(port), "--template", str(TEMPLATE))
    assert out.returncode == 2 and f"port {port} on 127.0.0.1 is busy" in out.stderr
    assert "Traceback" not in out.stderr


def test_invoke_without_a_running_stack_is_a_one_line_error(tmp_path: Path) -> None:
    out = _cli(
        "invoke",
        "worker",
        "--event",
        "events/worker-wakeup.json",
        "--state",
        str(tmp_path / "none.json"),
    )
    assert out.returncode == 2 and "no local stack is running" in out.stderr
    assert "Traceback" not in out.stderr


def test_importing_handlers_does_not_pull_in_the_local_stack() -> None:
    code = (
        "import sys, leasehold.handlers.worker, leasehold.handlers.api;"
        "heavy = ('moto', 'leasehold_dev.local', 'pydantic', 'samtranslator');"
        "bad = [m for m in sys.modules if m.startswith(heavy)];"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert importlib.util.find_spec("leasehold.handlers.worker") is not None


def test_make_build_without_a_python313_is_a_clear_error(tmp_path: Path) -> None:
    # No python3.13 on PATH and no pyenv: `make build` says what is missing, in one line.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYENV_ROOT": str(tmp_path / "none")}
    out = subprocess.run(
        ["make", "-s", "build"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert out.returncode != 0
    assert "make build: no working python3.13 found" in out.stderr
    assert "Traceback" not in out.stderr


def test_env_json_sets_every_variable_for_every_function_as_sam_local_applies_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `sam local invoke --env-vars events/env.json`: one object per function logical id. SAM
    # overrides only variables the template declares (others are dropped without a word), so
    # each must be declared; numbers equal the parameter defaults SAM uses for the function's
    # own Timeout, and the whole set passes the handlers' start-up check.
    env_json = json.loads((ROOT / "events" / "env.json").read_text())
    assert set(env_json) == set(_functions())
    globals_env = template()["Globals"]["Function"]["Environment"]["Variables"]
    defaults = parameter_defaults()
    for name, values in env_json.items():
        own = (_functions()[name].get("Environment") or {}).get("Variables") or {}
        declared = {**globals_env, **own}
        assert [var for var in REQUIRED if var not in values] == [], name
        assert set(values) <= set(declared), f"{name}: SAM would drop {set(values) - set(declared)}"
        assert all(isinstance(value, str) for value in values.values()), name
        for var, value in declared.items():
            parameter = value.get("Ref") if isinstance(value, dict) else None
            if parameter in defaults:
                assert values[var] == defaults[parameter], (name, var)
        Settings.from_env(values)
        for var, value in values.items():
            monkeypatch.setenv(var, value)
        AgentSettings.from_env()
        reading_list.check()


def test_every_table_and_bucket_of_the_template_is_kept_in_the_data_directory(
    moto: None, tmp_path: Path
) -> None:
    # Given the template with one more table (as a schedules table would be added)
    import yaml

    from leasehold_dev.local.stack import durable_resources

    doc = template()
    doc["Resources"]["SchedulesTable"] = {
        "Type": "AWS::DynamoDB::Table",
        "Properties": {
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        },
    }
    extended = tmp_path / "template.yaml"
    extended.write_text(yaml.safe_dump(doc))
    # When the stack is made from it
    info = create_stack("", extended)
    kept = durable_resources("", extended)
    # Then the journal keeps the new table too, by its logical id, with nothing else to change
    assert set(kept["tables"]) == {"JobsTable", "SchedulesTable"}
    assert kept["tables"]["JobsTable"] == info.outputs["JobsTable"]
    assert kept["buckets"] == {
        "DocumentsBucket": info.outputs["DocumentsBucket"],
        "DataBucket": info.outputs["DataBucket"],
    }
