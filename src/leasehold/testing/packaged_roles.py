"""The functions' execution roles as template.yaml writes them: the packaged copy a testbed
judges calls by when no template is at hand (leasehold.testing.definitions.PACKAGED).

The copy is data, not code: `packaged_roles.json` beside this module, shipped in the wheel as
package data and written by `python scripts/packaged_roles.py` from
`Definitions.from_template(template.yaml).roles` (run it after a change to a role).
tests/integration/test_testing_definitions.py checks it says what template.yaml says."""

import json
from importlib import resources
from typing import Any

PACKAGED_ROLES_FILE = "packaged_roles.json"

PACKAGED_ROLES: dict[str, Any] = json.loads(
    resources.files(__package__).joinpath(PACKAGED_ROLES_FILE).read_text(encoding="utf-8")
)
