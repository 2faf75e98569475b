"""Trusted checks before every tool (docs/architecture.md "The document-preparation agent"): the
planner proposes, this module decides.

`check_proposal` returns an `AllowedTool` or raises one of three outcomes, checked in this order:
1. `ToolRejected("tool_not_allowed")`: the tool is not `extract`, `validate` or `draft`
   (`send_email` included);
2. `ToolRejected("out_of_scope")`: the job's document key, or any key or `s3://` reference in the
   args, is not under `tenants/<tenant>/documents/` (checked before the schema, so a
   cross-tenant reference is reported as what it is);
3. `ToolRejected("invalid_args")`: `args` fails the tool's JSON schema (every tool takes `{}`);
4. `BudgetStop`: 3 tool steps were already *started* in the job's life (retries, resumes and
   a crash mid-tool included: see checkpoint.py);
5. `ToolRejected("out_of_order")`: the tool is not the next one in `extract → validate →
   draft` (each tool runs once, after the tools it reads from);
6. `NotEnoughTime`: now + the tool's bound + the safety margin does not fit before the deadline
   or before the lease expiry. Not a rejection: the engine hands the job back unspent.
Rejections and budget stops end the job (`failed` / `tool_rejected` or `budget_exhausted`).

The arg schemas are compiled with fastjsonschema *at import*, once per distinct schema: a bad
schema then fails the cold start and every unit test rather than the first doc_prep job, and the
cost is small (one compile ≈ 1-2 ms; importing fastjsonschema after boto3 ≈ 4-8 ms; jsonschema
would add ≈ 65-120 ms; measured on the shared dev machine, see docs/decisions.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import fastjsonschema

from leasehold import LeaseholdError
from leasehold_apps.doc_agent.checkpoint import AgentCheckpoint
from leasehold_apps.doc_agent.planner import Proposal
from leasehold_apps.doc_agent.spec import DocPrepInput, document_prefix, tenant_of_key
from leasehold_apps.doc_agent.vocabulary import MAX_TOOL_STEPS, TOOL_ORDER, clip_json

# Upper bounds of one run of each tool on a 512 KiB document (spec.MAX_DOCUMENT_BYTES), with
# room for a slow cold CPU (decision LD14, measured on a loaded 2-core machine: extract ≤ 0.6 s
# of CPU on 512 KiB adversarial documents — 87,000 lines of a bare "Date:" — ≤ 40 ms on 16 KiB;
# validate and draft < 1 ms, they read only the ≤ 6 KiB checkpoint). Kept at 2 s so that extract
# and the margin fit the local stack's 4 s lease.
TOOL_BOUND_MS: Final = {"extract": 2_000, "validate": 1_000, "draft": 1_000}
SAFETY_MARGIN_MS: Final = 2_000
EMPTY_ARGS_SCHEMA: Final = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}
TOOL_ARGS_SCHEMAS: Final = dict.fromkeys(TOOL_ORDER, EMPTY_ARGS_SCHEMA)


def _compile_each_once(schemas: Mapping[str, Mapping[str, Any]]) -> dict[str, Callable[[Any], Any]]:
    """One compiled validator per distinct schema (today the three tools share one)."""
    compiled: dict[str, Callable[[Any], Any]] = {}
    validators: dict[str, Callable[[Any], Any]] = {}
    for tool, schema in schemas.items():
        text = json.dumps(schema, sort_keys=True)
        if text not in compiled:
            compiled[text] = fastjsonschema.compile(dict(schema))
        validators[tool] = compiled[text]
    return validators


_ARGS_VALIDATORS: Final = _compile_each_once(TOOL_ARGS_SCHEMAS)
_MAX_ARG_NODES: Final = 256


# The three outcomes are named for what the engine does with them, not as errors (N818).
class ToolRejected(LeaseholdError):  # noqa: N818
    """A proposal trusted code refused; the job stops `failed` / `tool_rejected`."""

    code = "tool_rejected"

    def __init__(self, reason_code: str, message: str, *, tool: str) -> None:
        super().__init__(message)
        self.reason_code = reason_code
        self.tool = tool

    def record(self) -> dict[str, str]:
        """A small (< 300 bytes) entry for the job's history: what was refused and why. No args:
        they are the planner's output and may carry anything."""
        return {
            "event": "tool_rejected",
            "tool": clip_json(self.tool, 72),
            "reason": self.reason_code,
            "message": clip_json(str(self), 160),
        }


class BudgetStop(LeaseholdError):  # noqa: N818
    """The 3-tool-step budget is spent; the job stops `failed` / `budget_exhausted` without
    running the proposed tool."""

    code = "budget_exhausted"

    def __init__(self, message: str, *, tool: str) -> None:
        super().__init__(message)
        self.tool = tool

    def record(self) -> dict[str, str]:
        return {
            "event": "budget_exhausted",
            "tool": clip_json(self.tool, 72),
            "message": clip_json(str(self), 160),
        }


