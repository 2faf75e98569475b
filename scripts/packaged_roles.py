"""Write leasehold/testing/packaged_roles.json: the functions' execution roles as template.yaml
writes them (`Definitions.from_template(template.yaml).roles`), the copy a testbed judges calls
by when no template is at hand (leasehold.testing.definitions.PACKAGED). Data, not code: JSON
beside the module that loads it, shipped in the wheel as package data.

    python scripts/packaged_roles.py            # rewrite it after a change to a role
    python scripts/packaged_roles.py --check    # exit 1 when it differs from template.yaml

tests/integration/test_testing_definitions.py checks the copy says what template.yaml says."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "src" / "leasehold" / "testing" / "packaged_roles.json"


def render(roles: Mapping[str, Any]) -> str:
    """The file's text: sorted keys, two-space indent, so a regenerated copy diffs cleanly."""
    return json.dumps(roles, indent=2, sort_keys=True) + "\n"


def expected() -> str:
    from leasehold.testing.definitions import SOURCE_TEMPLATE, Definitions

    return render(Definitions.from_template(SOURCE_TEMPLATE).roles)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the copy is stale")
    args = parser.parse_args(argv)
    text = expected()
    if args.check:
        if TARGET.read_text(encoding="utf-8") != text:
            print(f"{TARGET} differs from template.yaml: run python scripts/packaged_roles.py")
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
