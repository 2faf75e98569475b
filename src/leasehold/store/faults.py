"""Fault injection at the client boundary (docs/architecture.md rule 9): moto never throttles,
never cancels a
transaction for a conflict and never loses an answer, so those faults are injected here — on the
wire, where botocore's own retry rules and our classification see them exactly as they would see
DynamoDB's and SQS's.

Switched on by configuration only: `LEASEHOLD_FAULTS` (read once into Settings) or
`leasehold local up --faults …`, e.g.

    dynamodb.TransactWriteItems:TransactionConflict=0.05,dynamodb.UpdateItem:ThrottlingException=0.02

Each rule is `service.Operation:ErrorCode=probability`, optionally `@N` to inject at most N
times (`=1@2`: the next two calls fail). `Operation` may be `*`. A DynamoDB `Query` or `Scan`
rule may name one index in brackets: `dynamodb.Query[by_state]:ThrottlingException=0.5` fails
only the queries of the `by_state` index (`Query` alone: every query, of the table or an index).
Error codes:

- a cancellation reason of `TransactWriteItems` (`TransactionConflict`, `ThrottlingError`,
  `ProvisionedThroughputExceeded`): the call fails with `TransactionCanceledException` whose
  `CancellationReasons` name one item with that code and `None` for the others; nothing applied;
- `TransactionConflictException` on a single write (`PutItem`, `UpdateItem`, `DeleteItem`, or
  `*`): the write met an item inside a transaction, as DynamoDB answers it (HTTP 400, the
  service's own error type); nothing applied; botocore does not retry it;
- any other code (`ThrottlingException`, `ProvisionedThroughputExceededException`,
  `RequestLimitExceeded`, `InternalServerError`, `InternalError`, `ServiceUnavailable`, …): the
  service answers that error (HTTP 500 for the internal/unavailable ones, else 400); nothing
  applied; botocore retries it if its rules say so;
- `ReadTimeout`: the request **is applied**, then the answer is lost (a `ReadTimeoutError`):
  the case of a commit whose answer never arrived.

A crash rule kills the process at one call instead: `service.Operation:crash-before@N` or
`service.Operation:crash-after@N` (`@N` defaults to `@1`), e.g.
`dynamodb.TransactWriteItems:crash-after@3`. N counts that client's API calls of `Operation`
(every operation with `*`) since the rule was installed, one per call whatever botocore's
retries did. At the N-th, the process exits with `os._exit(137)` as a `kill -9` would — no
`finally`, no flushed buffer, no message deleted:

- `crash-before`: before the call is sent; nothing of it reaches the store;
- `crash-after`: once its answer arrived (success or error): the store applied it, the answer
  is discarded.

Each crash rule fires once. `LEASEHOLD_FAULTS` is read by every function of a stack: give a
crash rule to the process meant to die (a worker's environment). Tests pass their own `crash`
callable to `install_faults` (raise a BaseException instead of exiting).
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import ReadTimeoutError

CANCELLATION_REASONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)
SINGLE_WRITE_CONFLICT = "TransactionConflictException"
SINGLE_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
"""The operations DynamoDB answers `TransactionConflictException` (an item inside a transaction)."""
INDEXED_READS = frozenset({"Query", "Scan"})
"""The operations a rule may narrow to one index (`Query[by_state]`)."""
_ERROR_TYPE = {"dynamodb": "com.amazonaws.dynamodb.v20120810#"}
"""The `__type` prefix of a service's own errors (what botocore parses the code from)."""
_MESSAGES = {SINGLE_WRITE_CONFLICT: "Transaction is ongoing for the item"}
RESPONSE_LOST = "ReadTimeout"
INJECTED_MARK = "leasehold_fault_injected"
_SERVER_ERRORS = frozenset(
    {"InternalServerError", "InternalError", "InternalFailure", "ServiceUnavailable"}
)
CRASH_BEFORE = "crash-before"
CRASH_AFTER = "crash-after"
CRASH_EXIT_CODE = 137
"""What a crash rule's process exits with: 128 + SIGKILL, as if it had been killed."""
_RULE = re.compile(
    r"^(?P<service>[a-z0-9-]+)\.(?P<operation>\*|[A-Za-z]+)(?:\[(?P<index>[A-Za-z0-9_.-]+)\])?"
    r":(?P<code>[A-Za-z.]+)"
    r"=(?P<probability>[0-9]*\.?[0-9]+)(?:@(?P<limit>[0-9]+))?$"
)
_CRASH_RULE = re.compile(
    r"^(?P<service>[a-z0-9-]+)\.(?P<operation>\*|[A-Za-z]+):(?P<code>crash-(?:before|after))"
    r"(?:@(?P<nth>[0-9]+))?$"
)


class FaultSpecError(ValueError):
    """A LEASEHOLD_FAULTS value that cannot be read: said in one line, never ignored."""


