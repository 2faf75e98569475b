"""`leasehold new` refuses a package name that would shadow a module the project needs (issue 28
item 8): `--package json` made `src/json/`, which the function's runtime and the project's tests
import before the standard library's `json` — every import of it, leasehold's own included, gets
the project's package. The same for a module leasehold or one of its dependencies installs
(boto3, botocore, yaml, pytest, moto, …)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from leasehold_dev.cli import main as leasehold_main
from leasehold_dev.scaffold import Project, ScaffoldError


@pytest.mark.parametrize("package", ["json", "email", "logging", "typing", "asyncio", "html"])
def test_a_package_named_as_a_standard_library_module_is_refused(
    tmp_path: Path, package: str
) -> None:
    with pytest.raises(ScaffoldError, match=rf"'{package}'.*standard library") as refused:
        Project.named(tmp_path / "ok", package=package)
    assert "--package" in str(refused.value)  # it says how to choose another


@pytest.mark.parametrize(
    "package", ["boto3", "botocore", "aws_lambda_powertools", "yaml", "pytest", "moto", "urllib3"]
)
def test_a_package_named_as_a_dependency_is_refused(tmp_path: Path, package: str) -> None:
    with pytest.raises(ScaffoldError, match=rf"'{package}'.*installs"):
        Project.named(tmp_path / "ok", package=package)


def test_a_directory_whose_name_would_shadow_is_refused_unless_a_package_is_given(
    tmp_path: Path,
) -> None:
    with pytest.raises(ScaffoldError, match="standard library"):
        Project.named(tmp_path / "email")  # the package is the slug's: `email`
    assert Project.named(tmp_path / "email", package="email_jobs").package_name == "email_jobs"


def test_the_cli_says_so_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    target = tmp_path / "mine"
    assert leasehold_main(["new", str(target), "--package", "json"]) == 2
    assert "standard library" in capsys.readouterr().err
    assert not target.exists() or not any(target.iterdir())


def test_ordinary_names_are_taken(tmp_path: Path) -> None:
    for package in ("order_jobs", "mine", "jsonish", "email_jobs"):
        assert Project.named(tmp_path / "ok", package=package).package_name == package


def test_what_counts_as_a_dependency_is_what_is_installed_for_a_project() -> None:
    from leasehold_dev.scaffold import dependency_modules

    modules = dependency_modules()
    assert {"boto3", "botocore", "aws_lambda_powertools", "moto", "pytest", "yaml"} <= modules
    assert not modules & {"order_jobs", "mine"}
    assert "json" in sys.stdlib_module_names  # the other list the check uses


def test_the_dependencies_are_read_from_the_distribution_as_it_is_named() -> None:
    """The closure starts at leasehold's distribution, `leasehold-jobs` (not its import name):
    asked for a name nothing installs, it would find no distribution and fall back to the floor,
    letting a package named as a module of the `project` extra's own dependencies through."""
    from importlib import metadata

    from leasehold_dev.scaffold import DEPENDENCY_FLOOR, DISTRIBUTION, dependency_modules

    assert metadata.distribution(DISTRIBUTION).metadata["Name"] == "leasehold-jobs"
    # flask comes with moto[server] (the `project` extra), and is not in the floor
    assert "flask" not in DEPENDENCY_FLOOR
    assert "flask" in dependency_modules()
    with pytest.raises(ScaffoldError, match=r"'flask'.*installs"):
        Project.named(Path("/tmp") / "ok", package="flask")
