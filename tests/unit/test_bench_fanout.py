"""The fan-out bench's model check (bench/fanout.py): the writes a 100-child fan-out measured
must be the ones the design says (WF4, WF7) — a count dropped from the model, a second count of
an end, or a fan-in item the model forgot fails it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from bench.capacity import WriteEvent
from bench.fanout import MODEL, check_model

pytestmark = pytest.mark.unit


def _write(phase: str, pk: str, action: str = "Put", tx: bool = True) -> WriteEvent:
    return WriteEvent(
        phase=phase, operation="TransactWriteItems", key={"pk": {"S": pk}}, old=None,
        new={"pk": {"S": pk}}, transactional=tx, failed=False, action=action,
    )  # fmt: skip


def _fanout(n: int) -> list[WriteEvent]:
    writes = []
    for i in range(n):
        writes.append(_write("parent:spawn", f"JOB#c{i}"))
        writes.append(_write("child:outcome", "FANIN#p#0#0", action="Update"))
    for _ in range(-(-n // 98)):
        writes.append(_write("parent:spawn", "JOB#p", action="ConditionCheck"))
        writes.append(_write("parent:spawn", "OUTBOX#p"))
    writes.append(_write("child:wake", "JOB#p", action="Update"))
    return writes


def test_the_design_s_writes_pass() -> None:
    rows = check_model(_fanout(100), 100)
    assert all(row["ok"] for row in rows), rows


def test_an_end_counted_twice_fails() -> None:
    writes = [*_fanout(100), _write("child:outcome", "FANIN#p#0#0", action="Update")]
    failed = [row["what"] for row in check_model(writes, 100) if not row["ok"]]
    assert failed == [
        "each child's end counted once, with the end (WF4)",
        "every fan-in write measured is in the model",
    ]


def test_a_model_without_the_fan_in_item_fails_on_the_measured_writes() -> None:
    wrong = [row for row in MODEL if row.kind != "FANIN"]
    failed = [row for row in check_model(_fanout(100), 100, wrong) if not row["ok"]]
    assert [row["what"] for row in failed] == ["every fan-in write measured is in the model"]
    assert failed[0]["expected"] == 0 and failed[0]["measured"] == 100


def test_a_parent_woken_twice_fails() -> None:
    writes = [*_fanout(100), _write("child:wake", "JOB#p", action="Update")]
    assert not all(row["ok"] for row in check_model(writes, 100))
    # a failed write (a wake that lost its condition) is not a wake
    lost = replace(_write("child:wake", "JOB#p", action="Update"), failed=True)
    assert all(row["ok"] for row in check_model([*_fanout(100), lost], 100))
