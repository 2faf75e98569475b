"""Each function's `sam build` is the engine, the applications and the runtime dependencies,
nothing else (src/Makefile, docs/decisions.md P1).

One real `sam build` of template.yaml into a temporary directory (a few seconds: sam runs
src/Makefile's build-<LogicalId> per function, in parallel), then, in every function's build:
what is there, what is not, and that every handler imports - and the runtime with the
configured kinds builds - with nothing but that build and the standard library on the path.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripts.build_sizes import (
    ROOT,
    find_python313,
    functions,
    import_from_build,
    sam_build,
    sam_executable,
)

FUNCTIONS = functions()
HANDLER_MODULES = sorted({handler.rsplit(".", 1)[0] for handler in FUNCTIONS.values()})

# Never in a function's build: the development stack (where it is today and where it goes),
# test helpers, and what only they need.
NOT_DEPLOYED = re.compile(
    r"^(leasehold_dev|leasehold/(local|demo|testing)|leasehold/cli[^/]*\.py|leasehold/smoke\.py"
    r"|moto|werkzeug|pytest|_pytest|hypothesis|samtranslator|flask|yaml|docker)(/|$|\.|-)"
)


def _requirements() -> dict[str, str]:
    """Distribution name (as its .dist-info spells it) -> pinned version, from requirements.txt."""
    pins = {}
    for raw in (ROOT / "src" / "requirements.txt").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[re.sub(r"[-.]+", "_", name).lower()] = version
    return pins


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if shutil.which("make") is None or sam_executable() is None:
        pytest.skip("sam build needs make and sam (pip install -e '.[dev]')")
    build_dir = tmp_path_factory.mktemp("sam") / "build"
    sam_build(ROOT / "template.yaml", build_dir, find_python313())
    yield build_dir


def _files(directory: Path) -> list[str]:
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())


def test_every_function_is_built(build: Path) -> None:
    assert sorted(p.name for p in build.iterdir() if p.is_dir()) == sorted(FUNCTIONS)


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_the_build_is_the_engine_the_applications_and_the_dependencies(
    build: Path, function: str
) -> None:
    files = set(_files(build / function))
    for module in HANDLER_MODULES:
        assert module.replace(".", "/") + ".py" in files
    assert {"leasehold/__init__.py", "leasehold_apps/__init__.py"} <= files
    applications = {
        p.relative_to(ROOT / "src").as_posix()
        for p in (ROOT / "src" / "leasehold_apps").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert applications <= files, sorted(applications - files)
    dist_infos = {f.split("/", 1)[0] for f in files if ".dist-info/" in f}
    for name, version in _requirements().items():
        assert f"{name}-{version}.dist-info" in {d.lower() for d in dist_infos}, name


def test_the_api_build_serves_the_console_from_its_own_files(build: Path) -> None:
    # The console's page, script and style sheet ship inside the package (no CDN): the API
    # function's build must hold them, byte for byte, and serve them from there
    from leasehold import console

    shipped = build / "ApiFunction" / "leasehold" / "console" / "static"
    for name in console.ASSETS:
        assert (shipped / name).read_text(encoding="utf-8") == console.asset(name), name
    python = find_python313() or sys.executable
    # Only the build and the standard library on the path (-I: no site-packages, no env;
    # -B: no __pycache__ left in the build, which the next test forbids)
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); from leasehold import console; "
        "print(console.asset('console.js').__len__())"
    )
    served = subprocess.run(
        [python, "-I", "-B", "-c", probe, str(build / "ApiFunction")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(served.stdout) == len(console.asset("console.js") or "")


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_the_build_holds_nothing_of_the_development_stack(build: Path, function: str) -> None:
    files = _files(build / function)
    assert [f for f in files if NOT_DEPLOYED.match(f)] == []
    assert [f for f in files if "__pycache__" in f or f.endswith(".pyc")] == []
    assert "Makefile" not in files


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_every_handler_imports_from_the_build_alone(build: Path, function: str) -> None:
    python = find_python313() or sys.executable
    probe = import_from_build(build / function, HANDLER_MODULES, python, runtime=True)
    assert probe["outside"] == []


def test_the_deny_list_matches_what_it_names() -> None:
    for path in [
        "leasehold_dev/__init__.py",
        "leasehold/local/stack.py",
        "leasehold/demo/main.py",
        "leasehold/testing/__init__.py",
        "leasehold/cli.py",
        "leasehold/cli_ops.py",
        "leasehold/smoke.py",
        "moto/__init__.py",
        "moto-5.2.5.dist-info/METADATA",
        "werkzeug/serving.py",
        "_pytest/main.py",
        "hypothesis/core.py",
        "samtranslator/__init__.py",
    ]:
        assert NOT_DEPLOYED.match(path), path
    for path in [
        "leasehold/handlers/worker.py",
        "leasehold/sdk/loading.py",
        "leasehold_apps/synthetic.py",
        "botocore/data/dynamodb/2012-08-10/service-2.json.gz",
        "aws_lambda_powertools/__init__.py",
        "yamlish/x.py",
    ]:
        assert not NOT_DEPLOYED.match(path), path
