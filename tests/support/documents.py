"""doc_prep in tests: the kind wired to a documents bucket in moto, test planners in the hosted
planner's slot (the real hosted adapter is never called by tests), and the sample documents of
samples/documents/ — on `leasehold.testing` (`doc_prep_testbed`), or in the repository's
harness for the cases that reach into the worker (`doc_prep_kinds`, `submit_doc_prep`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import boto3

from leasehold.domain.job import Job, Owner
from leasehold.domain.options import Submission
from leasehold.sdk.engine_kind import EngineKind
from leasehold.service.jobs import JobService
from leasehold.testing import DEFAULT_OWNER, LeaseholdTestbed
from leasehold_apps.doc_agent import doc_prep_kind
from leasehold_apps.doc_agent.checkpoint import AgentCheckpoint
from leasehold_apps.doc_agent.documents import S3Documents
from leasehold_apps.doc_agent.draft import draft
from leasehold_apps.doc_agent.extract import extract
from leasehold_apps.doc_agent.planner import Planner, Proposal
from leasehold_apps.doc_agent.validate import validate
from leasehold_apps.doc_agent.vocabulary import DEFAULT_REQUIRED_FIELDS
from leasehold_dev.local.resources import DOCUMENTS_BUCKET
from tests.support.harness import ALICE, Harness
from tests.support.kinds import JobKind, registry
from tests.support.resources import REGION, ROOT, create_documents_bucket

SAMPLES = ROOT / "samples" / "documents"
SAMPLE_NAMES = sorted(path.name for path in SAMPLES.glob("*.txt"))


def sample(name: str) -> str:
    return (SAMPLES / name).read_text(encoding="utf-8")


def s3() -> Any:
    return boto3.session.Session(region_name=REGION).client("s3")


class CountingReader:
    """The S3 reader, counting reads (what `extract` fetched), with an optional hook that runs
    before each read (crash a worker inside its tool)."""

    def __init__(self, bucket: str, hook: Callable[[int], None] | None = None) -> None:
        self._real = S3Documents(s3(), bucket)
        self._hook = hook
        self.reads = 0

    def read(self, key: str, max_bytes: int) -> bytes:
        self.reads += 1
        if self._hook is not None:
            self._hook(self.reads)
        return self._real.read(key, max_bytes)


class CallbackPlanner:
    """A planner in the hosted slot whose answers come from a test function (raise, return
    garbage, act while it "thinks")."""

    def __init__(self, answer: Callable[[AgentCheckpoint], Any]) -> None:
        self._answer = answer

    def propose(self, checkpoint: AgentCheckpoint) -> Any:
        return self._answer(checkpoint)


def doc_prep_kinds(
    *,
    reader: Any = None,
    planner: Planner | None = None,
    kind: type[EngineKind] = EngineKind,
) -> dict[str, JobKind]:
    """The registry with doc_prep reading through `reader` and `planner` as its hosted one
    (and the guard's own 2 s safety margin, whatever the harness worker's)."""
    return {
        **registry(),
        "doc_prep": kind(
            doc_prep_kind(
                documents=(lambda: reader) if reader is not None else None,
                hosted_planner=(lambda: planner) if planner is not None else None,
                safety_margin_ms=2_000,
            )
        ),
    }


class DocPrepBed(NamedTuple):
    tb: LeaseholdTestbed
    reader: CountingReader | None
    """The documents bucket's reader, counting reads (None: no bucket is configured)."""


TESTBED_KEY = f"tenants/{DEFAULT_OWNER.tenant}/documents/rechnung.txt"
"""A document of the testbed's default owner's tenant."""


@contextmanager
def doc_prep_testbed(
    *,
    bucket: bool = True,
    hook: Callable[[int], None] | None = None,
    planner: Planner | None = None,
    **settings: Any,
) -> Iterator[DocPrepBed]:
    """An open testbed running doc_prep (with the guard's own 2 s safety margin), `planner` in
    the hosted slot (None: no hosted planner is configured) and, with `bucket`, the documents
    bucket in the testbed's moto, read through a `CountingReader` with `hook`."""
    readers: list[CountingReader] = []
    kind = doc_prep_kind(
        documents=(lambda: readers[0]) if bucket else None,
        hosted_planner=(lambda: planner) if planner is not None else None,
        safety_margin_ms=2_000,
    )
    resources = {"DocumentsBucket": DOCUMENTS_BUCKET}  # the worker's role reads it
    with LeaseholdTestbed([kind], settings=settings or None, resources=resources) as tb:
        if bucket:
            create_documents_bucket(tb.client("s3"))
            readers.append(CountingReader(DOCUMENTS_BUCKET, hook))
        yield DocPrepBed(tb, readers[0] if readers else None)


def progress_of(tb: LeaseholdTestbed, job_id: str) -> AgentCheckpoint:
    """The agent's checkpoint as the job last saved it (`tb.progress`)."""
    state = tb.progress(job_id)
    assert state is not None
    return AgentCheckpoint.from_json(state)


def jobs_with(harness: Harness, kinds: dict[str, JobKind]) -> JobService:
    return JobService(
        harness.stores, kinds, harness.clock, harness.new_id, harness.telemetry,
        default_max_attempts=3,
    )  # fmt: skip


def submit_doc_prep(
    harness: Harness,
    payload: dict[str, Any],
    *,
    kinds: dict[str, JobKind] | None = None,
    owner: Owner = ALICE,
    **body: Any,
) -> str:
    service = jobs_with(harness, kinds or doc_prep_kinds())
    return service.accept(
        owner, Submission.from_body({"kind": "doc_prep", "payload": payload, **body})
    ).job_id


def job_of(harness: Harness, job_id: str) -> Job:
    job = harness.store.get(job_id)
    assert job is not None
    return job


def agent_of(harness: Harness, job_id: str) -> AgentCheckpoint:
    """The agent's checkpoint as the job last saved it."""
    state = job_of(harness, job_id).kind_state
    assert state is not None
    return AgentCheckpoint.from_json(state)


def next_tool(checkpoint: AgentCheckpoint) -> Proposal | None:
    """What the fixture planner proposes: the next tool in order, then nothing."""
    tools = ("extract", "validate", "draft")
    return Proposal(tools[checkpoint.next_step], {}) if checkpoint.next_step < 3 else None


def pipeline(text: str) -> dict[str, Any]:
    """What the three tools make of `text` when called directly (no engine)."""
    fields = extract(text)
    problems = validate(fields, DEFAULT_REQUIRED_FIELDS)
    return {
        "fields": fields,
        "problems": [p.as_dict() for p in problems],
        "draft_note": draft(fields, problems),
        "tools_run": ["extract", "validate", "draft"],
    }


def hosted_payload() -> dict[str, Any]:
    """The clean English invoice, inline, for the planner in the hosted slot."""
    return {"document": {"text": sample("01-clean-invoice-en.txt")}, "planner": {"kind": "hosted"}}


def scripted(*tools: str | dict[str, Any]) -> dict[str, Any]:
    """A scripted planner's payload part: tool names (args `{}`) or whole proposals."""
    proposals = [t if isinstance(t, dict) else {"tool": t, "args": {}} for t in tools]
    return {"kind": "scripted", "proposals": proposals}
