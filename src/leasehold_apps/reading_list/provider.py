"""The client of the billable enrichment provider (docs/architecture.md "External effects"), used
by the worker's `enrich` step.

A call here may charge money, so every failure says which of three things happened on the wire:

- `ProviderUnavailable`: nothing was sent (the connection was refused or never opened). Safe to
  call again with the same key.
- `ProviderRejected`: the provider answered with a definite failure and charged nothing (a 4xx,
  or its 500 / 501, which the provider's contract defines as "nothing done").
- `ProviderOutcomeUnknown`: the request left this process and no usable answer came back (the
  connection dropped after sending, a read timeout, a 502/503/504 from a gateway, a malformed
  body). The charge may or may not exist; only a lookup, a repeat under an idempotent key, or an
  operator can settle it. This client never retries on its own (`retries=False`): whether to call
  again is the engine's decision, made from the provider's declared capability.

urllib3 (already on the Lambda path through botocore) does the HTTP; no other dependency.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal
from urllib.parse import quote, urlsplit

import urllib3
from urllib3.exceptions import ConnectTimeoutError, HTTPError, NewConnectionError

from leasehold import LeaseholdError

MAX_ANSWER_BYTES = 64 * 1024  # an answer larger than this is not one this provider sends
FAULTS = ("lose_response", "fail", "slow")
_KEY = re.compile(r"[A-Za-z0-9._:-]{1,200}")
_RECEIPT = re.compile(r"[A-Za-z0-9_.:-]{1,200}")


def is_valid_provider_key(key: object) -> bool:
    """The provider key rule, shared by this client and the local provider: 1–200 characters of
    `A-Za-z0-9._:-` — safe in a header and in a URL path segment, and wide enough for an
    operation id such as `<job_id>:<step>:<source_version>`."""
    return isinstance(key, str) and _KEY.fullmatch(key) is not None


class Capability(StrEnum):
    """What a provider can tell us after a lost answer (docs/architecture.md "External effects").
    Decides recovery:
    IDEMPOTENT_KEY → call again with the same key; STATUS_LOOKUP → look the key up first;
    NONE → an operator decides."""

    IDEMPOTENT_KEY = "idempotent_key"
    STATUS_LOOKUP = "status_lookup"
    NONE = "none"

    @property
    def provider_mode(self) -> str:
        """The name the provider service uses for this capability (`--capability`)."""
        return _MODE_BY_CAPABILITY[self]

    @property
    def can_lookup(self) -> bool:
        """Whether `GET /v1/enrichments/{key}` is part of the provider's contract."""
        return self is not Capability.NONE

    @classmethod
    def parse(cls, value: str) -> Capability:
        """Accepts either spelling — the provider's mode (`idempotent`, `lookup`, `none`) or the
        design's capability name — so a template parameter may use either. Anything else raises
        ValueError naming the accepted values."""
        for capability, mode in _MODE_BY_CAPABILITY.items():
            if value in (capability.value, mode):
                return capability
        accepted = sorted({*_MODE_BY_CAPABILITY.values(), *(c.value for c in cls)})
        raise ValueError(f"unknown provider capability {value!r}; expected one of {accepted}")


# The one place the provider's mode names meet the design's capability names.
_MODE_BY_CAPABILITY: dict[Capability, str] = {
    Capability.IDEMPOTENT_KEY: "idempotent",
    Capability.STATUS_LOOKUP: "lookup",
    Capability.NONE: "none",
}
PROVIDER_MODES: tuple[str, ...] = tuple(_MODE_BY_CAPABILITY.values())


@dataclass(frozen=True)
class Receipt:
    """The provider's proof of one charged enrichment, with the work it returned."""

    key: str
    receipt: str
    summary: str
    tags: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "receipt": self.receipt,
            "summary": self.summary,
            "tags": [*self.tags],
        }


@dataclass(frozen=True)
class LookupResult:
    """What the provider knows about a key: `succeeded` carries the receipt of the first success;
    `not_found` means the provider has no record of the key (nothing was charged under it)."""

    status: Literal["not_found", "succeeded", "failed"]
    receipt: Receipt | None = None


