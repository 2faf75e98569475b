"""The `doc_prep` kind (docs/architecture.md "The document-preparation agent"): the bounded
document-preparation agent as a job.

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

The agent's modules (regexes, the compiled arg schemas) are imported inside the step, so the
API, which only validates, never loads them.

`doc_prep_kind(...)` builds the kind from its parts (the documents reader, the hosted planner);
the package's `doc_prep` is the one built from the function's settings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from leasehold import (
    FatalError,
    Finished,
    HandBackError,
    JobInfo,
    Kind,
    Owner,
    RetryableError,
    Step,
    StepContext,
    StepInterruptedError,
    StopJobError,
    ValidationError,
)
from leasehold_apps.doc_agent.spec import DocPrepInput, parse_doc_prep_input, tenant_of_key

if TYPE_CHECKING:
    from leasehold_apps.doc_agent.checkpoint import AgentCheckpoint
    from leasehold_apps.doc_agent.documents import DocumentReader
    from leasehold_apps.doc_agent.guard import AllowedTool
    from leasehold_apps.doc_agent.planner import Planner, Proposal

KIND_NAME: Final = "doc_prep"
MAX_PAYLOAD_BYTES: Final = 2 * 512 * 1024 + 16 * 1024
"""An inline document may be 512 KiB of UTF-8 text (spec.MAX_DOCUMENT_BYTES, decision LD14); its
JSON gets room around it: twice the text (every `\n`, `"` or `\\` escapes to two bytes) and
16 KiB for `required_fields` and a scripted planner's proposals. Its own rules check the text
itself. Over the inline limit the engine keeps the payload in the data bucket (DESIGN §20)."""
TOOL_REJECTED: Final = "tool_rejected"
STOP_REASONS: Final = (TOOL_REJECTED,)
"""The stop reasons this kind ends jobs with beyond the engine's own (`budget_exhausted`,
`deadline_exceeded`): docs/openapi.yaml's `StopReason` names them too."""
TOOLS_BOUND_MS: Final = 4_000
"""The sum of the agent guard's per-tool bounds (extract 2 s, validate 1 s, draft 1 s); a unit
test keeps it equal to guard.TOOL_BOUND_MS (kept here so the plan, which the API makes, does not
import the guard)."""
STEP_MARGIN_MS: Final = 2_000
"""The guard's safety margin (a unit test keeps them equal): in the step's bound, and the most
time kept back before the lease and the deadline beyond a tool's bound."""
PROPOSALS_PER_JOB: Final = 4
"""At most 3 tools run; a 4th proposal (None, or one the budget refuses) ends the loop."""
DELAY_SLICE_S: Final = 0.25


def doc_prep_kind(
    *,
    documents: Callable[[], DocumentReader] | None = None,
    hosted_planner: Callable[[], Planner] | None = None,
    safety_margin_ms: int | None = None,
) -> Kind:
    """The `doc_prep` kind. `documents` builds the documents bucket's reader at the first S3
    read (None: no bucket, and a job naming an `s3_key` fails when its extract runs);
    `hosted_planner` builds the configured hosted planner (None: `planner.kind: hosted` is a
    400). `safety_margin_ms`: the time kept back before the lease and the deadline beyond a
    tool's bound; None takes the worker's own (`StepContext.safety_margin_ms`), at most 2 s."""
    agent = DocAgent(
        documents=documents, hosted_planner=hosted_planner, safety_margin_ms=safety_margin_ms
    )
    kind = Kind(KIND_NAME, max_payload_bytes=MAX_PAYLOAD_BYTES)
    kind.check(agent.accept)
    kind.planner(agent.steps)
    kind.view(agent_view)
    kind.related(document_of)
    kind.result(agent_result)
    return kind


def document_of(job: JobInfo) -> dict[str, Any]:
    """The stored document a job reads, for operators (`{"document_key": s3 key}`): its key,
    never its text; nothing for a document sent inline."""
    document = job.payload.get("document")
    key = document.get("s3_key") if isinstance(document, dict) else None
    return {"document_key": key} if isinstance(key, str) else {}


def agent_view(job: JobInfo) -> dict[str, Any]:
    """The agent's progress (docs/architecture.md "The document-preparation agent"): the tools
    finished, the tool steps started in the job's
    life (≤ 3) and the tool begun and not finished — names and counters only, never a field
    value (those are in the result, once it succeeds)."""
    state = job.progress
    if not state:
        return {}
    return {
        "agent": {
            "tools_run": list(state.get("tools_run") or []),
            "steps_started": state.get("steps_started", 0),
            "tool_in_flight": state.get("tool_in_flight"),
        }
    }


