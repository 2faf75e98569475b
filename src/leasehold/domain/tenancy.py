"""What one tenant may take from the others (decisions Q1–Q3): who may ask for high
priority, how many schedules one owner may keep, and how many jobs a tenant may submit a second.
Set per deployment (template parameters `HighPriorityTenants`, `SchedulesPerOwner`,
`TenantSubmitRate`); an engine built without them (a testbed, a library user) allows everything."""

from __future__ import annotations

import re
from dataclasses import dataclass

from leasehold.domain.errors import PriorityNotAllowedError, ValidationError
from leasehold.domain.job import Owner

ALL_TENANTS = "*"
_TENANT_LIST = re.compile(r"^[^,\s*]+(,[^,\s*]+)*$")
"""The template's AllowedPattern for HighPriorityTenants says the same (a test holds them to it)."""
MAX_SCHEDULES_PER_OWNER = 10_000
MAX_SUBMIT_RATE = 1000
"""Submissions a second one tenant may make at most: one counter item takes them all, and a
DynamoDB partition takes 1,000 writes a second."""


def parse_tenant_list(text: str) -> frozenset[str] | None:
    """`HighPriorityTenants`: `*` (every tenant: None), empty (none but operators) or tenant ids
    separated by commas (no spaces: a tenant id is matched exactly)."""
    text = text.strip()
    if text == ALL_TENANTS:
        return None
    if not text:
        return frozenset()
    if not _TENANT_LIST.fullmatch(text):
        raise ValidationError(
            f"tenant list {text[:80]!r} must be '*', empty, or tenant ids separated by commas"
        )
    return frozenset(text.split(","))


@dataclass(frozen=True)
class TenantPolicy:
    """A deployment's limits between tenants.

    - `high_priority_tenants`: the tenants whose callers may ask for `priority: high` (None:
      every tenant). Operators always may, and so may any caller of a kind whose own default is
      high: the deployer chose it, not the caller.
    - `schedules_per_owner`: active schedules one caller (tenant and user) may keep; 0: no limit.
      Schedules a kind declares are the deployer's and are not counted.
    - `submit_rate`: jobs a tenant may submit a second through `POST /jobs`; 0: no limit (and
      no counter write per job)."""

    high_priority_tenants: frozenset[str] | None = None
    schedules_per_owner: int = 0
    submit_rate: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.schedules_per_owner <= MAX_SCHEDULES_PER_OWNER:
            raise ValidationError(
                f"schedules per owner must be within 0..{MAX_SCHEDULES_PER_OWNER}"
            )
        if not 0 <= self.submit_rate <= MAX_SUBMIT_RATE:
            raise ValidationError(f"a tenant's submit rate must be within 0..{MAX_SUBMIT_RATE}")

    def check_priority(self, owner: Owner, asked: str | None, kind_default: str | None) -> None:
        """PriorityNotAllowedError when `owner` asked for high priority that its tenant is not
        given (asking for the kind's own default is asking for nothing)."""
        if asked != "high" or kind_default == "high" or owner.is_operator:
            return
        allowed = self.high_priority_tenants
        if allowed is None or owner.tenant in allowed:
            return
        raise PriorityNotAllowedError(
            f"tenant {owner.tenant[:80]!r} may not ask for priority high in this deployment "
            "(its operators list the tenants that may: the HighPriorityTenants parameter); "
            "submit at normal or low priority"
        )
