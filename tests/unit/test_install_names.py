"""No documented install can fetch the other project: leasehold's distribution is
`leasehold-jobs`, and `leasehold` on PyPI is an unrelated project's (docs/decisions.md PK1). Every
`pip install` and every requirement in README.md, docs/ and the files `leasehold new` writes
names `leasehold-jobs`, never plain `leasehold`."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from leasehold_dev.scaffold import TEMPLATE_DIR
from tests.support.resources import ROOT

pytestmark = pytest.mark.unit

_NAME = r"(?<![\w./-])leasehold(?![\w-])"
"""`leasehold` as a whole name: not `leasehold-jobs`, `leasehold_dev`, `src/leasehold`,
`leasehold.testing` or `/path/to/leasehold`."""
_REQUIREMENT = re.compile(
    _NAME + r"(?:\s*\[[^\]]*\])?\s*(?:===|==|>=|<=|~=|!=|<|>|@\s)"  # a version or a URL
    r"|" + _NAME + r"\["  # extras: only a requirement has them
)
_INSTALL = re.compile(
    r"\b(?:pip3?|pipx|uv\s+pip|python3?\s+-m\s+pip)\s+(?:install|download)\b([^`\n]*)"
    r"|\b(?:uv|poetry)\s+add\b([^`\n]*)"
)
_BARE = re.compile(r"^leasehold(?:\[[^\]]*\])?(?:[=<>~!].*)?$")
"""An install argument that asks an index for plain `leasehold`."""
_REQUIREMENT_LINE = re.compile(r"^\s*leasehold\s*(?:\[[^\]]*\])?\s*(?:[=<>~!;@#]|$)")
"""A line of a requirements file naming plain `leasehold`."""


def offending(text: str, *, requirements_file: bool = False) -> list[str]:
    """The lines of `text` whose install command or requirement names plain `leasehold`."""
    found = []
    for line in text.splitlines():
        arguments = [
            argument.strip("'\"")
            for match in _INSTALL.finditer(line)
            for argument in _split(match.group(1) or match.group(2) or "")
        ]
        if (
            _REQUIREMENT.search(line)
            or any(_BARE.match(argument) for argument in arguments)
            or (requirements_file and _REQUIREMENT_LINE.match(line))
        ):
            found.append(line.strip())
    return found


def _split(arguments: str) -> list[str]:
    try:
        return shlex.split(arguments)
    except ValueError:  # an unbalanced quote in prose: split on spaces
        return arguments.split()


def documented_files() -> list[Path]:
    """README.md, every Markdown file under docs/, and every file of `leasehold new`'s template."""
    scaffold = [path for path in sorted(TEMPLATE_DIR.rglob("*")) if path.is_file()]
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *scaffold]


@pytest.mark.parametrize(
    "text",
    [
        "pip install leasehold",
        "python -m pip install -U 'leasehold[project]'",
        "pipx install leasehold==0.1.0",
        "uv add leasehold",
        "LEASEHOLD ?= leasehold[project]==0.1.0",
        "`leasehold[project] @ file:///path/to/leasehold`",
        "install `leasehold>=0.1` from the index",
    ],
)
def test_a_line_that_fetches_plain_leasehold_is_found(text: str) -> None:
    assert offending(text) == [text.strip()]


@pytest.mark.parametrize(
    "text",
    [
        "pip install 'leasehold-jobs[project]==0.1.0'",
        "LEASEHOLD ?= leasehold-jobs[project] @ file:///path/to/leasehold",
        "pip wheel --no-deps /path/to/leasehold",
        "pip install -e '.[dev]'",
        "leasehold new greeter && leasehold local up",
        "from leasehold import Client; import leasehold.testing",
        "-r leasehold-requirements.txt",
        "cp -R $(LEASEHOLD_PACKAGE) $(ARTIFACTS_DIR)/leasehold",
    ],
)
def test_a_line_that_names_leasehold_otherwise_is_not(text: str) -> None:
    assert offending(text) == []


def test_a_requirements_file_naming_plain_leasehold_is_found() -> None:
    assert offending("boto3==1.0\nleasehold\n", requirements_file=True) == ["leasehold"]
    assert offending("leasehold-jobs\n-r other.txt\n", requirements_file=True) == []


def test_no_documented_install_names_plain_leasehold() -> None:
    files = documented_files()
    assert ROOT / "README.md" in files
    assert TEMPLATE_DIR / "cookiecutter.json" in files
    assert any(path.name == "Makefile" for path in files)
    problems = {
        str(path.relative_to(ROOT)): lines
        for path in files
        if (
            lines := offending(
                path.read_text(encoding="utf-8"),
                requirements_file=path.name.endswith("requirements.txt"),
            )
        )
    }
    assert problems == {}, (
        "these install plain `leasehold` (another project on PyPI); name `leasehold-jobs`"
    )
