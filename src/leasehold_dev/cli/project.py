"""`leasehold new` and `leasehold template`: a project of one's own, and the files it generates
from the leasehold installed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from leasehold_dev.cli.target import CliError


def _cmd_new(args: argparse.Namespace) -> int:
    from leasehold_dev.scaffold import Project, write_project

    directory = Path(args.directory)
    project = Project.named(
        directory.resolve(), package=args.package, leasehold_requirement=args.leasehold
    )
    written = write_project(directory, project)
    print(
        f"wrote {len(written)} files to {directory}/ (package {project.package_name}, kind greet)"
    )
    print(f"leasehold for its .venv: {project.leasehold_requirement}")
    print(f"next:  cd {directory} && make test && make up")
    return 0


def _cmd_template(args: argparse.Namespace) -> int:
    from leasehold.sdk.loading import KindLoadError, module_names
    from leasehold_dev.scaffold import drifted, engine_files

    try:
        module_names(args.kinds)
    except KindLoadError as exc:
        raise CliError(str(exc)) from exc
    files = engine_files(args.kinds)
    if args.check:
        stale = drifted(Path(args.check), args.kinds)
        if stale:
            print(
                f"leasehold template: {', '.join(stale)} in {args.check} differ from what the "
                "leasehold installed makes: run `make template` (leasehold template --write)",
                file=sys.stderr,
            )
            return 1
        return 0
    if args.write:
        for name, text in files.items():
            path = Path(args.write) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
        return 0
    sys.stdout.write(files["template.yaml"])
    return 0


def add_project_commands(commands: Any) -> None:
    """`new` and `template`."""
    new = commands.add_parser(
        "new",
        help="write a project of your own: a kind, its tests, template.yaml, Makefile, events",
    )
    new.add_argument("directory", help="the project's directory (new or empty); names the project")
    new.add_argument(
        "--package",
        help="the Python package (default: the directory's name, _ for -); not the name of "
        "a standard-library module or of one leasehold's dependencies install",
    )
    new.add_argument(
        "--leasehold",
        metavar="REQUIREMENT",
        help="how the project's .venv installs leasehold (default: this checkout's path when run "
        "from one, else this release from a package index)",
    )
    new.set_defaults(run=_cmd_new)
    template = commands.add_parser(
        "template",
        help="leasehold's template.yaml with your kinds as the Kinds default (a project's "
        "generated files)",
    )
    template.add_argument(
        "--kinds", required=True, help="LEASEHOLD_KINDS: modules, comma-separated"
    )
    where = template.add_mutually_exclusive_group()
    where.add_argument(
        "--write", metavar="DIR", help="write template.yaml and src/leasehold-requirements.txt"
    )
    where.add_argument(
        "--check", metavar="DIR", help="exit 1 when DIR's generated files differ from these"
    )
    template.set_defaults(run=_cmd_template)
