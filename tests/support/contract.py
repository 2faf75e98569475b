"""docs/openapi.yaml as a test oracle: every answer the suites receive from the API is checked
against it, so the document cannot drift from the code.

`check_exchange` is called by the `call` fixture (the Api handler driven with events/*.json) and
by `LocalStackProcess.request` (the local stack over HTTP). It finds the operation by method and
route — the route key of the event, or the concrete path matched against template.yaml's
`HttpApi` routes, as the gateway does — and validates with openapi-core:

- every response (status documented, body, `Location` / `Retry-After` headers) — always;
- the request too when the API accepted it (2xx): a request the API takes must be one the
  document allows, or the document is stricter than the API.

A path no route matches must be answered with a 404 in the error envelope. The validator is built
once per process (`contract()` is cached): building it reads and checks the whole document.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse

from leasehold_dev.local.template import Route, http_routes, load_template
from tests.support.yamlfile import read_yaml

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "docs" / "openapi.yaml"
HOST_URL = "http://127.0.0.1:8080"  # the document's local server; any listed server would do


class ContractViolationError(AssertionError):
    """An exchange the document does not allow: the test that received it fails."""


@dataclass(frozen=True)
class Exchange:
    """One request and its answer, as the client saw them (headers as sent and received)."""

    method: str
    path: str
    query: Mapping[str, str]
    request_headers: Mapping[str, str]
    request_body: bytes | None
    status: int
    response_headers: Mapping[str, str]
    response_body: bytes
    route: str | None = None
    """`/jobs/{job_id}`-style route when the caller knows it (an event's routeKey)."""


@dataclass(frozen=True)
class Contract:
    api: OpenAPI
    document: dict[str, Any]
    routes: tuple[Route, ...]
    envelope: Draft202012Validator

    def route_of(self, method: str, path: str) -> tuple[str, dict[str, str]] | None:
        for route in self.routes:
            params = route.match(method, path)
            if params is not None:
                return route.path, params
        return None


@cache
def contract() -> Contract:
    """The document, its validator and the template's routes (built once per process)."""
    document = read_yaml(OPENAPI)
    # Every error answer is one envelope; a 404's schema with any code is that envelope.
    envelope = copy.deepcopy(document["components"]["schemas"]["NotFoundAnswer"])
    envelope["properties"]["error"]["properties"]["code"] = {"type": "string"}
    return Contract(
        api=OpenAPI.from_dict(document),
        document=document,
        routes=tuple(http_routes(load_template(ROOT / "template.yaml"))),
        envelope=Draft202012Validator(envelope),
    )


def _json_or_text(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data[:500]


def check_exchange(exchange: Exchange) -> None:
    """Raise ContractViolationError when the answer (or an accepted request) breaks the document."""
    spec = contract()
    method = exchange.method.upper()
    if exchange.route is not None:
        route = spec.route_of(method, exchange.path)
        params = route[1] if route and route[0] == exchange.route else {}
        found: tuple[str, dict[str, str]] | None = (exchange.route, params)
    else:
        found = spec.route_of(method, exchange.path)
    where = f"{method} {exchange.path} → {exchange.status}"
    if found is None:
        body = _json_or_text(exchange.response_body)
        errors = [e.message for e in spec.envelope.iter_errors(body)]
        if exchange.status != 404 or errors:
            raise ContractViolationError(f"{where}: no route, and not a 404 envelope: {errors}")
        return
    pattern, params = found
    headers = {k.lower(): v for k, v in exchange.request_headers.items()}
    request = MockRequest(
        HOST_URL,
        method,
        exchange.path,
        path_pattern=pattern,
        args=dict(exchange.query),
        view_args=params,
        headers=headers,
        data=exchange.request_body,
        content_type=headers.get("content-type", "application/json"),
    )
    response_headers = dict(exchange.response_headers)
    content_type = next(
        (v for k, v in response_headers.items() if k.lower() == "content-type"), "application/json"
    )
    response = MockResponse(
        exchange.response_body,
        status_code=exchange.status,
        headers=response_headers,
        content_type=content_type,
    )
    problems = [("response", error) for error in spec.api.iter_response_errors(request, response)]
    if 200 <= exchange.status < 300:
        problems += [
            ("request (the API accepted it)", error)
            for error in spec.api.iter_request_errors(request)
        ]
    if problems:
        body = _json_or_text(exchange.response_body)
        explained = _explain(problems)
        raise ContractViolationError(f"{where} breaks docs/openapi.yaml:\n{explained}\n{body}")


def _explain(problems: list[tuple[str, Exception]]) -> str:
    """Each problem in a line or a few: the error's kind and what the schema said, by path."""
    parts = []
    for side, error in problems:
        text = f"{side}: {type(error).__name__}: {str(error)[:200]}"
        seen = error
        while seen.__cause__ is not None:
            seen = seen.__cause__
        for detail in getattr(seen, "schema_errors", None) or []:
            path = "/".join(str(p) for p in detail.absolute_path) or "(body)"
            text += f"\n  - {path}: {detail.message[:300]}"
        parts.append(text)
    return "\n".join(parts)
