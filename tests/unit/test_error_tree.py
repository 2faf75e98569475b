"""One error tree (docs/sdk.md, "Errors"): every public exception of the four namespaces derives
from `LeaseholdError`, and `LeaseholdError`'s docstring draws that tree — every public exception
once, under its own parent, in the namespace that exports it, with the HTTP status and code the
API and the client give it."""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass

import pytest

from leasehold import LeaseholdError
from leasehold.client.errors import ERROR_BY_STATUS
from leasehold.handlers.api import STATUS_BY_ERROR

NAMESPACES = {
    "": "leasehold",
    "apps": "leasehold.apps",
    "client": "leasehold.client",
    "testing": "leasehold.testing",
}
BULLETS = "*x+-·"  # one per depth, as httpx's _exceptions.py draws its tree
LINE = re.compile(r"^(?P<indent> *)(?P<bullet>\S) (?P<name>[A-Z][\w.]*)\s+(?P<rest>.*)$")
TAG = re.compile(r"^\[(?P<tag>\w+)\]\s*")


@dataclass(frozen=True)
class Drawn:
    name: str
    namespace: str
    parent: str | None
    note: str


def public_exceptions() -> dict[str, tuple[str, type[BaseException]]]:
    """Every exception class a user can reach by name: the exception classes in each
    namespace's `__all__`, and the exception classes they carry as attributes
    (`ApiError.NotFound`), keyed by that name."""
    found: dict[str, tuple[str, type[BaseException]]] = {}
    for namespace in NAMESPACES.values():
        module = importlib.import_module(namespace)
        for name in module.__all__:
            value = getattr(module, name)
            if not (isinstance(value, type) and issubclass(value, BaseException)):
                continue
            found[name] = (namespace, value)
            for attribute, member in vars(value).items():
                if isinstance(member, type) and issubclass(member, BaseException):
                    found[f"{name}.{attribute}"] = (namespace, member)
    return found


def drawing() -> tuple[list[Drawn], str]:
    """The tree LeaseholdError's docstring draws, and its "Outside the tree" paragraph."""
    doc = inspect.cleandoc(LeaseholdError.__doc__ or "")
    drawn: list[Drawn] = []
    parents: list[str] = []
    for line in doc.splitlines():
        match = LINE.match(line)
        if not match or match.group("bullet") not in BULLETS:
            continue
        depth, remainder = divmod(len(match.group("indent")), 2)
        assert remainder == 0 and depth <= len(parents), f"misdrawn: {line!r}"
        assert match.group("bullet") == BULLETS[depth], f"wrong bullet for its depth: {line!r}"
        del parents[depth:]
        tag = TAG.match(match.group("rest"))
        drawn.append(
            Drawn(
                name=match.group("name"),
                namespace=NAMESPACES[tag.group("tag") if tag else ""],
                parent=parents[-1] if parents else None,
                note=match.group("rest")[tag.end() if tag else 0 :],
            )
        )
        parents.append(match.group("name"))
    outside = doc[doc.index("Outside the tree") :].split("\n\n")[0]
    return drawn, outside


def test_every_public_exception_derives_from_leasehold_error() -> None:
    _, outside = drawing()
    for name, (namespace, cls) in public_exceptions().items():
        if issubclass(cls, Exception):
            assert issubclass(cls, LeaseholdError), f"{namespace}.{name} is outside the tree"
        else:  # a BaseException on purpose (a process dying): named as outside, and why
            assert f"`{name}`" in outside, f"{namespace}.{name} is not drawn as outside"


def test_the_docstring_draws_every_public_exception_once_under_its_own_parent() -> None:
    drawn, _ = drawing()
    public = {n: v for n, v in public_exceptions().items() if issubclass(v[1], Exception)}
    names = [d.name for d in drawn]
    assert len(names) == len(set(names)), "a class is drawn twice"
    assert sorted(names) == sorted(public), "the drawing and the public exceptions differ"
    assert drawn[0].name == "LeaseholdError" and drawn[0].parent is None
    for entry in drawn:
        namespace, cls = public[entry.name]
        assert entry.namespace == namespace, f"{entry.name} is drawn in {entry.namespace}"
        if entry.parent is not None:
            parent = public[entry.parent][1]
            assert issubclass(cls, parent), f"{entry.name} is not a {entry.parent}"
            assert cls is not parent


def status_the_api_gives(cls: type[BaseException]) -> int | None:
    return next((status for error, status in STATUS_BY_ERROR if issubclass(cls, error)), None)


@pytest.mark.parametrize("entry", drawing()[0], ids=lambda entry: entry.name)
def test_each_drawn_status_and_code_is_what_the_error_carries(entry: Drawn) -> None:
    cls = public_exceptions()[entry.name][1]
    status = re.match(r"(\d{3})\b", entry.note)
    code = re.search(r"`([a-z_]+)`", entry.note)
    if entry.namespace == "leasehold.client":  # a status is the answer's; a code per instance
        if status:
            assert issubclass(cls, ERROR_BY_STATUS[int(status.group(1))])
        return
    if status:
        assert status_the_api_gives(cls) == int(status.group(1)), entry.name
    else:
        assert entry.name == "LeaseholdError" or status_the_api_gives(cls) is None, entry.name
    if code:
        assert getattr(cls, "code", None) == code.group(1), entry.name
