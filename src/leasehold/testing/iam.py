"""IAM, judged where moto judges none: each AWS call a function makes is checked against the
policy of that function's own role, and a call the role does not allow fails as it does on AWS
(a `ClientError` with the code and HTTP status each service answers: `AccessDeniedException`
for DynamoDB and Secrets Manager, `AccessDenied` for SQS and S3).

How a call is judged (docs/decisions.md, "Real AWS: IAM enforced locally"):
- `install()` adds two handlers to every botocore session made from then on (as moto adds its
  own): `before-parameter-build` reads the call's parameters, names the IAM action(s) and the
  resource ARN(s) AWS would authorise, and judges them; `before-call` answers a denied call
  with the service's error, so nothing reaches moto.
- A call is judged only while a role *acts* (`acting_as(role)`, a context variable set around
  each invocation of a function by whatever runs it: the local stack, the test harness). The
  stack's own set-up, Lambda's pollers and a test's own reads act as no role and are not judged.
- The policy language is evaluated as IAM does for one identity policy set: an explicit Deny
  wins, else an Allow is needed; `*` and `?` in actions (case-insensitive) and resources;
  `NotAction` / `NotResource`. A statement with a `Condition` is not guessed at: a call it
  would decide raises `UnjudgedCallError` (loud, never an allow). So does a call whose action
  or resource this module cannot name (an operation nobody taught it).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast
from urllib.parse import urlparse

DENIAL_MARK = "leasehold_iam_denied"
"""The request context key that carries a denial from parameter build to `before-call`."""


class UnjudgedCallError(RuntimeError):
    """A call or policy this evaluator cannot judge faithfully: refused, never allowed."""


# ---------------------------------------------------------------------------------- policies


def _patterns(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise UnjudgedCallError(f"a policy element that is not a string or list of strings: {value!r}")


def _glob(pattern: str, *, ignore_case: bool) -> re.Pattern[str]:
    """IAM's wildcards: `*` any run of characters, `?` one character, nothing else special."""
    body = "".join(
        ".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern
    )  # fmt: skip
    return re.compile(f"^{body}$", re.IGNORECASE if ignore_case else 0)


_STATEMENT_KEYS = {"Sid", "Effect", "Action", "NotAction", "Resource", "NotResource", "Condition"}


@dataclass(frozen=True)
class Statement:
    """One statement of an identity policy, its patterns compiled once."""

    effect: str
    actions: tuple[re.Pattern[str], ...]
    not_actions: tuple[re.Pattern[str], ...]
    resources: tuple[re.Pattern[str], ...]
    not_resources: tuple[re.Pattern[str], ...]
    condition: Mapping[str, Any] | None
    source: Mapping[str, Any] = field(compare=False, repr=False)

    @staticmethod
    def parse(doc: Mapping[str, Any]) -> Statement:
        unknown = set(doc) - _STATEMENT_KEYS
        if unknown:  # Principal in an identity policy, or anything else not evaluated here
            raise UnjudgedCallError(f"policy statement keys not evaluated: {sorted(unknown)}")
        effect = doc.get("Effect")
        if effect not in {"Allow", "Deny"}:
            raise UnjudgedCallError(f"policy statement effect {effect!r}")
        if ("Action" in doc) == ("NotAction" in doc):
            raise UnjudgedCallError("a statement needs exactly one of Action and NotAction")
        if ("Resource" in doc) == ("NotResource" in doc):
            raise UnjudgedCallError("a statement needs exactly one of Resource and NotResource")
        return Statement(
            effect=str(effect),
            actions=tuple(_glob(p, ignore_case=True) for p in _patterns(doc.get("Action"))),
            not_actions=tuple(_glob(p, ignore_case=True) for p in _patterns(doc.get("NotAction"))),
            resources=tuple(_glob(p, ignore_case=False) for p in _patterns(doc.get("Resource"))),
            not_resources=tuple(
                _glob(p, ignore_case=False) for p in _patterns(doc.get("NotResource"))
            ),
            condition=doc.get("Condition") or None,
            source=doc,
        )

    def applies(self, action: str, resource: str) -> bool:
        if "NotAction" in self.source:
            if any(p.match(action) for p in self.not_actions):
                return False
        elif not any(p.match(action) for p in self.actions):
            return False
        if "NotResource" in self.source:
            return not any(p.match(resource) for p in self.not_resources)
        return any(p.match(resource) for p in self.resources)


