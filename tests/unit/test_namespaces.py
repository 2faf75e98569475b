"""One namespace per audience (docs/sdk.md, "Namespaces"): each namespace's `__all__` is pinned
here, name by name, so a name cannot join or leave a public surface unnoticed; every name is
documented in docs/sdk.md; and a name that left `leasehold` still answers there for one release,
with a DeprecationWarning naming its new home."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import leasehold

ROOT = Path(__file__).resolve().parents[2]
SDK_DOC = ROOT / "docs" / "sdk.md"

PUBLIC_NAMES = {
    "leasehold": [
        "Budget",
        "Checkpoint",
        "ChildView",
        "Debounce",
        "Effect",
        "FatalError",
        "Finished",
        "HandBackError",
        "JobInfo",
        "JobOptions",
        "Kind",
        "KindDefinitionError",
        "KindLoadError",
        "LeaseholdError",
        "Limit",
        "Migration",
        "Operation",
        "Outcome",
        "Owner",
        "Rate",
        "RelatedChange",
        "RetryableError",
        "Schedule",
        "SettingError",
        "SignalTimeoutError",
        "SignalWait",
        "Step",
        "StepContext",
        "StepInterruptedError",
        "StepLogger",
        "StopJobError",
        "Submission",
        "Unique",
        "ValidationError",
        "at_cold_start",
        "int_setting",
        "setting",
    ],
    "leasehold.client": [
        "ApiError",
        "Client",
        "JobHandle",
        "LoginSession",
        "MfaRequired",
        "Reply",
        "WaitTimeout",
    ],
    "leasehold.apps": [
        "ConditionFailed",
        "ConflictError",
        "Engine",
        "NewJob",
        "NewJobs",
        "NotFoundError",
        "Routes",
        "StoreUnavailableError",
        "Submitted",
        "Table",
        "idempotency",
        "iso_time",
        "items",
        "job_states",
        "job_view",
        "job_writes",
        "job_writes_many",
        "pages",
        "respond",
        "step_operation",
        "submit_direct",
        "submit_direct_many",
        "transact_closing_job",
    ],
    "leasehold.testing": [
        "Answer",
        "CrashPlan",
        "DEFAULT_OWNER",
        "Definitions",
        "Delivery",
        "KindsSpec",
        "LeaseholdTestbed",
        "NotIdleError",
        "OPERATOR",
        "PACKAGED",
        "RunReport",
        "TemplateError",
        "TestbedSettings",
        "WorkerCrashed",
    ],
}


@pytest.mark.parametrize("namespace", sorted(PUBLIC_NAMES))
def test_each_namespace_exports_exactly_its_pinned_names(namespace: str) -> None:
    module = importlib.import_module(namespace)
    assert module.__all__ == sorted(module.__all__), f"{namespace}.__all__ is not sorted"
    assert module.__all__ == PUBLIC_NAMES[namespace]
    for name in module.__all__:
        assert hasattr(module, name), f"{namespace}.{name} is listed but missing"


def test_a_public_name_lives_in_one_namespace() -> None:
    """An audience finds a name in its own namespace, and only there: no name is exported twice
    under two homes (which one would the docs name?)."""
    seen: dict[str, str] = {}
    for namespace, names in PUBLIC_NAMES.items():
        for name in names:
            assert name not in seen, f"{name} is in both {seen[name]} and {namespace}"
            seen[name] = namespace


def documented_names(text: str) -> set[str]:
    """The names docs/sdk.md shows in inline code: `` `Client` ``, `` `Client(base_url, …)` ``,
    `` `leasehold.apps.job_writes` ``, `` `Engine.current()` `` — each part of the dotted name a
    code span starts with."""
    return {
        part
        for match in re.finditer(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)", text)
        for part in match.group(1).split(".")
    }


@pytest.mark.parametrize("namespace", sorted(PUBLIC_NAMES))
def test_every_public_name_is_documented_in_the_sdk_reference(namespace: str) -> None:
    shown = documented_names(SDK_DOC.read_text())
    missing = [name for name in PUBLIC_NAMES[namespace] if name not in shown]
    assert not missing, f"docs/sdk.md does not show these {namespace} names: {missing}"


@pytest.mark.parametrize("namespace", sorted(PUBLIC_NAMES))
def test_every_public_name_has_a_docstring(namespace: str) -> None:
    module = importlib.import_module(namespace)
    for name in module.__all__:
        value = getattr(module, name)
        if isinstance(value, str):  # a constant (DEFAULT_OWNER is an Owner; PACKAGED a str)
            continue
        assert (value.__doc__ or "").strip(), f"{namespace}.{name} has no docstring"


@pytest.mark.parametrize("name", sorted(leasehold.MOVED))
def test_a_moved_name_still_answers_in_leasehold_with_a_warning_naming_its_home(
    name: str,
) -> None:
    home = leasehold.MOVED[name]
    assert name in PUBLIC_NAMES[home], f"{name} moved to {home}, which does not export it"
    assert name not in leasehold.__all__
    with pytest.warns(DeprecationWarning, match=rf"import it from {re.escape(home)}\b"):
        value = getattr(leasehold, name)
    assert value is getattr(importlib.import_module(home), name)


def test_an_unknown_name_is_an_attribute_error_not_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no attribute 'Nope'"):
            leasehold.Nope  # noqa: B018


def test_every_name_leasehold_exported_before_still_resolves() -> None:
    """The 53 names of the last release: each is public in `leasehold` or answers there through
    its deprecated alias — nothing a user imported disappears without a warning first."""
    before = {
        "ApiError",
        "Checkpoint",
        "Client",
        "ConditionFailed",
        "ConflictError",
        "Effect",
        "Engine",
        "FatalError",
        "Finished",
        "HandBackError",
        "JobHandle",
        "JobInfo",
        "Kind",
        "KindDefinitionError",
        "KindLoadError",
        "LeaseholdError",
        "Limit",
        "Migration",
        "NewJob",
        "NotFoundError",
        "Operation",
        "Outcome",
        "Owner",
        "Rate",
        "RelatedChange",
        "Reply",
        "RetryableError",
        "Routes",
        "Schedule",
        "SettingError",
        "Step",
        "StepContext",
        "StepInterruptedError",
        "StepLogger",
        "StopJobError",
        "StoreUnavailableError",
        "Submitted",
        "Table",
        "ValidationError",
        "WaitTimeout",
        "at_cold_start",
        "idempotency",
        "int_setting",
        "iso_time",
        "items",
        "job_states",
        "job_writes",
        "pages",
        "respond",
        "setting",
        "step_operation",
        "submit_direct",
        "transact_closing_job",
    }
    assert len(before) == 53
    # new in this release: the one options type (decision OW1), a job request for the batches
    added = {"Budget", "JobOptions", "Submission"}
    added |= {"ChildView", "SignalTimeoutError", "SignalWait"}  # workflows (DESIGN §19)
    added |= {"Debounce"}  # debounce (DESIGN §21, decisions DB1-DB6)
    added |= {"Unique"}  # unique jobs (DESIGN §21, decision UQ1)
    assert before | added == set(leasehold.__all__) | set(leasehold.MOVED)


def test_importing_leasehold_loads_neither_the_client_nor_the_application_toolkit() -> None:
    """A handler's cold start imports `leasehold`; the kind authors' namespace must not drag in
    the HTTP client or the application toolkit (and through it the store and the services)."""
    probe = (
        "import sys, leasehold\n"
        "loaded = [m for m in ('leasehold.client', 'leasehold.apps', 'leasehold.sdk.apps')"
        " if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
