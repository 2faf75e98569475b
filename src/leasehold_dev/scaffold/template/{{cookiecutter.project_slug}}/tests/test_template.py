"""template.yaml and src/leasehold-requirements.txt are leasehold's own, made by
`leasehold template`: this fails when they drift from the leasehold installed (after an
upgrade, or an edit by hand). `make template` rewrites them."""

from __future__ import annotations

from pathlib import Path

from leasehold_dev.scaffold import drifted

PROJECT = Path(__file__).resolve().parents[1]


def test_the_generated_files_are_the_installed_leaseholds() -> None:
    assert drifted(PROJECT, "{{cookiecutter.package_name}}.kinds") == [], (
        "generated from another leasehold, or edited: run `make template`"
    )


def test_every_function_is_built_with_the_project_and_the_engine() -> None:
    template = (PROJECT / "template.yaml").read_text()
    makefile = (PROJECT / "src" / "Makefile").read_text()
    assert "CodeUri: src/" in template and "BuildMethod: makefile" in template
    assert "build-%:" in makefile and "PACKAGES := {{cookiecutter.package_name}}" in makefile
    assert "Default: {{cookiecutter.package_name}}.kinds" in template
