"""leasehold as someone else gets it: the wheel built from this checkout, installed with the
`project` extra into a fresh venv, `leasehold new` run from that venv (so the project comes from
the files the wheel carries, not from this checkout), and the new project's tests run against
the installed engine. It fails when the wheel misses a file an installed engine or the scaffold
reads (the console's static files, the cookiecutter tree, py.typed).

Bounded: the wheel is built once, and the dependencies are installed with this venv's versions
as constraints from a wheelhouse kept between runs (`~/.cache/leasehold/wheelhouse`, or
`$XDG_CACHE_HOME/leasehold/wheelhouse`), filled from the package index only by the first run
(pip's own HTTP cache does not keep the index's files on every machine), without compiling them
(`--no-compile`: a third of the time). About 1.5 minutes with a filled wheelhouse on a busy
2-core machine; the first run also downloads a hundred wheels (about 3 more minutes). So the
install is a `long` test (make test-long); make test checks what the wheel carries."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

import pytest

from leasehold_dev.scaffold import DISTRIBUTION, Project, write_project
from tests.support.resources import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

PACKAGES = ("leasehold", "leasehold_apps", "leasehold_dev")
_NOT_SHIPPED = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
WHEELHOUSE = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "leasehold" / "wheelhouse"
)


def _environment() -> dict[str, str]:
    """This process's environment without what would point a command at this checkout or steer
    it (PYTHONPATH, a pytest-xdist worker's variables, a stack state file, an outer make's
    flags, this venv on PATH)."""
    bin_dir = str(Path(sys.executable).parent)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "LEASEHOLD_", "MAKE", "VIRTUAL_ENV"))
        and key not in {"MFLAGS", "PYTHONPATH", "PYTHONHOME"}
    }
    env["PATH"] = os.pathsep.join(
        part for part in env.get("PATH", "").split(os.pathsep) if part != bin_dir
    )
    return env | {"PYTHONUNBUFFERED": "1"}


def _run(command: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=_environment(), capture_output=True, text=True, timeout=timeout,
        check=False,
    )  # fmt: skip


def _ok(answer: subprocess.CompletedProcess[str]) -> str:
    assert answer.returncode == 0, (
        f"{' '.join(answer.args)}\n{answer.stdout[-3000:]}\n{answer.stderr[-3000:]}"
    )
    return answer.stdout


def build_wheel(out: Path) -> Path:
    """The wheel of this checkout's working tree, built from a copy of it (setuptools' build/
    directory in the checkout would keep files a previous build had), its build backend
    installed from the wheelhouse."""
    source = out / "source"
    source.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "src",
        source / "src",
        ignore=lambda _, names: [
            name for name in names if name in _NOT_SHIPPED or name.endswith((".egg-info", ".pyc"))
        ],
    )
    build = [
        *(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index"),
        *("--find-links", str(WHEELHOUSE), "-w", str(out / "dist"), str(source)),
    ]
    if _run(build, cwd=out, timeout=300).returncode != 0:
        # pyproject's [build-system] requirements into the wheelhouse, once
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
        download = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary", ":all:"]
        _ok(_run([*download, "-d", str(WHEELHOUSE), *_build_requirements()], cwd=out, timeout=300))
        _ok(_run(build, cwd=out, timeout=300))
    (wheel,) = (out / "dist").glob("leasehold_jobs-*.whl")
    return wheel


def _build_requirements() -> list[str]:
    return list(tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"])


def shipped_source_files() -> set[str]:
    """Every file of the three packages in this checkout (modules and data alike), as a path in
    the wheel: an installed leasehold reads each of them."""
    return {
        str(path.relative_to(ROOT / "src"))
        for package in PACKAGES
        for path in (ROOT / "src" / package).rglob("*")
        if path.is_file() and not _NOT_SHIPPED & set(path.parts) and path.suffix != ".pyc"
    }


def install_fresh(venv: Path, requirement: str, work: Path) -> None:
    """A new venv holding `requirement`, its dependencies at this venv's versions, installed
    from the wheelhouse; the wheelhouse is filled from the index first when it lacks one."""
    _ok(_run([sys.executable, "-m", "venv", str(venv)], cwd=work, timeout=120))
    frozen = _ok(
        _run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], cwd=work, timeout=120)
    )
    constraints = work / "constraints.txt"
    constraints.write_text(
        "".join(
            f"{line}\n"
            for line in frozen.splitlines()
            if line and not line.startswith(("-e", "#")) and "leasehold" not in line.lower()
        )
    )
    install = [
        *(str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-compile"),
        *("--no-index", "--find-links", str(WHEELHOUSE), "--constraint", str(constraints)),
        requirement,
    ]
    if _run(install, cwd=work, timeout=600).returncode != 0:
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
        fill = [sys.executable, "-m", "pip", "wheel", "--quiet", "-w", str(WHEELHOUSE)]
        fill += ["--find-links", str(WHEELHOUSE), "--constraint", str(constraints), requirement]
        _ok(_run(fill, cwd=work, timeout=1200))
        for own in WHEELHOUSE.glob("leasehold_jobs-*.whl"):
            own.unlink()  # the checkout's wheel is built afresh by every run
        _ok(_run(install, cwd=work, timeout=600))


def _tree(directory: Path) -> dict[str, str]:
    return {
        str(path.relative_to(directory)): path.read_text()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built once for the module's tests."""
    return build_wheel(tmp_path_factory.mktemp("build"))