class ProviderError(LeaseholdError):
    """Root of the provider client's errors. `http_status` and `provider_code` are set when the
    provider answered (the status line and its JSON `error` field)."""

    code = "provider_error"

    def __init__(
        self, message: str, *, http_status: int | None = None, provider_code: str | None = None
    ) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.provider_code = provider_code


class ProviderRejected(ProviderError):  # noqa: N818 (names fixed by the engine's contract)
    """A definite failure: the provider (or this client, before sending) refused the request and
    nothing was charged. Whether to try again is the engine's call."""

    code = "provider_rejected"


class LookupNotSupported(ProviderRejected):
    """A lookup asked of a provider whose capability has none (checked before sending, or the
    provider's 501): a configuration mistake, never a `not_found`."""

    code = "lookup_not_supported"


class ProviderOutcomeUnknown(ProviderError):  # noqa: N818 (names fixed by the engine's contract)
    """The request was sent and may have been processed, but no usable answer came back."""

    code = "provider_outcome_unknown"


class ProviderUnavailable(ProviderError):  # noqa: N818 (names fixed by the engine's contract)
    """Nothing was sent: the connection could not be opened. Safe to retry with the same key."""

    code = "provider_unavailable"


class EnrichmentProvider:
    """One provider endpoint and its declared capability. Thread-safe (urllib3's pool is)."""

    def __init__(
        self,
        base_url: str,
        capability: Capability,
        *,
        timeout_s: float = 5.0,
        http: urllib3.PoolManager | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"provider URL must be http(s)://host[:port], got {base_url!r}")
        if parts.query or parts.fragment:
            raise ValueError(f"provider URL must not carry a query or fragment: {base_url!r}")
        if not 0 < timeout_s <= 300:
            raise ValueError(f"timeout_s must be in (0, 300], got {timeout_s}")
        self.base_url = base_url.rstrip("/")
        self.capability = Capability(capability)
        self._timeout = urllib3.Timeout(connect=timeout_s, read=timeout_s)
        self._http = http or urllib3.PoolManager(num_pools=2, maxsize=4, retries=False)

    def submit(
        self, key: str, *, url: str, text: str | None = None, fault: str | None = None
    ) -> Receipt:
        """Ask for one enrichment under `key` (the provider key of one operation: a retry of the
        same operation passes the same key). Returns the receipt, or raises one of the three
        ProviderError kinds above. `fault` asks the local provider to misbehave (tests, demo)."""
        if not is_valid_provider_key(key):
            raise ProviderRejected(f"invalid provider key {key!r}: 1-200 of A-Za-z0-9._:-")
        if fault is not None and fault not in FAULTS:
            raise ProviderRejected(f"unknown fault {fault!r}; expected one of {list(FAULTS)}")
        body: dict[str, str] = {"url": url}
        if text is not None:
            body["text"] = text
        headers = {"Content-Type": "application/json", "Idempotency-Key": key}
        if fault is not None:
            headers["X-Fault"] = fault
        status, answer = self._exchange("POST", "/v1/enrichments", headers, json.dumps(body))
        if 200 <= status < 300:
            return _receipt_from(answer, key, status)
        raise _error_for_status(status, answer, "enrichment")

    def lookup(self, key: str) -> LookupResult:
        """What the provider recorded under `key`. Has no effect, so every error it raises is safe
        to retry; `not_found` is reported only when the provider says exactly that (a bare 404
        from a wrong URL is a ProviderRejected, never a reason to charge again)."""
        if not self.capability.can_lookup:
            raise LookupNotSupported(
                f"provider capability {self.capability.value!r} has no status lookup"
            )
        if not is_valid_provider_key(key):
            raise ProviderRejected(f"invalid provider key {key!r}: 1-200 of A-Za-z0-9._:-")
        path = "/v1/enrichments/" + quote(key, safe="")
        status, answer = self._exchange("GET", path, {"Accept": "application/json"}, None)
        if status == 200:
            if isinstance(answer, dict) and answer.get("status") == "failed":
                return LookupResult("failed")
            return LookupResult("succeeded", _receipt_from(answer, key, status))
        if status == 404 and isinstance(answer, dict) and answer.get("status") == "not_found":
            return LookupResult("not_found")
        raise _error_for_status(status, answer, "lookup")

    def _exchange(
        self, method: str, path: str, headers: dict[str, str], body: str | None
    ) -> tuple[int, Any]:
        """One request, no retries. Returns (status, parsed JSON or None when the body is not
        JSON). Failures before the request could leave → ProviderUnavailable; after → unknown."""
        try:
            response = self._http.request(
                method,
                self.base_url + path,
                body=body.encode() if body is not None else None,
                headers=headers,
                timeout=self._timeout,
                retries=False,
                redirect=False,
                preload_content=False,
            )
        except (NewConnectionError, ConnectTimeoutError) as exc:
            # Raised only while opening the connection (NameResolutionError is a
            # NewConnectionError): no byte of the request was written.
            raise ProviderUnavailable(f"provider not reachable at {self.base_url}: {exc}") from exc
        except HTTPError as exc:
            # ProtocolError (dropped mid-exchange), ReadTimeoutError, …: the request was written,
            # or may have been, so the provider may have acted on it.
            raise ProviderOutcomeUnknown(f"{method} {path}: no answer ({exc})") from exc
        try:
            raw = response.read(MAX_ANSWER_BYTES + 1)
        except HTTPError as exc:
            raise ProviderOutcomeUnknown(f"{method} {path}: answer cut off ({exc})") from exc
        finally:
            response.release_conn()
        if len(raw) > MAX_ANSWER_BYTES:
            raise ProviderOutcomeUnknown(f"{method} {path}: answer larger than {MAX_ANSWER_BYTES}")
        try:
            return response.status, json.loads(raw) if raw else None
        except ValueError:
            return response.status, None


