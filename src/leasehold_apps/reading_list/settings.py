"""The reading list's settings, read from the function's environment with `leasehold.setting`:
checked at cold start (`at_cold_start`: a required one that is missing or malformed stops the
function with a `SettingError` naming it, never a silent default) and read again where a kind or
a route needs them. The template sets each for every function;
the local stack sets `TITLE_FETCHER=fixture` and `LEASEHOLD_LOCAL_PROVIDERS`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from leasehold import SettingError, at_cold_start, setting
from leasehold_apps.reading_list.titles import FETCHER_NAMES

CAPABILITIES = ("idempotent_key", "status_lookup", "none")

ENV_VARIABLES = ("TITLE_FETCHER", "ENRICHMENT_PROVIDER_URL", "ENRICHMENT_PROVIDER_CAPABILITY")
"""What the reading list reads, set by the template for every function."""

LOCAL_ENV_VARIABLES = ("LEASEHOLD_LOCAL_PROVIDERS",)
"""Read when set, never set by the template: the local stack's own providers."""


def title_fetcher() -> str:
    """TITLE_FETCHER: `live` (deployed) or `fixture` (local stack: no network)."""
    name = setting("TITLE_FETCHER")
    if name not in FETCHER_NAMES:
        raise SettingError(f"TITLE_FETCHER={name!r} must be 'live' or 'fixture'")
    return name


@dataclass(frozen=True)
class ProviderSettings:
    """The billable enrichment provider (docs/architecture.md "External effects")."""

    url: str
    """ENRICHMENT_PROVIDER_URL: empty = enrich requests are refused (400)."""
    capability: str
    """ENRICHMENT_PROVIDER_CAPABILITY: what it can say after a lost answer."""
    local: dict[str, str] = field(default_factory=dict)
    """LEASEHOLD_LOCAL_PROVIDERS: the local stack's own providers by mode (idempotent, lookup,
    none); a request may pick one and ask it for a fault. Never set when deployed."""


def provider_settings() -> ProviderSettings:
    capability = setting("ENRICHMENT_PROVIDER_CAPABILITY")
    if capability not in CAPABILITIES:
        raise SettingError(
            f"ENRICHMENT_PROVIDER_CAPABILITY={capability!r} must be one of "
            f"{', '.join(CAPABILITIES)}"
        )
    local = setting("LEASEHOLD_LOCAL_PROVIDERS", "")
    try:
        providers = json.loads(local) if local else {}
    except ValueError as exc:
        raise SettingError("LEASEHOLD_LOCAL_PROVIDERS is not JSON {mode: url}") from exc
    return ProviderSettings(setting("ENRICHMENT_PROVIDER_URL", ""), capability, providers)


@at_cold_start
def check() -> None:
    """Read every setting now: a SettingError names the first one missing or malformed."""
    title_fetcher()
    provider_settings()
