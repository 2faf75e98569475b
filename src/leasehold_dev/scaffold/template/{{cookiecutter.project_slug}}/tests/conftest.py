"""The project's tests run its kinds on moto with leasehold.testing (`leasehold_testbed`), with
the table, queues and settings of the project's own template.yaml."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["leasehold.testing.pytest_plugin"]

PROJECT = Path(__file__).resolve().parents[1]
KINDS = "{{cookiecutter.package_name}}.kinds"

os.environ.setdefault("LEASEHOLD_TEMPLATE", str(PROJECT / "template.yaml"))


@pytest.fixture
def leasehold_kinds() -> str:
    """The kinds every `leasehold_testbed` runs: the ones the project deploys."""
    return KINDS