def _receipt_from(answer: Any, key: str, status: int) -> Receipt:
    """A success must name our key, say `succeeded` and carry a well-formed receipt; anything
    else after a possible charge is an unknown outcome, not a crash."""
    problem = _receipt_problem(answer, key)
    if problem:
        raise ProviderOutcomeUnknown(f"malformed provider answer ({problem})", http_status=status)
    return Receipt(
        key=answer["key"],
        receipt=answer["receipt"],
        summary=answer["summary"],
        tags=list(answer["tags"]),
    )


def _receipt_problem(answer: Any, key: str) -> str | None:
    if not isinstance(answer, dict):
        return "not a JSON object"
    if answer.get("key") != key:
        return f"key {answer.get('key')!r} is not the key sent"
    if answer.get("status") != "succeeded":
        return f"status {answer.get('status')!r}"
    receipt = answer.get("receipt")
    if not isinstance(receipt, str) or not _RECEIPT.fullmatch(receipt):
        return "no valid receipt"
    if not isinstance(answer.get("summary"), str):
        return "summary is not a string"
    tags = answer.get("tags")
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        return "tags is not a list of strings"
    return None


def _error_for_status(status: int, answer: Any, what: str) -> ProviderError:
    """The provider's status codes → the client's error kinds, in one table. 500 and 501 are
    definite ("nothing done") by the provider's contract; 502/503/504 and anything unexpected
    (3xx, other 5xx) may sit in front of a request that went through, so they are unknown."""
    code = answer.get("error") if isinstance(answer, dict) else None
    provider_code = code if isinstance(code, str) else None
    message = f"{what}: provider answered {status}" + (f" {provider_code}" if provider_code else "")
    if status == 501 and what == "lookup":
        return LookupNotSupported(message, http_status=status, provider_code=provider_code)
    if 400 <= status < 500 or status in (500, 501):
        return ProviderRejected(message, http_status=status, provider_code=provider_code)
    return ProviderOutcomeUnknown(message, http_status=status, provider_code=provider_code)