@dataclass(frozen=True)
class FaultRule:
    service: str
    operation: str
    code: str
    probability: float
    limit: int | None = None
    nth: int | None = None
    """A crash rule's call: the N-th of the operation (None for an error rule)."""
    index: str | None = None
    """An index rule's index (`Query[by_state]`): only requests naming it (None: any)."""

    @property
    def is_crash(self) -> bool:
        return self.code in {CRASH_BEFORE, CRASH_AFTER}

    def applies_to(self, service: str, operation: str, index: str | None = None) -> bool:
        if self.service != service or self.operation not in {"*", operation}:
            return False
        return self.index is None or self.index == index


@dataclass(frozen=True)
class FaultPlan:
    rules: tuple[FaultRule, ...]

    @staticmethod
    def parse(spec: str | None) -> FaultPlan:
        """`service.Operation:Code=p,…` → a plan; an empty spec is no faults."""
        rules: list[FaultRule] = []
        for raw in (spec or "").split(","):
            text = raw.strip()
            if not text:
                continue
            crash = _CRASH_RULE.fullmatch(text)
            if crash:
                nth = int(crash["nth"] or 1)
                if nth < 1:
                    raise FaultSpecError(f"fault rule {text!r}: the call to crash at is @1 or more")
                rules.append(
                    FaultRule(crash["service"], crash["operation"], crash["code"], 1.0, 1, nth)
                )
                continue
            found = _RULE.fullmatch(text)
            if not found:
                raise FaultSpecError(
                    f"fault rule {text!r} is not service.Operation:ErrorCode=probability"
                    " or service.Operation:crash-before|crash-after@N"
                )
            probability = float(found["probability"])
            if not 0.0 <= probability <= 1.0:
                raise FaultSpecError(f"fault rule {text!r}: probability must be within 0..1")
            code = found["code"]
            if code in CANCELLATION_REASONS and found["operation"] not in {
                "TransactWriteItems",
                "*",
            }:
                raise FaultSpecError(
                    f"fault rule {text!r}: {code} is a transaction cancellation reason"
                )
            if code == SINGLE_WRITE_CONFLICT and found["operation"] not in SINGLE_WRITES | {"*"}:
                raise FaultSpecError(
                    f"fault rule {text!r}: {code} answers a single write (PutItem, UpdateItem, "
                    "DeleteItem); a transaction's is the cancellation reason TransactionConflict"
                )
            index = found["index"]
            if index is not None and found["operation"] not in INDEXED_READS:
                raise FaultSpecError(
                    f"fault rule {text!r}: only Query and Scan read an index ([{index}])"
                )
            limit = int(found["limit"]) if found["limit"] else None
            rules.append(
                FaultRule(
                    found["service"], found["operation"], code, probability, limit, index=index
                )
            )
        return FaultPlan(tuple(rules))

    def __bool__(self) -> bool:
        return bool(self.rules)


def exit_process(where: str) -> None:
    """A crash rule's default: die at once, as a kill would (no cleanup, no flush but this)."""
    sys.stderr.write(f"leasehold: injected crash {where}: exiting {CRASH_EXIT_CODE}\n")
    sys.stderr.flush()
    os._exit(CRASH_EXIT_CODE)


