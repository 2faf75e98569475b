"""The log groups the trace walkthrough and the runbook send an operator to are the template's
(`/leasehold/<stack>/…`, issue 34 item 6): a group renamed in template.yaml, or a doc naming one
that does not exist, fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
FUNCTION_GROUPS = {"api", "relay", "worker", "sweeper"}


def _template_groups() -> set[str]:
    text = (ROOT / "template.yaml").read_text()
    return set(re.findall(r'LogGroupName: !Sub "/leasehold/\$\{AWS::StackName\}/([a-z-]+)"', text))


def _named_in(doc: str) -> set[str]:
    text = (ROOT / "docs" / doc).read_text()
    named = set(re.findall(r"/leasehold/<stack>/([a-z-]+)", text))
    # the walkthrough's "`/leasehold/<stack>/api`, `…/relay`, …" shorthand names groups too
    named |= set(re.findall(r"`…/([a-z-]+)`", text))
    return named


def test_the_docs_name_the_templates_log_groups() -> None:
    groups = _template_groups()
    assert groups >= FUNCTION_GROUPS, groups  # one group per function, as the docs say
    walkthrough = _named_in("trace-walkthrough.md")
    assert walkthrough == FUNCTION_GROUPS, walkthrough  # all four, and nothing else
    for doc in ("trace-walkthrough.md", "runbook.md"):
        named = _named_in(doc)
        assert named and named <= groups, (doc, named - groups)
