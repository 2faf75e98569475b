"""Strings DynamoDB and JSON cannot carry are a 400 at the edge, on every route (engine and
applications alike): a lone UTF-16 surrogate (`"\\ud800"` is valid JSON syntax, not Unicode) in a
body string or key, a path, a query parameter or a header the route reads; `NaN`, `Infinity` and
numbers past a double's range in a body. Through the real Api handler on moto: a 400 naming
where, nothing written, no ERROR logged. Every operation of docs/openapi.yaml is driven."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.support.api import EVENTS, Call
from tests.support.yamlfile import read_yaml

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT: dict[str, Any] = read_yaml(ROOT / "docs" / "openapi.yaml")
LONE = "\ud800"
OPS_ROUTES = "/ops/"


def _events_by_route() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(EVENTS.glob("api-*.json")):
        found.setdefault(json.loads(path.read_text())["routeKey"], path.name)
    return found


def _string_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from _string_paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _string_paths(child, (*path, index))


def _with_lone(body: Any, path: tuple[Any, ...]) -> Any:
    copy = json.loads(json.dumps(body))
    holder = copy
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = holder[path[-1]] + LONE
    return copy


def _cases() -> Iterator[Any]:
    """(event, user, call keyword arguments) per input each operation reads."""
    events = _events_by_route()
    methods = {"get", "post", "put", "patch", "delete"}
    for route, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            if method not in methods or operation["operationId"] == "health":
                continue
            key = f"{method.upper()} {route}"
            assert key in events, f"{key} has no sample event in events/: add one"
            event = events[key]
            user = "ops" if route.startswith(OPS_ROUTES) else "alice"
            op = operation["operationId"]
            sample = json.loads((EVENTS / event).read_text()).get("body")
            if "requestBody" in operation:
                body = json.loads(sample) if sample else {"note": "x"}
                for where in _string_paths(body):
                    label = ".".join(map(str, where))
                    yield pytest.param(
                        event, user, {"body": _with_lone(body, where)}, id=f"{op}-{label}"
                    )
                keyed = {**body, f"extra{LONE}": 1} if isinstance(body, dict) else body
                yield pytest.param(event, user, {"body": keyed}, id=f"{op}-key")
            for parameter in operation.get("parameters", []):
                name = parameter["$ref"].rsplit("/", 1)[-1]
                spec = DOCUMENT["components"]["parameters"][name]
                value = f"x{LONE}"
                where = {
                    "path": {"path_id": f"{spec['name'][0]}_{LONE}"},
                    "query": {"query": {spec["name"]: value}},
                    "header": {"headers": {spec["name"].lower(): value}},
                }[spec["in"]]
                yield pytest.param(event, user, where, id=f"{op}-{spec['in']}-{spec['name']}")


def _stored() -> int:
    dynamodb = boto3.client("dynamodb")
    return sum(
        dynamodb.scan(TableName=name, Select="COUNT")["Count"]
        for name in dynamodb.list_tables()["TableNames"]
    )


def _errors_logged(out: str) -> list[str]:
    return [line for line in out.splitlines() if '"level":"ERROR"' in line.replace(" ", "")]


@pytest.mark.parametrize(("event", "user", "given"), list(_cases()))
def test_a_lone_surrogate_anywhere_a_route_reads_is_a_400(
    local_call: Call, capsys: pytest.CaptureFixture[str], event: str, user: str, given: Any
) -> None:
    before = _stored()
    status, body, _ = local_call(event, user=user, **given)
    assert status == 400, body
    assert "not Unicode text" in body["error"]["message"], body
    assert _stored() == before
    assert _errors_logged(capsys.readouterr().out) == []


def test_the_message_names_the_json_path(local_call: Call) -> None:
    body = {"kind": "synthetic", "payload": {"steps": [{"name": f"a{LONE}b"}]}}
    status, answer, _ = local_call("api-submit-job.json", body=body)
    assert status == 400 and answer["error"]["code"] == "invalid_request"
    assert answer["error"]["message"] == (
        "'payload.steps[0].name' is not Unicode text (a lone surrogate \\ud800 at character 1)"
    )


def test_a_header_a_route_does_not_read_is_not_judged(local_call: Call) -> None:
    status, _, _ = local_call("api-health.json", user=None, headers={"x-anything": LONE})
    assert status == 200


@pytest.mark.parametrize(
    "raw",
    [
        '{"kind": "synthetic", "payload": {"steps": [{"name": "a"}], "x": NaN}}',
        '{"kind": "synthetic", "payload": {"steps": [{"name": "a"}], "x": -Infinity}}',
        '{"kind": "synthetic", "payload": {"steps": [{"name": "a"}], "x": 1e999}}',
        f'{{"kind": "synthetic", "payload": {{"steps": [{{"name": "{LONE}"}}]}}}}',
    ],
    ids=["nan", "infinity", "past-a-double", "raw-surrogate-in-the-event"],
)
def test_what_json_cannot_write_back_is_malformed_json(
    local_call: Call, capsys: pytest.CaptureFixture[str], raw: str
) -> None:
    status, body, _ = local_call("api-submit-job.json", raw_body=raw)
    assert status == 400 and body["error"]["code"] == "malformed_json", body
    assert _stored() == 0
    assert _errors_logged(capsys.readouterr().out) == []


def test_an_identity_that_is_not_text_is_401(local_call: Call) -> None:
    status, body, _ = local_call("api-list-jobs.json", user=f"alice{LONE}")
    assert status == 401 and body["error"]["code"] == "unauthenticated"
