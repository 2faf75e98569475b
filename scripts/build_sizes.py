"""What `sam build` puts in each function, before and after src/Makefile (docs/decisions.md P1).

Builds template.yaml twice with the real `sam build`, in temporary directories:

- before: the template without its `BuildMethod: makefile` Metadata lines, so sam's own
  python3.13 builder copies the whole of src/ and installs src/requirements.txt (what every
  function got until the Makefile);
- after: the template as it is (src/Makefile: the engine, the applications, the dependencies).

and prints, per function, the files and bytes of its build (and of its zip, as deployed), then
the worker's cold import: `import leasehold.handlers.worker` in a fresh python3.13 whose only
path besides the standard library is the function's build (`-I -S`), with no bytecode written
(`-B`: the build ships none and Lambda's /var/task is read-only, so every cold start compiles
the sources, as here). The median of --runs runs of each, before and after alternating.

    python scripts/build_sizes.py [--runs 9]

Needs sam (the dev install), make, and a python3.13 (pyenv's or on PATH) for the before build.
tests/integration/test_build_contents.py uses the same functions to build and inspect.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
# Each function's Metadata holds BuildMethod and its checkov skips; removing this line leaves
# the skips, and sam's python builder.
MAKEFILE_METADATA = "      BuildMethod: makefile\n"


class _CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags (!Ref, !Sub...) read as plain values."""


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)  # type: ignore[arg-type]


_CfnLoader.add_multi_constructor("!", _any_tag)


def functions(template: Path = TEMPLATE) -> dict[str, str]:
    """Logical id -> handler of every AWS::Serverless::Function in the template."""
    doc = yaml.load(template.read_text(), Loader=_CfnLoader)  # noqa: S506 (SafeLoader subclass)
    return {
        name: resource["Properties"]["Handler"]
        for name, resource in doc["Resources"].items()
        if resource.get("Type") == "AWS::Serverless::Function"
    }


def find_python313() -> str | None:
    """A working python3.13 (what `make build` looks for): pyenv's, else one on PATH."""
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates = sorted(glob.glob(f"{root}/versions/3.13*/bin/python3.13"))
    on_path = shutil.which("python3.13")
    if on_path:
        candidates.append(on_path)
    for candidate in candidates:
        probe = subprocess.run(
            [candidate, "-c", "import sys; sys.exit(sys.version_info[:2] != (3, 13))"],
            capture_output=True,
            check=False,
        )
        if probe.returncode == 0:
            return candidate
    return None


def sam_executable() -> str | None:
    beside = Path(sys.executable).with_name("sam")
    return str(beside) if beside.exists() else shutil.which("sam")


def sam_build(
    template: Path, build_dir: Path, python: str | None = None, base_dir: Path = ROOT
) -> None:
    """`sam build` of template (its CodeUri relative to base_dir) into build_dir, its cache
    beside it: nothing is written in the repository. python: put first on PATH (sam's python
    builder needs a python3.13; the Makefile's pip runs `python3` unless PYTHON is set)."""
    sam = sam_executable()
    if sam is None:
        raise RuntimeError("sam is not installed (pip install -e '.[dev]')")
    env = dict(os.environ, SAM_CLI_TELEMETRY="0")
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    if python:
        env["PATH"] = f"{Path(python).parent}{os.pathsep}{env.get('PATH', '')}"
    work = build_dir.parent
    result = subprocess.run(
        [
            sam,
            "build",
            "--template",
            str(template),
            "--base-dir",
            str(base_dir),
            "--build-dir",
            str(build_dir),
            "--cache-dir",
            str(work / f"{build_dir.name}-cache"),
            "--no-cached",
            "--parallel",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"sam build failed:\n{result.stdout}\n{result.stderr}")


def before_template(directory: Path) -> Path:
    """template.yaml as it was before src/Makefile, in directory beside a copy of src/ without
    the Makefile: no BuildMethod, so sam's python builder packs all of src/."""
    text = TEMPLATE.read_text()
    count = text.count(MAKEFILE_METADATA)
    if count != len(functions()):
        raise RuntimeError(f"expected one {MAKEFILE_METADATA.strip()!r} per function, saw {count}")
    shutil.copytree(ROOT / "src", directory / "src", ignore=shutil.ignore_patterns("Makefile"))
    path = directory / "template-before.yaml"
    path.write_text(text.replace(MAKEFILE_METADATA, ""))
    return path


@dataclass(frozen=True)
class Inventory:
    files: int
    bytes: int
    zip_bytes: int
    src_files: int
    """Of files: those copied from src/ (not installed by pip)."""
    src_bytes: int


def inventory(directory: Path) -> Inventory:
    """Regular files under directory, their bytes, the bytes of their zip (as sam deploys it),
    and the files and bytes of those that came from src/ rather than from pip."""
    files = sorted(p for p in directory.rglob("*") if p.is_file() and not p.is_symlink())
    from_src = {p.name for p in (ROOT / "src").iterdir()} | {"leasehold_dev"}
    ours = [p for p in files if p.relative_to(directory).parts[0] in from_src]
    with tempfile.TemporaryFile() as raw:
        with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, path.relative_to(directory).as_posix())
        zip_bytes = raw.tell()
    return Inventory(
        files=len(files),
        bytes=sum(p.stat().st_size for p in files),
        zip_bytes=zip_bytes,
        src_files=len(ours),
        src_bytes=sum(p.stat().st_size for p in ours),
    )


def _median_ms(samples: list[float]) -> str:
    runs = ", ".join(f"{v:.0f}" for v in samples)
    return f"median {statistics.median(samples):.0f} ms (runs: {runs})"


