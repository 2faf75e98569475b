"""The small records the engine keeps on a job item, typed (STYLE item 19): what a worker writes
before an external effect (`EffectIntent`), the operation ledger's entries (`LedgerEntry`), one
line of the job's history (`HistoryEntry`) and what a queued job waits for (`WaitingFor`). They are
stored as they are (DynamoDB maps), so each is a `TypedDict`: the item's shape, named."""

from __future__ import annotations

from typing import Any, TypedDict


class EffectIntent(TypedDict, total=False):
    """The open external effect of a running job (docs/architecture.md "External effects"): while
    it is on the item, nothing
    but its own step's completion removes it, and an expired lease makes the job `unknown`."""

    operation_id: str
    """`<job id>:<step index>`: stable across attempts, workers and replays."""
    idempotency_key: str
    provider: str
    """An SDK `Effect`'s provider (absent for a bare `effect=True` intent)."""
    capability: str
    """How the outcome can be learnt afterwards (`idempotent_key`, `status_lookup`, `none`)."""
    step: int
    started_at: int


class LedgerEntry(TypedDict, total=False):
    """One operation of the job's ledger (docs/architecture.md "External effects"): `submitted`
    before the provider is called,
    then `confirmed` (with the receipt), `failed` (with the error) or `released`."""

    provider: str
    key: str
    fingerprint: str
    capability: str
    state: str
    step: int
    submitted_at: int
    settled_at: int
    receipt: dict[str, Any]
    """The provider's receipt (its JSON, as the step or the provider gave it)."""
    reconciled: bool
    returned: str
    """How a confirmed step's output is read back from the receipt (`receipt` or `value`)."""
    output: Any
    """The output of a step that confirmed its own operation (a JSON value)."""
    error: dict[str, str]


class HistoryEntry(TypedDict, total=False):
    """One line of a job's history (store/history.py keeps the last of them on the item), in
    its short stored names: `ev` the event, `t` when, `s` the state it went to, then who and
    why."""

    ev: str
    t: int
    s: str
    a: int
    e: int
    w: str
    st: int
    r: str
    by: str
    n: str
    op: str


class ApprovalRequest(TypedDict):
    """What a job paused before a step waits for (`waiting_approval`): that step's approval."""

    step: int
    step_name: str
    requested_at: int


class Resolution(TypedDict, total=False):
    """An operator's resolution of an `unknown` job: what they found the effect came to."""

    outcome: str
    """`succeeded` or `failed`."""
    by: str
    at: int
    note: str
    receipt: str
    """What the operator found at the provider (their words or its reference)."""
    operation_id: str
    """The operation the job was `unknown` over."""


class WaitingFor(TypedDict, total=False):
    """What a queued job waits for, for the job view (its claim clears it): a concurrency
    limit's key (`tenant:acme`) or a rate's."""

    concurrency: str
    rate: str
    paused: dict[str, str]
    """Its kind is paused: since when (ISO) and by whom (decision PA2)."""


__all__ = [
    "ApprovalRequest",
    "EffectIntent",
    "HistoryEntry",
    "LedgerEntry",
    "Resolution",
    "WaitingFor",
]
