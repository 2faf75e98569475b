"""The worker's rooms keep their walls (issue 29): the kind protocol declares everything the
engine reads from a kind, so nothing probes a kind with `getattr`; and a step comes to exactly
one `StepOutcome`, each of which `Outcomes.settle` handles."""

from __future__ import annotations

import ast
import inspect
import re
import typing
from pathlib import Path

import pytest

from leasehold import Kind
from leasehold.sdk.engine_kind import EngineKind
from leasehold.service import outcomes, steps
from leasehold.service.kinds import JobKind
from leasehold.service.worker import _NO_KIND

SRC = Path(__file__).resolve().parents[2] / "src" / "leasehold"


def protocol_members(protocol: type) -> set[str]:
    """The attributes and methods a Protocol class declares (not the machinery's own)."""
    declared = set(getattr(protocol, "__annotations__", {}))
    for name, value in vars(protocol).items():
        if not name.startswith("_") and callable(value):
            declared.add(name)
    return declared


@pytest.mark.unit
def test_the_kind_protocol_declares_what_the_engine_reads() -> None:
    members = protocol_members(JobKind)
    assert {"concurrency", "rate", "default_priority", "declared_schedules", "migrate"} <= members
    for kind in (EngineKind(Kind("probe")), _NO_KIND):
        missing = sorted(name for name in members if not hasattr(kind, name))
        assert not missing, f"{type(kind).__name__} lacks {missing}"


@pytest.mark.unit
def test_no_module_probes_a_kind_with_getattr() -> None:
    probe = re.compile(r"getattr\(\s*(kind|self\._kind|k)\s*,")
    found = [
        f"{path.relative_to(SRC)}:{number}"
        for path in sorted(SRC.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if probe.search(line)
    ]
    assert found == []


@pytest.mark.unit
def test_every_outcome_that_ends_an_attempt_is_settled() -> None:
    ending = set(typing.get_args(steps.Settled))
    assert ending == set(typing.get_args(steps.StepOutcome)) - {steps.Completed}
    tree = ast.parse(inspect.getsource(outcomes.Outcomes.settle).strip().replace("\n    ", "\n"))
    handled = {
        case.pattern.cls.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Match)
        for case in node.cases
        if isinstance(case.pattern, ast.MatchClass) and isinstance(case.pattern.cls, ast.Name)
    }
    assert handled == {cls.__name__ for cls in ending}