class FaultInjector:
    """Registered on one client's event system. Counts what it injected (tests read it).
    `crash(where)` is what a crash rule does (default: exit the process)."""

    def __init__(
        self,
        plan: FaultPlan,
        service: str,
        rng: random.Random | None = None,
        crash: Callable[[str], None] = exit_process,
    ) -> None:
        self._service = service
        self._rng = rng or random.Random()
        self._crash = crash
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._used: dict[FaultRule, int] = {}
        self._calls: dict[str, int] = {}
        self.injected: dict[str, int] = {}
        self._crash_mark = f"leasehold_fault_crash_{id(self)}"  # its own: clients may have two
        self.use(plan)

    def use(self, plan: FaultPlan) -> None:
        """Replace the rules (an empty plan switches injection off); crash rules count the
        calls from now on."""
        with self._lock:
            self._rules = [rule for rule in plan.rules if rule.service == self._service]
            self._used = {}
            self._calls = {}

    def _crash_due(self, operation: str) -> FaultRule | None:
        """Count this call; the crash rule whose call it is, if any (each fires once)."""
        with self._lock:
            due = None
            for key in (operation, "*"):
                self._calls[key] = self._calls.get(key, 0) + 1
            for rule in self._rules:
                if not rule.is_crash or not rule.applies_to(self._service, operation):
                    continue
                if self._used.get(rule) or self._calls[rule.operation] != rule.nth:
                    continue
                if due is None:
                    self._used[rule] = 1
                    self.injected[f"{operation}:{rule.code}"] = 1
                    due = rule
            return due

    def before_call(self, model: Any, context: Any = None, **kwargs: Any) -> None:
        rule = self._crash_due(model.name)
        if rule is None:
            return
        where = f"{rule.code} {self._service}.{model.name} #{rule.nth}"
        if rule.code == CRASH_BEFORE:
            self._crash(where)
        elif context is not None:
            context[self._crash_mark] = where

    def _draw(self, operation: str, index: str | None) -> FaultRule | None:
        with self._lock:
            for rule in self._rules:
                if rule.is_crash or not rule.applies_to(self._service, operation, index):
                    continue
                if rule.limit is not None and self._used.get(rule, 0) >= rule.limit:
                    continue
                if self._rng.random() < rule.probability:
                    self._used[rule] = self._used.get(rule, 0) + 1
                    key = f"{operation}:{rule.code}"
                    self.injected[key] = self.injected.get(key, 0) + 1
                    return rule
        return None

    def before_send(self, request: Any, **kwargs: Any) -> AWSResponse | None:
        # The context lives across botocore's retries of one call: a mark from the last try
        # must not make the mock skip this one.
        request.context.pop(INJECTED_MARK, None)
        operation = _operation_of(request)
        index = _index_of(request) if operation in INDEXED_READS else None
        rule = self._draw(operation, index)
        if rule is None:
            return None
        if rule.code == RESPONSE_LOST:
            request.context["leasehold_fault_response_lost"] = True
            return None
        # The in-process moto mock is a before-send handler too: this mark tells it to leave the
        # request alone (tests/support/atomic.py), as the service would after such an error.
        request.context[INJECTED_MARK] = rule.code
        return _error_response(rule.code, self._service, request, self._rng)

    def after_call(self, http_response: Any, parsed: Any, model: Any, **kwargs: Any) -> None:
        context = kwargs.get("context") or {}
        crash = context.pop(self._crash_mark, None)
        if crash is not None:
            context.pop("leasehold_fault_response_lost", None)
            self._crash(crash)
        if context.pop("leasehold_fault_response_lost", False):
            raise ReadTimeoutError(endpoint_url=f"injected://{self._service}/{model.name}")


def _operation_of(request: Any) -> str:
    target = request.headers.get("X-Amz-Target", b"")
    target = target.decode() if isinstance(target, bytes) else str(target)
    if target:
        return target.rsplit(".", 1)[-1]
    body = request.body or b""
    text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
    found = re.search(r"(?:^|&)Action=([A-Za-z]+)", text)
    return found.group(1) if found else ""


def _index_of(request: Any) -> str | None:
    """The `IndexName` a Query or Scan reads (None: the table itself)."""
    try:
        doc = json.loads(request.body or b"{}")
    except ValueError:
        return None
    name = doc.get("IndexName") if isinstance(doc, dict) else None
    return name if isinstance(name, str) else None


def _error_response(code: str, service: str, request: Any, rng: random.Random) -> AWSResponse:
    prefix = _ERROR_TYPE.get(service, "com.amazonaws.injected#")
    message = f"{_MESSAGES[code]} [injected fault]" if code in _MESSAGES else "injected fault"
    body: dict[str, Any] = {"__type": f"{prefix}{code}", "message": message}
    status = 500 if code in _SERVER_ERRORS else 400
    if code in CANCELLATION_REASONS:
        count = _transact_item_count(request)
        chosen = rng.randrange(count) if count else 0
        body = {
            "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
            "message": f"Transaction cancelled, please refer cancellation reasons for specific "
            f"reasons [injected {code}]",
            "CancellationReasons": [
                {"Code": code, "Message": "injected fault"} if i == chosen else {"Code": "None"}
                for i in range(max(count, 1))
            ],
        }
        status = 400
    headers = {"Content-Type": "application/x-amz-json-1.0"}
    if service == "sqs":  # SQS speaks JSON with query-compatible error codes
        headers["x-amzn-query-error"] = f"{code};{'Receiver' if status >= 500 else 'Sender'}"
    raw = _RawBody(json.dumps(body).encode())
    wire_headers = HTTPHeaders()
    for name, value in headers.items():
        wire_headers[name] = value
    return AWSResponse(request.url, status, wire_headers, raw)


def _transact_item_count(request: Any) -> int:
    try:
        doc = json.loads(request.body or b"{}")
    except ValueError:
        return 1
    return len(doc.get("TransactItems") or []) or 1


class _RawBody:
    """The raw-stream shape AWSResponse reads its content from."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        yield self._data


def install_faults(
    client: Any,
    plan: FaultPlan,
    rng: random.Random | None = None,
    crash: Callable[[str], None] = exit_process,
) -> FaultInjector:
    """Attach the plan's rules for this client's service; returns the injector (its counts).
    `crash`: what a crash rule does (default: exit the process with CRASH_EXIT_CODE)."""
    service = client.meta.service_model.service_name
    injector = FaultInjector(plan, service, rng, crash)
    client.meta.events.register_first(f"before-call.{service}", injector.before_call)
    client.meta.events.register_first(f"before-send.{service}", injector.before_send)
    client.meta.events.register(f"after-call.{service}", injector.after_call)
    return injector