def agent_result(finished: Finished) -> dict[str, Any]:
    """`{fields, problems, draft_note, tools_run}` from the agent's saved checkpoint (≤ 6 KiB:
    the checkpoint's own bound)."""
    from leasehold_apps.doc_agent.runner import result_of

    return result_of(_resumed(finished.job.progress))


class DocAgent:
    """The kind's accept rule, its one step's plan and the agent loop that step runs."""

    def __init__(
        self,
        *,
        documents: Callable[[], DocumentReader] | None,
        hosted_planner: Callable[[], Planner] | None,
        safety_margin_ms: int | None,
    ) -> None:
        self._documents_factory = documents
        self._documents: DocumentReader | None = None
        self._hosted_factory = hosted_planner
        self._hosted: Planner | None = None
        self._safety_margin_ms = safety_margin_ms

    # ------------------------------------------------------------------ accept (the API)

    def accept(self, payload: dict[str, Any], owner: Owner) -> None:
        """The whole input rule at accept, the caller's tenant included (a key under another
        tenant's prefix is a 400, never a job)."""
        parse_doc_prep_input(
            payload, tenant=owner.tenant, hosted_configured=self._hosted_factory is not None
        )

    def steps(self, payload: dict[str, Any]) -> list[Step]:
        """One engine step, `agent`, bounding every tool and the planner's delays."""
        planner = payload.get("planner")
        delay = planner.get("step_delay_ms", 0) if isinstance(planner, dict) else 0
        delay = delay if isinstance(delay, int) else 0
        bound_ms = TOOLS_BOUND_MS + STEP_MARGIN_MS + PROPOSALS_PER_JOB * delay
        return [Step("agent", self.run, timeout_seconds=bound_ms / 1000)]

    # ------------------------------------------------------------------ run (the worker)

    def run(self, ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
        from leasehold_apps.doc_agent.runner import run_tool

        job_input = self._input_at_run(payload, ctx.owner.tenant)
        planner = self._planner(job_input)
        checkpoint = _resumed(ctx.progress)
        log = ctx.logger
        log.info(
            "agent resumed" if checkpoint.steps_started else "agent started", **_shape(checkpoint)
        )
        for _ in range(PROPOSALS_PER_JOB):
            _think(ctx, job_input.planner.step_delay_ms)
            if not ctx.heartbeat():
                raise StepInterruptedError("the agent was told to stop between tools")
            proposal = _propose(planner, checkpoint)
            if proposal is None:
                break
            allowed = self._allow(ctx, proposal, checkpoint, job_input)
            if allowed.tool == "extract" and job_input.s3_key is not None:
                self._reader()  # a cold S3 client is made now, not inside extract's bound
            tool = {"tool": allowed.tool, "operation_id": f"{ctx.job_id}:tool:{allowed.step_index}"}
            checkpoint = checkpoint.begin(allowed.tool)
            ctx.save_progress(checkpoint.to_dict())  # the step is spent before the tool runs
            log.info("tool started", **tool, bound_ms=allowed.bound_ms)
            started = time.perf_counter()
            checkpoint = _run(run_tool, allowed, checkpoint, job_input, self._loader(job_input))
            duration_ms = round((time.perf_counter() - started) * 1000, 2)
            ctx.save_progress(checkpoint.to_dict())
            log.info("tool finished", **tool, duration_ms=duration_ms)
        else:
            # Unreachable: the guard refuses a 4th tool step. Said loudly if it ever is not.
            raise FatalError("the agent did not stop after 3 tool steps", code="bug")
        log.info("agent finished", **_shape(checkpoint))
        return {"tools_run": list(checkpoint.tools_run)}

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
            raise FatalError(
                f"the job's input is not valid: {invalid}", code="input_invalid"
            ) from invalid

    def _planner(self, job_input: DocPrepInput) -> Planner:
        from leasehold_apps.doc_agent.planner import PlannerError
        from leasehold_apps.doc_agent.runner import build_planner

        try:
            return build_planner(job_input.planner, hosted=self._hosted_planner)
        except PlannerError as missing:  # hosted asked for, none configured any more
            raise FatalError(str(missing), code="planner_error") from missing

    def _hosted_planner(self) -> Planner:
        if self._hosted is None:
            assert self._hosted_factory is not None  # build_planner asks only when configured
            self._hosted = self._hosted_factory()
        return self._hosted

    def _margin_ms(self, ctx: StepContext) -> int:
        if self._safety_margin_ms is not None:
            return self._safety_margin_ms
        return min(STEP_MARGIN_MS, ctx.safety_margin_ms)

    def _allow(
        self,
        ctx: StepContext,
        proposal: Proposal,
        checkpoint: AgentCheckpoint,
        job_input: DocPrepInput,
    ) -> AllowedTool:
        """The guard's verdict on `proposal`, as the engine acts on it (module docstring)."""
        from leasehold_apps.doc_agent.guard import (
            BudgetStop,
            NotEnoughTime,
            ToolRejected,
            check_proposal,
        )

        tool = proposal.tool[:64]
        for renewed in (False, True):
            try:
                return check_proposal(
                    proposal,
                    checkpoint,
                    tenant=ctx.owner.tenant,
                    job_input=job_input,
                    now_ms=ctx.now_ms(),
                    deadline_at_ms=ctx.deadline_at_ms,
                    lease_expires_at_ms=ctx.lease_expires_at_ms,
                    safety_margin_ms=self._margin_ms(ctx),
                )
            except ToolRejected as rejected:
                ctx.logger.warning("tool rejected", tool=tool, reason=rejected.reason_code)
                raise StopJobError(
                    TOOL_REJECTED,
                    TOOL_REJECTED,
                    f"{rejected.reason_code}: {rejected}",
                    rejected.record(),
                ) from None
            except BudgetStop as spent:
                ctx.logger.warning("tool budget spent", tool=tool, **_shape(checkpoint))
                raise StopJobError(
                    "budget_exhausted", "budget_exhausted", str(spent), spent.record()
                ) from None
            except NotEnoughTime as short:
                ctx.logger.info(
                    "not enough time for the tool", tool=tool, limit=short.limit,
                    needed_ms=short.needed_ms, remaining_ms=short.remaining_ms,
                )  # fmt: skip
                if short.limit == "deadline":
                    raise StopJobError(
                        "deadline_exceeded",
                        "deadline_too_close",
                        f"{short}: no attempt can finish {tool} before the deadline",
                        {"tool": tool},
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
                raise FatalError("no documents bucket is configured", code="documents_unconfigured")
            self._documents = self._documents_factory()
        return self._documents

    def _read_document(self, key: str) -> str:
        from leasehold_apps.doc_agent.documents import (
            DocumentNotFoundError,
            DocumentUnavailableError,
        )
        from leasehold_apps.doc_agent.spec import (
            MAX_DOCUMENT_BYTES,
            DocumentUnreadableError,
            decode_document,
        )

        try:
            return decode_document(self._reader().read(key, MAX_DOCUMENT_BYTES))
        except DocumentUnavailableError as unavailable:
            raise RetryableError(str(unavailable), code=unavailable.code) from None
        except (DocumentNotFoundError, DocumentUnreadableError) as unusable:
            raise FatalError(str(unusable), code=unusable.code) from None


def _resumed(progress: Mapping[str, Any] | None) -> AgentCheckpoint:
    from leasehold_apps.doc_agent.checkpoint import AgentCheckpoint, CheckpointError

    if progress is None:
        return AgentCheckpoint()
    try:
        return AgentCheckpoint.from_json(progress)
    except CheckpointError as corrupt:
        raise FatalError(str(corrupt), code=corrupt.code) from None


def _propose(planner: Planner, checkpoint: AgentCheckpoint) -> Proposal | None:
    from leasehold_apps.doc_agent.planner import PlannerError, next_proposal

    try:
        return next_proposal(planner, checkpoint)
    except PlannerError as failed:
        error = RetryableError if failed.transient else FatalError
        raise error(str(failed), code=failed.code) from None


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
    except (FatalError, RetryableError):
        raise
    except Exception as failed:  # a tool is deterministic: the same input fails the same way
        raise FatalError(
            f"tool {allowed.tool} failed: {type(failed).__name__}", code="tool_failed"
        ) from None


def _think(ctx: StepContext, delay_ms: int) -> None:
    """The fixture/scripted planner's `step_delay_ms` (≤ 3 s; 0 by default): wait, heartbeating,
    so a demo can stop a worker between two tools."""
    remaining_s = delay_ms / 1000
    while remaining_s > 0:
        slice_s = min(DELAY_SLICE_S, remaining_s)
        time.sleep(slice_s)
        remaining_s -= slice_s
        if not ctx.heartbeat():
            raise StepInterruptedError("the agent was told to stop while planning")


def _shape(checkpoint: AgentCheckpoint) -> dict[str, Any]:
    """What a log line may say of the checkpoint: tool names and counters, never values."""
    return {
        "tools_run": list(checkpoint.tools_run),
        "steps_started": checkpoint.steps_started,
        "tool_in_flight": checkpoint.tool_in_flight,
    }
