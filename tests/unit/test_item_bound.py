"""The with-bucket shares of the job item (leasehold.domain.sizes, decision LD16): they add up to
at most 64,000 bytes, a reference is never longer than its bound, and whatever the parts' sizes
the stores keep each part within its share (a property test over random sizes, on an in-memory
bucket)."""

from __future__ import annotations

import hashlib
import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from leasehold.domain import sizes
from leasehold.domain.policies import MAX_STEPS
from leasehold.store.blobs import BlobStore, is_ref

JOB_ID = "j_" + "f" * 22  # the longest id the engine makes (`j_` + 22 hex, store/keys.py)


class MemoryBucket:
    """The two S3 calls the blob store makes, in memory."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put_object(self, *, Key: str, Body: bytes, **_: Any) -> None:  # noqa: N803 - boto3's names
        self.objects[Key] = Body

    def get_object(self, *, Key: str, **_: Any) -> dict[str, Any]:  # noqa: N803
        return {"Body": io.BytesIO(self.objects[Key])}


def _store() -> BlobStore:
    return BlobStore(MemoryBucket(), "data")  # type: ignore[arg-type]


def test_the_with_bucket_shares_add_up_to_at_most_64_kb() -> None:
    assert sum(sizes.BUCKET_SHARES.values()) == sizes.BUCKET_ITEM_BUDGET == 63_413
    assert sizes.BUCKET_ITEM_BUDGET <= sizes.ITEM_CAP == 64_000
    # the outputs' share: 8 KiB inline, a reference for each of the 20 steps, brackets, commas
    assert sizes.OUTPUTS_WITH_BUCKET == 8 * 1024 + MAX_STEPS * sizes.REF_LIMIT + MAX_STEPS + 1
    # the table without a bucket is unchanged (an engine built for a unit test)
    assert sizes.ITEM_BUDGET == 284 * 1024


def test_the_longest_reference_is_within_its_bound() -> None:
    store = _store()
    epoch = 10**10 - 1  # ten digits of epoch
    value = "x" * (sizes.BLOB_LIMIT - 2)  # eight digits of size
    for name in ("out/19", "state/{sha}", "op/{sha}", "result"):
        ref = store.spill(JOB_ID, name, value.encode(), epoch=epoch)
        assert sizes.json_bytes(ref) <= sizes.REF_LIMIT, (name, sizes.json_bytes(ref))


def _value(seed: int, size: int) -> Any:
    """A value of `size` characters: ASCII, or non-ASCII (escaped on the item: 6 bytes each)."""
    if seed % 3 == 0:
        return {"t": "é" * size}
    return {"t": hashlib.sha256(str(seed).encode()).hexdigest()[:1] * size}


sizes_of = st.integers(min_value=0, max_value=20_000)


@settings(max_examples=40, deadline=None)
@given(
    outputs=st.lists(sizes_of, min_size=0, max_size=MAX_STEPS),
    state=sizes_of,
    receipts=st.lists(sizes_of, min_size=0, max_size=MAX_STEPS),
)
def test_whatever_the_sizes_each_part_stays_within_its_share(
    outputs: list[int], state: int, receipts: list[int]
) -> None:
    store = _store()
    epoch = 7
    kept = store.keep_outputs(JOB_ID, epoch, [_value(i, n) for i, n in enumerate(outputs)])
    assert sizes.json_bytes(kept) <= sizes.OUTPUTS_WITH_BUCKET
    assert [store.load(JOB_ID, v) for v in kept] == [_value(i, n) for i, n in enumerate(outputs)]
    kept_state = store.keep_state(JOB_ID, epoch, _value(99, state))
    assert sizes.json_bytes(kept_state) <= sizes.KIND_STATE_INLINE
    assert store.load(JOB_ID, kept_state) == _value(99, state)
    ledger: dict[str, Any] = {}
    for step, receipt in enumerate(receipts):
        stored = store.keep_entry(JOB_ID, epoch, *_effect_entry(step, receipt), ledger)
        assert sizes.json_bytes(stored["receipt"]) <= sizes.RECEIPT_INLINE
        assert store.load(JOB_ID, stored["receipt"]) == _value(step, receipt)  # whole
        ledger[stored["key"]] = stored
    # up to twenty effect steps (the engine's own confirm: the output is the receipt), whatever
    # their receipts, fit the ledger's share: the entries keep references
    assert sizes.json_bytes(ledger) <= sizes.LEDGER_INLINE


def test_twenty_effect_steps_with_large_receipts_fit_the_ledgers_share() -> None:
    store, ledger = _store(), {}
    for step in range(MAX_STEPS):
        stored = store.keep_entry(JOB_ID, 10**10 - 1, *_effect_entry(step, 20_000), ledger)
        assert is_ref(stored["receipt"])
        ledger[stored["key"]] = stored
    assert sizes.json_bytes(ledger) <= sizes.LEDGER_INLINE


def _effect_entry(step: int, receipt: int) -> tuple[str, dict[str, Any]]:
    """An SDK effect step's confirmed entry, its longest fields at their bounds (a 64-character
    provider, `status_lookup`, `reconciled`, `returned`)."""
    operation_id = f"{JOB_ID}:{step}"
    return operation_id, {
        "provider": "p" * 64,
        "key": operation_id,
        "fingerprint": "f" * 32,
        "capability": "status_lookup",
        "state": "confirmed",
        "step": step,
        "submitted_at": 1_764_800_000_000,
        "settled_at": 1_764_800_000_000,
        "reconciled": False,
        "returned": "value",
        "receipt": _value(step, receipt),
    }
