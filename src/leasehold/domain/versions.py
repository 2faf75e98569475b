"""Kind versions (decisions KV1–KV6): which step list a job's checkpoint belongs to.

A job records, when it is accepted, one short digest per planned step (`StepList`, stored as
`d1.d2.…` on the job item, decision KV1). Its *fingerprint* is a digest of that list: two lists
with the same steps in the same order have the same fingerprint, whatever the code inside the
steps. A resumed job compares what it recorded with what its kind plans now: the finished steps
(and the step it holds something of) must be the same, or it never runs on (decision KV2)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

DIGEST_CHARS = 8
"""Hex characters per step digest (32 bits: a changed step passes unseen once in 4 billion)."""
FINGERPRINT_CHARS = 12
_FINGERPRINT = re.compile(r"^[0-9a-f]{12}$")
_DIGEST = re.compile(r"^[0-9a-f]{8}$")


def step_digest(name: str, approval: bool, effect: str | None) -> str:
    """A step's identity: its name, whether it asks approval, and what effect it has (`intent`
    for a bare one, `provider/capability` for an `Effect`, None) — not its cost, timeout or
    code, which a deploy may change under a running job."""
    text = json.dumps([name, bool(approval), effect], separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def is_fingerprint(value: object) -> bool:
    return isinstance(value, str) and bool(_FINGERPRINT.fullmatch(value))


@dataclass(frozen=True)
class StepList:
    """The digests of a job's planned steps, in order."""

    digests: tuple[str, ...]

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.encode().encode()).hexdigest()[:FINGERPRINT_CHARS]

    def encode(self) -> str:
        return ".".join(self.digests)

    @staticmethod
    def decode(text: str) -> StepList | None:
        """The list as stored; None for a value that is not one (then nothing is known)."""
        digests = tuple(text.split(".")) if text else ()
        if not digests or not all(_DIGEST.fullmatch(digest) for digest in digests):
            return None
        return StepList(digests)

    def first_difference(self, other: StepList, upto: int) -> int | None:
        """The first index below `upto` where the two lists differ (a step missing from one of
        them differs), or None when their first `upto` steps are the same."""
        for index in range(upto):
            mine = self.digests[index] if index < len(self.digests) else None
            theirs = other.digests[index] if index < len(other.digests) else None
            if mine != theirs:
                return index
        return None


__all__ = ["StepList", "is_fingerprint", "step_digest"]