@dataclass(frozen=True)
class Role:
    """A function's execution role as deployed: its name, the account and region its resources
    were resolved in, and every statement of every policy attached to it."""

    name: str
    account: str
    region: str
    statements: tuple[Statement, ...]

    @staticmethod
    def of(name: str, account: str, region: str, documents: Iterable[Mapping[str, Any]]) -> Role:
        """From policy documents (`{"Version": …, "Statement": […]}` each)."""
        statements: list[Statement] = []
        for document in documents:
            found = document.get("Statement", [])
            for doc in [found] if isinstance(found, Mapping) else found:
                statements.append(Statement.parse(doc))
        return Role(name, account, region, tuple(statements))

    def allows(
        self, action: str, resource: str, context: Mapping[str, str | None] | None = None
    ) -> bool:
        """IAM's evaluation for one principal's identity policies: explicit Deny, then Allow,
        else the implicit deny. A statement's `Condition` is evaluated when every key it names
        is in the request's `context` (a key there with None: absent from this request) and its
        operators are StringEquals / StringLike; any other conditioned statement that would
        decide is refused."""
        allowed = False
        conditioned: Statement | None = None
        for statement in self.statements:
            if not statement.applies(action, resource):
                continue
            if statement.condition is not None:
                holds = _condition_holds(statement.condition, context or {})
                if holds is None:
                    conditioned = statement
                    continue
                if not holds:
                    continue
            if statement.effect == "Deny":
                return False
            allowed = True
        if conditioned is not None and (conditioned.effect == "Deny" or not allowed):
            raise UnjudgedCallError(
                f"{self.name}: {action} on {resource} depends on a condition this evaluator "
                f"does not evaluate: {dict(conditioned.condition or {})}"
            )
        return allowed

    @property
    def principal(self) -> str:
        return f"arn:aws:sts::{self.account}:assumed-role/{self.name}/leasehold-local"


# ------------------------------------------------------------------- calls → action, resource


def _condition_holds(
    condition: Mapping[str, Any], context: Mapping[str, str | None]
) -> bool | None:
    """Whether a statement's `Condition` holds for a request with these condition keys; None
    when it names an operator or a key this evaluator does not know for the request."""
    for operator, tests in condition.items():
        if operator not in {"StringEquals", "StringLike"} or not isinstance(tests, Mapping):
            return None
        for key, wanted in tests.items():
            if key not in context:
                return None
            value = context[key]
            if value is None:  # the key is absent from the request: the test does not hold
                return False
            patterns = _patterns(wanted)
            if operator == "StringLike":
                if not any(_glob(p, ignore_case=False).match(value) for p in patterns):
                    return False
            elif value not in patterns:
                return False
    return True


@dataclass(frozen=True)
class Request:
    """One authorisation a call needs: an IAM action on a resource ARN, with the condition keys
    AWS sets for it that a policy here may test (`s3:prefix` of a listing)."""

    action: str
    resource: str
    context: tuple[tuple[str, str | None], ...] = ()


