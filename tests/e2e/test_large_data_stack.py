"""Large data end to end on the local stack (DESIGN §20, issue 32's must-show): a 2 MiB payload
and a 1 MB step output pass between steps, into the result and back through the Client byte for
byte; a 12 MiB payload comes through the presigned upload the local gateway serves; another
tenant cannot read the result; a 12 MiB body is a 413."""

from __future__ import annotations

import hashlib
import json
import textwrap
from collections.abc import Iterator

import pytest

from leasehold.client import ApiError
from tests.support.localstack import ROOT, LocalStackProcess

pytestmark = pytest.mark.e2e

MIB = 1024 * 1024

USER_MODULE = """
import hashlib

from leasehold import Kind, StepContext

big = Kind("big", max_payload_bytes=32 * 1024 * 1024)


@big.step()
def expand(ctx: StepContext, payload: dict) -> dict:
    # a 1 MB output made from the payload: the next step must see it whole
    return {"head": payload["blob"][:1_000_000]}


@big.step()
def summarise(ctx: StepContext, payload: dict) -> dict:
    head = ctx.outputs["expand"]["head"]
    # a result holds at most 10 MiB: a 12 MiB payload comes back as its hash only
    echoed = payload["blob"] if len(payload["blob"]) <= 4 * 1024 * 1024 else None
    return {
        "payload": echoed,
        "head": head,
        "payload_sha": hashlib.sha256(payload["blob"].encode()).hexdigest(),
        "head_is_prefix": payload["blob"].startswith(head),
    }
"""


def _blob(size: int, seed: str) -> str:
    """`size` characters nobody could guess or compress away: sha256 chains in hex."""
    parts: list[str] = []
    block = hashlib.sha256(seed.encode()).hexdigest()
    for _ in range(size // len(block) + 1):
        parts.append(block)
        block = hashlib.sha256(block.encode()).hexdigest()
    return "".join(parts)[:size]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStackProcess]:
    project = tmp_path_factory.mktemp("project")
    (project / "bigjobs").mkdir()
    (project / "bigjobs" / "__init__.py").write_text("")
    (project / "bigjobs" / "kinds.py").write_text(textwrap.dedent(USER_MODULE))
    assert ROOT not in project.parents
    workdir = tmp_path_factory.mktemp("stack")
    running = LocalStackProcess(workdir, workers=1, kinds="bigjobs.kinds", python_path=project)
    try:
        yield running
    finally:
        running.stop()
    assert running.process.returncode == 0, running.log.read_text()[-2000:]


@pytest.mark.parametrize("size", [2 * MIB, 12 * MIB], ids=["2-mib-body", "12-mib-upload"])
def test_a_large_payload_and_output_come_back_through_the_client_byte_for_byte(
    stack: LocalStackProcess, size: int
) -> None:
    # Given a payload of 2 MiB (a plain POST /jobs) or 12 MiB (past the 5 MiB body: the Client
    # takes a presigned upload from the API and PUTs it to the URL the local gateway serves)
    blob = _blob(size, f"seed-{size}")
    alice = stack.client("alice")
    # When the Client submits it and waits
    handle = alice.submit("big", {"blob": blob})
    done = handle.wait(timeout=120)
    # Then the result came back whole: the payload, the first step's 1 MB output, byte for byte
    assert done["state"] == "succeeded", (done["state"], done.get("error"))
    result = done["result"]
    assert result["payload"] == (blob if size <= 4 * MIB else None)
    assert result["head"] == blob[:1_000_000] and result["head_is_prefix"] is True
    assert result["payload_sha"] == hashlib.sha256(blob.encode()).hexdigest()
    # ...read from its result URL (too large for the view), whose size is the stored JSON's
    _, view = stack.request("GET", f"/jobs/{handle.job_id}", user="alice")
    assert "result" not in view and view["result_url"] == f"/jobs/{handle.job_id}/result"
    assert view["result_size"] == len(json.dumps(result, separators=(",", ":")).encode())
    # And another tenant's caller cannot read it, through the route or the Client
    status, refused = stack.request("GET", f"/jobs/{handle.job_id}/result", user="mallory")
    assert status in (401, 404), refused
    with pytest.raises(ApiError):
        stack.client("bob").get(handle.job_id)


def test_a_12_mib_body_is_a_413(stack: LocalStackProcess) -> None:
    body = json.dumps({"kind": "big", "payload": {"blob": "x" * (12 * MIB)}}).encode()
    status, refused = stack.request("POST", "/jobs", body, user="alice")
    assert status == 413, refused
    assert refused["error"]["code"] == "payload_too_large", refused
