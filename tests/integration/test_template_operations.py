"""What keeps a deployed stack operable, read from template.yaml: alarms that can notify (a topic
CloudWatch may encrypt to), users made only by an administrator, an alarm on every function, a
dashboard of the metrics the code really counts with the dimensions Powertools really emits, and
an HTTP API that logs and throttles. Each test names the rule it guards; breaking the rule in
the template fails it."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from typing import Any

import pytest

from leasehold.service.sweeper import REPORT_METRICS
from leasehold_dev.local.stack import STACK_NAME, client, create_stack
from leasehold_dev.local.template import translate
from tests.support.resources import ROOT, TEMPLATE, template

SOURCE = ROOT / "src" / "leasehold"
APPS = ROOT / "src" / "leasehold_apps"
IF_ALARM_EMAIL = {"Fn::If": ["HasAlarmEmail", [{"Ref": "AlarmTopic"}], {"Ref": "AWS::NoValue"}]}


def _resources(kind: str) -> dict[str, dict[str, Any]]:
    return {n: r for n, r in template()["Resources"].items() if r["Type"] == kind}


def _alarms() -> dict[str, dict[str, Any]]:
    return {n: r["Properties"] for n, r in _resources("AWS::CloudWatch::Alarm").items()}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _statements_for(policy: dict[str, Any], service: str) -> list[dict[str, Any]]:
    return [
        s
        for s in policy["Statement"]
        if s["Effect"] == "Allow" and service in _as_list((s.get("Principal") or {}).get("Service"))
    ]


# ------------------------------------------------------------------ the alarm topic


def test_alarm_topic_is_encrypted_with_a_key_cloudwatch_may_use() -> None:
    # alias/aws/sns is AWS-managed: its policy cannot let CloudWatch in, so alarms never arrive.
    resources = template()["Resources"]
    topic = resources["AlarmTopic"]
    key_ref = topic["Properties"]["KmsMasterKeyId"]
    assert "alias/aws/" not in json.dumps(key_ref)
    assert set(key_ref) == {"Ref"}, key_ref
    key = resources[key_ref["Ref"]]
    assert key["Type"] == "AWS::KMS::Key"
    assert key["Properties"]["EnableKeyRotation"] is True
    policy = key["Properties"]["KeyPolicy"]
    # The account administers the key (a policy without it locks everyone out) ...
    root = {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}
    assert any(
        s["Effect"] == "Allow" and s["Principal"] == {"AWS": root} and s["Action"] == "kms:*"
        for s in policy["Statement"]
    )
    # ... and CloudWatch may encrypt to the topic, for alarms of this account only.
    (cloudwatch,) = _statements_for(policy, "cloudwatch.amazonaws.com")
    assert {"kms:Decrypt", "kms:GenerateDataKey*"} <= set(_as_list(cloudwatch["Action"]))
    account = {"Ref": "AWS::AccountId"}
    assert cloudwatch["Condition"]["StringEquals"]["aws:SourceAccount"] == account
    # The topic policy lets CloudWatch publish, under the same condition.
    (topic_policy,) = [
        r
        for r in _resources("AWS::SNS::TopicPolicy").values()
        if {"Ref": "AlarmTopic"} in r["Properties"]["Topics"]
    ]
    topic_document = topic_policy["Properties"]["PolicyDocument"]
    (publish,) = _statements_for(topic_document, "cloudwatch.amazonaws.com")
    assert "sns:Publish" in _as_list(publish["Action"])
    assert publish["Condition"]["StringEquals"]["aws:SourceAccount"] == account
    # Key, alias, topic and policy exist together: a key with no topic costs $1/month for nothing.
    made_together = {n for n, r in resources.items() if r.get("Condition") == "HasAlarmEmail"}
    assert {"AlarmKey", "AlarmTopic"} <= made_together
    assert {n for n, r in resources.items() if r["Type"].startswith(("AWS::KMS", "AWS::SNS"))} <= (
        made_together
    )


# ------------------------------------------------------------------ identity


def test_only_an_administrator_creates_users_and_no_client_writes_the_tenant() -> None:
    (pool,) = [r["Properties"] for r in _resources("AWS::Cognito::UserPool").values()]
    # Self sign-up would let anyone choose their tenant, and read that tenant's jobs.
    assert pool["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    (tenant,) = [a for a in pool["Schema"] if a["Name"] == "tenant"]
    assert tenant["Mutable"] is False
    assert pool["Policies"]["PasswordPolicy"]["MinimumLength"] >= 12
    clients = _resources("AWS::Cognito::UserPoolClient")
    assert clients
    for name, resource in clients.items():
        props = resource["Properties"]
        # Without WriteAttributes a client may write every writable attribute.
        assert "WriteAttributes" in props, name
        assert not [a for a in props["WriteAttributes"] if a.startswith("custom:")], name
        assert props["PreventUserExistenceErrors"] == "ENABLED", name
        assert "custom:tenant" in props["ReadAttributes"], name  # the API reads it from the token


# ------------------------------------------------------------------ alarms


def _alarm_on(metric: str, function: str) -> dict[str, Any] | None:
    for props in _alarms().values():
        if (
            props["Namespace"] == "AWS/Lambda"
            and props["MetricName"] == metric
            and props["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]
        ):
            return props
    return None


@pytest.mark.parametrize("metric", ["Errors", "Throttles"])
def test_every_function_has_an_errors_and_a_throttles_alarm(metric: str) -> None:
    functions = _resources("AWS::Serverless::Function")
    assert len(functions) == 4
    for function in functions:
        alarm = _alarm_on(metric, function)
        assert alarm is not None, f"{function} has no {metric} alarm"
        # Any failed or throttled invocation in five minutes is worth a look.
        assert (alarm["Statistic"], alarm["Threshold"]) == ("Sum", 0), function
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold", function
        assert alarm["Period"] * alarm["EvaluationPeriods"] <= 300, function


def test_relay_has_an_iterator_age_alarm() -> None:
    alarm = _alarm_on("IteratorAge", "RelayFunction")
    assert alarm is not None
    assert alarm["Statistic"] == "Maximum" and alarm["Threshold"] <= 60_000
    assert alarm["Period"] * alarm["EvaluationPeriods"] <= 300


def test_queues_keep_their_depth_and_age_alarms() -> None:
    watched = {
        (p["MetricName"], p["Dimensions"][0]["Value"]["Fn::GetAtt"][0])
        for p in _alarms().values()
        if p["Namespace"] == "AWS/SQS"
    }
    assert {
        ("ApproximateNumberOfMessagesVisible", "DeadLetterQueue"),
        ("ApproximateNumberOfMessagesVisible", "RelayFailureQueue"),
        ("ApproximateAgeOfOldestMessage", "WorkQueue"),
        ("ApproximateAgeOfOldestMessage", "HighPriorityQueue"),
        ("ApproximateAgeOfOldestMessage", "LowPriorityQueue"),
    } <= watched


def test_every_alarm_notifies_ignores_missing_data_and_names_its_runbook_section() -> None:
    headings = re.findall(r"^## (.+)$", (ROOT / "docs" / "runbook.md").read_text(), re.M)
    alarms = _alarms()
    assert len(alarms) >= 12
    for name, props in alarms.items():
        # An idle stack publishes no Lambda or SQS datapoints: missing data is not a failure.
        assert props["TreatMissingData"] == "notBreaching", name
        assert props["AlarmActions"] == IF_ALARM_EMAIL, name
        sections = re.findall(r'docs/runbook\.md "([^"]+)"', props["AlarmDescription"])
        assert sections, f"{name} names no runbook section"
        for section in sections:
            assert [h for h in headings if h.startswith(section)], f"{name}: no {section!r}"
            matching = [h for h in headings if h.startswith(section)]
            family = re.sub(r"Shard\d+$", "Shard<n>", name)  # a queue shard's alarm (QS1)
            assert any(family in h for h in matching), f"runbook {section!r} does not name {name}"


# ------------------------------------------------------------------ dashboard


def _dashboards() -> dict[str, dict[str, Any]]:
    """Every dashboard's body, by resource name (the main one, `Dashboard`, and the workflows')."""
    bodies = {}
    for name, dashboard in _resources("AWS::CloudWatch::Dashboard").items():
        body = dashboard["Properties"]["DashboardBody"]["Fn::Sub"]
        assert isinstance(body, str)
        # Every ${...} is a pseudo parameter or a resource of this stack (else the deploy fails).
        for ref in re.findall(r"\$\{([^}]+)\}", body):
            assert ref.startswith("AWS::") or ref.split(".")[0] in template()["Resources"], ref
        bodies[name] = dict(json.loads(re.sub(r"\$\{([^}]+)\}", r"<\1>", body)))
    return bodies


def _dashboard() -> dict[str, Any]:
    return _dashboards()["Dashboard"]


def _dashboard_metrics(name: str | None = None) -> list[list[Any]]:
    """The metric rows of dashboard `name`, or of every dashboard."""
    rows = []
    for key, body in _dashboards().items():
        if name is not None and key != name:
            continue
        for widget in body["widgets"]:
            for row in widget["properties"].get("metrics", []):
                rows.append([part for part in row if not isinstance(part, dict)])
    return rows


def _counted_metric_names() -> set[str]:
    """Every name the code passes to `telemetry.count(...)`: literal strings, values of a
    module-level dict used in the call, and the sweeper's `Sweeper<Report key>` names. A call
    this cannot read fails the test, so a new metric cannot slip past the dashboard."""
    names: set[str] = set()
    # The engine's, and the applications' (which count through `Engine.count`)
    for path in sorted([*SOURCE.rglob("*.py"), *APPS.rglob("*.py")]):
        if path.is_relative_to(SOURCE) and "local" in path.relative_to(SOURCE).parts:
            continue  # the embedded stack counts nothing CloudWatch sees
        tree = ast.parse(path.read_text())
        dicts = {
            target.id: node.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for call in ast.walk(tree):
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "count"
                and any(via in ast.unparse(call.func.value) for via in ("telemetry", "engine"))
            ):
                continue
            argument = call.args[0]
            if isinstance(argument, ast.JoinedStr):
                assert ast.unparse(argument) == "f'Sweeper{metric.capitalize()}'", path
                names |= {
                    f"Sweeper{REPORT_METRICS.get(key, key).capitalize()}"
                    for key in _sweeper_report_keys(tree)
                }
            else:
                names |= _names_of(argument, dicts, path.name)
    return names


def _names_of(node: ast.expr, dicts: dict[str, ast.Dict], where: str) -> set[str]:
    """The metric names an argument of `count` can evaluate to."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _names_of(node.body, dicts, where) | _names_of(node.orelse, dicts, where)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in dicts
    ):
        values = {str(ast.literal_eval(v)) for v in dicts[node.func.value.id].values}
        return values | _names_of(node.args[1], dicts, where)
    raise AssertionError(f"cannot read the metric name of {ast.unparse(node)} in {where}")


