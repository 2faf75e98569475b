"""docs/openapi.yaml is a contract the common tools take whole: Redocly CLI's recommended rules
(redocly.yaml) find no error and no warning in it, and openapi-python-client makes a client of
it with a class for every named schema — the job view, the operator's view and the job list
among them — that imports.

Both run as their users run them: Redocly CLI pinned by the Makefile, from npm into .venv/node
(`make setup`, or `make redocly` here when it is missing); openapi-python-client from .venv."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.yamlfile import read_yaml

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "docs" / "openapi.yaml"
DOCUMENT: dict[str, Any] = read_yaml(OPENAPI)
SCHEMAS: dict[str, Any] = DOCUMENT["components"]["schemas"]
MAKEFILE = (ROOT / "Makefile").read_text()
REDOCLY = ROOT / ".venv" / "node" / "node_modules" / ".bin" / "redocly"
METHODS = {"get", "post", "put", "patch", "delete"}
SCALARS = {"string", "integer", "number", "boolean"}


def _redocly() -> Path:
    if not REDOCLY.exists():
        subprocess.run(["make", "--no-print-directory", "redocly"], cwd=ROOT, check=False)
    if not REDOCLY.exists():
        pytest.fail(
            f"no {REDOCLY.relative_to(ROOT)}: `make redocly` installs it from npm "
            "(it needs Node.js and npm: apt-get install nodejs npm)"
        )
    return REDOCLY


def test_redocly_finds_no_error_and_no_warning() -> None:
    pinned = re.search(r"^REDOCLY_VERSION := (\S+)$", MAKEFILE, re.MULTILINE)
    assert pinned is not None
    run = subprocess.run(
        [_redocly(), "lint", "--config", "redocly.yaml", "--format", "json", "docs/openapi.yaml"],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        # no usage report to Redocly and no look for a newer release (as in the Makefile)
        env={**os.environ, "REDOCLY_TELEMETRY": "off", "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true"},
    )
    report = json.loads(run.stdout)
    assert report["version"] == pinned[1]
    problems = [
        f"{p['severity']} {p['ruleId']}: {p['message']} at {p['location'][0]['pointer']}"
        for p in report["problems"]
    ]
    assert problems == []
    assert report["totals"] == {"errors": 0, "warnings": 0, "ignored": 0}
    assert run.returncode == 0, run.stderr


def _response(response: dict[str, Any]) -> dict[str, Any]:
    """A response, or the one of components/responses it refers to."""
    if "$ref" not in response:
        return response
    found: dict[str, Any] = DOCUMENT["components"]["responses"][response["$ref"].split("/")[-1]]
    return found


def _class_name(schema_name: str) -> str:
    return schema_name[0].upper() + schema_name[1:]


def _kind_of(schema: dict[str, Any]) -> str:
    """What a generator makes of a named schema: a class ("model": an object, an enum), a union
    of other named schemas ("union"), or a plain value ("scalar")."""
    if schema.get("type") == "object" or "properties" in schema or "allOf" in schema:
        return "model"
    if "enum" in schema:
        return "model"
    if "oneOf" in schema or "anyOf" in schema:
        return "union"
    types = schema.get("type", [])
    assert set([types] if isinstance(types, str) else types) <= SCALARS, schema
    return "scalar"


def _generate(tmp_path: Path) -> tuple[Path, str]:
    config = tmp_path / "config.yaml"
    config.write_text("post_hooks: []\n")  # no ruff pass over the output: not what is checked
    out = tmp_path / "leasehold_client"
    run = subprocess.run(
        [
            Path(sys.executable).parent / "openapi-python-client",
            "generate",
            "--path",
            OPENAPI,
            "--config",
            config,
            "--meta",
            "none",
            "--output-path",
            out,
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return out, run.stdout + run.stderr


def test_a_generated_client_keeps_every_named_schema_as_a_type(tmp_path: Path) -> None:
    out, said = _generate(tmp_path)
    # Any schema it cannot take, any response it drops, it says so (and goes on)
    assert said.strip() == f"Generating {out}", said
    # The package imports, every module of it; and it names its models
    program = (
        "import importlib, json, pkgutil, leasehold_client, leasehold_client.models as m\n"
        "for info in pkgutil.walk_packages(leasehold_client.__path__, 'leasehold_client.'):\n"
        "    importlib.import_module(info.name)\n"
        "print(json.dumps(sorted(m.__all__)))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert run.returncode == 0, run.stderr
    models = set(json.loads(run.stdout))
    assert {"JobView", "OperatorJobView", "JobList", "OpsJobList", "BookmarkView"} <= models
    # No class named after an operation (`ListSchedulesResponse200`, `SubmitJobBody`): that is
    # an inline body, typed only where it is used and named by its route's operation id
    operations = [
        _class_name(operation["operationId"])
        for item in DOCUMENT["paths"].values()
        for method, operation in item.items()
        if method in METHODS
    ]
    inline = re.compile(rf"^({'|'.join(operations)})(Response[0-9]{{3}}|Body)")
    assert sorted(filter(inline.match, models)) == []
    kinds = {name: _kind_of(schema) for name, schema in SCHEMAS.items()}
    missing = [n for n, kind in kinds.items() if kind == "model" and _class_name(n) not in models]
    assert missing == []
    for name, kind in kinds.items():
        if kind == "union":
            members = SCHEMAS[name].get("oneOf") or SCHEMAS[name]["anyOf"]
            for member in members:  # a union of named schemas (and null), nothing inline
                assert "$ref" in member or member == {"type": "null"}, (name, member)
    # Each operation's generated call parses its answers into the named classes
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            if method not in METHODS:
                continue
            module = re.sub(r"(?<!^)(?=[A-Z])", "_", operation["operationId"]).lower()
            tag = operation["tags"][0]
            source = (out / "api" / tag / f"{module}.py").read_text()
            for code, given in operation["responses"].items():
                response = _response(given)
                content = response.get("content", {}).get("application/json")
                if content is None:
                    continue  # no body, or not JSON (the console's files)
                name = content["schema"].get("$ref", "(inline)").rsplit("/", 1)[-1]
                if kinds.get(name) == "union":
                    members = SCHEMAS[name].get("oneOf") or SCHEMAS[name]["anyOf"]
                    named = [m["$ref"].rsplit("/", 1)[-1] for m in members if "$ref" in m]
                else:
                    named = [name]
                for each in named:
                    parsed = f"{_class_name(each)}.from_dict("
                    assert parsed in source, (method, path, code, each)


def _bodies() -> list[tuple[str, dict[str, Any]]]:
    """Every body of the document — request and response, of every operation and every
    components/responses entry — with where it is."""
    found = []
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            if method not in METHODS:
                continue
            content = operation.get("requestBody", {}).get("content", {})
            found += [(f"{method} {path} request {t}", m) for t, m in content.items()]
            for code, response in operation["responses"].items():
                content = response.get("content", {})
                found += [(f"{method} {path} {code} {t}", m) for t, m in content.items()]
    for name, response in DOCUMENT["components"]["responses"].items():
        content = response.get("content", {})
        found += [(f"components/responses/{name} {t}", m) for t, m in content.items()]
    return found


def test_every_body_is_a_named_schema() -> None:
    bodies = _bodies()
    assert len(bodies) > 40
    inline = [where for where, media in bodies if set(media["schema"]) != {"$ref"}]
    assert inline == []
    for where, media in bodies:
        assert media["schema"]["$ref"].startswith("#/components/schemas/"), where
        assert media["schema"]["$ref"].rsplit("/", 1)[-1] in SCHEMAS, where
