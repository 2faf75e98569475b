"""What the blob pass may delete while a job's item lives (decision LD11): keys no item of the
job's collection names, named by an epoch at most the item's or by content — found in any
attribute, at any depth, in a JSON string or not."""

from __future__ import annotations

import json

import pytest

from leasehold.service.blob_sweep import referenced, unreferenced

pytestmark = pytest.mark.unit

P = "jobs/j_1/"


def _ref(name: str) -> dict[str, object]:
    return {"$blob": {"key": P + name, "size": 5000, "sha256": "0" * 64}}


def _job_item() -> dict[str, object]:
    """A raw job item as DynamoDB answers it: references inside JSON strings and maps."""
    return {
        "pk": {"S": "JOB#j_1"},
        "sk": {"S": "JOB"},
        "payload": {"S": json.dumps(_ref("payload/00112233445566aa"))},
        "outputs": {"S": json.dumps([{"small": 1}, _ref("e1/out/1")])},
        "result": {"S": json.dumps(_ref("e2/result"))},
        "operations": {"M": {"op": {"M": {"receipt": {"S": json.dumps(_ref("e2/op/ab"))}}}}},
        "tp": {"B": b"\x00" * 25},
    }


def test_every_reference_is_found_wherever_it_is_held() -> None:
    signal = {"pk": {"S": "JOB#j_1"}, "sk": {"S": "SIGNAL#go"}, "body": {"S": P + "signals/go/1"}}
    found = referenced("j_1", [_job_item(), signal])
    assert found == {
        P + "payload/00112233445566aa",
        P + "e1/out/1",
        P + "e2/result",
        P + "e2/op/ab",
        P + "signals/go/1",
    }
    assert referenced("j_2", [_job_item()]) == set()  # another job's prefix names nothing here


def test_only_unnamed_keys_of_known_shapes_at_most_the_items_epoch_are_orphans() -> None:
    keys = [
        P + "e1/out/1",  # named
        P + "e1/out/10",  # not named (e1/out/1 is a prefix of it, not it)
        P + "e1/out/0",
        P + "e2/result",  # named
        P + "e3/out/0",  # a later epoch: a replay's, not referenced yet
        P + "payload/00112233445566aa",  # named
        P + "payload/ffffffffffffffff",  # a refused second payload
        P + "payload/not-a-hash",
        P + "signals/go/1",  # another shape: kept while the item lives
        "jobs/j_10/e1/out/0",  # another job's (a prefix listing never gives it; still kept)
    ]
    assert unreferenced(keys, "j_1", [_job_item()], epoch=2) == [
        P + "e1/out/10",
        P + "e1/out/0",
        P + "payload/ffffffffffffffff",
    ]