# Run in a subprocess with -I -S -B: only the build and the standard library can be imported.
IMPORT_PROBE = """
import json, os, sys, sysconfig, time
build = os.path.realpath(sys.argv[1])
sys.path.insert(0, build)
start = time.perf_counter()
for module in sys.argv[2].split(","):
    __import__(module)
elapsed = time.perf_counter() - start
if sys.argv[3] == "runtime":
    from leasehold.handlers.wiring import runtime
    runtime()  # the configured kinds (LEASEHOLD_KINDS) and the engine's clients, as a cold start
stdlib = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib")}
outside = sorted(
    name
    for name, module in list(sys.modules.items())
    if getattr(module, "__file__", None)
    and not module.__file__.startswith(build + "/")
    and not any(module.__file__.startswith(path + "/") for path in stdlib)
)
print(json.dumps({"seconds": elapsed, "outside": outside}))
"""

# What every function's environment has (template.yaml's Globals), with stand-in resources.
FUNCTION_ENV = {
    "LEASEHOLD_KINDS": "leasehold_apps.synthetic",
    "TABLE_NAME": "jobs",
    "QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/work",
    "HIGH_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/high",
    "LOW_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/low",
    "QUEUE_SHARD_URLS": "",
    "INDEX_SHARDS": "64",
    "DLQ_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/dead",
    "LEASE_SECONDS": "60",
    "MAX_ATTEMPTS": "3",
    "BACKOFF_BASE_MS": "2000",
    "BACKOFF_CAP_MS": "300000",
    "USER_CONCURRENCY_LIMIT": "5",
    "SLOT_WAIT_SECONDS": "10",
    "SWEEP_ACTIVE_RATE": "10",
    "SWEEP_DUE_RATE": "10",
    "SWEEP_SCHEDULE_RATE": "10",
    "SWEEP_SEGMENTS": "1",
    "SWEEP_SCHEDULE": "rate(1 minute)",
    "LOST_WAKEUP_GRACE_SECONDS": "120",
    "WORKER_TIMEOUT_SECONDS": "120",
    "MAX_STEP_SECONDS": "60",
    "VISIBILITY_TIMEOUT_SECONDS": "720",
    "HIGH_PRIORITY_TENANTS": "",
    "SCHEDULES_PER_OWNER": "25",
    "TENANT_SUBMIT_RATE": "0",
    "TITLE_FETCHER": "live",
    "ENRICHMENT_PROVIDER_URL": "",
    "ENRICHMENT_PROVIDER_CAPABILITY": "none",
    "DOCUMENTS_BUCKET": "documents",
    "DATA_BUCKET": "data",
    "HOSTED_PLANNER_ENDPOINT": "",
    "HOSTED_PLANNER_MODEL": "",
    "HOSTED_PLANNER_API_KEY_SECRET": "",
    "POWERTOOLS_SERVICE_NAME": "leasehold",
    "POWERTOOLS_METRICS_NAMESPACE": "Leasehold",
    "POWERTOOLS_LOG_LEVEL": "INFO",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


def import_from_build(
    build: Path, modules: list[str], python: str, *, runtime: bool = False
) -> dict[str, Any]:
    """Import modules (then, with runtime, build the handlers' runtime) with nothing but build
    and the standard library on the path. Returns the import's seconds and the modules that
    came from anywhere else."""
    result = subprocess.run(
        [python, "-I", "-S", "-B", "-c", IMPORT_PROBE, str(build), ",".join(modules)]
        + ["runtime" if runtime else "import"],
        env=dict(FUNCTION_ENV, PATH=os.environ.get("PATH", "")),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"importing {modules} from {build} failed:\n{result.stderr}")
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="cold imports per build (median)")
    args = parser.parse_args()
    python = find_python313()
    if python is None:
        print("build_sizes: no python3.13 found (pyenv install 3.13)", file=sys.stderr)
        return 1
    names = functions()
    with tempfile.TemporaryDirectory(prefix="leasehold-build-sizes-") as tmp:
        work = Path(tmp)
        builds = {"before": work / "before", "after": work / "after"}
        sam_build(before_template(work), builds["before"], python, base_dir=work)
        sam_build(TEMPLATE, builds["after"], python)
        # What shipping bytecode would give (not done: docs/decisions.md P1): the after build
        # compiled by the runtime's python.
        compiled = work / "after-compiled"
        shutil.copytree(builds["after"] / "WorkerFunction", compiled)
        subprocess.run([python, "-m", "compileall", "-q", str(compiled)], check=True)
        print(f"python for the imports: {python}; {args.runs} runs each\n")
        print(
            "| function | before: files | bytes | zip | from src/ | after: files | bytes | zip "
            "| from src/ |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for name in names:
            b, a = (inventory(builds[k] / name) for k in ("before", "after"))
            print(
                f"| {name} | {b.files:,} | {b.bytes:,} | {b.zip_bytes:,} "
                f"| {b.src_files:,} files, {b.src_bytes:,} B | {a.files:,} | {a.bytes:,} "
                f"| {a.zip_bytes:,} | {a.src_files:,} files, {a.src_bytes:,} B |"
            )
        c = inventory(compiled)
        print(
            f"\nafter, WorkerFunction with .pyc: {c.files:,} files, {c.bytes:,} bytes, "
            f"zip {c.zip_bytes:,}"
        )
        worker = {
            "before": builds["before"] / "WorkerFunction",
            "after": builds["after"] / "WorkerFunction",
            "after with .pyc": compiled,
        }
        timings: dict[str, list[float]] = {key: [] for key in worker}
        for _ in range(args.runs):
            for key, build in worker.items():
                probe = import_from_build(build, ["leasehold.handlers.worker"], python)
                timings[key].append(probe["seconds"] * 1000)
        print()
        for key, samples in timings.items():
            print(f"worker cold import, {key}: {_median_ms(samples)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