def test_the_wheel_carries_every_file_of_the_packages_under_the_new_name(wheel: Path) -> None:
    """What the wheel carries: every module and data file of the packages, py.typed and the
    console's and the scaffold's files among them, and nothing from elsewhere (in make test: a
    file the wheel lacks fails here in seconds; the install below is make test-long's)."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {"leasehold/py.typed", "leasehold/console/static/index.html"} <= names
    missing = shipped_source_files() - names
    assert not missing, f"the wheel lacks {sorted(missing)}"
    dist_info = "-".join(wheel.name.split("-")[:2]) + ".dist-info"  # leasehold_jobs-0.1.0
    assert {name.split("/")[0] for name in names} == {*PACKAGES, dist_info}
    with zipfile.ZipFile(wheel) as archive:
        assert f"Name: {DISTRIBUTION}\n" in archive.read(f"{dist_info}/METADATA").decode()


@pytest.mark.long
def test_the_wheel_installs_scaffolds_a_project_and_its_tests_pass(
    wheel: Path, tmp_path: Path
) -> None:
    timings: dict[str, float] = {}
    mark = time.monotonic()
    venv = tmp_path / "venv"
    requirement = f"{DISTRIBUTION}[project] @ {wheel.as_uri()}"
    install_fresh(venv, requirement, tmp_path)
    timings["install"] = time.monotonic() - mark
    python = str(venv / "bin" / "python")
    # The venv's leasehold is the wheel's, not this checkout's, and it reads its own files
    where = _ok(
        _run(
            [
                python,
                "-c",
                "import leasehold, leasehold_dev.scaffold as s, leasehold.console as c;"
                "assert c.asset('index.html') and c.asset('console.js');"
                "print(leasehold.__file__, s.TEMPLATE_DIR, s.default_requirement(), sep='\\n')",
            ],
            cwd=tmp_path,
            timeout=60,
        )  # fmt: skip
    ).splitlines()
    site = venv.resolve() / "lib"
    assert all(Path(line).is_relative_to(site) for line in where[:2]), where
    assert where[2] == f"{DISTRIBUTION}[project]==0.1.0"

    # `leasehold new` from the installed wheel writes what this checkout's scaffold writes
    mark = time.monotonic()
    project = tmp_path / "greeter"
    said = _ok(
        _run(
            [str(venv / "bin" / "leasehold"), "new", str(project), "--leasehold", requirement],
            cwd=tmp_path,
            timeout=120,
        )  # fmt: skip
    )
    assert requirement in said
    expected = tmp_path / "expected" / "greeter"
    write_project(expected, Project("greeter", "greeter", requirement))
    assert _tree(project) == _tree(expected)

    # and the project's own tests pass against that venv's engine
    answer = _run(
        ["make", "--no-print-directory", "test", f"LEASEHOLD_VENV={venv}"], cwd=project,
        timeout=600,
    )  # fmt: skip
    timings["project"] = time.monotonic() - mark
    assert answer.returncode == 0, answer.stdout[-3000:] + answer.stderr[-3000:]
    assert re.search(r"\b10 passed\b", answer.stdout), answer.stdout[-2000:]
    print(
        "wheel install: " + ", ".join(f"{step} {took:.0f} s" for step, took in timings.items()),
        file=sys.stderr,
    )
