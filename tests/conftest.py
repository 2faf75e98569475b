"""Shared fixtures: moto for integration tests, `load_event()` for events/*.json."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from leasehold.testing import iam
from leasehold_dev.local.moto import item_size as moto_item_size
from leasehold_dev.local.moto import text as moto_text
from leasehold_dev.local.moto import transactions as moto_transactions
from tests.support.api import Call, call_fixture
from tests.support.atomic import serialise_dynamodb
from tests.support.harness import Harness

EVENTS = Path(__file__).resolve().parents[1] / "events"

# leasehold.testing's fixtures, enabled as a user's own conftest.py enables them
# (tests/integration/test_testing_harness.py uses them as a user would).
pytest_plugins = ["leasehold.testing.pytest_plugin"]


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


@pytest.fixture(autouse=True, scope="session")
def moto_behaves_like_the_service() -> Iterator[None]:
    """For every test that runs moto in-process (the `moto` fixture, or a state machine that
    starts its own mock): conditions and writes are atomic, an injected fault leaves the request
    unapplied, botocore's retries keep their rules but not their real-time sleeps, and a call
    made as a function (the harness's services, a handler invoked as its function) is judged
    by that function's role, as IAM judges it on AWS."""
    moto_transactions.install()  # transactions that cost what DynamoDB's would, not the table
    moto_text.install()  # a lone surrogate is refused, as DynamoDB refuses it
    moto_item_size.install()  # an update refused for the item's size changes nothing
    iam.install()  # a call made acting as a function's role is judged by that role's policy
    patches = pytest.MonkeyPatch()
    serialise_dynamodb(patches)
    instant_sdk_backoff(patches)
    one_model_loader(patches)
    yield
    patches.undo()


@pytest.fixture(autouse=True)
def token_window_on_the_wall_clock() -> Iterator[None]:
    """A harness points the ClientRequestToken window at its manual clock; the next test starts
    on the wall clock again."""
    yield
    moto_transactions.use_token_clock(None)


@pytest.fixture(autouse=True)
def no_running_engine_outlives_its_test() -> Iterator[None]:
    """A handler's cold start makes its engine the process's running one (`Engine.current()`,
    what `submit_direct` and `job_writes` use for tenant limits and the data bucket). The next
    test starts with the engine it found: test_batches' submit-rate test left its engine (a rate
    of 5, its own table) to test_direct_enqueue, which failed only when run after it."""
    from leasehold.sdk import apps

    before = apps._running
    yield
    apps._running = before


@pytest.fixture
def moto_server() -> Iterator[str]:
    """The local stack's embedded moto server (a thread of this process), its endpoint."""
    from leasehold_dev.local.moto.server import start_moto

    server, url = start_moto()
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture
def moto(aws_env: None) -> Iterator[None]:
    with mock_aws():
        yield


def one_model_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every botocore session of the test process shares one data loader: each test makes its
    own session and clients (a client carries the test's fault injectors), and a new session
    read the service models from disk again — two thirds of a harness's 0.2 s setup, paid by
    some 1,500 tests. The models are read-only; the clients are still new."""
    import botocore.loaders
    import botocore.session

    from leasehold.testing.testbed import _SearchPaths

    loaders: dict[str | None, Any] = {}
    create = botocore.loaders.create_loader

    def shared(search_path_string: str | None = None) -> Any:
        if search_path_string not in loaders:
            loader = create(search_path_string)
            # boto3 appends its data directory to every new session's loader: once here
            loader._search_paths = _SearchPaths(loader.search_paths)
            loaders[search_path_string] = loader
        return loaders[search_path_string]

    monkeypatch.setattr(botocore.session, "create_loader", shared)


def instant_sdk_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's standard retries keep their rules (what is retried, how often) but not their
    real-time sleeps: tests inject throttles by the hundred and run on a manual clock."""
    from botocore.retries.standard import ExponentialBackoff

    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0)


@pytest.fixture
def harness(moto: None) -> Harness:
    return Harness.create()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test is marked by the folder it lives in: unit, integration or e2e."""
    for item in items:
        for marker in ("unit", "integration", "e2e"):
            if f"/tests/{marker}/" in str(item.path):
                item.add_marker(getattr(pytest.mark, marker))


@pytest.fixture
def call(moto: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Call]:
    """The Api handler with the template's environment (the live title fetcher, as deployed)."""
    yield from call_fixture(monkeypatch)


@pytest.fixture
def local_call(moto: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Call]:
    """The Api handler configured as the local stack is (the fixture title fetcher)."""
    yield from call_fixture(monkeypatch, TITLE_FETCHER="fixture")