def _sweeper_report_keys(tree: ast.Module) -> set[str]:
    """`report["x"] += 1` and `..., counted = ..., "x"` in the sweeper."""
    keys = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript)
            and ast.unparse(node.value) == "report"
            and isinstance(node.slice, ast.Constant)
        ):
            keys.add(str(node.slice.value))
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
            names = [ast.unparse(t) for t in node.targets[0].elts]
            if "counted" in names and isinstance(node.value, ast.Tuple):
                value = node.value.elts[names.index("counted")]
                keys.add(str(ast.literal_eval(value)))
    return keys


def _emitted_by_powertools() -> dict[str, Any]:
    """One count through the handlers' own MetricsTelemetry, in a fresh interpreter with the
    template's Powertools variables: the EMF document CloudWatch would turn into a metric."""
    env = template()["Globals"]["Function"]["Environment"]["Variables"]
    code = (
        "import json; from leasehold.handlers.wiring import MetricsTelemetry, metrics;"
        "MetricsTelemetry().count('JobsSucceeded');"
        "print(json.dumps(metrics.serialize_metric_set()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={
            "POWERTOOLS_SERVICE_NAME": env["POWERTOOLS_SERVICE_NAME"],
            "POWERTOOLS_METRICS_NAMESPACE": env["POWERTOOLS_METRICS_NAMESPACE"],
            "PATH": "",
        },
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout))


