"""doc_prep's parts of template.yaml (arch §7): the documents bucket (private, encrypted, kept
30 days), the worker's read-only access to tenants/*/documents/*, the hosted planner off by
default with its key in Secrets Manager — and the local stack's bucket made from it in moto,
with `leasehold docs put` uploading to it. Also: the API never loads the agent's tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from leasehold_dev.cli import main
from leasehold_dev.local.resources import parameter_defaults
from leasehold_dev.local.stack import StackInfo, client, create_stack
from leasehold_dev.local.template import translate
from tests.support.resources import TEMPLATE, create_documents_bucket, template

KEY_PATTERN = "tenants/*/documents/*"
KINDS = str(template()["Parameters"]["Kinds"]["Default"])
"""What every function loads, the document agent among them."""


def _bucket() -> dict[str, Any]:
    return template()["Resources"]["DocumentsBucket"]["Properties"]


def _statements(role: str) -> list[dict[str, Any]]:
    resources = translate(template(), "us-east-1")["Resources"]
    statements = [s for p in resources[role]["Properties"]["Policies"]
                  for s in p["PolicyDocument"]["Statement"]]  # fmt: skip
    for extra in resources.values():
        if extra["Type"] == "AWS::IAM::Policy" and {"Ref": role} in extra["Properties"]["Roles"]:
            statements += extra["Properties"]["PolicyDocument"]["Statement"]
    return statements


def test_the_documents_bucket_is_private_encrypted_owner_enforced_and_expires() -> None:
    bucket = _bucket()
    (encryption,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in {"AES256", "aws:kms"}
    assert bucket["PublicAccessBlockConfiguration"] == dict.fromkeys(
        ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"), True
    )
    assert bucket["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    rules = bucket["LifecycleConfiguration"]["Rules"]
    assert {r.get("ExpirationInDays") for r in rules if r["Status"] == "Enabled"} >= {30}
    assert any(r.get("AbortIncompleteMultipartUpload") for r in rules)
    (tls_only,) = template()["Resources"]["DocumentsBucketPolicy"]["Properties"]["PolicyDocument"][
        "Statement"
    ]
    assert tls_only["Effect"] == "Deny"
    assert tls_only["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_only_the_worker_reads_documents_by_key_and_nothing_writes_or_lists_them() -> None:
    for role in ("ApiRole", "RelayRole", "SweeperRole", "WorkerRole"):
        s3_statements = [  # the documents bucket's; the data bucket's are LD's (test_large_data)
            s
            for s in _statements(role)
            if any(a.startswith("s3:") for a in s["Action"]) and "DocumentsBucket" in json.dumps(s)
        ]
        if role != "WorkerRole":
            assert s3_statements == [], role
            continue
        (read,) = s3_statements
        assert read["Action"] == ["s3:GetObject"]
        assert read["Resource"] == {"Fn::Sub": "${DocumentsBucket.Arn}/" + KEY_PATTERN}
    env = template()["Globals"]["Function"]["Environment"]["Variables"]
    assert env["DOCUMENTS_BUCKET"] == {"Ref": "DocumentsBucket"}


def test_the_hosted_planner_is_off_by_default_and_its_key_is_a_secret_only_the_worker_reads() -> (
    None
):
    defaults = parameter_defaults()
    assert defaults["HostedPlannerEndpoint"] == defaults["HostedPlannerModel"] == ""
    assert defaults["HostedPlannerApiKeySecretArn"] == ""
    env = template()["Globals"]["Function"]["Environment"]["Variables"]
    assert env["HOSTED_PLANNER_ENDPOINT"] == {"Ref": "HostedPlannerEndpoint"}
    assert env["HOSTED_PLANNER_API_KEY_SECRET"] == {"Ref": "HostedPlannerApiKeySecretArn"}
    policy = template()["Resources"]["WorkerHostedPlannerKeyPolicy"]
    assert policy["Condition"] == "HasHostedPlannerKey"
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == ["secretsmanager:GetSecretValue"]
    assert statement["Resource"] == {"Ref": "HostedPlannerApiKeySecretArn"}
    assert not any("secretsmanager:" in json.dumps(s) for s in _statements("ApiRole"))


def test_the_local_stack_makes_the_templates_documents_bucket_in_moto(moto: None) -> None:
    info = create_stack("", TEMPLATE)
    bucket = info.outputs["DocumentsBucket"]
    assert info.functions["WorkerFunction"].environment["DOCUMENTS_BUCKET"] == bucket
    assert info.functions["WorkerFunction"].environment["HOSTED_PLANNER_ENDPOINT"] == ""
    s3 = client("s3", None)
    rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    block = s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
    assert all(block.values()) and len(block) == 4
    ownership = s3.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"]
    assert ownership["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    lifecycle = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert {"expire-documents", "abort-incomplete-uploads"} == {r["ID"] for r in lifecycle}


def _stack_with_bucket(state: Path) -> StackInfo:
    """A running local stack's state file, as `docs put` reads it (moto in-process)."""
    info = StackInfo(
        "", {}, [], [], [], {}, {"DocumentsBucket": create_documents_bucket(client("s3", None))}
    )
    info.save(state)
    return info