_DYNAMODB_TRANSACT = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
_SQS_BATCHES = {  # a batch is authorised by its single-message action
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
_S3_ACTIONS = {
    "HeadObject": "GetObject",
    "ListObjects": "ListBucket",
    "ListObjectsV2": "ListBucket",
    "HeadBucket": "ListBucket",
}
_SQS_ACCOUNT_FREE = {"ListQueues"}
_NO_PERMISSION_NEEDED = {("sts", "GetCallerIdentity")}


def requests_of(
    service: str, operation: str, params: Mapping[str, Any], role: Role
) -> list[Request]:
    """What AWS authorises for this call (`service` is the client's service name)."""
    if (service, operation) in _NO_PERMISSION_NEEDED:
        return []
    if service == "dynamodb":
        return _dynamodb(operation, params, role)
    if service == "sqs":
        return _sqs(operation, params, role)
    if service == "s3":
        return _s3(operation, params)
    if service == "secretsmanager" and "SecretId" in params:
        secret = str(params["SecretId"])
        if not secret.startswith("arn:"):
            secret = f"arn:aws:secretsmanager:{role.region}:{role.account}:secret:{secret}"
        return [Request(f"secretsmanager:{operation}", secret)]
    raise UnjudgedCallError(
        f"{service}.{operation}: no rule names the IAM action and resource of this call "
        "(leasehold.testing.iam.requests_of); teach it before a function makes it"
    )


def _table_arn(role: Role, table: str) -> str:
    if table.startswith("arn:"):
        return table
    return f"arn:aws:dynamodb:{role.region}:{role.account}:table/{table}"


def _dynamodb(operation: str, params: Mapping[str, Any], role: Role) -> list[Request]:
    if operation in {"TransactWriteItems", "TransactGetItems"}:
        found = []
        for item in params.get("TransactItems") or []:
            for kind, body in item.items():
                found.append(
                    Request(
                        f"dynamodb:{_DYNAMODB_TRANSACT[kind]}", _table_arn(role, body["TableName"])
                    )
                )
        return found
    if operation in {"BatchGetItem", "BatchWriteItem"}:
        return [
            Request(f"dynamodb:{operation}", _table_arn(role, table))
            for table in params.get("RequestItems") or {}
        ]
    if "TableName" in params:
        arn = _table_arn(role, str(params["TableName"]))
        if params.get("IndexName"):
            arn = f"{arn}/index/{params['IndexName']}"
        return [Request(f"dynamodb:{operation}", arn)]
    if operation == "ListTables":
        return [Request("dynamodb:ListTables", "*")]
    raise UnjudgedCallError(f"dynamodb.{operation}: its resource is not known here")


def _queue_arn(url: str, role: Role) -> str:
    parts = [p for p in urlparse(url).path.split("/") if p]
    if len(parts) < 2:
        raise UnjudgedCallError(f"a queue URL without account and name: {url}")
    account, name = parts[-2], parts[-1]
    return f"arn:aws:sqs:{role.region}:{account}:{name}"


def _sqs(operation: str, params: Mapping[str, Any], role: Role) -> list[Request]:
    action = f"sqs:{_SQS_BATCHES.get(operation, operation)}"
    if "QueueUrl" in params:
        return [Request(action, _queue_arn(str(params["QueueUrl"]), role))]
    if "QueueName" in params:
        account = str(params.get("QueueOwnerAWSAccountId") or role.account)
        return [Request(action, f"arn:aws:sqs:{role.region}:{account}:{params['QueueName']}")]
    if operation in _SQS_ACCOUNT_FREE:
        return [Request(action, "*")]
    raise UnjudgedCallError(f"sqs.{operation}: its resource is not known here")


def _s3(operation: str, params: Mapping[str, Any]) -> list[Request]:
    bucket = params.get("Bucket")
    if not bucket:
        raise UnjudgedCallError(f"s3.{operation}: its resource is not known here")
    if operation == "CopyObject":  # AWS asks for both: reading the source, writing the copy
        source = params.get("CopySource")
        if isinstance(source, Mapping):
            source = f"{source.get('Bucket')}/{source.get('Key')}"
        return [
            Request("s3:GetObject", f"arn:aws:s3:::{str(source).lstrip('/')}"),
            Request("s3:PutObject", f"arn:aws:s3:::{bucket}/{params.get('Key')}"),
        ]
    if operation == "DeleteObjects":  # authorised key by key, as s3:DeleteObject
        objects = (params.get("Delete") or {}).get("Objects") or []
        return [Request("s3:DeleteObject", f"arn:aws:s3:::{bucket}/{o['Key']}") for o in objects]
    action = f"s3:{_S3_ACTIONS.get(operation, operation)}"
    if "Key" in params:
        return [Request(action, f"arn:aws:s3:::{bucket}/{params['Key']}")]
    if action == "s3:ListBucket":  # a listing's prefix is a condition key (None: no prefix)
        prefix = params.get("Prefix")
        context = (("s3:prefix", None if prefix is None else str(prefix)),)
        return [Request(action, f"arn:aws:s3:::{bucket}", context)]
    return [Request(action, f"arn:aws:s3:::{bucket}")]


# ------------------------------------------------------------------------------- the answers

_DENIAL = {  # service → (error code, HTTP status) as the service answers an unauthorised call
    "dynamodb": ("AccessDeniedException", 400),
    "dynamodbstreams": ("AccessDeniedException", 400),
    "secretsmanager": ("AccessDeniedException", 400),
    "sqs": ("AccessDenied", 403),
    "s3": ("AccessDenied", 403),
}


def judge(service: str, operation: str, params: Mapping[str, Any], role: Role) -> Request | None:
    """The first authorisation `role` lacks for this call, or None if it is allowed."""
    for request in requests_of(service, operation, params, role):
        if not role.allows(request.action, request.resource, dict(request.context)):
            return request
    return None


def denial(service: str, role: Role, refused: Request) -> tuple[Any, dict[str, Any]]:
    """(http response, parsed response) as botocore would make of the service's answer."""
    from botocore.awsrequest import AWSResponse
    from botocore.compat import HTTPHeaders

    code, status = _DENIAL.get(service, ("AccessDenied", 403))
    message = (
        f"User: {role.principal} is not authorized to perform: {refused.action} on resource: "
        f"{refused.resource} because no identity-based policy allows the {refused.action} action"
    )
    error: dict[str, Any] = {"Code": code, "Message": message}
    if service == "sqs":
        error["Type"] = "Sender"
    parsed = {
        "Error": error,
        "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0},
    }
    return AWSResponse("", status, HTTPHeaders(), None), parsed


# ----------------------------------------------------------------- who acts, and the handlers

_ACTING: contextvars.ContextVar[Role | None] = contextvars.ContextVar(
    "leasehold_iam_acting", default=None
)


@contextlib.contextmanager
def acting_as(role: Role | None) -> Iterator[None]:
    """Judge every AWS call made in this context (this thread) by `role`; None: judge none."""
    token = _ACTING.set(role)
    try:
        yield
    finally:
        _ACTING.reset(token)


def acting() -> Role | None:
    return _ACTING.get()


_T = TypeVar("_T")


class _ActingAs:
    """`target`, each of its methods called acting as `role`."""

    def __init__(self, target: Any, role: Role | None) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_role", role)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return value
        role = self._role

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            with acting_as(role):
                return value(*args, **kwargs)

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)