def test_dashboard_metrics_have_the_namespace_and_dimensions_powertools_emits() -> None:
    emf = _emitted_by_powertools()
    (directive,) = emf["_aws"]["CloudWatchMetrics"]
    (dimension_names,) = directive["Dimensions"]  # one dimension set: no per-function split
    expected = [directive["Namespace"]]
    for dimension in dimension_names:
        expected += [dimension, emf[dimension]]
    assert expected == ["Leasehold", "service", "leasehold"]
    app_rows = [row for row in _dashboard_metrics() if row[0] == directive["Namespace"]]
    assert app_rows
    for row in app_rows:
        assert [row[0], *row[2:]] == expected, row


def test_dashboard_shows_every_metric_the_code_counts_and_no_other() -> None:
    counted = _counted_metric_names()
    expected_outcomes = {"JobsSucceeded", "JobsFailed", "JobsDead", "JobsUnknown", "JobsCancelled"}
    assert expected_outcomes | {"JobsRetried", "StaleWritesRejected", "ClaimConflicts"} <= counted
    assert {"HeartbeatsFailed", "JobsHandedBack", "SweeperRescued"} <= counted
    shown = {row[1] for row in _dashboard_metrics() if row[0] == "Leasehold"}
    assert counted - shown == set(), "counted by the code, missing on the dashboard"
    assert shown - counted == set(), "on the dashboard, counted by nothing"


