"""The translated template is cached and shared, not copied, by every test that resolves its
functions' roles (leasehold_dev.local.roles): resolving them, with or without an `edit`, must
leave the shared translation as a fresh translation of template.yaml is."""

from __future__ import annotations

from typing import Any

from leasehold_dev.local.roles import shared_translated_template
from leasehold_dev.local.template import load_template, translate
from tests.support.resources import REGION, TEMPLATE, function_roles

TABLE = {
    "TableName": "jobs",
    "LatestStreamArn": "arn:aws:dynamodb:us-east-1:123456789012:table/jobs/stream/2026-12-03",
}
QUEUES = {
    "work": "https://sqs.us-east-1.amazonaws.com/123456789012/work",
    "dlq": "https://sqs.us-east-1.amazonaws.com/123456789012/dlq",
}


def _drop_every_statement(translated: dict[str, Any]) -> None:
    for resource in translated["Resources"].values():
        if resource.get("Type") == "AWS::IAM::Role":
            for policy in resource["Properties"].get("Policies", []):
                policy["PolicyDocument"]["Statement"] = []


def test_resolving_roles_leaves_the_shared_translation_as_translated() -> None:
    plain = function_roles(TABLE, QUEUES)
    edited = function_roles(TABLE, QUEUES, edit=_drop_every_statement)
    assert plain and set(edited) == set(plain)
    assert edited != plain  # the edit changed its copy...
    fresh = translate(load_template(TEMPLATE), REGION)
    assert shared_translated_template(TEMPLATE, REGION) == fresh  # ...and nothing shared
    assert function_roles(TABLE, QUEUES, edit=lambda _: None) == plain
