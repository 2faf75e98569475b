"""`leasehold new` and its cookiecutter template: what it writes is what cookiecutter (and so
`sam init --location`) writes; the project's template.yaml and runtime pins are leasehold's own,
and a test fails when they drift; the project lints clean and refuses bad names."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cookiecutter.main import cookiecutter

from leasehold_dev.cli import main as leasehold_main
from leasehold_dev.local.template import load_template
from leasehold_dev.scaffold import (
    ENGINE_FILES,
    PROJECT_DIR,
    TEMPLATE_DIR,
    Project,
    ScaffoldError,
    drifted,
    engine_files,
    project_template,
    render,
    write_project,
)
from tests.support.resources import ROOT

pytestmark = pytest.mark.integration

PLACEHOLDER = "{{cookiecutter.package_name}}.kinds"
SAM = Path(sys.executable).parent / "sam"


def _tree(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(path.relative_to(directory)): (path.read_bytes(), path.stat().st_mode & 0o777)
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "order-jobs"
    assert (
        leasehold_main(["new", str(directory), "--leasehold", "leasehold-jobs[project]==0.1.0"])
        == 0
    )
    return directory


# ------------------------------------------------------------------ one template, two renderers


def test_leasehold_new_writes_what_cookiecutter_writes(project: Path, tmp_path: Path) -> None:
    values = Project.named(project, leasehold_requirement="leasehold-jobs[project]==0.1.0").values()
    out = tmp_path / "cookiecutter"
    cookiecutter(str(TEMPLATE_DIR), no_input=True, extra_context=values, output_dir=str(out))
    assert _tree(out / "order-jobs") == _tree(project)
    assert (project / "src" / "order_jobs" / "kinds.py").is_file()
    assert "{{" not in "".join(text.decode() for text, _ in _tree(project).values())


def test_cookiecutters_own_defaults_derive_the_package_from_the_slug(tmp_path: Path) -> None:
    # `sam init --location <dir> --no-input` asks cookiecutter for the defaults
    made = Path(cookiecutter(str(TEMPLATE_DIR), no_input=True, output_dir=str(tmp_path)))
    defaults = json.loads((TEMPLATE_DIR / "cookiecutter.json").read_text())
    assert made.name == defaults["project_slug"] == "my-jobs"
    assert (made / "src" / "my_jobs" / "kinds.py").is_file()
    assert "Default: my_jobs.kinds" in (made / "template.yaml").read_text()


def test_sam_init_location_renders_the_same_project(project: Path, tmp_path: Path) -> None:
    out = tmp_path / "sam-init"
    context = {
        "project_slug": "order-jobs",
        "leasehold_requirement": "leasehold-jobs[project]==0.1.0",
    }
    answer = subprocess.run(
        [str(SAM), "init", "--location", str(TEMPLATE_DIR), "--no-input", "--output-dir",
         str(out), "--extra-context", json.dumps(context)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "SAM_CLI_TELEMETRY": "0"},
    )  # fmt: skip
    assert answer.returncode == 0, answer.stdout[-2000:] + answer.stderr[-2000:]
    assert _tree(out / "order-jobs") == _tree(project)


def test_the_template_uses_no_jinja_but_substitutions() -> None:
    for path in PROJECT_DIR.rglob("*"):
        if path.is_file():
            render(path.read_text(), {"project_slug": "a", "package_name": "a",
                                      "leasehold_requirement": "a"})  # fmt: skip
    with pytest.raises(ScaffoldError, match="Jinja"):
        render("{% if x %}", {})
    with pytest.raises(ScaffoldError, match="Jinja"):
        render("{{ cookiecutter.project_slug | upper }}", {"project_slug": "a"})


# ------------------------------------------------------------------ no drift from leasehold's


def test_the_templates_copies_are_leaseholds_own_files() -> None:
    """Fails when template.yaml or src/requirements.txt changes without `make
    scaffold-template`: the scaffold would deploy an engine other than this one."""
    made = engine_files(PLACEHOLDER)
    for name in ENGINE_FILES:
        assert (PROJECT_DIR / name).read_text() == made[name], (
            f"{name} of the scaffold drifted from leasehold's: run `make scaffold-template`"
        )
    requirements = (PROJECT_DIR / "src" / "leasehold-requirements.txt").read_text()
    assert requirements.endswith((ROOT / "src" / "requirements.txt").read_text())


def test_the_project_template_is_leaseholds_but_for_the_kinds_default(project: Path) -> None:
    engine = load_template(ROOT / "template.yaml")
    mine = load_template(project / "template.yaml")
    assert mine["Parameters"]["Kinds"]["Default"] == "order_jobs.kinds"
    mine["Parameters"]["Kinds"]["Default"] = engine["Parameters"]["Kinds"]["Default"]
    assert mine == engine
    assert (project / "template.yaml").read_text().startswith("# Generated by `leasehold template`")


def test_a_projects_drift_check_sees_an_edit_and_template_write_mends_it(project: Path) -> None:
    assert drifted(project, "order_jobs.kinds") == []
    assert leasehold_main(["template", "--kinds", "order_jobs.kinds", "--check", str(project)]) == 0
    path = project / "template.yaml"
    path.write_text(path.read_text().replace("Default: 60", "Default: 61", 1))
    assert drifted(project, "order_jobs.kinds") == ["template.yaml"]
    assert leasehold_main(["template", "--kinds", "order_jobs.kinds", "--check", str(project)]) == 1
    assert leasehold_main(["template", "--kinds", "order_jobs.kinds", "--write", str(project)]) == 0
    assert drifted(project, "order_jobs.kinds") == []


def test_a_template_of_another_engine_is_drift(project: Path) -> None:
    changed = project_template(
        (ROOT / "template.yaml").read_text().replace("Default: 60", "Default: 61", 1),
        "order_jobs.kinds",
    )
    (project / "template.yaml").write_text(changed)
    assert drifted(project, "order_jobs.kinds") == ["template.yaml"]


# ------------------------------------------------------------------ the project as written


def test_the_project_lints_clean(project: Path) -> None:
    ruff = Path(sys.executable).parent / "ruff"
    for command in (["check", "--no-cache", "."], ["format", "--check", "--no-cache", "."]):
        answer = subprocess.run(
            [str(ruff), *command], cwd=project, capture_output=True, text=True, check=False
        )
        assert answer.returncode == 0, answer.stdout + answer.stderr


def test_the_project_holds_what_a_project_needs(project: Path) -> None:
    files = set(_tree(project))
    assert {
        "README.md", "Makefile", "pyproject.toml", "samconfig.toml", "template.yaml",
        "src/Makefile", "src/requirements.txt", "src/leasehold-requirements.txt",
        "src/order_jobs/__init__.py", "src/order_jobs/kinds.py", "tests/conftest.py",
        "tests/test_kinds.py", "tests/test_template.py", "events/api-submit-greet.json",
    } <= files  # fmt: skip
    makefile = (project / "Makefile").read_text()
    assert "LEASEHOLD ?= leasehold-jobs[project]==0.1.0" in makefile
    assert 'stack_name = "order-jobs"' in (project / "samconfig.toml").read_text()
    readme = (project / "README.md").read_text()
    assert "make test" in readme and "make up" in readme and "sam deploy --guided" in readme


def test_new_refuses_bad_names_and_a_directory_in_the_way(tmp_path: Path) -> None:
    for name in ("Bad_Name", "1jobs", "x" * 64):
        with pytest.raises(ScaffoldError, match="directory name"):
            Project.named(tmp_path / name)
    for package in ("class", "leasehold_mine", "not-an-identifier"):
        with pytest.raises(ScaffoldError, match="package name"):
            Project.named(tmp_path / "ok", package=package)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    with pytest.raises(ScaffoldError, match="not an empty directory"):
        write_project(busy, Project.named(busy))
    assert leasehold_main(["new", str(busy)]) == 2
    assert [p.name for p in busy.iterdir()] == ["keep.txt"]


def test_leasehold_comes_from_this_checkout_by_default(tmp_path: Path) -> None:
    project = Project.named(tmp_path / "mine")
    assert project.leasehold_requirement == f"leasehold-jobs[project] @ {ROOT.as_uri()}"


def test_installed_without_the_checkout_it_serves_the_copies_it_carries(tmp_path: Path) -> None:
    """Installed from a wheel there is no template.yaml beside the code: the copies the wheel
    carries are what `leasehold template` and `leasehold new` use."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "src" / "leasehold", site / "leasehold")
    shutil.copytree(ROOT / "src" / "leasehold_dev", site / "leasehold_dev")
    shutil.copytree(ROOT / "src" / "leasehold_apps", site / "leasehold_apps")
    code = (
        "import json, leasehold_dev.scaffold as s;"
        "print(json.dumps([s.default_requirement(), s.engine_files('x.kinds')]))"
    )
    answer = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(site)},
    )  # fmt: skip
    requirement, files = json.loads(answer.stdout)
    assert requirement == "leasehold-jobs[project]==0.1.0"
    assert files == engine_files("x.kinds")