def test_dashboard_stays_within_the_free_tier_metric_count() -> None:
    # CloudWatch's free tier covers 3 dashboards of up to 50 metrics each; beyond, $3/month.
    dashboards = _dashboards()
    assert len(dashboards) <= 3
    for name in dashboards:
        assert len(_dashboard_metrics(name)) <= 50, name


def test_dashboard_shows_queues_functions_and_the_relay_stream() -> None:
    rows = {tuple(row) for row in _dashboard_metrics()}
    for metric in (
        "ApproximateNumberOfMessagesVisible",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
        "ApproximateAgeOfOldestMessage",
    ):
        assert ("AWS/SQS", metric, "QueueName", "<WorkQueue.QueueName>") in rows, metric
    dlq = ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName")
    assert (*dlq, "<DeadLetterQueue.QueueName>") in rows
    for function in _resources("AWS::Serverless::Function"):
        for metric in ("Errors", "Throttles"):
            assert ("AWS/Lambda", metric, "FunctionName", f"<{function}>") in rows, function
    assert ("AWS/Lambda", "IteratorAge", "FunctionName", "<RelayFunction>") in rows


# ------------------------------------------------------------------ HTTP API


def test_http_api_logs_every_request_and_throttles_its_default_route() -> None:
    resources = template()["Resources"]
    api = resources["HttpApi"]["Properties"]
    logs = api["AccessLogSettings"]
    (log_group,) = logs["DestinationArn"]["Fn::GetAtt"][:1]
    assert resources[log_group]["Type"] == "AWS::Logs::LogGroup"
    assert resources[log_group]["Properties"]["RetentionInDays"] == 14
    fields = json.loads(logs["Format"])  # API Gateway writes one JSON object per request
    for variable in (
        "$context.requestId",
        "$context.identity.sourceIp",
        "$context.routeKey",
        "$context.status",
        "$context.responseLatency",
        "$context.integrationErrorMessage",
        "$context.authorizer.error",
    ):
        assert variable in fields.values(), variable
    parameters = template()["Parameters"]
    throttling = api["DefaultRouteSettings"]
    for setting in ("ThrottlingBurstLimit", "ThrottlingRateLimit"):
        parameter = parameters[throttling[setting]["Ref"]]
        assert 1 <= parameter["Default"] <= parameter["MaxValue"], setting
    # SAM carries both onto the stage it creates.
    translated = translate(template(), "us-east-1")
    (stage,) = [
        r["Properties"]
        for r in translated["Resources"].values()
        if r["Type"] == "AWS::ApiGatewayV2::Stage"
    ]
    assert stage["AccessLogSettings"] == logs
    assert stage["DefaultRouteSettings"] == throttling


# ------------------------------------------------------------------ in moto


def test_stack_with_an_alarm_email_creates_its_key_topic_and_dashboard_in_moto(moto: None) -> None:
    # moto skips the alarms, the topic policy, Cognito and API Gateway v2 (it warns); the key,
    # the topic and the dashboard it creates, with every ${...} of the body resolved.
    create_stack("", TEMPLATE, {"AlarmEmail": "ops@example.com"})
    cloudformation = client("cloudformation", None)
    summaries = cloudformation.list_stack_resources(StackName=STACK_NAME)
    physical = {
        r["LogicalResourceId"]: r.get("PhysicalResourceId", "")
        for r in summaries["StackResourceSummaries"]
    }
    topic = client("sns", None).get_topic_attributes(TopicArn=physical["AlarmTopic"])
    assert topic["Attributes"]["KmsMasterKeyId"] == physical["AlarmKey"]
    cloudwatch = client("cloudwatch", None)
    body = cloudwatch.get_dashboard(DashboardName=physical["Dashboard"])["DashboardBody"]
    rows = [
        part
        for widget in json.loads(body)["widgets"]
        for row in widget["properties"].get("metrics", [])
        for part in row
    ]
    work_queue_name = physical["WorkQueue"].rsplit("/", 1)[1]
    assert work_queue_name in rows and physical["WorkerFunction"] in rows
    assert "${" not in body  # every reference resolved to a resource moto made
