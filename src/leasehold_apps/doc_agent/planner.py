"""The planner boundary: a planner *proposes* the next tool from the checkpoint alone; it never
decides (guard.check_proposal does) and never sees the document or any conversation.

A planner is untrusted: it may raise, return garbage, or propose anything. `next_proposal` is the
one way the engine asks a planner, and it turns every failure into a `PlannerError` and every
answer into a strictly parsed `Proposal` (or None: the planner is done).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from leasehold import LeaseholdError
from leasehold_apps.doc_agent.checkpoint import AgentCheckpoint
from leasehold_apps.doc_agent.vocabulary import TOOL_ORDER

MAX_TOOL_NAME_CHARS: Final = 64
_TOOL_NAME: Final = re.compile(rf"[A-Za-z0-9_.:\-]{{1,{MAX_TOOL_NAME_CHARS}}}")


class PlannerError(LeaseholdError):
    """The planner failed or answered something that is not a proposal. `transient` is True only
    for a hosted model that did not answer (timeout, 429, 5xx): worth a retry with backoff; a
    garbage answer is not (the same checkpoint would get the same answer)."""

    code = "planner_error"

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class Proposal:
    """What a planner asks for: a tool name (any string, even one not on the allowlist: the
    guard rejects it) and its `args` (any JSON value: the guard checks it against the tool's
    schema)."""

    tool: str
    args: Any


class Planner(Protocol):
    def propose(self, checkpoint: AgentCheckpoint) -> Proposal | None:
        """The next tool to run given `checkpoint`, or None when there is nothing left to do."""


def parse_proposal(raw: object) -> Proposal:
    """A proposal from a planner's raw output: exactly `{"tool": <name>, "args": <value>}` with
    a tool name of 1-64 characters from `A-Za-z0-9_.:-`. Anything else is a PlannerError; a
    well-formed name not on the allowlist is *not* (it is the guard's `tool_not_allowed`)."""
    if not isinstance(raw, dict):
        raise PlannerError(f"a proposal must be an object, not {type(raw).__name__}")
    if set(raw) != {"tool", "args"}:
        raise PlannerError("a proposal has exactly the keys 'tool' and 'args'")
    tool = raw["tool"]
    if not isinstance(tool, str) or not _TOOL_NAME.fullmatch(tool):
        raise PlannerError(
            f"a proposal's 'tool' must be a name of 1 to {MAX_TOOL_NAME_CHARS} characters"
        )
    return Proposal(tool=tool, args=raw["args"])


def next_proposal(planner: Planner, checkpoint: AgentCheckpoint) -> Proposal | None:
    """Ask `planner` for the next step. Whatever it raises becomes a PlannerError (kept as the
    cause); whatever it returns must be None, a Proposal or a proposal-shaped dict, and is
    re-parsed strictly so a planner cannot smuggle in a name the records cannot hold."""
    try:
        answer: object = planner.propose(checkpoint)
    except PlannerError:
        raise
    except Exception as exc:  # the planner is untrusted code: any failure is its failure
        raise PlannerError(f"the planner failed: {type(exc).__name__}") from exc
    if answer is None:
        return None
    if isinstance(answer, Proposal):
        return parse_proposal({"tool": answer.tool, "args": answer.args})
    return parse_proposal(answer)


class FixturePlanner:
    """The default planner: extract, then validate, then draft, then done. Deterministic: it
    reads only `checkpoint.next_step`, so a resumed job is offered the first unfinished tool."""

    def propose(self, checkpoint: AgentCheckpoint) -> Proposal | None:
        if checkpoint.next_step >= len(TOOL_ORDER):
            return None
        return Proposal(tool=TOOL_ORDER[checkpoint.next_step], args={})


class ScriptedPlanner:
    """Replays the given proposals in order, the n-th when n tools have finished (tests, demo);
    None after the last. A proposal whose tool was begun and not finished is offered again."""

    def __init__(self, proposals: Sequence[Proposal]) -> None:
        self._proposals = tuple(proposals)

    def propose(self, checkpoint: AgentCheckpoint) -> Proposal | None:
        if checkpoint.next_step >= len(self._proposals):
            return None
        return self._proposals[checkpoint.next_step]
