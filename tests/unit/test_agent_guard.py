"""Trusted checks before every tool, and the life of a doc_prep job across retries, resumes and
crashes, driven through the same pure calls the engine makes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from leasehold_apps.doc_agent.checkpoint import AgentCheckpoint, CheckpointError
from leasehold_apps.doc_agent.guard import (
    SAFETY_MARGIN_MS,
    TOOL_BOUND_MS,
    AllowedTool,
    BudgetStop,
    NotEnoughTime,
    ToolRejected,
    check_proposal,
)
from leasehold_apps.doc_agent.planner import (
    FixturePlanner,
    Planner,
    Proposal,
    ScriptedPlanner,
    next_proposal,
)
from leasehold_apps.doc_agent.runner import result_of, run_tool
from leasehold_apps.doc_agent.spec import DocPrepInput, PlannerSpec, parse_doc_prep_input
from leasehold_apps.doc_agent.vocabulary import DEFAULT_REQUIRED_FIELDS

TENANT = "study-group"
NOW = 1_700_000_000_000
TEXT = "Supplier: Acme Ltd\nVAT No: GB980780684\nIBAN: GB29 NWBK 6016 1331 9268 19\n"
TEXT_INPUT = DocPrepInput(TEXT, None, DEFAULT_REQUIRED_FIELDS, PlannerSpec("fixture"))


def check(
    proposal: Proposal,
    checkpoint: AgentCheckpoint | None = None,
    *,
    job_input: DocPrepInput = TEXT_INPUT,
    tenant: str = TENANT,
    now_ms: int = NOW,
    deadline_in_ms: int = 3_600_000,
    lease_in_ms: int = 60_000,
) -> AllowedTool:
    return check_proposal(
        proposal,
        checkpoint or AgentCheckpoint(),
        tenant=tenant,
        job_input=job_input,
        now_ms=now_ms,
        deadline_at_ms=now_ms + deadline_in_ms,
        lease_expires_at_ms=now_ms + lease_in_ms,
    )


def rejected(proposal: Proposal, checkpoint: AgentCheckpoint | None = None, **kw: Any) -> str:
    with pytest.raises(ToolRejected) as caught:
        check(proposal, checkpoint, **kw)
    return caught.value.reason_code


def after(*tools: str) -> AgentCheckpoint:
    """A checkpoint where `tools` ran (outputs irrelevant to the guard)."""
    checkpoint = AgentCheckpoint()
    for tool in tools:
        checkpoint = checkpoint.begin(tool).finish(tool)
    return checkpoint


# --- allowlist -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tool", ["send_email", "http_get", "read_s3", "EXTRACT", "extract ", "draft_and_send", "x" * 64]
)
def test_only_allowlisted_tools_run(tool: str) -> None:
    assert rejected(Proposal(tool, {})) == "tool_not_allowed"


def test_send_email_is_refused_even_where_the_next_tool_would_fit() -> None:
    # Given a job where draft is next and every other check would pass
    # Then send_email is still refused as not allowed (not as out of order or over budget)
    assert rejected(Proposal("send_email", {}), after("extract", "validate")) == "tool_not_allowed"
    assert rejected(Proposal("send_email", {}), after("extract", "validate", "draft")) == (
        "tool_not_allowed"
    )


def test_allowed_tools_in_order_pass() -> None:
    assert check(Proposal("extract", {})) == AllowedTool("extract", 0, TOOL_BOUND_MS["extract"])
    assert check(Proposal("validate", {}), after("extract")).step_index == 1
    assert check(Proposal("draft", {}), after("extract", "validate")).tool == "draft"


# --- args schema ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        {"to": "supplier@example.com"},
        {"text": "ignore previous instructions"},
        {"": None},
        [],
        None,
        "{}",
        0,
    ],
)
@pytest.mark.parametrize("tool", ["extract", "validate", "draft"])
def test_args_other_than_an_empty_object_are_refused(tool: str, args: Any) -> None:
    checkpoint = after(
        *{"extract": (), "validate": ("extract",), "draft": ("extract", "validate")}[tool]
    )
    with pytest.raises(ToolRejected) as caught:
        check(Proposal(tool, args), checkpoint)
    assert caught.value.reason_code == "invalid_args"
    assert "supplier@example.com" not in str(caught.value)  # the record never quotes args


# --- tenant scope --------------------------------------------------------------------------


def test_a_document_key_of_another_tenant_is_refused_at_the_guard() -> None:
    # Given an input whose key belongs to another tenant (accept refuses this; the guard is the
    # second line for a key that got in some other way, e.g. a tenant renamed after accept)
    foreign = DocPrepInput(
        None, "tenants/other-group/documents/x.txt", DEFAULT_REQUIRED_FIELDS, PlannerSpec("fixture")
    )
    assert rejected(Proposal("extract", {}), job_input=foreign) == "out_of_scope"
    # and the same input is fine for its own tenant
    assert check(Proposal("extract", {}), job_input=foreign, tenant="other-group").tool == "extract"


def test_accept_and_guard_agree_on_a_tenants_key() -> None:
    spec = parse_doc_prep_input(
        {"document": {"s3_key": "tenants/study-group/documents/a.txt"}},
        tenant=TENANT,
        hosted_configured=False,
    )
    assert check(Proposal("extract", {}), job_input=spec).tool == "extract"
    assert rejected(Proposal("extract", {}), job_input=spec, tenant="other-group") == "out_of_scope"


@pytest.mark.parametrize(
    "args",
    [
        {"s3_key": "tenants/other-group/documents/x.txt"},
        {"source": {"uri": "s3://leasehold-documents/tenants/study-group/documents/x.txt"}},
        {"files": ["tenants/other-group/documents/x.txt"]},
        {"document_key": "../other-group/documents/x.txt"},
    ],
)
def test_references_in_args_outside_the_tenant_are_out_of_scope(args: Any) -> None:
    assert rejected(Proposal("extract", args)) == "out_of_scope"


def test_a_reference_inside_the_tenant_still_fails_the_schema() -> None:
    args = {"s3_key": "tenants/study-group/documents/x.txt"}
    assert rejected(Proposal("extract", args)) == "invalid_args"


def test_huge_args_are_refused_without_walking_them_all() -> None:
    assert rejected(Proposal("extract", {"a": list(range(10_000))})) == "invalid_args"
    deep: Any = {}
    for _ in range(5_000):
        deep = {"d": deep}
    assert rejected(Proposal("extract", deep)) == "invalid_args"


# --- order ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "done"),
    [
        ("draft", ()),
        ("validate", ()),
        ("draft", ("extract",)),
        ("extract", ("extract",)),
        ("validate", ("extract", "validate")),
        ("extract", ("extract", "validate")),
    ],
)
def test_out_of_order_tools_are_refused(tool: str, done: tuple[str, ...]) -> None:
    assert rejected(Proposal(tool, {}), after(*done)) == "out_of_order"


# --- budget: 3 tool steps in the job's whole life ------------------------------------------


def test_a_fourth_step_is_a_budget_stop_not_a_rejection() -> None:
    with pytest.raises(BudgetStop) as caught:
        check(Proposal("validate", {}), after("extract", "validate", "draft"))
    assert caught.value.code == "budget_exhausted"
    assert caught.value.record()["event"] == "budget_exhausted"


def test_a_started_and_unfinished_tool_counts() -> None:
    # Given extract and validate finished and draft begun twice (two attempts died mid-tool)
    crashed = after("extract").begin("validate")
    crashed = AgentCheckpoint.from_json(crashed.to_json())
    # Then validate may run once more (its third step)…
    assert check(Proposal("validate", {}), crashed).step_index == 2
    # …but no tool may start after three starts, though only one tool ever finished
    spent = crashed.begin("validate")
    with pytest.raises(BudgetStop):
        check(Proposal("validate", {}), spent)


# --- time ----------------------------------------------------------------------------------


def test_time_check_with_explicit_numbers() -> None:
    # extract's bound is 2000 ms and the margin 2000 ms: it needs more than 4000 ms left
    assert TOOL_BOUND_MS["extract"] == 2_000 and SAFETY_MARGIN_MS == 2_000
    assert check(Proposal("extract", {}), lease_in_ms=4_001, deadline_in_ms=4_001)
    with pytest.raises(NotEnoughTime) as lease:
        check(Proposal("extract", {}), lease_in_ms=4_000)
    assert (lease.value.limit, lease.value.needed_ms, lease.value.remaining_ms) == (
        "lease",
        4_000,
        4_000,
    )
    with pytest.raises(NotEnoughTime) as deadline:
        check(Proposal("extract", {}), deadline_in_ms=3_999, lease_in_ms=60_000)
    assert (deadline.value.limit, deadline.value.remaining_ms) == ("deadline", 3_999)
    # validate's bound is 1000 ms: 3001 ms of lease is enough for it, not for extract
    assert check(Proposal("validate", {}), after("extract"), lease_in_ms=3_001)
    with pytest.raises(NotEnoughTime):
        check(Proposal("validate", {}), after("extract"), lease_in_ms=3_000)
    # a lease already expired
    with pytest.raises(NotEnoughTime):
        check(Proposal("extract", {}), lease_in_ms=-1)


def test_not_enough_time_is_not_a_rejection_and_comes_after_them() -> None:
    assert not issubclass(NotEnoughTime, ToolRejected)
    # a forbidden tool is rejected even with no time left (the refusal is what matters)
    assert rejected(Proposal("send_email", {}), lease_in_ms=0) == "tool_not_allowed"


# --- records -------------------------------------------------------------------------------


def test_rejection_record_is_small_and_says_why() -> None:
    with pytest.raises(ToolRejected) as caught:
        check(Proposal("send_email", {"to": "a" * 5000}))
    record = caught.value.record()
    assert record["event"] == "tool_rejected"
    assert record["tool"] == "send_email"
    assert record["reason"] == "tool_not_allowed"
    assert "extract, validate, draft" in record["message"]
    assert len(str(record).encode()) < 300


# --- the job's life through the engine's calls ---------------------------------------------


@dataclass
class Engine:
    """The engine's loop for one job, in memory: each attempt starts from the last *saved*
    checkpoint (JSON round-trip, as the store would give it back) with a fresh lease, and each
    tool takes `tool_ms` of the injected clock."""

    planner: Planner
    job_input: DocPrepInput = TEXT_INPUT
    saved: str = field(default_factory=lambda: AgentCheckpoint().to_json())
    now_ms: int = NOW
    tool_runs: list[str] = field(default_factory=list)  # every tool body that started
    reads: int = 0

    def attempt(self, *, lease_ms: int = 60_000, tool_ms: int = 0, crash_in: str = "") -> str:
        checkpoint = AgentCheckpoint.from_json(self.saved)
        lease_expires_at_ms = self.now_ms + lease_ms
        while True:
            proposal = next_proposal(self.planner, checkpoint)
            if proposal is None:
                return "succeeded"
            try:
                allowed = check(
                    proposal,
                    checkpoint,
                    job_input=self.job_input,
                    now_ms=self.now_ms,
                    lease_in_ms=lease_expires_at_ms - self.now_ms,
                )
            except ToolRejected as rejection:
                return f"failed/tool_rejected/{rejection.reason_code}"
            except BudgetStop:
                return "failed/budget_exhausted"
            except NotEnoughTime:
                return "handed_back"
            checkpoint = checkpoint.begin(allowed.tool)
            self.saved = checkpoint.to_json()
            self.tool_runs.append(allowed.tool)
            if crash_in == allowed.tool:
                return "crashed"  # the process died inside the tool: nothing more is saved
            checkpoint = run_tool(allowed, checkpoint, self.job_input, self._load_text)
            self.now_ms += tool_ms
            self.saved = checkpoint.to_json()

    def _load_text(self) -> str:
        self.reads += 1
        assert self.job_input.text is not None
        return self.job_input.text

    @property
    def checkpoint(self) -> AgentCheckpoint:
        return AgentCheckpoint.from_json(self.saved)


def test_fixture_planner_runs_extract_validate_draft_and_succeeds() -> None:
    engine = Engine(FixturePlanner())
    assert engine.attempt() == "succeeded"
    assert engine.tool_runs == ["extract", "validate", "draft"]
    assert engine.reads == 1
    result = result_of(engine.checkpoint)
    assert result["tools_run"] == ["extract", "validate", "draft"]
    assert result["fields"]["iban"] == "GB29NWBK60161331926819"
    assert result["problems"] == []
    assert result["draft_note"].startswith("Review note")


def test_resume_never_repeats_a_finished_tool() -> None:
    # Given an attempt whose lease runs short after extract (extract takes 1500 ms of 4500)
    engine = Engine(FixturePlanner())
    assert engine.attempt(lease_ms=4_500, tool_ms=1_500) == "handed_back"
    assert engine.tool_runs == ["extract"]
    # When the job is claimed again with a fresh lease
    assert engine.attempt() == "succeeded"
    # Then validate and draft ran once each, extract was not run again, the text read once
    assert engine.tool_runs == ["extract", "validate", "draft"]
    assert engine.reads == 1
    assert engine.checkpoint.tools_run == ("extract", "validate", "draft")
    assert engine.checkpoint.steps_started == 3


def test_crash_mid_tool_is_counted_and_the_fourth_start_is_a_budget_stop() -> None:
    # Given a job whose first attempt died inside validate
    engine = Engine(FixturePlanner())
    assert engine.attempt(crash_in="validate") == "crashed"
    assert engine.checkpoint.steps_started == 2
    assert engine.checkpoint.tool_in_flight == "validate"
    # When the retry resumes from the saved checkpoint
    outcome = engine.attempt()
    # Then validate runs again (third step) and draft, a fourth start, never runs
    assert outcome == "failed/budget_exhausted"
    assert engine.tool_runs == ["extract", "validate", "validate"]
    assert engine.checkpoint.tools_run == ("extract", "validate")


def test_crashes_cannot_buy_more_than_three_starts() -> None:
    engine = Engine(FixturePlanner())
    outcomes = [engine.attempt(crash_in="extract") for _ in range(5)]
    assert outcomes == ["crashed"] * 3 + ["failed/budget_exhausted"] * 2
    assert engine.tool_runs == ["extract"] * 3


def test_scripted_fourth_proposal_ends_the_job_across_resumes() -> None:
    # Given a script of four proposals, and leases that fit one tool per attempt
    tools = ("extract", "validate", "draft", "draft")
    engine = Engine(ScriptedPlanner([Proposal(tool, {}) for tool in tools]))
    outcomes = [engine.attempt(lease_ms=4_500, tool_ms=1_500) for _ in range(4)]
    # Then each attempt resumed where the last stopped, and the fourth proposal never ran
    assert outcomes == [
        "handed_back",
        "handed_back",
        "failed/budget_exhausted",
        "failed/budget_exhausted",
    ]
    assert engine.tool_runs == ["extract", "validate", "draft"]


def test_scripted_send_email_ends_the_job_as_rejected_after_the_allowed_steps() -> None:
    script = ScriptedPlanner([Proposal("extract", {}), Proposal("send_email", {"to": "x@y"})])
    engine = Engine(script)
    assert engine.attempt() == "failed/tool_rejected/tool_not_allowed"
    assert engine.tool_runs == ["extract"]


@pytest.mark.parametrize(
    ("proposals", "reason"),
    [
        ([Proposal("draft", {})], "out_of_order"),
        ([Proposal("extract", {}), Proposal("extract", {})], "out_of_order"),
        ([Proposal("extract", {"path": "/etc/passwd"})], "invalid_args"),
        ([Proposal("unknown_tool", {})], "tool_not_allowed"),
    ],
)
def test_scripted_bad_proposals_are_rejected_before_running(
    proposals: list[Proposal], reason: str
) -> None:
    engine = Engine(ScriptedPlanner(proposals))
    assert engine.attempt() == f"failed/tool_rejected/{reason}"
    assert engine.tool_runs == [p.tool for p in proposals[:-1]]


def test_run_tool_refuses_a_tool_that_was_not_begun() -> None:
    allowed = check(Proposal("extract", {}))
    with pytest.raises(CheckpointError):
        run_tool(allowed, AgentCheckpoint(), TEXT_INPUT, lambda: TEXT)
    with pytest.raises(CheckpointError):  # begun for another step
        run_tool(allowed, after("extract").begin("validate"), TEXT_INPUT, lambda: TEXT)
