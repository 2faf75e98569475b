"""No item of a job exceeds 64 KB, by construction (decisions LD16, LD17; moto, the testbed).

One kind fills every part of the job item at once: a large payload, 1 MiB of kind state, an
effect step returning 1 MB (its receipt), eight effect steps and eleven plain steps returning
16 KiB each. Every table item that names the job stays ≤ 64,000 bytes — while the job holds all
of it (a job that fails at its last step keeps outputs, ledger and kind state) and once it has
succeeded — and everything reads back whole. A crash inside the 1 MB effect step leaves its
operation `submitted`; the next attempt asks the provider (status lookup) and confirms it
`reconciled`, the 1 MB receipt going to the bucket."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold import Effect, FatalError, Kind, RetryableError, Step, StepContext
from leasehold.domain import sizes
from leasehold.store.blobs import BlobStore, is_ref
from leasehold.testing import LeaseholdTestbed
from leasehold.testing.testbed import DATA_BUCKET
from tests.integration.test_large_data import _item_bytes, _job_items

pytestmark = pytest.mark.integration

MB = 1_000_000
KIB16 = 16 * 1024
PROVIDER: dict[str, Any] = {}
"""The fake provider's charges by idempotency key (status lookup asks it)."""
CHARGES: list[str] = []
"""Every charge the provider made (a reconcile must not charge again)."""