def acting_proxy(target: _T, role: Role | None) -> _T:
    """`target` (a service object) whose every method call acts as `role`: how a test harness
    that calls services directly, not through a handler, runs each as its function would."""
    return cast(_T, _ActingAs(target, role))


@dataclass
class Judgements:
    """How many calls were judged and refused since `install()` (read by tests and the bench)."""

    judged: int = 0
    refused: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, refused: bool) -> None:
        with self._lock:  # a local worker's poller threads judge at once
            self.judged += 1
            self.refused += int(refused)


JUDGEMENTS = Judgements()


def _before_parameter_build(params: Any, model: Any, context: Any = None, **_: Any) -> None:
    role = _ACTING.get()
    if role is None:
        return
    service = model.service_model.service_name
    refused = judge(service, model.name, params, role)
    JUDGEMENTS.count(refused is not None)
    if refused is not None and context is not None:
        context[DENIAL_MARK] = (service, role, refused)


def _before_call(context: Any = None, **_: Any) -> tuple[Any, dict[str, Any]] | None:
    if not context or DENIAL_MARK not in context:
        return None
    service, role, refused = context.pop(DENIAL_MARK)
    return denial(service, role, refused)


_HANDLERS = (
    ("before-parameter-build", _before_parameter_build),
    ("before-call", _before_call),
)


def install() -> None:
    """Judge the calls of every botocore session made from now on (idempotent). Harmless
    where no role acts: one context-variable read a call."""
    from botocore.handlers import BUILTIN_HANDLERS

    for handler in _HANDLERS:
        if handler not in BUILTIN_HANDLERS:
            BUILTIN_HANDLERS.append(handler)


def installed() -> bool:
    from botocore.handlers import BUILTIN_HANDLERS

    return all(handler in BUILTIN_HANDLERS for handler in _HANDLERS)


__all__ = [
    "JUDGEMENTS",
    "Request",
    "Role",
    "Statement",
    "UnjudgedCallError",
    "acting",
    "acting_as",
    "acting_proxy",
    "denial",
    "install",
    "judge",
    "requests_of",
]
