"""The local stack's translation cache (decision CI15): a template translated once is read back,
not translated again; a change to the template is a new translation; a damaged entry is only
slower."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from leasehold_dev.local import template as templates

pytestmark = pytest.mark.unit

SAM: dict[str, Any] = {
    "AWSTemplateFormatVersion": "2010-09-09",
    "Transform": "AWS::Serverless-2016-10-31",
    "Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {"DelaySeconds": 0}}},
}


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Each translation aws-sam-translator was asked for (the real one still runs)."""
    monkeypatch.setenv("LEASEHOLD_CACHE", str(tmp_path / "cache"))
    seen: list[dict[str, Any]] = []
    real = templates._translate

    def counted(template: dict[str, Any], region: str) -> dict[str, Any]:
        seen.append(template)
        return real(template, region)

    monkeypatch.setattr(templates, "_translate", counted)
    return seen


def test_a_second_translation_of_the_same_template_is_read_from_the_cache(
    calls: list[dict[str, Any]],
) -> None:
    first = templates.translate(SAM, "us-east-1")
    second = templates.translate(SAM, "us-east-1")
    assert len(calls) == 1
    assert second == first
    assert first["Resources"]["Queue"]["Type"] == "AWS::SQS::Queue"


def test_another_template_or_region_is_translated_again(calls: list[dict[str, Any]]) -> None:
    templates.translate(SAM, "us-east-1")
    changed = {**SAM, "Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {}}}}
    templates.translate(changed, "us-east-1")
    templates.translate(SAM, "eu-west-1")
    assert len(calls) == 3


def test_a_damaged_entry_is_translated_again_and_replaced(
    calls: list[dict[str, Any]], tmp_path: Path
) -> None:
    first = templates.translate(SAM, "us-east-1")
    (entry,) = (tmp_path / "cache").glob("translated-*.json")
    entry.write_text('{"Resources": ')  # a write cut short
    assert templates.translate(SAM, "us-east-1") == first
    assert len(calls) == 2
    assert templates.translate(SAM, "us-east-1") == first
    assert len(calls) == 2


def test_an_unwritable_cache_only_translates_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: list[dict[str, Any]]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("LEASEHOLD_CACHE", str(blocker / "cache"))
    assert templates.translate(SAM, "us-east-1") == templates.translate(SAM, "us-east-1")
    assert len(calls) == 2


def test_the_cache_keeps_the_newest_entries_only(
    calls: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(templates, "CACHE_KEEP", 2)
    for delay in range(4):
        queue = {"Type": "AWS::SQS::Queue", "Properties": {"DelaySeconds": delay}}
        variant = {**SAM, "Resources": {"Queue": queue}}
        templates.translate(variant, "us-east-1")
    assert len(list((tmp_path / "cache").glob("translated-*.json"))) == 2