def _text(seed: str, size: int) -> str:
    """`size` characters of distinct content (no two outputs share a blob)."""
    block = hashlib.sha256(seed.encode()).hexdigest()
    return (block * (size // len(block) + 1))[:size]


def _state() -> dict[str, Any]:
    return {"seen": _text("state", 1024 * 1024)}


def _sixteen(index: int) -> dict[str, Any]:
    return {"step": index, "data": _text(f"out{index}", KIB16 - 40)}


def _big_receipt() -> dict[str, Any]:
    return {"charge": _text("receipt", MB)}


def _plan(payload: dict[str, Any]) -> list[Step]:
    def remember(ctx: StepContext, payload: dict[str, Any]) -> Any:
        ctx.save_progress(_state())
        return _sixteen(0)

    def charge_big(ctx: StepContext, payload: dict[str, Any]) -> Any:
        operation = ctx.operation
        assert operation is not None
        if operation.recovering and operation.key in PROVIDER:
            return PROVIDER[operation.key]  # asked afterwards: the charge it made
        PROVIDER[operation.key] = _big_receipt()
        CHARGES.append(operation.key)
        return PROVIDER[operation.key]

    def charge(index: int) -> Any:
        def run(ctx: StepContext, payload: dict[str, Any]) -> Any:
            return _sixteen(index)

        return run

    def plain(index: int) -> Any:
        def run(ctx: StepContext, payload: dict[str, Any]) -> Any:
            return _sixteen(index)

        return run

    def check(ctx: StepContext, payload: dict[str, Any]) -> Any:
        # every earlier value whole: the payload, the kind state, the outputs
        outputs = ctx.outputs
        assert payload["blob"] == _text("payload", 200_000)
        assert ctx.progress == _state()
        assert outputs["s1"] == _big_receipt()
        assert all(outputs[f"s{i}"] == _sixteen(i) for i in (0, *range(2, 19)))
        if payload.get("fail_at_end"):
            raise FatalError("failing with every part of the item in place", code="kept")
        return _sixteen(19)

    lookup = Effect("bank", capability="status_lookup")
    steps = [Step("s0", remember), Step("s1", charge_big, effect=lookup)]
    bank = Effect("bank", "idempotent_key")
    steps += [Step(f"s{i}", charge(i), effect=bank) for i in range(2, 10)]
    steps += [Step(f"s{i}", plain(i)) for i in range(10, 19)]
    return [*steps, Step("s19", check)]


filled = Kind("filled", max_payload_bytes=sizes.BLOB_LIMIT)
filled.planner(_plan)


chatty = Kind("chatty", max_attempts=2)


@chatty.step(effect=Effect("bank", "idempotent_key"))
def never_sent(ctx: StepContext, payload: dict[str, Any]) -> Any:
    # the connection never opened: nothing charged, said at length
    raise RetryableError("refused: " + "x" * 100_000, effect_settled=True)


@pytest.fixture
def tb() -> Iterator[Any]:
    PROVIDER.clear()
    CHARGES.clear()
    with LeaseholdTestbed([filled, chatty]) as testbed:
        yield testbed


def _payload(**extra: Any) -> dict[str, Any]:
    return {"blob": _text("payload", 200_000), **extra}


def _largest(tb: Any, job_id: str) -> int:
    items = _job_items(tb, job_id)
    assert items, "the job has items"
    return max(_item_bytes(item) for item in items)


def _blobs(tb: Any) -> BlobStore:
    return BlobStore(tb.client("s3"), DATA_BUCKET)


def _receipt(tb: Any, job_id: str, step: int) -> Any:
    entry = next(op for op in tb.operations(job_id) if op["step"] == step)
    return _blobs(tb).load(job_id, entry["receipt"])


def test_every_part_full_every_item_under_64_kb_and_everything_reads_back_whole(tb: Any) -> None:
    # Given a job that holds every part at once and fails at its last step (so nothing goes)
    job_id = tb.submit("filled", _payload(fail_at_end=True))
    # When it runs
    tb.run_until_idle()
    # Then it ended as the kind said, after every earlier step read its values whole
    view = tb.view(job_id)
    assert (view["state"], view["error"]["code"]) == ("failed", "kept"), view
    # and no item naming the job is over 64,000 bytes though it holds >1.3 MB of values
    assert _largest(tb, job_id) <= sizes.ITEM_CAP
    # the kind state, the 1 MB receipt and each 16 KiB receipt read back whole
    assert tb.progress(job_id) == _state()
    assert _receipt(tb, job_id, 1) == _big_receipt()
    assert [_receipt(tb, job_id, i) for i in range(2, 10)] == [_sixteen(i) for i in range(2, 10)]
    states = [op["state"] for op in tb.operations(job_id)]
    assert states == ["confirmed"] * 9
    # the large ones are references on the item, under the epoch that wrote them (LD4)
    raw = _job_items(tb, job_id)
    job_item = next(item for item in raw if item["sk"]["S"] == "JOB")
    assert is_ref(json.loads(job_item["kind_state"]["S"]))
    assert json.loads(job_item["kind_state"]["S"])["$blob"]["key"].startswith(f"jobs/{job_id}/e1/")


def test_the_effect_reconciles_with_a_1_mb_receipt_after_a_crash_inside_it(tb: Any) -> None:
    # Given a worker that dies inside the 1 MB effect step, after the provider charged
    tb.crash(in_step="s1")
    job_id = tb.submit("filled", _payload())
    tb.run_until_idle()
    assert [op["state"] for op in tb.operations(job_id)] == ["submitted"]
    # When its lease runs out (two minutes: inside the job's deadline) and the next attempt
    # asks the provider
    tb.advance(120)
    tb.run_until_idle()
    # Then the job succeeded, charged once, the operation confirmed as reconciled
    view = tb.view(job_id)
    assert view["state"] == "succeeded", view
    assert len(CHARGES) == 1
    first = next(op for op in tb.operations(job_id) if op["step"] == 1)
    assert (first["state"], first["reconciled"]) == ("confirmed", True)
    assert _receipt(tb, job_id, 1) == _big_receipt()
    assert tb.result(job_id) == _sixteen(19)
    assert _largest(tb, job_id) <= sizes.ITEM_CAP


def test_a_released_operations_reason_is_kept_to_500_characters(tb: Any) -> None:
    # Given an effect step whose provider was never reached, with a 100,000-character reason
    job_id = tb.submit("chatty", {})
    tb.run_until_idle()
    # Then its ledger entry is released with the reason cut, not refused for the item's size
    (entry,) = tb.operations(job_id)
    assert entry["state"] == "released", entry
    assert len(entry["error"]["message"]) == 500
    assert _largest(tb, job_id) <= sizes.ITEM_CAP
