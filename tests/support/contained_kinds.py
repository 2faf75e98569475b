"""Kinds whose own code and data misbehave (tests/integration/test_contained.py): loaded by the
testbed and, as `LEASEHOLD_KINDS` module, by the real API handler."""

from __future__ import annotations

from typing import Any

from leasehold import Effect, FatalError, Kind, SettingError, StepContext
from leasehold.domain.job import Owner

runs: dict[str, int] = {}
OUTPUTS: dict[str, Any] = {}
SURROGATE = "bad \ud800 text"

plain = Kind("plain", schema={"type": "object"})
effect = Kind("effectful", schema={"type": "object"})
keyed = Kind("keyed", schema={"type": "object"})
raising_view = Kind("raising_view", schema={"type": "object"})
checked = Kind("checked", schema={"type": "object"})
garbage_view = Kind("garbage_view", schema={"type": "object"})


@plain.step()
def plain_step(ctx: StepContext, payload: dict[str, Any]) -> Any:
    runs["plain"] = runs.get("plain", 0) + 1
    if payload.get("fail"):
        raise FatalError(SURROGATE, code="bad\udc00code")
    return OUTPUTS[payload["output"]]


@effect.step(effect=Effect("prov", capability="none"))
def effect_step(ctx: StepContext, payload: dict[str, Any]) -> Any:
    runs["effect"] = runs.get("effect", 0) + 1
    return OUTPUTS[payload["output"]]


@keyed.step(effect=Effect("prov", capability="idempotent_key"))
def keyed_step(ctx: StepContext, payload: dict[str, Any]) -> Any:
    runs["keyed"] = runs.get("keyed", 0) + 1
    return OUTPUTS[payload["output"]]


@raising_view.step()
def view_step(ctx: StepContext, payload: dict[str, Any]) -> Any:
    if payload.get("fail"):
        raise FatalError("asked to fail")
    return {"ok": True}


@raising_view.view
def broken_view(job: Any) -> dict[str, Any]:
    raise RuntimeError("the view's own bug")


@garbage_view.step()
def garbage_step(ctx: StepContext, payload: dict[str, Any]) -> Any:
    return {"ok": True}


@garbage_view.view
def garbage(job: Any) -> Any:
    return {"when": object()}


@checked.step()
def checked_step(ctx: StepContext, payload: dict[str, Any]) -> Any:
    return {}


CHECK_RAISES: list[bool] = [False]
"""Set to make `checked`'s check raise for every payload (a deploy that broke it)."""


@checked.check
def needs_name(payload: dict[str, Any], owner: Owner) -> None:
    payload["name"]  # a KeyError when the field is missing: the check's own bug
    if payload["name"] == "unset":  # a leasehold error with no answer of its own: a bug too
        raise SettingError("CHECKED_ENDPOINT is not set")
    if CHECK_RAISES[0]:
        raise RuntimeError("the check broke")


KINDS = [plain, effect, keyed, raising_view, garbage_view, checked]
OUTPUTS.update(
    {
        "float": {"price": 12.5, "ratio": 1e-7},
        "big": {"n": 10**400},
        "int_keys": {1: "one"},
        "surrogate": {"name": SURROGATE},
        "fine": {"name": "ok", "n": 10**37},
    }
)
