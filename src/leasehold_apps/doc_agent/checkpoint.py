"""The agent's checkpoint: the only state that survives between tool steps, retries and resumes,
and the only thing a planner sees.

What it holds: the tools finished (in order), how many tool steps were *started* in the job's
whole life, the tool started and not yet finished (if any), and the latest safe output — fields,
problems, the draft note. What it never holds: the document text, prompts or model output.

**Bounded by construction** (≤ `MAX_CHECKPOINT_BYTES` = 6 KiB as compact UTF-8 JSON): every value
a tool hands in is cut to its JSON-encoded cap in `finish` (vocabulary.py: field values 16–240
bytes each, ≤ 10 problems with messages ≤ 96 bytes, the draft ≤ 3.25 KiB), the names and codes
are from closed vocabularies, and the counters are ≤ 3. The sum of the caps plus the fixed keys
is under 6 KiB (tests/unit/test_agent_checkpoint.py builds the worst case). `from_json` refuses
anything outside these bounds instead of trusting a stored copy.

**How a started tool is counted.** Before a tool runs, the engine saves `begin(tool)` (fenced,
like any worker write): `steps_started` goes up and `tool_in_flight` names the tool. `finish`
clears `tool_in_flight` and appends to `tools_run`. A crash in between leaves the step counted,
so a retry that runs the tool again spends a second step (docs/architecture.md "The
document-preparation agent": at most 3 tool steps in the
job's whole life, retries and resumes included).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from leasehold import LeaseholdError
from leasehold_apps.doc_agent.vocabulary import (
    DRAFT_MAX_JSON_BYTES,
    FIELD_MAX_JSON_BYTES,
    MAX_PROBLEMS,
    MAX_TOOL_STEPS,
    PROBLEM_CODE_MAX_CHARS,
    PROBLEM_MESSAGE_MAX_JSON_BYTES,
    TOOL_ORDER,
    Problem,
    clip_json,
    json_size,
)

CHECKPOINT_VERSION: Final = 1
MAX_CHECKPOINT_BYTES: Final = 6 * 1024
_PROBLEM_CODE: Final = re.compile(rf"[a-z][a-z0-9_]{{0,{PROBLEM_CODE_MAX_CHARS - 1}}}")
_KEYS: Final = frozenset(
    {
        "version",
        "next_step",
        "steps_started",
        "tools_run",
        "tool_in_flight",
        "fields",
        "problems",
        "draft_note",
    }
)


class CheckpointError(LeaseholdError):
    """A stored checkpoint that is not one this code wrote, or a step applied out of protocol
    (finishing a tool that was never begun): a bug or corruption, never retried."""

    code = "checkpoint_invalid"


@dataclass(frozen=True)
class AgentCheckpoint:
    tools_run: tuple[str, ...] = ()
    steps_started: int = 0
    tool_in_flight: str | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    draft_note: str | None = None

    @property
    def next_step(self) -> int:
        """Index of the next tool step in TOOL_ORDER: the number of tools finished. A planner
        proposes from it; a tool begun and never finished is proposed again."""
        return len(self.tools_run)

    def begin(self, tool: str) -> AgentCheckpoint:
        """The checkpoint to save *before* running `tool`: the step is spent from here on."""
        if tool not in TOOL_ORDER:
            raise CheckpointError(f"unknown tool {tool!r}")
        return replace(self, steps_started=self.steps_started + 1, tool_in_flight=tool)

    def finish(
        self,
        tool: str,
        *,
        fields: Mapping[str, str] | None = None,
        problems: Sequence[Problem] | None = None,
        draft_note: str | None = None,
    ) -> AgentCheckpoint:
        """The checkpoint after `tool` finished with this output, every value cut to its cap."""
        if self.tool_in_flight != tool:
            raise CheckpointError(f"{tool!r} finished but {self.tool_in_flight!r} was begun")
        updated = replace(self, tools_run=(*self.tools_run, tool), tool_in_flight=None)
        if fields is not None:
            updated = replace(updated, fields=_bounded_fields(fields))
        if problems is not None:
            updated = replace(updated, problems=_bounded_problems(problems))
        if draft_note is not None:
            updated = replace(updated, draft_note=clip_json(draft_note, DRAFT_MAX_JSON_BYTES))
        return updated

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": CHECKPOINT_VERSION,
            "next_step": self.next_step,
            "steps_started": self.steps_started,
            "tools_run": list(self.tools_run),
            "tool_in_flight": self.tool_in_flight,
            "fields": dict(self.fields),
            "problems": [problem.as_dict() for problem in self.problems],
            "draft_note": self.draft_note,
        }

    def to_json(self) -> str:
        """Compact JSON, ≤ MAX_CHECKPOINT_BYTES in UTF-8 (see the module docstring)."""
        text = json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))
        if len(text.encode("utf-8")) > MAX_CHECKPOINT_BYTES:
            raise CheckpointError("checkpoint over its size bound")  # unreachable by the caps
        return text

    @classmethod
    def from_json(cls, raw: str | bytes | Mapping[str, Any]) -> AgentCheckpoint:
        """Parse a stored checkpoint strictly: the same bounds `finish` enforces, and counters
        that agree (`steps_started` covers every finished and in-flight tool)."""
        data = _load(raw)
        if set(data) != _KEYS or data["version"] != CHECKPOINT_VERSION:
            raise CheckpointError("checkpoint keys or version are not this code's")
        tools_run = _tool_names(data["tools_run"])
        in_flight = data["tool_in_flight"]
        if in_flight is not None and in_flight not in TOOL_ORDER:
            raise CheckpointError("checkpoint names an unknown tool in flight")
        steps = data["steps_started"]
        floor = len(tools_run) + (in_flight is not None)
        if type(steps) is not int or not floor <= steps <= MAX_TOOL_STEPS:
            raise CheckpointError("checkpoint step counter is out of range")
        if data["next_step"] != len(tools_run):
            raise CheckpointError("checkpoint next_step disagrees with tools_run")
        fields = data["fields"]
        if not isinstance(fields, dict) or _bounded_fields(fields) != fields:
            raise CheckpointError("checkpoint fields are unknown or over their caps")
        problems = _problems(data["problems"])
        note = data["draft_note"]
        if note is not None and (
            not isinstance(note, str) or json_size(note) > DRAFT_MAX_JSON_BYTES
        ):
            raise CheckpointError("checkpoint draft note is not a bounded string")
        return cls(tools_run, steps, in_flight, dict(fields), problems, note)


def _load(raw: str | bytes | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if len(raw) > MAX_CHECKPOINT_BYTES * 4:
        raise CheckpointError("checkpoint is far over its size bound")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise CheckpointError("checkpoint is not JSON") from exc
    if not isinstance(data, dict):
        raise CheckpointError("checkpoint is not a JSON object")
    return data


def _tool_names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or any(name not in TOOL_ORDER for name in value):
        raise CheckpointError("checkpoint tools_run names unknown tools")
    if len(set(value)) != len(value):
        raise CheckpointError("checkpoint tools_run repeats a tool")
    return tuple(value)


def _bounded_fields(fields: Mapping[str, Any]) -> dict[str, str]:
    """Known fields with non-empty string values, each cut to its cap; others are dropped."""
    return {
        name: clip_json(value, FIELD_MAX_JSON_BYTES[name])
        for name, value in fields.items()
        if name in FIELD_MAX_JSON_BYTES and isinstance(value, str) and value
    }


def _bounded_problems(problems: Sequence[Problem]) -> tuple[Problem, ...]:
    bounded: list[Problem] = []
    for problem in problems[:MAX_PROBLEMS]:
        if problem.field not in FIELD_MAX_JSON_BYTES or not _PROBLEM_CODE.fullmatch(problem.code):
            raise CheckpointError(f"problem {problem.code!r} on {problem.field!r} is malformed")
        message = clip_json(problem.message, PROBLEM_MESSAGE_MAX_JSON_BYTES)
        bounded.append(Problem(problem.field, problem.code, message))
    return tuple(bounded)


def _problems(value: Any) -> tuple[Problem, ...]:
    if not isinstance(value, list) or len(value) > MAX_PROBLEMS:
        raise CheckpointError("checkpoint problems are not a bounded list")
    problems: list[Problem] = []
    for item in value:
        if not isinstance(item, dict) or set(item) != {"field", "code", "message"}:
            raise CheckpointError("checkpoint problem is malformed")
        if not all(isinstance(item[key], str) for key in item):
            raise CheckpointError("checkpoint problem is malformed")
        problems.append(Problem(item["field"], item["code"], item["message"]))
    bounded = _bounded_problems(problems)
    if bounded != tuple(problems):
        raise CheckpointError("checkpoint problem message is over its cap")
    return bounded
