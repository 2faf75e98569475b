"""A template's `Rules` and `Conditions`, evaluated as CloudFormation evaluates them before it
creates or changes anything. moto's CloudFormation ignores `Rules`: without this, a combination
of parameters that AWS refuses at deploy (a lease longer than the worker's timeout, a visibility
timeout under six of them) would make a local stack whose functions then fail their settings
check at cold start — the defect the rules exist to stop.

Only the functions CloudFormation allows in a rule are known (`Fn::And`, `Fn::Contains`,
`Fn::EachMemberEquals`, `Fn::EachMemberIn`, `Fn::Equals`, `Fn::Not`, `Fn::Or`, `Ref`), plus
`Fn::If` and `Condition` for reading what a parameter set deploys. A parameter's value is its
string, as CloudFormation passes it: `Fn::Equals` of a Number parameter and `120` compares
"120" with "120"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leasehold_dev.local.template import TemplateError

PSEUDO_PARAMETERS = {
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::StackName": "leasehold-local",
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
}


def parameter_values(template: Mapping[str, Any], given: Mapping[str, str]) -> dict[str, str]:
    """Every parameter's value as a stack would get it: `given`, else its default (a parameter
    with neither is absent, as CloudFormation would refuse it)."""
    values: dict[str, str] = {}
    for name, spec in (template.get("Parameters") or {}).items():
        if name in given:
            values[name] = str(given[name])
        elif "Default" in (spec or {}):
            values[name] = _text(spec["Default"])
    return values


def rule_problems(template: Mapping[str, Any], values: Mapping[str, str]) -> list[str]:
    """What the template's `Rules` refuse in `values` (a parameter's value by name): one line
    per failed assertion, its rule's name and `AssertDescription`. Empty: CloudFormation would
    go on."""
    problems = []
    for name, rule in (template.get("Rules") or {}).items():
        when = rule.get("RuleCondition")
        if when is not None and not _truth(evaluate(when, values), f"rule {name}'s condition"):
            continue
        for assertion in rule.get("Assertions") or []:
            if not _truth(evaluate(assertion["Assert"], values), f"rule {name}'s assertion"):
                said = assertion.get("AssertDescription") or "an assertion failed"
                problems.append(f"{name}: {said}")
    return problems


def condition_values(template: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, bool]:
    """Each of the template's `Conditions` with these parameter values."""
    declared = dict(template.get("Conditions") or {})
    known: dict[str, bool] = {}

    def condition(name: str) -> bool:
        if name not in known:
            if name not in declared:
                raise TemplateError(f"no condition {name} in the template")
            known[name] = _truth(evaluate(declared[name], values, condition), name)
        return known[name]

    for name in declared:
        condition(name)
    return known


def evaluate(
    expression: Any,
    values: Mapping[str, str],
    condition: Any = None,
) -> Any:
    """`expression` with these parameter values; `condition(name)` answers `Condition` and
    `Fn::If` (None: a template part that may not use conditions, as a rule)."""

    def value(item: Any) -> Any:
        return evaluate(item, values, condition)

    if isinstance(expression, list):
        return [value(item) for item in expression]
    if not isinstance(expression, dict):
        return expression
    if len(expression) != 1:
        return {key: value(item) for key, item in expression.items()}
    ((function, argument),) = expression.items()
    if function == "Ref":
        if argument in values:
            return values[argument]
        if argument == "AWS::NoValue":
            return None  # the property is left out
        if argument in PSEUDO_PARAMETERS:
            return PSEUDO_PARAMETERS[argument]
        raise TemplateError(f"Ref {argument}: no such parameter has a value")
    if function == "Fn::Equals":
        left, right = value(argument)
        return _text(left) == _text(right)
    if function == "Fn::Not":
        (inner,) = value(argument)
        return not _truth(inner, "Fn::Not")
    if function == "Fn::And":
        return all(_truth(item, "Fn::And") for item in value(argument))
    if function == "Fn::Or":
        return any(_truth(item, "Fn::Or") for item in value(argument))
    if function == "Fn::Contains":
        members, item = value(argument)
        return _text(item) in [_text(m) for m in members]
    if function == "Fn::EachMemberEquals":
        members, item = value(argument)
        return all(_text(m) == _text(item) for m in members)
    if function == "Fn::EachMemberIn":
        members, allowed = value(argument)
        return {_text(m) for m in members} <= {_text(a) for a in allowed}
    if function in {"Condition", "Fn::If"} and condition is None:
        raise TemplateError(f"{function} is not allowed here (CloudFormation refuses it)")
    if function == "Condition":
        return condition(argument)
    if function == "Fn::If":
        name, then, otherwise = argument
        return value(then) if condition(name) else value(otherwise)
    return {function: value(argument)}


def _truth(result: Any, where: str) -> bool:
    if not isinstance(result, bool):
        raise TemplateError(f"{where} is not a condition CloudFormation can evaluate: {result!r}")
    return result


def _text(value: Any) -> str:
    """A value as CloudFormation compares it: booleans as true/false, numbers as written."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
