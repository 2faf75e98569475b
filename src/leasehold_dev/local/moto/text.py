"""DynamoDB refuses what is not Unicode text; moto stores it.

A string holding a lone UTF-16 surrogate (`"\\ud800"`) is valid JSON syntax — botocore sends it
as an escape — but no UTF-8 encoder can write it, and DynamoDB answers such a request with a
400 instead of storing it. moto 5.2.5 parses the escape into a Python string and stores it; the
embedded stack's journal then cannot write the record (`UnicodeEncodeError`), so a write moto
acknowledged in memory never reached the disk: the store stopped answering, and a restart took
back a state the caller had been shown (issue: a `failed` job back to `queued`).

`install()` wraps moto's `DynamoHandler.call_action`: a request any of whose strings (a value,
a key, an attribute name, an expression) holds a lone surrogate is answered `400
ValidationException` before moto reads or writes anything — in process (the tests) and in the
embedded server alike. The engine never sends one (leasehold.domain.storable); this makes the
fixture refuse, as the service does, what a bug might still send.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from leasehold_dev.local.moto.transactions import require_pinned_moto

_saved: dict[str, Callable[..., Any]] = {}
MESSAGE = "One or more parameter values were invalid: a string is not valid UTF-8 text"


def lone_surrogate_in(value: Any) -> bool:
    """Whether any string in `value` (keys included) holds a lone surrogate."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def call_action(self: Any) -> Any:
    if lone_surrogate_in(getattr(self, "params", None)):
        body = json.dumps(
            {"__type": "com.amazonaws.dynamodb.v20120810#ValidationException", "message": MESSAGE}
        )
        return 400, {"Content-Type": "application/x-amz-json-1.0", "status": 400}, body
    return _saved["moto"](self)


def installed() -> bool:
    return "moto" in _saved  # not an identity check: another patch may wrap this one


def install() -> None:
    """Refuse non-text strings in every DynamoDB request of this process. Idempotent. Raises
    MotoVersionError, changing nothing, on any moto but the pinned release."""
    require_pinned_moto("text", "DynamoHandler.call_action")
    if installed():
        return
    from moto.dynamodb.responses import DynamoHandler

    _saved["moto"] = DynamoHandler.call_action
    DynamoHandler.call_action = call_action  # type: ignore[method-assign]


def uninstall() -> None:
    if not installed():
        return
    from moto.dynamodb.responses import DynamoHandler

    DynamoHandler.call_action = _saved.pop("moto")  # type: ignore[method-assign]
