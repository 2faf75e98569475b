"""Shared fixtures: moto for integration tests, `load_event()` for events/*.json."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from leasehold.local import moto_transactions
from tests.support.atomic import serialise_dynamodb
from tests.support.harness import Harness

EVENTS = Path(__file__).resolve().parents[1] / "events"


def load_event(name: str) -> dict[str, Any]:
    """One helper for every sample event in events/ (the same files `sam local invoke` takes)."""
    return json.loads((EVENTS / name).read_text())


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def moto(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    moto_transactions.install()
    serialise_dynamodb(monkeypatch)
    with mock_aws():
        yield


@pytest.fixture
def harness(moto: None) -> Harness:
    return Harness.create()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test is marked by the folder it lives in: unit, integration or e2e."""
    for item in items:
        for marker in ("unit", "integration", "e2e"):
            if f"/tests/{marker}/" in str(item.path):
                item.add_marker(getattr(pytest.mark, marker))
