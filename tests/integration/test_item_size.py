"""A job item stays far from DynamoDB's 400 KB (arch §17): each part of the job has a share of
the item's budget (leasehold.domain.sizes), a part that would pass its share ends the job
`failed` / `item_too_large` before the write, and a write DynamoDB refuses for size all the same
ends it the same way — the message is let go, never re-delivered into the DLQ (moto, in-process;
moto's size refusal made atomic by leasehold_dev.local.moto.item_size)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from leasehold import Effect, FatalError, Kind, Step, StepContext
from leasehold.domain import sizes
from leasehold.service.worker import Disposition
from leasehold.store.items import job_key
from leasehold.testing import LeaseholdTestbed
from tests.support.harness import ALICE, Harness, steps

pytestmark = pytest.mark.integration

CHUNK = 15 * 1024  # each output under the 16 KiB limit; seven of them pass the outputs' share

piles_up = Kind("piles_up")


@piles_up.planner
def _plan(payload: dict[str, Any]) -> list[Step]:
    return [Step(f"s{i}", lambda ctx, payload: "x" * CHUNK) for i in range(8)]


hoards = Kind("hoards")


@hoards.step()
def keep_everything(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    ctx.save_progress({"seen": "x" * (40 * 1024)})  # over the kind state's 32 KiB
    return {"ok": True}


overflows = Kind("overflows")


@overflows.step()
def keep_more_than_dynamodb_holds(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    ctx.save_progress({"seen": "x" * 420_000})
    return {"ok": True}


charges = Kind("charges")


@charges.planner
def _charge_plan(payload: dict[str, Any]) -> list[Step]:
    def charge(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
        return {"receipt": "r" * CHUNK}  # kept in the ledger with the operation

    return [Step(f"pay{i}", charge, effect=Effect("bank")) for i in range(6)]


KINDS = [piles_up, hoards, overflows, charges]


@pytest.fixture
def tb() -> Iterator[Any]:
    with LeaseholdTestbed(KINDS) as testbed:
        yield testbed


@pytest.fixture
def bare() -> Iterator[Any]:
    """The testbed as an engine without DATA_BUCKET: every value on the item, under the shares
    of the first table (leasehold.domain.sizes; a unit test's engine)."""
    with LeaseholdTestbed(KINDS) as testbed:
        testbed.runtime.stores.table.blobs = None
        testbed._worker = testbed._new_worker()  # noqa: SLF001 - its blob store goes too
        yield testbed


def _ended(view: dict[str, Any]) -> tuple[str, str | None, str | None]:
    return view["state"], view.get("stop_reason"), (view.get("error") or {}).get("code")


def _left_on_queues(tb: Any) -> dict[str, int]:
    """Messages still on the work queue and the DLQ, visible or in flight."""
    sqs = tb.client("sqs")
    counts = {}
    for name in ("work", "dlq"):
        attrs = sqs.get_queue_attributes(
            QueueUrl=tb.queue_urls[name],
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        counts[name] = sum(int(value) for value in attrs.values())
    return counts


def _item(tb: Any, job_id: str) -> dict[str, Any]:
    answer = tb.client("dynamodb").get_item(
        TableName=tb.table_name, Key=job_key(job_id), ConsistentRead=True
    )
    return dict(answer["Item"])


def _json_bytes(item: Any) -> int:
    """The raw item as JSON, a binary attribute (the job's trace, `tp`) as base64: more than
    DynamoDB counts for it, so an item under the budget here is under it there."""
    return len(json.dumps(item, default=lambda raw: base64.b64encode(raw).decode()))


def test_the_budget_adds_up_far_from_dynamodbs_limit() -> None:
    assert sizes.ITEM_BUDGET == 284 * 1024
    assert sizes.ITEM_BUDGET <= 0.75 * sizes.DYNAMODB_ITEM_LIMIT


def test_outputs_past_their_share_go_to_the_data_bucket_not_the_item(tb: Any) -> None:
    # Given a kind whose eight outputs together pass what the item may hold (they once ended
    # the job `item_too_large`, SZ2; with a data bucket they are kept there, decision LD1)
    job_id = tb.submit("piles_up", {})
    # When it runs
    report = tb.run_until_idle()
    # Then it succeeds, its item holds references, and stays small
    assert _ended(tb.view(job_id)) == ("succeeded", None, None)
    assert [d.outcome for d in report.deliveries] == ["succeeded"]
    assert _left_on_queues(tb) == {"work": 0, "dlq": 0}
    assert _json_bytes(_item(tb, job_id)) < 8 * 1024
    kept = tb.client("s3").list_objects_v2(Bucket="leasehold-data", Prefix=f"jobs/{job_id}/")
    assert len(kept["Contents"]) == 1  # eight equal outputs and the result: one blob (LD2)


def test_kind_state_past_its_share_fails_the_job_unsaved(bare: Any) -> None:
    tb = bare
    job_id = tb.submit("hoards", {})
    tb.run_until_idle()
    view = tb.view(job_id)
    assert _ended(view) == ("failed", "handler_error", "item_too_large")
    assert str(sizes.KIND_STATE_BUDGET) in view["error"]["message"]
    assert tb.progress(job_id) is None
    assert _left_on_queues(tb) == {"work": 0, "dlq": 0}


def test_a_receipt_past_the_ledgers_share_is_not_recorded_and_the_effect_is_unknown(
    bare: Any,
) -> None:
    tb = bare
    # Given effect steps whose receipts together pass the ledger's 64 KiB (no data bucket)
    job_id = tb.submit("charges", {})
    tb.run_until_idle()
    # Then the fifth receipt is not written; its effect happened but is not on record, so the
    # job goes to an operator (`unknown`), saying why
    view = tb.view(job_id)
    assert _ended(view) == ("unknown", "effect_uncertain", "effect_uncertain")
    assert str(sizes.LEDGER_BUDGET) in view["error"]["message"]
    states = [operation["state"] for operation in tb.operations(job_id)]
    assert states == ["confirmed"] * 4 + ["submitted"]
    assert _json_bytes(_item(tb, job_id)) < sizes.ITEM_BUDGET
    assert _left_on_queues(tb) == {"work": 0, "dlq": 0}


def test_a_write_dynamodb_refuses_for_size_fails_the_job_and_lets_the_message_go(
    bare: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tb = bare
    # Given a budget set past what DynamoDB holds (belt and braces: the refusal itself)
    monkeypatch.setattr(sizes, "KIND_STATE_BUDGET", 10 * sizes.DYNAMODB_ITEM_LIMIT)
    job_id = tb.submit("overflows", {})
    # When the step saves ~420 KB of progress, and DynamoDB (moto) refuses the write
    report = tb.run_until_idle()
    # Then the job ends failed / item_too_large with DynamoDB's reason; the message is gone
    view = tb.view(job_id)
    assert _ended(view) == ("failed", "handler_error", "item_too_large")
    assert "exceeded the maximum allowed size" in view["error"]["message"]
    assert [d.outcome for d in report.deliveries] == ["failed"]
    assert _left_on_queues(tb) == {"work": 0, "dlq": 0}
    assert tb.progress(job_id) is None  # nothing of the refused write was applied


# ------------------------------------------------------------------ an injected refusal

SIZE_REFUSAL = "Item size to update has exceeded the maximum allowed size"


def _refuse_checkpoints(client: Any, times: int) -> list[int]:
    """DynamoDB's answer to an UpdateItem over 400 KB, for the next `times` checkpoints (the
    UpdateItems that write `outputs` under a lease), injected at the client boundary."""
    refused: list[int] = []

    def before_call(params: dict[str, Any], **_: Any) -> Any:
        body = json.loads(params.get("body") or b"{}")
        names = set((body.get("ExpressionAttributeNames") or {}).values())
        if len(refused) >= times or not {"outputs", "lease_expires_at"} <= names:
            return None
        refused.append(1)
        response = AWSResponse("https://dynamodb.injected", 400, {}, None)
        error = {"Code": "ValidationException", "Message": SIZE_REFUSAL}
        return response, {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}

    client.meta.events.register_first("before-call.dynamodb.UpdateItem", before_call)
    return refused


@pytest.fixture
def harness(moto: None) -> Harness:
    return Harness.create()


def test_an_injected_size_refusal_of_a_checkpoint_fails_the_job_and_acks(harness: Harness) -> None:
    # Given a two-step job whose first checkpoint DynamoDB refuses for size
    job_id = harness.submit(payload=steps({}, {}))
    refused = _refuse_checkpoints(harness.dynamodb, times=1)
    # When a worker runs it
    result = harness.deliver(job_id)
    # Then the message is let go (not kept for a redelivery) and the job says why
    assert refused == [1]
    assert (result.disposition, result.outcome) == (Disposition.ACK, "failed")
    view = harness.jobs().view(ALICE, job_id)
    assert _ended(view) == ("failed", "handler_error", "item_too_large")
    assert SIZE_REFUSAL in view["error"]["message"]
    assert "step 0" in view["error"]["message"]


def test_a_failure_refused_for_size_too_is_written_without_the_outputs(harness: Harness) -> None:
    # Given an item DynamoDB refuses to grow at all: the checkpoint and the first failure write
    job_id = harness.submit(payload=steps({}, {}))
    refused = _refuse_checkpoints(harness.dynamodb, times=2)
    result = harness.deliver(job_id)
    # Then the failure is written once more without the outputs and the kind state
    assert refused == [1, 1]
    assert (result.disposition, result.outcome) == (Disposition.ACK, "failed")
    raw = harness.raw(job_id)
    assert (raw["state"], raw["error"]["code"], raw["outputs"]) == (
        "failed",
        "item_too_large",
        "[]",
    )


def test_a_job_whose_every_write_is_refused_for_size_still_lets_the_message_go(
    harness: Harness,
) -> None:
    job_id = harness.submit(payload=steps({}, {}))
    refused = _refuse_checkpoints(harness.dynamodb, times=3)
    result = harness.deliver(job_id)
    # Then nothing could be written, and a redelivery could only be refused again: the message
    # goes; the job stays running until its lease runs out (the sweeper's)
    assert refused == [1, 1, 1]
    assert (result.disposition, result.outcome) == (Disposition.ACK, "item_too_large")
    assert harness.state(job_id) == "running"


careful = Kind("careful")


@careful.step()
def save_less_when_refused(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    try:
        ctx.save_progress({"seen": "x" * (40 * 1024)})
    except FatalError as refused:
        assert refused.error_code == "item_too_large"
        ctx.save_progress({"seen": "x" * 1024})
    return {"ok": True}


def test_a_kind_can_catch_the_refusal_and_save_less() -> None:
    with LeaseholdTestbed([careful]) as tb:
        job_id = tb.submit("careful", {})
        tb.run_until_idle()
        assert tb.view(job_id)["state"] == "succeeded"
