"""External effects that are never charged twice (arch §6), against the real local billable
provider on 127.0.0.1: the crash-point matrix, each point × each provider capability; replay
and URL edits; the operator's path."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from leasehold.domain.states import JobState
from leasehold.sdk.engine_kind import EngineKind
from leasehold.service.worker import Disposition
from leasehold.store.items import deserialize_item
from leasehold_apps.reading_list.codec import bookmark_key
from leasehold_apps.reading_list.enrich import EnrichKind
from leasehold_apps.reading_list.service import BookmarkService
from leasehold_dev.local.provider import ProviderServer
from tests.support.harness import ALICE, LEASE_MS, Harness
from tests.support.index_lag import lagging_index
from tests.support.kinds import registry


@pytest.fixture(autouse=True)
def lagging(harness: Harness) -> Iterator[None]:
    """The sweeper finds its jobs through the by_state index: every test here runs with the
    index 500 ms behind the table, and what it says must still hold."""
    with lagging_index(harness.clock):
        yield


CAPABILITIES = ["idempotent", "lookup", "none"]
RECOVERABLE = {"idempotent", "lookup"}


class Crash(BaseException):
    """The worker process dies here (nothing in the worker may catch it)."""


class CrashAt:
    """A store seen through a worker that dies at one call: before it is applied, or after."""

    def __init__(self, real: Any, method: str, after: bool, counts: dict[str, int]) -> None:
        self._real, self._method, self._after, self._counts = real, method, after, counts

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if name == self._method and not self._after:
                raise Crash
            answer = method(*args, **kwargs)
            if name == "finish" and args[1] is JobState.SUCCEEDED:
                self._counts["results"] = self._counts.get("results", 0) + 1
            if name == self._method and self._after:
                raise Crash
            return answer

        return call


# point → (store, method, crash after the call?, fault sent to the provider on the first call)
POINTS: dict[str, tuple[str | None, str | None, bool, str | None]] = {
    "before the intent is saved": ("ledger", "submit", False, None),
    "after the intent, before the call": ("ledger", "submit", True, None),
    "provider committed, response lost": (None, None, False, "lose_response"),
    "after the response, before the ledger update": ("ledger", "settle", False, None),
    "after the ledger update, before the outcome": ("ledger", "settle", True, None),
    "after the outcome, before the ack": ("leases", "finish", True, None),
}


@pytest.fixture
def providers(tmp_path: Path) -> Any:
    servers = {
        mode: ProviderServer(capability=mode, db_path=tmp_path / f"{mode}.db").start()
        for mode in CAPABILITIES
    }
    yield servers
    for server in servers.values():
        server.stop()


def _enrich_kind(server: ProviderServer) -> EnrichKind:
    return EnrichKind(server.url, server.capability, timeout_s=2.0)


def _service(harness: Harness, kind: EnrichKind) -> BookmarkService:
    return harness.bookmarks(enrich=kind)


def _enrichment(harness: Harness, bookmark_id: str) -> dict[str, Any] | None:
    item = harness.dynamodb.get_item(
        TableName=harness.table, Key=bookmark_key(ALICE.tenant, bookmark_id)
    )["Item"]
    return deserialize_item(item).get("enrichment")


@pytest.mark.parametrize("capability", CAPABILITIES)
@pytest.mark.parametrize("point", list(POINTS))
def test_crash_point_matrix(
    harness: Harness, providers: dict[str, ProviderServer], point: str, capability: str
) -> None:
    server = providers[capability]
    kind = _enrich_kind(server)
    service = _service(harness, kind)
    view, _ = service.create(ALICE, {"url": "https://example.org/articles/leases"}, None)
    body: dict[str, Any] = {}
    store_name, method, after, fault = POINTS[point]
    job_id = service.enrich(ALICE, view["id"], body, None).job_id
    if fault:
        harness.dynamodb.update_item(  # the first call asks the provider to misbehave
            TableName=harness.table,
            Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}},
            UpdateExpression="SET payload = :p",
            ExpressionAttributeValues={":p": {"S": _payload_with(harness, job_id, fault=fault)}},
        )
    kinds = {**registry(), "enrich": EngineKind(kind)}
    counts: dict[str, int] = {}
    # Every worker's outcomes are counted (one visible result); the first one may die
    stores = replace(harness.stores, leases=CrashAt(harness.stores.leases, "", False, counts))
    if store_name and method:
        real = getattr(harness.stores, store_name)
        stores = replace(stores, **{store_name: CrashAt(real, method, after, counts)})
    # When the first worker runs the job and dies at the point (or, with a lost answer, lives)
    first = harness.worker("w1", kinds=kinds, stores=stores)
    with contextlib.suppress(Crash):
        first.handle(harness.wakeup(job_id))
    # Then workers come and go, the sweeper rescues, until the job comes to rest
    counted = replace(harness.stores, leases=CrashAt(harness.stores.leases, "", False, counts))
    for _ in range(6):
        job = harness.store.get(job_id)
        assert job is not None
        if job.state in {JobState.SUCCEEDED, JobState.UNKNOWN, JobState.FAILED}:
            break
        harness.clock.advance(LEASE_MS + 1)
        harness.sweep()
        result = harness.worker("w2", kinds=kinds, stores=counted).handle(harness.wakeup(job_id))
        assert result.disposition is Disposition.ACK
    job = harness.store.get(job_id)
    assert job is not None
    _, charges = server.ledger.list_charges(f"{job_id}:0:1")
    visible = counts.get("results", 0)
    print(f"MATRIX|{point}|{capability}|{len(charges)}|{job.state.value}|{visible}")
    if capability in RECOVERABLE:
        # The attempt is recovered, never started afresh: exactly one charge, one result
        assert len(charges) == 1, (point, capability, charges)
        assert job.state is JobState.SUCCEEDED and visible == 1
        enrichment = _enrichment(harness, view["id"])
        assert enrichment is not None and enrichment["receipt"] == charges[0]["receipt"]
    else:
        # Nobody can say whether it happened: at most one charge, never an automatic repeat
        assert len(charges) <= 1, (point, capability, charges)
        assert job.state in {JobState.SUCCEEDED, JobState.UNKNOWN}
        assert visible <= 1
        if job.state is JobState.UNKNOWN:
            assert job.effect_intent is not None
            assert job.effect_intent["operation_id"] == f"{job_id}:0:1"
            assert job.error is not None and job.error["code"] == "effect_uncertain"
        else:
            assert len(charges) == 1


def test_a_replay_reuses_the_operations_key_and_a_new_url_is_a_new_operation(
    harness: Harness, providers: dict[str, ProviderServer]
) -> None:
    server = providers["idempotent"]
    kind = _enrich_kind(server)
    service = _service(harness, kind)
    kinds = {**registry(), "enrich": EngineKind(kind)}
    view, _ = service.create(ALICE, {"url": "https://example.org/a"}, None)
    job_id = service.enrich(ALICE, view["id"], {}, None).job_id
    harness.dynamodb.update_item(  # one attempt only: the crash below uses it up
        TableName=harness.table,
        Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}},
        UpdateExpression="SET max_attempts = :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    # The provider charged, the worker died before it could write the receipt down
    crashing = replace(harness.stores, ledger=CrashAt(harness.stores.ledger, "settle", False, {}))
    with pytest.raises(Crash):
        harness.worker("w1", kinds=kinds, stores=crashing).handle(harness.wakeup(job_id))
    harness.clock.advance(LEASE_MS + 1)
    harness.sweep()
    job = harness.store.get(job_id)
    # its last attempt's lease ran out with the operation open: `unknown`, never `dead` (arch §23)
    assert job is not None and job.state is JobState.UNKNOWN
    assert len(server.ledger.list_charges(f"{job_id}:0:1")[1]) == 1
    # An operator replays it: the same operation, the same key — the provider charges nothing
    harness.ops().replay(
        job_id,
        harness.operator,
        {"note": "charge seen, receipt not recorded", "checked_provider": True},
    )
    assert harness.worker("w2", kinds=kinds).handle(harness.wakeup(job_id)).outcome == "succeeded"
    _, charges = server.ledger.list_charges(f"{job_id}:0:1")
    assert len(charges) == 1
    enrichment = _enrichment(harness, view["id"])
    assert enrichment is not None and enrichment["receipt"] == charges[0]["receipt"]
    # A new URL is new work: a new source_version, a new operation, a new (correct) charge
    service.edit(ALICE, view["id"], {"version": 1, "url": "https://example.org/b"})
    second = service.enrich(ALICE, view["id"], {}, None).job_id
    assert harness.worker("w3", kinds=kinds).handle(harness.wakeup(second)).outcome == "succeeded"
    assert len(server.ledger.list_charges(f"{second}:0:2")[1]) == 1
    assert server.ledger.list_charges()[0] == 2


def test_enrich_needs_a_provider_and_keeps_to_its_budget(
    harness: Harness, providers: dict[str, ProviderServer]
) -> None:
    from leasehold.domain.errors import ValidationError

    view, _ = harness.bookmarks().create(ALICE, {"url": "https://example.org/a"}, None)
    unconfigured = _service(harness, EnrichKind("", "none"))
    with pytest.raises(ValidationError, match="no enrichment provider"):
        unconfigured.enrich(ALICE, view["id"], {}, None)
    server = providers["idempotent"]
    service = _service(harness, _enrich_kind(server))
    for bad in (
        {"budget": {"max_cost": -1}},
        {"budget": 3},
        {"provider_mode": "idempotent"},
        {"colour": 1},
    ):
        with pytest.raises(ValidationError):
            service.enrich(ALICE, view["id"], bad, None)
    # A budget of 0 stops before the paid call: nothing is charged
    job_id = service.enrich(ALICE, view["id"], {"budget": {"max_cost": 0}}, None).job_id
    kinds = {**registry(), "enrich": EngineKind(_enrich_kind(server))}
    assert harness.worker(kinds=kinds).handle(harness.wakeup(job_id)).outcome == "failed"
    job = harness.store.get(job_id)
    assert job is not None and job.stop_reason == "budget_exhausted"
    assert server.ledger.list_charges()[0] == 0


def _payload_with(harness: Harness, job_id: str, **extra: str) -> str:
    import json

    job = harness.store.get(job_id)
    assert job is not None
    return json.dumps({**job.payload, **extra}, separators=(",", ":"))
