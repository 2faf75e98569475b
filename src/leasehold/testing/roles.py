"""Each function's execution role, read from a CloudFormation template (translated by SAM, or
leasehold's own template.yaml, whose roles SAM leaves as they are) and resolved against the
resources a local stack, a test or a testbed actually created: the policies
leasehold.testing.iam judges every call by.

A role's policies are its inline `Policies` and every `AWS::IAM::Policy` that names it in
`Roles` (when the policy's condition holds). Intrinsics are resolved as CloudFormation would:
Ref, Fn::GetAtt, Fn::Sub, Fn::If (AWS::NoValue dropped), Fn::Join, Fn::Select and the
conditions' Fn::Equals/Not/And/Or. What cannot be resolved is refused, never guessed; an
attribute of a resource the caller did not create resolves to an ARN no call matches (the call
is denied, not allowed)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from typing import Any, TypedDict, Unpack
from urllib.parse import urlparse

from leasehold.domain.types import JsonObject
from leasehold.testing.iam import Role

ACCOUNT = "123456789012"
"""moto's default account: the local stack's, the tests' and the testbed's resources live in
it."""

FUNCTION_TYPES = ("AWS::Lambda::Function", "AWS::Serverless::Function")


class RoleResolutionError(RuntimeError):
    """The template says something about a role this module cannot resolve faithfully."""


def resource_attributes(
    template: Mapping[str, Any],
    physical: Mapping[str, str],
    *,
    region: str,
    account: str = ACCOUNT,
    extra: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, dict[str, str]]:
    """`Ref` and the `Fn::GetAtt` attributes of each created resource (logical id → physical
    name or URL), by its type; `extra` adds or overrides (a table's real StreamArn)."""
    found: dict[str, dict[str, str]] = {}
    for logical_id, name in physical.items():
        kind = str(template["Resources"].get(logical_id, {}).get("Type", ""))
        found[logical_id] = _attributes(kind, name, region, account)
    for logical_id, attributes in (extra or {}).items():
        found.setdefault(logical_id, {}).update(attributes)
    return found


def _attributes(kind: str, name: str, region: str, account: str) -> dict[str, str]:
    if kind == "AWS::DynamoDB::Table":
        arn = f"arn:aws:dynamodb:{region}:{account}:table/{name}"
        return {"Ref": name, "Arn": arn, "StreamArn": f"{arn}/stream/*"}
    if kind == "AWS::SQS::Queue":
        queue = urlparse(name).path.rstrip("/").rsplit("/", 1)[-1] if "/" in name else name
        url = name if "/" in name else f"https://sqs.{region}.amazonaws.com/{account}/{name}"
        return {"Ref": url, "QueueName": queue, "Arn": f"arn:aws:sqs:{region}:{account}:{queue}"}
    if kind == "AWS::S3::Bucket":
        return {"Ref": name, "Arn": f"arn:aws:s3:::{name}"}
    if kind == "AWS::Logs::LogGroup":
        return {"Ref": name, "Arn": f"arn:aws:logs:{region}:{account}:log-group:{name}:*"}
    if kind == "AWS::IAM::Role":
        return {"Ref": name, "Arn": f"arn:aws:iam::{account}:role/{name}"}
    return {"Ref": name}


class RoleDocuments(TypedDict):
    """A function's role as `role_documents` resolves it: the role's logical id, where it is, and
    every IAM policy document attached to it (the template's JSON, resolved)."""

    role: str
    account: str
    region: str
    documents: list[JsonObject]


class Placement(TypedDict, total=False):
    """Where the template's stack stands, beyond its region: what `role_documents` resolves the
    template's references with (each has role_documents' default when absent)."""

    parameters: Mapping[str, str] | None
    account: str
    stack_name: str
    edit: Callable[[JsonObject], None] | None


def function_roles(
    template: Mapping[str, Any],
    attributes: Mapping[str, Mapping[str, str]],
    *,
    region: str,
    **where: Unpack[Placement],
) -> dict[str, Role]:
    """Each `AWS::Lambda::Function` of the translated `template` (by logical id) → its role.
    `edit(template)` may change a copy of the template first (a test removing an action)."""
    found = role_documents(template, attributes, region=region, **where)
    return {function: role_of(doc) for function, doc in found.items()}


def role_of(doc: Mapping[str, Any]) -> Role:
    """A role from what `role_documents` gives for a function (JSON: a state file keeps it)."""
    return Role.of(str(doc["role"]), str(doc["account"]), str(doc["region"]), doc["documents"])


def role_documents(
    template: Mapping[str, Any],
    attributes: Mapping[str, Mapping[str, str]],
    *,
    parameters: Mapping[str, str] | None = None,
    region: str,
    account: str = ACCOUNT,
    stack_name: str = "leasehold",
    edit: Callable[[JsonObject], None] | None = None,
) -> dict[str, RoleDocuments]:
    """Each function (logical id) → `{"role", "account", "region", "documents"}`: its role's
    logical id and every policy document attached to it, resolved."""
    if edit is not None:
        copied = copy.deepcopy(dict(template))
        edit(copied)
        template = copied
    resolver = _Resolver(template, attributes, parameters or {}, region, account, stack_name)
    documents: dict[str, list[JsonObject]] = {}
    resources = template.get("Resources", {})
    for logical_id, resource in resources.items():
        if resource.get("Type") != "AWS::IAM::Role" or not resolver.holds(resource):
            continue
        props = resource.get("Properties", {})
        if props.get("ManagedPolicyArns") or props.get("PermissionsBoundary"):
            raise RoleResolutionError(
                f"{logical_id}: managed policies and permission boundaries are not evaluated"
            )
        documents[logical_id] = [
            resolver.value(policy["PolicyDocument"]) for policy in props.get("Policies") or []
        ]
    for logical_id, resource in resources.items():
        if resource.get("Type") != "AWS::IAM::Policy" or not resolver.holds(resource):
            continue
        props = resource.get("Properties", {})
        if props.get("Users") or props.get("Groups"):
            raise RoleResolutionError(f"{logical_id}: policies for users or groups")
        for role_ref in props.get("Roles") or []:
            role = _logical_of(role_ref, logical_id)
            documents.setdefault(role, []).append(resolver.value(props["PolicyDocument"]))
    found: dict[str, RoleDocuments] = {}
    for logical_id, resource in resources.items():
        if resource.get("Type") not in FUNCTION_TYPES:
            continue
        role = _logical_of(resource.get("Properties", {}).get("Role"), logical_id)
        found[logical_id] = {
            "role": role,
            "account": account,
            "region": region,
            "documents": documents.get(role, []),
        }
    return found


def _logical_of(reference: Any, where: str) -> str:
    """The role a `Ref` / `Fn::GetAtt: [X, Arn]` names."""
    if isinstance(reference, Mapping):
        if set(reference) == {"Ref"}:
            return str(reference["Ref"])
        if set(reference) == {"Fn::GetAtt"}:
            target = reference["Fn::GetAtt"]
            return str(target[0] if isinstance(target, list) else str(target).split(".")[0])
    raise RoleResolutionError(f"{where}: a role named by {reference!r}, not a template role")


_NO_VALUE = object()
_SUB = re.compile(r"\$\{([^}!][^}]*)\}")


class _Resolver:
    def __init__(
        self,
        template: Mapping[str, Any],
        attributes: Mapping[str, Mapping[str, str]],
        parameters: Mapping[str, str],
        region: str,
        account: str,
        stack_name: str,
    ) -> None:
        self._template = template
        self._attributes = attributes
        declared = template.get("Parameters", {})
        self._parameters = {
            name: str(parameters.get(name, spec.get("Default", "")))
            for name, spec in declared.items()
        }
        self._pseudo = {
            "AWS::Region": region,
            "AWS::AccountId": account,
            "AWS::Partition": "aws",
            "AWS::StackName": stack_name,
            "AWS::URLSuffix": "amazonaws.com",
        }

    def holds(self, resource: Mapping[str, Any]) -> bool:
        name = resource.get("Condition")
        return True if name is None else self.condition(str(name))

    def condition(self, name: str) -> bool:
        conditions = self._template.get("Conditions", {})
        if name not in conditions:
            raise RoleResolutionError(f"unknown condition {name}")
        return bool(self._truth(conditions[name]))

    def _truth(self, node: Any) -> bool:
        if isinstance(node, Mapping) and len(node) == 1:
            ((fn, args),) = node.items()
            if fn == "Fn::Equals":
                return bool(str(self.value(args[0])) == str(self.value(args[1])))
            if fn == "Fn::Not":
                return not self._truth(args[0])
            if fn == "Fn::And":
                return all(self._truth(a) for a in args)
            if fn == "Fn::Or":
                return any(self._truth(a) for a in args)
            if fn == "Condition":
                return self.condition(str(args))
        raise RoleResolutionError(f"a condition not evaluated here: {node!r}")

    def value(self, node: Any) -> Any:
        resolved = self._value(node)
        if resolved is _NO_VALUE:
            raise RoleResolutionError("AWS::NoValue where a value is required")
        return resolved

    def _value(self, node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (self._value(item) for item in node) if v is not _NO_VALUE]
        if not isinstance(node, Mapping):
            return node
        if len(node) == 1:
            ((key, args),) = node.items()
            if key == "Ref":
                return self._ref(str(args))
            if key == "Fn::GetAtt":
                target, attribute = args if isinstance(args, list) else str(args).split(".", 1)
                return self._get_att(str(target), str(attribute))
            if key == "Fn::Sub":
                return self._sub(args)
            if key == "Fn::If":
                name, then, otherwise = args
                return self._value(then if self.condition(str(name)) else otherwise)
            if key == "Fn::Join":
                separator, items = args
                return str(separator).join(str(v) for v in self.value(items))
            if key == "Fn::Select":
                index, items = args
                return self.value(items)[int(self.value(index))]
            if key.startswith("Fn::") or key == "Condition":
                raise RoleResolutionError(f"{key} is not resolved here")
        resolved = {k: self._value(v) for k, v in node.items()}
        return {k: v for k, v in resolved.items() if v is not _NO_VALUE}

    def _ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in self._pseudo:
            return self._pseudo[name]
        if name in self._parameters:
            return self._parameters[name]
        return self._get_att(name, "Ref")

    def _get_att(self, logical_id: str, attribute: str) -> str:
        if logical_id not in self._template.get("Resources", {}):
            raise RoleResolutionError(f"{logical_id} is neither a parameter nor a resource")
        found = self._attributes.get(logical_id, {}).get(attribute)
        if found is None:  # not created here: an ARN no call matches (denied, never allowed)
            return f"arn:leasehold:not-created:::{logical_id}.{attribute}"
        return found

    def _sub(self, args: Any) -> str:
        text, variables = (args, {}) if isinstance(args, str) else (args[0], args[1])
        bound = {k: self.value(v) for k, v in variables.items()}

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in bound:
                return str(bound[name])
            if "." in name and not name.startswith("AWS::"):
                target, attribute = name.split(".", 1)
                return self._get_att(target, attribute)
            return str(self._ref(name))

        return _SUB.sub(replace, str(text)).replace("${!", "${")
