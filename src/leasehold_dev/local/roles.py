"""Each function's execution role, read from the *translated* template (what CloudFormation
deploys: SAM's expansions included) and resolved against the resources a local stack or a test
actually created (leasehold.testing.roles resolves; this module translates)."""

from __future__ import annotations

from collections.abc import Mapping
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
from leasehold_dev.local.template import TemplateError, load_template, translate

_TRANSLATED: dict[tuple[str, str], dict[str, Any]] = {}


def shared_translated_template(path: Path, region: str) -> Mapping[str, Any]:
    """The template as CloudFormation receives it (aws-sam-translator), once per file version
    and region: translation takes about a second. The cached translation itself, not a copy:
    its readers never change it (resolving the roles reads it; `role_documents` copies before
    an `edit`). A deep copy cost 0.05 s, paid by every test that made its resources."""
    if not path.is_file():
        raise TemplateError(f"template not found: {path}")
    stat = path.stat()
    key = (repr((path.resolve(), stat.st_mtime_ns, stat.st_size)), region)
    if key not in _TRANSLATED:
        translated = translate(load_template(path), region)  # load_template: a copy, parsed once
        _TRANSLATED.clear()
        _TRANSLATED[key] = translated
    return _TRANSLATED[key]


__all__ = [
    "ACCOUNT",
    "RoleResolutionError",
    "function_roles",
    "resource_attributes",
    "role_documents",
    "role_of",
    "shared_translated_template",
]
