"""A worker that dies after a blob is in S3 and before the checkpoint that would reference it
(issue 32's must-show: nothing referenced twice, nothing lost)."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.store.blobs import REF
from leasehold.testing import WorkerCrashed


def crash_after_first_blob(testbed: Any, monkeypatch: pytest.MonkeyPatch, name: str) -> list[str]:
    """Make the first spill of blob `name` (`out/0`: the first step's output) crash the worker
    once the blob is written; the list returned gets the key of the blob left behind."""
    blobs = testbed.runtime.stores.table.blobs
    real_spill = blobs.spill
    crashed: list[str] = []

    def spill_then_die(job_id: str, blob: str, data: bytes, *, epoch: int | None = None) -> Any:
        ref = real_spill(job_id, blob, data, epoch=epoch)
        if blob == name and not crashed:  # the blob is in S3; its checkpoint never comes
            crashed.append(ref[REF]["key"])
            raise WorkerCrashed("died after the blob, before the checkpoint")
        return ref

    monkeypatch.setattr(blobs, "spill", spill_then_die)
    return crashed
