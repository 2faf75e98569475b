"""docs/openapi.yaml is a valid OpenAPI 3.1 document and says what the code says: one operation
per template route, the enums and limits of the domain, every error code the API can answer,
and examples that validate against their own schemas."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openapi_schema_validator import OAS31Validator, oas31_format_checker
from openapi_spec_validator import validate

from leasehold.domain.options import IDEMPOTENCY_KEY as _IDEMPOTENCY_KEY
from leasehold.domain.states import JobState, StopReason
from leasehold.service.jobs import MAX_LIST_LIMIT
from leasehold_apps.doc_agent import STOP_REASONS as AGENT_STOP_REASONS
from leasehold_apps.reading_list.bookmark import TitleStatus
from leasehold_apps.reading_list.store import SOURCE_DELETED, SUPERSEDED
from leasehold_apps.reading_list.titles import FIXTURE_MODES
from leasehold_apps.synthetic import STEP_FIELDS
from leasehold_dev.local.template import http_routes, load_template
from tests.support.kinds import registry
from tests.support.yamlfile import read_yaml

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT: dict[str, Any] = read_yaml(ROOT / "docs" / "openapi.yaml")
SCHEMAS = DOCUMENT["components"]["schemas"]
METHODS = {"get", "post", "put", "patch", "delete"}


def _operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield method.upper(), path, operation


def _validator(schema: dict[str, Any]) -> OAS31Validator:
    """A validator for a schema of the document (OpenAPI 3.1's dialect: JSON Schema 2020-12 and
    the OpenAPI keywords), its `#/components/...` references resolved."""
    return OAS31Validator(
        {**schema, "components": DOCUMENT["components"]}, format_checker=oas31_format_checker
    )


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = DOCUMENT
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def test_the_document_is_valid_openapi_3_1() -> None:
    validate(DOCUMENT)  # openapi-spec-validator: raises on any structural error
    assert DOCUMENT["openapi"] == "3.1.0"


def test_every_template_route_has_one_operation_and_nothing_else_is_documented() -> None:
    routes = {(r.method, r.path) for r in http_routes(load_template(ROOT / "template.yaml"))}
    documented = [(method, path) for method, path, _ in _operations()]
    assert len(documented) == len(set(documented))
    assert set(documented) == routes
    ids = [operation["operationId"] for _, _, operation in _operations()]
    assert len(ids) == len(set(ids))


def test_every_operation_has_a_request_and_a_response_example() -> None:
    for method, path, operation in _operations():
        responses = operation["responses"]
        success = next(code for code in responses if code.startswith("2"))
        content = _resolve(responses[success]).get("content")
        if content is not None:  # 204 has no body to show
            for media_type, media in content.items():  # JSON, or the console's HTML/JS/CSS
                assert media.get("examples"), (method, path, media_type)
        body = operation.get("requestBody")
        if body is not None:
            assert body["content"]["application/json"].get("examples"), (method, path)


def _pointer(where: str, key: object) -> str:
    return f"{where}/{str(key).replace('~', '~0').replace('/', '~1')}"


def _schema_examples(schema: Any, where: str) -> Iterator[tuple[str, Any, Any]]:
    """Every `examples` list of a schema and of each schema inside it, with the (sub)schema that
    holds it."""
    if isinstance(schema, dict):
        if isinstance(schema.get("examples"), list):
            for index, value in enumerate(schema["examples"]):
                yield _pointer(_pointer(where, "examples"), index), schema, value
        for key, value in schema.items():
            if key != "examples":
                yield from _schema_examples(value, _pointer(where, key))
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from _schema_examples(value, _pointer(where, index))


def _examples(used: set[str]) -> Iterator[tuple[str, Any, Any]]:
    """Every example in the document, as (where, schema, value): each `example` and `examples`
    entry of a media type, parameter or header (a `$ref` to `#/components/examples` resolved, and
    added to `used`), and each `examples` list of a schema, wherever the schema is."""

    def walk(node: Any, where: str) -> Iterator[tuple[str, Any, Any]]:
        if isinstance(node, list):
            for index, value in enumerate(node):
                yield from walk(value, _pointer(where, index))
            return
        if not isinstance(node, dict) or where == "#/components/examples":
            return  # a component example is validated where it is used
        if where == "#/components/schemas":
            yield from _schema_examples(node, where)
            return
        schema = node.get("schema")
        if isinstance(schema, dict):  # a media type, a parameter or a header
            yield from _schema_examples(schema, _pointer(where, "schema"))
            if "example" in node:
                yield _pointer(where, "example"), schema, node["example"]
            for name, example in (node.get("examples") or {}).items():
                if "$ref" in example:
                    used.add(example["$ref"])
                value = _resolve(example)["value"]
                yield _pointer(_pointer(where, "examples"), name), schema, value
        for key, value in node.items():
            if key not in {"schema", "examples", "example"}:
                yield from walk(value, _pointer(where, key))

    yield from walk(DOCUMENT, "#")


REFERENCED_EXAMPLES: set[str] = set()
EXAMPLES = [pytest.param(*site, id=site[0]) for site in _examples(REFERENCED_EXAMPLES)]


def test_every_example_is_found_and_every_component_example_is_used() -> None:
    # The walk reaches request and response bodies, parameters and schemas alike
    sites = [str(site.values[0]) for site in EXAMPLES]
    for kind in ("/requestBody/", "/responses/", "/parameters/", "/schemas/", "/properties/"):
        assert any(kind in where for where in sites), kind
    assert len(sites) == len(set(sites))
    components = {f"#/components/examples/{name}" for name in DOCUMENT["components"]["examples"]}
    assert components == REFERENCED_EXAMPLES  # none unused, so none unchecked


@pytest.mark.parametrize(("where", "schema", "value"), EXAMPLES)
def test_every_example_validates_against_its_schema(where: str, schema: Any, value: Any) -> None:
    errors = [
        f"{list(e.absolute_path)}: {e.message}" for e in _validator(schema).iter_errors(value)
    ]
    assert errors == [], where


def test_every_link_names_an_operation_and_its_parameters() -> None:
    by_id = {operation["operationId"]: operation for _, _, operation in _operations()}
    links = 0
    for _, _, operation in _operations():
        for response in operation["responses"].values():
            for link in (response.get("links") or {}).values():
                links += 1
                target = by_id[link["operationId"]]
                names = {_resolve(p)["name"] for p in target.get("parameters", [])}
                assert set(link.get("parameters", {})) <= names
    assert links >= 10


def test_enums_and_limits_match_the_domain() -> None:
    assert SCHEMAS["JobState"]["enum"] == [state.value for state in JobState]
    # The engine's stop reasons, and those the shipped applications' kinds end jobs with (the
    # reading list's kinds and transact_closing_job set its two): each named, each matching the
    # rule a kind's own reasons follow too.
    stop_reason = SCHEMAS["StopReason"]
    known = [*(reason.value for reason in StopReason), *AGENT_STOP_REASONS]
    for reason in [*known, SOURCE_DELETED, SUPERSEDED]:
        assert f"`{reason}`" in stop_reason["description"], reason
        assert re.fullmatch(stop_reason["pattern"], reason), reason
    statuses = SCHEMAS["BookmarkView"]["properties"]["title_status"]["enum"]
    assert statuses == [TitleStatus.PENDING, TitleStatus.READY, TitleStatus.FAILED]
    kinds = registry()
    # Kinds are whatever LEASEHOLD_KINDS registers: the document names the shipped ones and
    # gives the rule every kind name follows (leasehold.Kind refuses any other name).
    assert all(re.fullmatch(SCHEMAS["Kind"]["pattern"], name) for name in kinds)
    assert all(f"`{name}`" in SCHEMAS["Kind"]["description"] for name in kinds)
    described = SCHEMAS["JobKindName"]["description"]  # JobRequest's and BatchJobRequest's kind
    for name, kind in kinds.items():
        assert (f"`{name}`" in described) is kind.submittable, name
    assert SCHEMAS["TitleMode"]["enum"] == [*FIXTURE_MODES]
    assert set(SCHEMAS["SyntheticStep"]["properties"]) == STEP_FIELDS
    key = DOCUMENT["components"]["parameters"]["IdempotencyKey"]["schema"]["pattern"]
    assert key == _IDEMPOTENCY_KEY.pattern
    for name in ("Limit", "OpsLimit"):
        assert DOCUMENT["components"]["parameters"][name]["schema"]["maximum"] == MAX_LIST_LIMIT


def _codes_raised(error_class: str) -> set[str]:
    """Every literal `code=` given to `error_class(...)` (or its subclasses' `super().__init__`)
    anywhere in src/leasehold and the applications the API serves (src/leasehold_apps)."""
    codes = set()
    subclasses = {error_class}
    sources = [*(ROOT / "src" / "leasehold").rglob("*.py")]
    sources += [*(ROOT / "src" / "leasehold_apps").rglob("*.py")]
    for source in sources:
        tree = ast.parse(source.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(base, ast.Name) and base.id == error_class for base in node.bases
            ):
                subclasses.add(node.name)
                for call in ast.walk(node):
                    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
                        codes |= _code_keyword(call)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in subclasses
            ):
                codes |= _code_keyword(node)
    return codes


def _code_keyword(call: ast.Call) -> set[str]:
    return {
        keyword.value.value
        for keyword in call.keywords
        if keyword.arg == "code"
        and isinstance(keyword.value, ast.Constant)
        and isinstance(keyword.value.value, str)
    }


def _documented_codes(response: str) -> set[str]:
    schema = _resolve(DOCUMENT["components"]["responses"][response]["content"]["application/json"])
    code = _resolve(schema["schema"])["properties"]["error"]["properties"]["code"]
    return set(code.get("enum") or [code["const"]])


def test_every_error_code_the_api_raises_is_documented_under_its_status() -> None:
    raised_400 = _codes_raised("ValidationError") | {"invalid_request"}
    raised_409 = _codes_raised("ConflictError") | {"conflict"}
    assert {"malformed_json", "invalid_url", "checked_provider_required"} <= raised_400
    assert {"idempotency_key_reused", "stale_version", "not_replayable"} <= raised_409
    # a body or payload over its limit is a 413 (decision LD2), every other one a 400
    assert "payload_too_large" in raised_400
    assert raised_400 - {"payload_too_large"} <= _documented_codes("BadRequest")
    assert _documented_codes("PayloadTooLarge") == {"payload_too_large"}
    assert raised_409 <= _documented_codes("Conflict")
    assert _documented_codes("NotFound") == {"not_found"}
    assert _documented_codes("Forbidden") == {"forbidden"}
    assert _documented_codes("Unavailable") == {"store_unavailable"}


def test_ids_in_the_document_are_the_ids_the_api_issues() -> None:
    from leasehold.domain.clock import ManualClock
    from leasehold.domain.ids import time_ordered_ids
    from leasehold.domain.job import Owner
    from leasehold.store.keys import derived_id

    clock = ManualClock(1_795_964_400_000)
    job_pattern = re.compile(SCHEMAS["JobId"]["pattern"])
    bookmark_pattern = re.compile(SCHEMAS["BookmarkId"]["pattern"])
    owner = Owner("study-group", "alice")
    assert job_pattern.fullmatch(time_ordered_ids(clock)())
    assert job_pattern.fullmatch(derived_id("j", owner, "key-1"))
    assert bookmark_pattern.fullmatch(time_ordered_ids(clock, "b")())
    assert bookmark_pattern.fullmatch(derived_id("b", owner, "key-1", "bookmarks"))
