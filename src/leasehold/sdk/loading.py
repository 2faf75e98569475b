"""Kinds found through configuration: `LEASEHOLD_KINDS` names importable modules
(comma-separated); every `Kind` and every `Routes` at module level of each is registered. It
runs once per cold start, and anything wrong stops the function with a message that names the
module or the kind — there is never a silent default."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field

from leasehold.domain.errors import LeaseholdError
from leasehold.sdk.config import checks_registered, cold_start_checks, note_brought
from leasehold.sdk.engine_kind import EngineKind
from leasehold.sdk.kind import Kind
from leasehold.sdk.routes import Routes

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class KindLoadError(LeaseholdError, RuntimeError):
    """`LEASEHOLD_KINDS` cannot be honoured: a module that does not import, defines no kind, a
    name taken twice, a kind with no steps, a step longer than the deployment allows."""


@dataclass(frozen=True)
class Loaded:
    """What `LEASEHOLD_KINDS` registered: the kinds by name (as the engine runs them), and the
    routes to mount on the API function."""

    kinds: dict[str, EngineKind] = field(default_factory=dict)
    routes: tuple[Routes, ...] = ()
    modules: tuple[str, ...] = ()


def module_names(spec: str) -> list[str]:
    """The module names in a `LEASEHOLD_KINDS` value (blank entries ignored)."""
    names = [part.strip() for part in spec.split(",") if part.strip()]
    for name in names:
        if not _MODULE.match(name):
            raise KindLoadError(f"LEASEHOLD_KINDS: {name!r} is not a Python module name")
    return list(dict.fromkeys(names))


def load_kinds(
    spec: str, *, max_step_seconds: float | None = None, start_checks: bool = True
) -> Loaded:
    """Import every module named in `spec` and register its module-level `Kind`s and
    `Routes`, then run the modules' `at_cold_start` checks (`start_checks`; off only for
    tests that set no application settings). `max_step_seconds`: the deployment's longest
    step; a declared step longer than it could never start, so it is refused here."""
    names = module_names(spec)
    if not names:
        raise KindLoadError("LEASEHOLD_KINDS names no module: at least one kind is needed")
    kinds: dict[str, EngineKind] = {}
    where: dict[str, str] = {}
    routes: list[Routes] = []
    for module_name in names:
        before = checks_registered()
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise KindLoadError(
                f"LEASEHOLD_KINDS: module {module_name!r} cannot be imported: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        note_brought(module_name, before)
        found = [value for value in vars(module).values() if isinstance(value, Kind)]
        routes.extend(
            value
            for value in vars(module).values()
            if isinstance(value, Routes) and value not in routes
        )
        if not found:
            raise KindLoadError(f"LEASEHOLD_KINDS: module {module_name!r} defines no Kind")
        for kind in found:
            if kind.name in kinds:
                if kinds[kind.name].kind is kind:
                    continue  # one object re-exported by a second module
                raise KindLoadError(
                    f"LEASEHOLD_KINDS: kind {kind.name!r} is defined twice "
                    f"(in {where[kind.name]!r} and {module_name!r})"
                )
            if not kind.has_steps:
                raise KindLoadError(
                    f"LEASEHOLD_KINDS: kind {kind.name!r} (module {module_name!r}) has no steps"
                )
            if max_step_seconds is not None:
                for step in kind.steps:
                    if step.timeout_seconds > max_step_seconds:
                        raise KindLoadError(
                            f"LEASEHOLD_KINDS: kind {kind.name!r} step {step.name!r} may run "
                            f"{step.timeout_seconds:g} s, over MAX_STEP_SECONDS "
                            f"({max_step_seconds:g})"
                        )
            kinds[kind.name] = EngineKind(
                kind,
                max_step_ms=None if max_step_seconds is None else int(max_step_seconds * 1000),
            )
            where[kind.name] = module_name
    if start_checks:
        seen: set[int] = set()
        for module_name in names:
            for check in cold_start_checks(module_name):
                if id(check) in seen:
                    continue
                seen.add(id(check))
                try:
                    check()
                except Exception as exc:
                    raise KindLoadError(
                        f"LEASEHOLD_KINDS: module {module_name!r} refused to start: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
    return Loaded(kinds=kinds, routes=tuple(routes), modules=tuple(names))


__all__ = ["KindLoadError", "Loaded", "load_kinds", "module_names"]
