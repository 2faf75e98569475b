"""The `doc_prep` kind (arch §7): the bounded document-preparation agent as a job.

**One engine step, the agent's own progress inside it.** The engine sees one step, `agent`,
whose bound covers every tool. Inside it the agent loop runs over `AgentCheckpoint`, saved with
`StepContext.save_progress` — a fenced write of the job item, like any worker write, that also
renews the lease. For each proposal of the planner (which sees the checkpoint only):

1. trusted code decides (`check_proposal`: allowlist, tenant scope, args schema, ≤ 3 tool steps
   in the job's whole life, the tool's bound before the deadline and the lease);
2. `begin(tool)` is saved *before* the tool runs: a crash inside the tool leaves the step spent;
3. the tool runs (`run_tool`; only `extract` reads the document: inline, or once from S3);
4. the checkpoint after it is saved: a resume (retry, another worker, a replay) starts here and
   never repeats a finished tool.

How each verdict ends the job: a rejected proposal → `failed` / `tool_rejected` (the job's error
and history say which tool and why); the step budget spent → `failed` / `budget_exhausted`
(the proposed tool does not run); too little lease left → the lease is renewed once (a fenced
save), and if that is not enough the job is handed back (attempt not burned); too little time
before the *deadline* → `dead` / `deadline_exceeded` at once (no later attempt can do better, so
handing back would only spin until the deadline passed). A planner that fails or answers garbage
→ `failed` / `handler_error` (`planner_error`), or a retry with backoff when a hosted model did
not answer.

**Nothing of the document in logs or metrics**: the log lines carry the job, attempt, epoch,
tool, operation id (`<job>:tool:<n>`, n = the tool step's index in the job's life) and
durations; errors carry codes and fixed sentences. The text is read inside `extract`, used and
dropped.

The agent's modules (regexes, the compiled arg schemas) are imported inside `run_step`, so the
API, which only validates, never loads them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from aws_lambda_powertools import Logger

from leasehold.agent.spec import DocPrepInput, parse_doc_prep_input, tenant_of_key
from leasehold.domain.errors import (
    FatalStepError,
    HandBackError,
    StepInterruptedError,
    StopJobError,
    TransientStepError,
    ValidationError,
)
from leasehold.kinds import KindBase, StepPlan

if TYPE_CHECKING:
    from leasehold.agent.checkpoint import AgentCheckpoint
    from leasehold.agent.guard import AllowedTool
    from leasehold.agent.planner import Planner, Proposal
    from leasehold.domain.job import Checkpoint, Job, Owner
    from leasehold.service.kinds import StepRuntime as StepContext
    from leasehold.store.documents import DocumentReader

logger = Logger(service="leasehold", child=True)

TOOLS_BOUND_MS: Final = 4_000
"""The sum of the agent guard's per-tool bounds (extract 2 s, validate 1 s, draft 1 s); a unit
test keeps it equal to guard.TOOL_BOUND_MS (kept here so `plan`, which the API calls, does not
import the guard)."""
STEP_MARGIN_MS: Final = 2_000
PROPOSALS_PER_JOB: Final = 4
"""At most 3 tools run; a 4th proposal (None, or one the budget refuses) ends the loop."""
DELAY_SLICE_S: Final = 0.25


class DocPrepKind(KindBase):
    name = "doc_prep"
    submittable = True
    max_payload_bytes = 20 * 1024
    """An inline document may be 16 KiB of UTF-8 text; its JSON (escapes, required_fields, a
    scripted planner's proposals) gets room around it. Its own rules check the text itself."""

    def __init__(
        self,
        *,
        documents: Callable[[], DocumentReader] | None = None,
        hosted_planner: Callable[[], Planner] | None = None,
        safety_margin_ms: int = 2_000,
    ) -> None:
        self._documents_factory = documents
        self._documents: DocumentReader | None = None
        self._hosted_factory = hosted_planner
        self._hosted: Planner | None = None
        self._safety_margin_ms = safety_margin_ms

    # ------------------------------------------------------------------ accept (the API)

    def validate(self, payload: dict[str, Any]) -> None:
        raise ValidationError("a doc_prep job is checked against its owner's tenant")

    def validate_for(self, payload: dict[str, Any], owner: Owner) -> None:
        """The whole input rule at accept, the caller's tenant included (a key under another
        tenant's prefix is a 400, never a job)."""
        parse_doc_prep_input(
            payload, tenant=owner.tenant, hosted_configured=self._hosted_factory is not None
        )

    def plan(self, payload: dict[str, Any]) -> list[StepPlan]:
        planner = payload.get("planner")
        delay = planner.get("step_delay_ms", 0) if isinstance(planner, dict) else 0
        delay = delay if isinstance(delay, int) else 0
        bound = TOOLS_BOUND_MS + STEP_MARGIN_MS + PROPOSALS_PER_JOB * delay
        return [StepPlan("agent", cost=0, duration_ms=bound, needs_approval=False,
                         has_effect=False)]  # fmt: skip

    def view_fields(self, job: Job) -> dict[str, Any]:
        """The agent's progress (arch §7): the tools finished, the tool steps started in the
        job's life (≤ 3) and the tool begun and not finished — names and counters only, never a
        field value (those are in the result, once it succeeds)."""
        state = job.kind_state
        if not state:
            return {}
        return {
            "agent": {
                "tools_run": list(state.get("tools_run") or []),
                "steps_started": state.get("steps_started", 0),
                "tool_in_flight": state.get("tool_in_flight"),
            }
        }

    # ------------------------------------------------------------------ run (the worker)

    def run_step(self, payload: dict[str, Any], index: int, attempt: int, tick: Any) -> Any:
        from leasehold.agent.runner import run_tool

        ctx: StepContext = tick
        job = ctx.job
        job_input = self._input_at_run(payload, job.owner.tenant)
        planner = self._planner(job_input)
        checkpoint = _resumed(ctx.progress)
        keys = ctx.log_keys
        logger.info(
            "agent resumed" if checkpoint.steps_started else "agent started",
            extra=keys | _shape(checkpoint),
        )
        for _ in range(PROPOSALS_PER_JOB):
            _think(ctx, job_input.planner.step_delay_ms)
            if not ctx():
                raise StepInterruptedError("the agent was told to stop between tools")
            proposal = _propose(planner, checkpoint)
            if proposal is None:
                break
            allowed = self._allow(ctx, proposal, checkpoint, job_input)
            if allowed.tool == "extract" and job_input.s3_key is not None:
                self._reader()  # a cold S3 client is made now, not inside extract's bound
            operation_id = f"{job.job_id}:tool:{allowed.step_index}"
            tool_keys = keys | {"tool": allowed.tool, "operation_id": operation_id}
            checkpoint = checkpoint.begin(allowed.tool)
            ctx.save_progress(checkpoint.to_dict())  # the step is spent before the tool runs
            logger.info("tool started", extra=tool_keys | {"bound_ms": allowed.bound_ms})
            started = time.perf_counter()
            checkpoint = _run(run_tool, allowed, checkpoint, job_input, self._loader(job_input))
            duration_ms = round((time.perf_counter() - started) * 1000, 2)
            ctx.save_progress(checkpoint.to_dict())
            logger.info("tool finished", extra=tool_keys | {"duration_ms": duration_ms})
        else:
            # Unreachable: the guard refuses a 4th tool step. Said loudly if it ever is not.
            raise FatalStepError("the agent did not stop after 3 tool steps", error_code="bug")
        logger.info("agent finished", extra=keys | _shape(checkpoint))
        return {"tools_run": list(checkpoint.tools_run)}

    def result(self, job: Job, checkpoint: Checkpoint) -> Any:
        """`{fields, problems, draft_note, tools_run}` from the agent's saved checkpoint
        (≤ 6 KiB: the checkpoint's own bound)."""
        from leasehold.agent.runner import result_of

        return result_of(_resumed(job.kind_state))

    # ------------------------------------------------------------------ the parts

    def _input_at_run(self, payload: dict[str, Any], tenant: str) -> DocPrepInput:
        """The input as accepted. The tenant rule is *not* applied here: a key in another
        tenant that got this far is the guard's to refuse (`tool_rejected` / `out_of_scope`),
        recorded as such, rather than an input error."""
        document = payload.get("document")
        key = document.get("s3_key") if isinstance(document, dict) else None
        key_tenant = tenant_of_key(key) if isinstance(key, str) else None
        try:
            return parse_doc_prep_input(
                payload, tenant=key_tenant or tenant, hosted_configured=True
            )
        except ValidationError as invalid:
            raise FatalStepError(
                f"the job's input is not valid: {invalid}", error_code="input_invalid"
            ) from invalid

    def _planner(self, job_input: DocPrepInput) -> Planner:
        from leasehold.agent.planner import PlannerError
        from leasehold.agent.runner import build_planner

        try:
            return build_planner(job_input.planner, hosted=self._hosted_planner)
        except PlannerError as missing:  # hosted asked for, none configured any more
            raise FatalStepError(str(missing), error_code="planner_error") from missing

    def _hosted_planner(self) -> Planner:
        if self._hosted is None:
            assert self._hosted_factory is not None  # build_planner asks only when configured
            self._hosted = self._hosted_factory()
        return self._hosted

    def _allow(
        self,
        ctx: StepContext,
        proposal: Proposal,
        checkpoint: AgentCheckpoint,
        job_input: DocPrepInput,
    ) -> AllowedTool:
        """The guard's verdict on `proposal`, as the engine acts on it (module docstring)."""
        from leasehold.agent.guard import BudgetStop, NotEnoughTime, ToolRejected, check_proposal

        keys = ctx.log_keys | {"tool": proposal.tool[:64]}
        for renewed in (False, True):
            try:
                return check_proposal(
                    proposal,
                    checkpoint,
                    tenant=ctx.job.owner.tenant,
                    job_input=job_input,
                    now_ms=ctx.now_ms(),
                    deadline_at_ms=ctx.deadline_at(),
                    lease_expires_at_ms=ctx.lease_expires_at(),
                    safety_margin_ms=self._safety_margin_ms,
                )
            except ToolRejected as rejected:
                logger.warning("tool rejected", extra=keys | {"reason": rejected.reason_code})
                raise StopJobError(
                    "tool_rejected",
                    "tool_rejected",
                    f"{rejected.reason_code}: {rejected}",
                    rejected.record(),
                ) from None
            except BudgetStop as spent:
                logger.warning("tool budget spent", extra=keys | _shape(checkpoint))
                raise StopJobError(
                    "budget_exhausted", "budget_exhausted", str(spent), spent.record()
                ) from None
            except NotEnoughTime as short:
                logger.info(
                    "not enough time for the tool",
                    extra=keys | {"limit": short.limit, "needed_ms": short.needed_ms,
                                  "remaining_ms": short.remaining_ms},
                )  # fmt: skip
                if short.limit == "deadline":
                    raise StopJobError(
                        "deadline_exceeded",
                        "deadline_too_close",
                        f"{short}: no attempt can finish {proposal.tool[:64]} before the deadline",
                        {"tool": proposal.tool[:64]},
                        state="dead",
                    ) from None
                if renewed:
                    raise HandBackError(str(short)) from None
                ctx.save_progress(checkpoint.to_dict())  # renews the lease, under the fence
        raise AssertionError("unreachable")  # pragma: no cover

    def _loader(self, job_input: DocPrepInput) -> Callable[[], str]:
        """What `extract` calls for the text: the inline text, or one bounded read from S3."""
        if job_input.text is not None:
            text = job_input.text
            return lambda: text
        key = job_input.s3_key
        assert key is not None  # exactly one of text / s3_key (spec.DocPrepInput)
        return lambda: self._read_document(key)

    def _reader(self) -> DocumentReader:
        if self._documents is None:
            if self._documents_factory is None:
                raise FatalStepError(
                    "no documents bucket is configured", error_code="documents_unconfigured"
                )
            self._documents = self._documents_factory()
        return self._documents

    def _read_document(self, key: str) -> str:
        from leasehold.agent.spec import (
            MAX_DOCUMENT_BYTES,
            DocumentUnreadableError,
            decode_document,
        )
        from leasehold.store.documents import DocumentNotFoundError, DocumentUnavailableError

        try:
            return decode_document(self._reader().read(key, MAX_DOCUMENT_BYTES))
        except DocumentUnavailableError as unavailable:
            raise TransientStepError(str(unavailable), error_code=unavailable.code) from None
        except (DocumentNotFoundError, DocumentUnreadableError) as unusable:
            raise FatalStepError(str(unusable), error_code=unusable.code) from None


def _resumed(progress: dict[str, Any] | None) -> AgentCheckpoint:
    from leasehold.agent.checkpoint import AgentCheckpoint, CheckpointError

    if progress is None:
        return AgentCheckpoint()
    try:
        return AgentCheckpoint.from_json(progress)
    except CheckpointError as corrupt:
        raise FatalStepError(str(corrupt), error_code=corrupt.code) from None


def _propose(planner: Planner, checkpoint: AgentCheckpoint) -> Proposal | None:
    from leasehold.agent.planner import PlannerError, next_proposal

    try:
        return next_proposal(planner, checkpoint)
    except PlannerError as failed:
        error = TransientStepError if failed.transient else FatalStepError
        raise error(str(failed), error_code=failed.code) from None


def _run(
    run_tool: Callable[..., AgentCheckpoint],
    allowed: AllowedTool,
    checkpoint: AgentCheckpoint,
    job_input: DocPrepInput,
    load_text: Callable[[], str],
) -> AgentCheckpoint:
    """One tool. Its own failures become a step error that names the tool and the exception's
    type only (an exception's message could quote the document; the traceback is not logged)."""
    try:
        return run_tool(allowed, checkpoint, job_input, load_text)
    except (FatalStepError, TransientStepError):
        raise
    except Exception as failed:  # a tool is deterministic: the same input fails the same way
        raise FatalStepError(
            f"tool {allowed.tool} failed: {type(failed).__name__}", error_code="tool_failed"
        ) from None


def _think(ctx: StepContext, delay_ms: int) -> None:
    """The fixture/scripted planner's `step_delay_ms` (≤ 3 s; 0 by default): wait, heartbeating,
    so a demo can stop a worker between two tools."""
    remaining_s = delay_ms / 1000
    while remaining_s > 0:
        slice_s = min(DELAY_SLICE_S, remaining_s)
        time.sleep(slice_s)
        remaining_s -= slice_s
        if not ctx():
            raise StepInterruptedError("the agent was told to stop while planning")


def _shape(checkpoint: AgentCheckpoint) -> dict[str, Any]:
    """What a log line may say of the checkpoint: tool names and counters, never values."""
    return {
        "tools_run": list(checkpoint.tools_run),
        "steps_started": checkpoint.steps_started,
        "tool_in_flight": checkpoint.tool_in_flight,
    }
