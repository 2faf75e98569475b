"""Finding the running local stack — one way, for every command.

`leasehold local up` writes a state file (`.leasehold/local-stack.json` at the checkout's root:
the nearest directory, from where it runs upwards, that holds `template.yaml`). Every other
command finds it by, in order: its `--state` option, the `LEASEHOLD_STATE` variable, or the
first `.leasehold/local-stack.json` in the current directory or any directory above it — so a
command works from any subdirectory of the checkout. A state file whose `local up` process is
gone (killed with SIGKILL, the machine rebooted) is stale, and is reported as such."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from leasehold_dev.local.stack import StackError, StackInfo

STATE_FILE = Path(".leasehold") / "local-stack.json"
STATE_VARIABLE = "LEASEHOLD_STATE"
DATA_DIRECTORY = Path(".leasehold") / "data"
TEMPLATE_FILE = "template.yaml"


class StackNotRunningError(StackError):
    """No state file was found, or the stack it describes no longer runs."""


def project_root(cwd: Path) -> Path | None:
    """The nearest directory, from `cwd` upwards, that holds template.yaml (the checkout)."""
    for directory in (cwd, *cwd.parents):
        if (directory / TEMPLATE_FILE).is_file():
            return directory
    return None


def state_path_for_up(explicit: str | None, cwd: Path, environ: Mapping[str, str]) -> Path:
    """Where `local up` writes its state file: `--state`, `LEASEHOLD_STATE`, or the checkout's
    `.leasehold/local-stack.json` (the current directory's when no template.yaml is above)."""
    if explicit:
        return Path(explicit)
    if environ.get(STATE_VARIABLE):
        return Path(environ[STATE_VARIABLE])
    return (project_root(cwd) or cwd) / STATE_FILE


def data_path_for_up(explicit: str | None, cwd: Path) -> Path:
    """Where `local up` keeps its state: `--data`, or the checkout's `.leasehold/data` (the
    current directory's when no template.yaml is above)."""
    if explicit:
        return Path(explicit)
    return (project_root(cwd) or cwd) / DATA_DIRECTORY


def template_for_up(explicit: str | None, cwd: Path) -> Path:
    """`--template`, or the checkout's template.yaml found from `cwd` upwards."""
    if explicit:
        return Path(explicit)
    return (project_root(cwd) or cwd) / TEMPLATE_FILE


def find_state(explicit: str | None, cwd: Path, environ: Mapping[str, str]) -> Path | None:
    """The state file a command should read, or None when there is none to find. An explicit
    `--state` or `LEASEHOLD_STATE` is returned as given, whether or not it exists."""
    if explicit:
        return Path(explicit)
    if environ.get(STATE_VARIABLE):
        return Path(environ[STATE_VARIABLE])
    for directory in (cwd, *cwd.parents):
        candidate = directory / STATE_FILE
        if candidate.is_file():
            return candidate
    return None


def running_stack(
    explicit: str | None, cwd: Path, environ: Mapping[str, str]
) -> tuple[Path, StackInfo]:
    """The state file and the stack it describes, which is running; else StackNotRunningError
    saying how to start one."""
    path = find_state(explicit, cwd, environ)
    if path is None:
        raise StackNotRunningError(
            f"no local stack is running (no {STATE_FILE} in {cwd} or any directory above it); "
            "start one with `make up` (or `leasehold local up`) in the checkout"
        )
    if not path.is_file():
        raise StackNotRunningError(
            f"no local stack is running (no {path}); start one with `make up` "
            "(or `leasehold local up`)"
        )
    info = StackInfo.load(path)
    if info.pid and not info.process.alive():
        raise StackNotRunningError(
            f"the local stack of {path} is not running any more (its process {info.pid} is "
            "gone); start one with `make up` (`leasehold local down` clears what it left)"
        )
    return path, info