class NotEnoughTime(LeaseholdError):  # noqa: N818
    """The tool's bound does not fit before `limit` ("deadline" or "lease"). The tool is not run
    and no step is spent. Before the lease: hand the job back for a fresh claim. Before the
    deadline: no later attempt can do better either."""

    code = "not_enough_time"

    def __init__(self, message: str, *, limit: str, needed_ms: int, remaining_ms: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.needed_ms = needed_ms
        self.remaining_ms = remaining_ms


@dataclass(frozen=True)
class AllowedTool:
    """A proposal that passed every check: run `tool` as the job's `step_index`-th tool step
    (0-based, counting every step started) within `bound_ms`."""

    tool: str
    step_index: int
    bound_ms: int


def check_proposal(
    proposal: Proposal,
    checkpoint: AgentCheckpoint,
    *,
    tenant: str,
    job_input: DocPrepInput,
    now_ms: int,
    deadline_at_ms: int,
    lease_expires_at_ms: int,
    tool_bound_ms: Mapping[str, int] = TOOL_BOUND_MS,
    safety_margin_ms: int = SAFETY_MARGIN_MS,
) -> AllowedTool:
    """Decide whether `proposal` may run now. See the module docstring for the checks and their
    order; the first that fails decides the outcome."""
    tool = proposal.tool
    if tool not in TOOL_ORDER:
        raise ToolRejected(
            "tool_not_allowed",
            f"tool {clip_json(tool, 72)} is not allowed; allowed: {', '.join(TOOL_ORDER)}",
            tool=tool,
        )
    _check_scope(proposal, job_input, tenant)
    try:
        _ARGS_VALIDATORS[tool](proposal.args)
    except fastjsonschema.JsonSchemaValueException as exc:
        # The validator's own message quotes the args: say only which rule failed.
        raise ToolRejected(
            "invalid_args",
            f"args for {tool} must be an empty object ({exc.rule} failed)",
            tool=tool,
        ) from exc
    if checkpoint.steps_started >= MAX_TOOL_STEPS:
        raise BudgetStop(
            f"{checkpoint.steps_started} of {MAX_TOOL_STEPS} tool steps already started; "
            f"{tool} is not run",
            tool=tool,
        )
    expected = TOOL_ORDER[checkpoint.next_step] if checkpoint.next_step < len(TOOL_ORDER) else None
    if tool != expected:
        raise ToolRejected(
            "out_of_order",
            f"{tool} cannot run now: the next tool is {expected or 'none'} (each tool runs once, "
            f"in the order {' → '.join(TOOL_ORDER)})",
            tool=tool,
        )
    bound_ms = tool_bound_ms[tool]
    needed_ms = bound_ms + safety_margin_ms
    for limit, at_ms in (("deadline", deadline_at_ms), ("lease", lease_expires_at_ms)):
        remaining_ms = at_ms - now_ms
        if remaining_ms <= needed_ms:
            raise NotEnoughTime(
                f"{tool} needs {needed_ms} ms before the {limit}; {remaining_ms} ms remain",
                limit=limit,
                needed_ms=needed_ms,
                remaining_ms=remaining_ms,
            )
    return AllowedTool(tool=tool, step_index=checkpoint.steps_started, bound_ms=bound_ms)


def _check_scope(proposal: Proposal, job_input: DocPrepInput, tenant: str) -> None:
    references = list(_references(proposal.args, tool=proposal.tool))
    if job_input.s3_key is not None:
        references.append(job_input.s3_key)
    for reference in references:
        if reference.startswith("s3://") or tenant_of_key(reference) != tenant:
            raise ToolRejected(
                "out_of_scope",
                f"{proposal.tool} refers to an object outside {document_prefix(tenant)}",
                tool=proposal.tool,
            )


def _references(args: Any, *, tool: str) -> Iterator[str]:
    """Every string in `args` that names a stored object: any value under a key ending in
    `key`/`uri`/`url`, and any string starting with `tenants/` or `s3://`. Walked iteratively
    and bounded, so hostile args cannot exhaust the stack."""
    pending: list[tuple[str, Any]] = [("", args)]
    seen = 0
    while pending:
        name, value = pending.pop()
        seen += 1
        if seen > _MAX_ARG_NODES:
            raise ToolRejected("invalid_args", "args are too large to check", tool=tool)
        if isinstance(value, dict):
            pending.extend((str(key), item) for key, item in value.items())
        elif isinstance(value, list):
            pending.extend((name, item) for item in value)
        elif isinstance(value, str) and (
            value.startswith(("tenants/", "s3://")) or name.lower().endswith(("key", "uri", "url"))
        ):
            yield value
