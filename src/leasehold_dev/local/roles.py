"""Each function's execution role, read from the *translated* template (what CloudFormation
deploys: SAM's expansions included) and resolved against the resources a local stack or a test
actually created (leasehold.testing.roles resolves; this module translates)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from leasehold.testing.roles import (
    ACCOUNT,
    RoleResolutionError,
    function_roles,
    resource_attributes,
    role_documents,
    role_of,
)
from leasehold_dev.local.template import load_template, translate

_TRANSLATED: dict[tuple[str, str], dict[str, Any]] = {}


def translated_template(path: Path, region: str) -> dict[str, Any]:
    """The template as CloudFormation receives it (aws-sam-translator), once per file version
    and region: translation takes about a second. A copy every time."""
    template = load_template(path)  # cached per file version
    stamp = repr((path.resolve(), path.stat().st_mtime_ns, path.stat().st_size))
    key = (stamp, region)
    if key not in _TRANSLATED:
        _TRANSLATED.clear()
        _TRANSLATED[key] = translate(template, region)
    return copy.deepcopy(_TRANSLATED[key])


__all__ = [
    "ACCOUNT",
    "RoleResolutionError",
    "function_roles",
    "resource_attributes",
    "role_documents",
    "role_of",
    "translated_template",
]
