"""The doc_prep job input: what accept refuses (HTTP 400) and what it keeps."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.domain.errors import ValidationError
from leasehold_apps.doc_agent.planner import Proposal
from leasehold_apps.doc_agent.spec import (
    MAX_DOCUMENT_BYTES,
    DocumentUnreadableError,
    decode_document,
    parse_doc_prep_input,
    tenant_of_key,
)
from leasehold_apps.doc_agent.vocabulary import DEFAULT_REQUIRED_FIELDS

TENANT = "study-group"
KEY = "tenants/study-group/documents/2026/invoice-0142.txt"


def parse(payload: Any, *, hosted: bool = False) -> Any:
    return parse_doc_prep_input(payload, tenant=TENANT, hosted_configured=hosted)


def refused(payload: Any, *, hosted: bool = False) -> str:
    with pytest.raises(ValidationError) as caught:
        parse(payload, hosted=hosted)
    assert caught.value.code == "invalid_request"
    return str(caught.value)


def test_text_document_with_defaults() -> None:
    spec = parse({"document": {"text": "Supplier: Acme"}})
    assert spec.text == "Supplier: Acme"
    assert spec.s3_key is None
    assert spec.required_fields == DEFAULT_REQUIRED_FIELDS
    assert spec.planner.kind == "fixture"
    assert spec.planner.proposals == ()


def test_s3_document_in_the_callers_tenant() -> None:
    spec = parse({"document": {"s3_key": KEY}, "required_fields": ["iban", "total_amount"]})
    assert spec.s3_key == KEY
    assert spec.text is None
    assert spec.required_fields == ("iban", "total_amount")


def test_another_tenants_key_is_refused_at_accept() -> None:
    message = refused({"document": {"s3_key": "tenants/other-group/documents/invoice.txt"}})
    assert "tenants/study-group/documents/" in message
    # nor can a key climb out of the tenant's folder or leave the documents folder
    for key in (
        "tenants/study-group/documents/../../other-group/documents/x.txt",
        "tenants/study-group/uploads/x.txt",
        "tenants/study-group/documents/",
        "/tenants/study-group/documents/x.txt",
        "tenants/study-group//documents/x.txt",
        "tenants/study-group/documents/a b.txt",
        "tenants/study-group/documents/" + "x" * 600,
        "s3://bucket/tenants/study-group/documents/x.txt",
        "",
    ):
        refused({"document": {"s3_key": key}})


def test_tenant_of_key() -> None:
    assert tenant_of_key(KEY) == TENANT
    assert tenant_of_key("tenants/other-group/documents/x.txt") == "other-group"
    assert tenant_of_key("tenants/study-group/documents/../x.txt") is None
    assert tenant_of_key("tenants/study-group/x.txt") is None
    assert tenant_of_key("documents/x.txt") is None


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        (None, "must be an object"),
        ({}, "exactly one of"),
        ({"text": "a", "s3_key": KEY}, "exactly one of"),
        ({"text": ""}, f"1 to {MAX_DOCUMENT_BYTES} bytes"),
        ({"text": "   \n"}, "not blank"),
        ({"text": "é" * (MAX_DOCUMENT_BYTES // 2 + 1)}, f"1 to {MAX_DOCUMENT_BYTES} bytes"),
        ({"text": 42}, "must be a string"),
        ({"text": "\ud800"}, "not valid Unicode"),
        ({"text": "a", "url": "http://x"}, "unknown field(s): url"),
    ],
)
def test_document_shapes_refused(document: Any, fragment: str) -> None:
    assert fragment in refused({"document": document})


def test_text_at_the_size_limit_is_accepted() -> None:
    # exactly MAX_DOCUMENT_BYTES (1 MiB) of UTF-8
    assert parse({"document": {"text": "é" * (MAX_DOCUMENT_BYTES // 2)}}).text is not None


@pytest.mark.parametrize(
    "required",
    [
        "iban",
        ["iban", "iban"],
        ["swift_code"],
        [1],
        ["iban"] * 11,
    ],
)
def test_required_fields_refused(required: Any) -> None:
    refused({"document": {"text": "x"}, "required_fields": required})


def test_required_fields_may_be_empty() -> None:
    assert parse({"document": {"text": "x"}, "required_fields": []}).required_fields == ()


def test_scripted_planner_keeps_its_proposals_unjudged() -> None:
    # send_email is accepted here on purpose: refusing it is the guard's job at run time,
    # where the refusal is recorded in the job's history.
    spec = parse(
        {
            "document": {"text": "x"},
            "planner": {
                "kind": "scripted",
                "proposals": [{"tool": "extract", "args": {}}, {"tool": "send_email", "args": {}}],
            },
        }
    )
    assert spec.planner.proposals == (Proposal("extract", {}), Proposal("send_email", {}))


@pytest.mark.parametrize(
    ("planner", "fragment"),
    [
        ("fixture", "must be an object"),
        ({"kind": "gpt"}, "must be one of"),
        ({}, "must be one of"),
        ({"kind": "scripted"}, "1 to 10 proposals"),
        ({"kind": "scripted", "proposals": []}, "1 to 10 proposals"),
        ({"kind": "scripted", "proposals": [{"tool": "extract", "args": {}}] * 11}, "1 to 10"),
        ({"kind": "scripted", "proposals": [{"tool": "extract"}]}, "exactly the keys"),
        ({"kind": "scripted", "proposals": [{"tool": 5, "args": {}}]}, "'tool' must be"),
        ({"kind": "scripted", "proposals": [{"tool": "x", "args": []}]}, "must be an object"),
        ({"kind": "scripted", "proposals": ["extract"]}, "must be an object"),
        ({"kind": "fixture", "proposals": []}, "only for kind 'scripted'"),
        ({"kind": "fixture", "model": "x"}, "unknown field(s): model"),
        ({"kind": "hosted"}, "none is configured"),
    ],
)
def test_planner_refused(planner: Any, fragment: str) -> None:
    assert fragment in refused({"document": {"text": "x"}, "planner": planner})


def test_hosted_planner_accepted_only_when_configured() -> None:
    assert parse({"document": {"text": "x"}, "planner": {"kind": "hosted"}}, hosted=True)


def test_unknown_top_level_fields_refused() -> None:
    assert "unknown field(s): send_to" in refused({"document": {"text": "x"}, "send_to": "a@b"})
    refused(["not", "an", "object"])


def test_decode_document() -> None:
    assert decode_document("\ufeffSupplier: Acme".encode()) == "Supplier: Acme"
    for data in (b"", b"\xff\xfe\x00", b" \n ", b"x" * (MAX_DOCUMENT_BYTES + 1)):
        with pytest.raises(DocumentUnreadableError):
            decode_document(data)
