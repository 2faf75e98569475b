"""YAML files the tests read whole (docs/openapi.yaml is 170 KB): with libyaml's loader when
PyYAML has it, about five times faster than the pure-Python one that `yaml.safe_load` uses — the
suite reads the document in several modules at collection, in each xdist worker (decision CI16)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    """The YAML document at `path`, safely loaded (no Python tags)."""
    return yaml.load(path.read_text(), Loader=_LOADER)  # noqa: S506 - a safe loader