def test_docs_put_uploads_under_the_users_tenant_and_prints_the_key(
    moto: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    info = _stack_with_bucket(tmp_path / "local-stack.json")
    state = tmp_path / "local-stack.json"
    document = Path(__file__).resolve().parents[2] / "samples/documents/03-wrong-iban.txt"
    assert main(["docs", "put", str(document), "--user", "carol", "--state", str(state)]) == 0
    key = capsys.readouterr().out.strip()
    assert key == "tenants/other-group/documents/03-wrong-iban.txt"
    stored = client("s3", None).get_object(Bucket=info.outputs["DocumentsBucket"], Key=key)
    assert stored["Body"].read() == document.read_bytes()


@pytest.mark.parametrize(
    ("content", "name", "fragment"),
    [
        (b"\xff\xfe", None, "not UTF-8 text"),
        (b"x" * (512 * 1024 + 1), None, "must be 1 to 524288 bytes"),
        (b"fine", "../escape.txt", "not a usable document key"),
        (b"fine", "a b.txt", "not a usable document key"),
    ],
)
def test_docs_put_refuses_what_a_job_could_not_use(
    moto: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    name: str | None,
    fragment: str,
) -> None:
    info = _stack_with_bucket(tmp_path / "local-stack.json")
    state = tmp_path / "local-stack.json"
    document = tmp_path / "doc.txt"
    document.write_bytes(content)
    args = ["docs", "put", str(document), "--user", "alice", "--state", str(state)]
    assert main([*args, *(["--name", name] if name else [])]) == 2
    assert fragment in capsys.readouterr().err
    listed = client("s3", None).list_objects_v2(Bucket=info.outputs["DocumentsBucket"])
    assert listed.get("KeyCount", 0) == 0


def test_docs_put_without_a_running_stack_is_a_one_line_error(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "leasehold_dev.cli", "docs", "put", str(TEMPLATE), "--user", "alice",
         "--state", str(tmp_path / "none.json")],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2 and "no local stack is running" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_api_validates_doc_prep_jobs_without_loading_the_agents_tools() -> None:
    # The API's cold path: its handler module, the kinds as LEASEHOLD_KINDS loads them (the
    # agent's settings read and its kind built), and a doc_prep accept check. The tools (their
    # regexes), the guard (fastjsonschema's compiled schemas) and the runner load only inside a
    # worker's step.
    code = (
        "import sys, leasehold.handlers.api;"
        "from leasehold.sdk.loading import load_kinds; from leasehold import Owner;"
        f"kind = load_kinds({KINDS!r}, start_checks=False).kinds['doc_prep'];"
        "kind.validate_for({'document': {'text': 'Invoice'}}, Owner('t', 'u'));"
        "kind.plan({'document': {'text': 'Invoice'}});"
        "heavy = ('fastjsonschema', 'leasehold_apps.doc_agent.guard',"
        " 'leasehold_apps.doc_agent.extract', 'leasehold_apps.doc_agent.runner',"
        " 'leasehold_apps.doc_agent.formats', 'leasehold_apps.doc_agent.hosted');"
        "print([m for m in sys.modules if m.startswith(heavy)])"
    )
    env = {**os.environ, "DOCUMENTS_BUCKET": "leasehold-documents"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
