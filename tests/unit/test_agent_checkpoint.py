"""The agent checkpoint: round-trips, refuses what this code never writes, and stays ≤ 6 KiB."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leasehold_apps.doc_agent.checkpoint import (
    MAX_CHECKPOINT_BYTES,
    AgentCheckpoint,
    CheckpointError,
)
from leasehold_apps.doc_agent.draft import draft
from leasehold_apps.doc_agent.extract import extract
from leasehold_apps.doc_agent.validate import validate
from leasehold_apps.doc_agent.vocabulary import (
    FIELD_MAX_JSON_BYTES,
    KNOWN_FIELDS,
    MAX_PROBLEMS,
    TOOL_ORDER,
    Problem,
    json_size,
)


def full(fields: dict[str, str], problems: list[Problem], note: str) -> AgentCheckpoint:
    checkpoint = AgentCheckpoint().begin("extract").finish("extract", fields=fields)
    checkpoint = checkpoint.begin("validate").finish("validate", problems=problems)
    return checkpoint.begin("draft").finish("draft", draft_note=note)


def test_round_trip_keeps_everything() -> None:
    checkpoint = full(
        {"iban": "DE89370400440532013000", "supplier_name": "Müller & Söhne GmbH"},
        [Problem("vat_id", "missing", "The VAT id is required but not found.")],
        "Review note\n…",
    )
    again = AgentCheckpoint.from_json(checkpoint.to_json())
    assert again == checkpoint
    assert again.next_step == 3
    assert json.loads(checkpoint.to_json())["next_step"] == 3


@pytest.mark.parametrize("char", ['"', "\\", "\x01", "😀", "é", "a"])
def test_the_worst_case_checkpoint_fits_6_kib(char: str) -> None:
    # Given every field, problem and the draft at (far over) their caps, in the characters
    # that cost the most bytes once JSON-encoded
    checkpoint = full(
        dict.fromkeys(KNOWN_FIELDS, char * 5000),
        [Problem("supplier_address", "x" * 24, char * 5000)] * (MAX_PROBLEMS + 5),
        char * 20_000,
    )
    # Then the stored checkpoint is at most 6 KiB and reads back
    raw = checkpoint.to_json()
    assert len(raw.encode("utf-8")) <= MAX_CHECKPOINT_BYTES
    assert AgentCheckpoint.from_json(raw) == checkpoint
    assert len(checkpoint.problems) == MAX_PROBLEMS


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=4000))
def test_any_document_gives_a_bounded_checkpoint_without_its_text(text: str) -> None:
    marker = "ZQXJ-DOCUMENT-BODY-ZQXJ"
    # (after 3 blank lines: a bare "Supplier:" label may take a value from the next 2 lines)
    document = f"{text}\n\n\n\nNotes: {marker}\n"
    fields = extract(document)
    problems = validate(fields, KNOWN_FIELDS)
    checkpoint = full(fields, problems, draft(fields, problems))
    raw = checkpoint.to_json()
    assert len(raw.encode("utf-8")) <= MAX_CHECKPOINT_BYTES
    assert marker not in raw  # a line no rule reads never reaches the checkpoint
    assert AgentCheckpoint.from_json(raw) == checkpoint


def test_finish_drops_unknown_fields_and_cuts_long_ones() -> None:
    checkpoint = (
        AgentCheckpoint()
        .begin("extract")
        .finish("extract", fields={"iban": "A" * 500, "password": "x", "vat_id": ""})
    )
    assert set(checkpoint.fields) == {"iban"}
    assert json_size(checkpoint.fields["iban"]) <= FIELD_MAX_JSON_BYTES["iban"]


def test_finish_requires_the_tool_to_have_been_begun() -> None:
    with pytest.raises(CheckpointError):
        AgentCheckpoint().finish("extract", fields={})
    with pytest.raises(CheckpointError):
        AgentCheckpoint().begin("extract").finish("validate", problems=[])
    with pytest.raises(CheckpointError):
        AgentCheckpoint().begin("send_email")


def good() -> dict[str, Any]:
    return json.loads(full({"iban": "X"}, [], "note").to_json())


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(version=2),
        lambda d: d.update(extra=1),
        lambda d: d.pop("fields"),
        lambda d: d.update(steps_started=4),
        lambda d: d.update(steps_started=2),  # three tools finished need three starts
        lambda d: d.update(steps_started="3"),
        lambda d: d.update(next_step=1),
        lambda d: d.update(tools_run=["extract", "extract", "draft"]),
        lambda d: d.update(tools_run=["extract", "send_email"], next_step=2),
        lambda d: d.update(tool_in_flight="send_email"),
        lambda d: d.update(tool_in_flight="draft"),  # a fourth start on three finished
        lambda d: d.update(fields={"iban": "A" * 100}),
        lambda d: d.update(fields={"secret": "x"}),
        lambda d: d.update(fields=[]),
        lambda d: d.update(problems=[{"field": "iban", "code": "Bad Code", "message": "m"}]),
        lambda d: d.update(problems=[{"field": "nope", "code": "missing", "message": "m"}]),
        lambda d: d.update(problems=[{"field": "iban", "code": "missing"}]),
        lambda d: d.update(problems=[{"field": "iban", "code": "missing", "message": "m" * 200}]),
        lambda d: d.update(draft_note="x" * 5000),
        lambda d: d.update(draft_note=5),
    ],
)
def test_from_json_refuses_what_this_code_never_writes(change: Any) -> None:
    data = good()
    change(data)
    with pytest.raises(CheckpointError):
        AgentCheckpoint.from_json(json.dumps(data))


@pytest.mark.parametrize("raw", ["", "[]", "not json", "x" * 100_000])
def test_from_json_refuses_non_objects(raw: str) -> None:
    with pytest.raises(CheckpointError):
        AgentCheckpoint.from_json(raw)


def test_tool_order_is_the_vocabulary() -> None:
    assert TOOL_ORDER == ("extract", "validate", "draft")
