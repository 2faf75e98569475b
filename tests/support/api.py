"""Calls the real Api handler with the sample events of events/, as API Gateway would."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from leasehold.handlers import api, wiring
from leasehold.testing.iam import acting_as
from leasehold_dev.local.invoke import LocalContext
from tests.support.contract import Exchange, check_exchange
from tests.support.resources import (
    clients,
    create_data_bucket,
    create_queues,
    create_table,
    function_roles,
    template_environment,
)

SAMPLE_IDS = (
    "j_000000000000example",
    "b_019d2a7f3c00a1b2c3d4e5",
    "s_019d2a7f3c00a1b2c3d4e5",
    "console.js",
)
"""The ids (and the console asset name) the sample events' paths carry: `path_id` replaces them."""
EVENTS = Path(__file__).resolve().parents[2] / "events"


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def _exchange(event: dict[str, Any], answer: dict[str, Any]) -> Exchange:
    """The event and the handler's answer as the client would see them: the JWT the authorizer
    took its claims from stands as an `Authorization` header."""
    headers = dict(event.get("headers") or {})
    if (event["requestContext"].get("authorizer") or {}).get("jwt"):
        headers["authorization"] = "Bearer <the caller's JWT>"
    body = event.get("body")
    return Exchange(
        method=event["requestContext"]["http"]["method"],
        path=event["rawPath"],
        query=event.get("queryStringParameters") or {},
        request_headers=headers,
        # surrogatepass: an event may carry what no client could encode (a lone surrogate)
        request_body=None if body is None else str(body).encode("utf-8", "surrogatepass"),
        status=answer["statusCode"],
        response_headers=answer.get("headers") or {},
        response_body=(answer.get("body") or "").encode(),
        route=event["routeKey"].split(" ", 1)[1],
    )


CACHED = (wiring.runtime, api.jobs, api.ops, api.schedules, api.mounted)


Call = Callable[..., tuple[int, dict[str, Any], dict[str, str]]]


def acting_as_function(call: Call, function: str) -> Any:
    """A context acting as `function`'s role (`WorkerFunction`, `SweeperFunction`…) over the
    resources of `call`'s API: for a test that invokes another function's handler itself."""
    return acting_as(call.roles[function])  # type: ignore[attr-defined]


def call_fixture(monkeypatch: pytest.MonkeyPatch, **env_overrides: str) -> Iterator[Call]:
    dynamodb, sqs = clients()
    description = create_table(dynamodb)
    table = description["TableName"]
    queues = create_queues(sqs)
    create_data_bucket()  # large values (DESIGN §20), as the template's DataBucket
    roles = function_roles(description, queues)
    role = roles["ApiFunction"]
    for name, value in template_environment(table, queues, **env_overrides).items():
        monkeypatch.setenv(name, value)
    for cached in CACHED:
        cached.cache_clear()

    def invoke(
        event_name: str,
        *,
        body: Any = None,
        raw_body: str | None = None,
        user: str | None = "alice",
        path_id: str | None = None,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        claims: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        event = copy.deepcopy(load_event(event_name))
        event["headers"].pop("idempotency-key", None)  # only where a test gives one
        if body is not None:
            event["body"] = json.dumps(body)
        if raw_body is not None:
            event["body"] = raw_body
        if claims is not None:  # the caller's JWT claims exactly as given (`user` is ignored)
            event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
        elif user is None:
            event["requestContext"].pop("authorizer", None)
        elif user != "keep":
            claims = {
                "sub": user,
                "custom:tenant": "other-group" if user == "carol" else "study-group",
            }
            if user == "ops":
                claims["cognito:groups"] = "[operators]"
            event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
        if path_id is not None:
            # `path_id` replaces the parameter its first letter names (`j_…` the job id, `n_…`
            # a signal's name, `t_…` a callback token), or the route's only one.
            params = dict(event["pathParameters"])
            name = next((n for n in params if n[0] == path_id[0]), None)
            if name is None:
                (name,) = params
            old = str(params[name])
            params[name] = path_id
            event["pathParameters"] = params
            event["rawPath"] = event["rawPath"].replace(old, path_id)
            event["requestContext"]["http"]["path"] = event["rawPath"]
        if query is not None:
            event["queryStringParameters"] = query
        if headers is not None:
            event["headers"] = {**event["headers"], **headers}
        with acting_as(role):  # the API's own role judges every call it makes
            answer = api.handler(event, LocalContext("api"))
        check_exchange(_exchange(event, answer))  # every answer against docs/openapi.yaml
        return answer["statusCode"], json.loads(answer["body"] or "{}"), answer.get("headers") or {}

    invoke.roles = roles  # type: ignore[attr-defined]  # read by acting_as_function
    try:
        yield invoke
    finally:  # also when a test drives this generator itself and closes it
        for cached in CACHED:
            cached.cache_clear()
