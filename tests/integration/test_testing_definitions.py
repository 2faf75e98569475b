"""leasehold.testing keeps a copy of template.yaml's table, queues and settings for projects
that have no template: it must say what template.yaml says, read the way the repository's own
tooling reads it."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
import tomllib
from dataclasses import fields
from pathlib import Path

import pytest

from leasehold.handlers.settings import sweep_interval_seconds
from leasehold.testing import PACKAGED, Definitions, TemplateError, TestbedSettings
from leasehold.testing.definitions import SETTINGS_FROM_ENVIRONMENT, SOURCE_TEMPLATE
from leasehold.testing.packaged_roles import PACKAGED_ROLES_FILE
from leasehold_dev.local.resources import TEMPLATE, parameter_defaults, resolved, template

pytestmark = pytest.mark.integration


def test_the_packaged_copy_is_what_template_yaml_deploys() -> None:
    assert Definitions.from_template(TEMPLATE).content() == PACKAGED.content()


def test_the_packaged_roles_are_the_generators_json_and_ship_in_the_wheel() -> None:
    # The roles' copy is data written by scripts/packaged_roles.py: the file holds exactly what
    # the generator writes from template.yaml now (not a hand edit, not a stale copy)...
    root = Path(__file__).resolve().parents[2]
    checked = subprocess.run(
        [sys.executable, str(root / "scripts" / "packaged_roles.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # ...and the wheel carries it: a package-data glob of leasehold.testing names it
    package_data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]
    assert any(
        fnmatch.fnmatch(PACKAGED_ROLES_FILE, glob)
        for glob in package_data.get("leasehold.testing", [])
    )


def test_the_packaged_copy_matches_the_template_as_leasehold_local_reads_it() -> None:
    """The same comparison through samtranslator's YAML reader, not the package's own."""
    resources = template()["Resources"]
    jobs = resources["JobsTable"]["Properties"]
    for name in ("BillingMode", "AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes"):
        assert PACKAGED.table[name] == jobs[name], name
    assert PACKAGED.table["StreamSpecification"] == jobs["StreamSpecification"]
    work = resources["WorkQueue"]["Properties"]
    assert PACKAGED.queues["work"] == {
        "MessageRetentionPeriod": work["MessageRetentionPeriod"],
        "maxReceiveCount": work["RedrivePolicy"]["maxReceiveCount"],
    }
    for queue, logical_id in (("dlq", "DeadLetterQueue"), ("relay_failures", "RelayFailureQueue")):
        retention = resources[logical_id]["Properties"]["MessageRetentionPeriod"]
        assert PACKAGED.queues[queue] == {"MessageRetentionPeriod": retention}
    environment = template()["Globals"]["Function"]["Environment"]["Variables"]
    for variable, name in SETTINGS_FROM_ENVIRONMENT.items():
        assert PACKAGED.settings[name] == int(resolved(environment[variable])), variable
    assert PACKAGED.settings["visibility_timeout_seconds"] == int(
        resolved(work["VisibilityTimeout"])
    )
    assert PACKAGED.settings["sweep_interval_seconds"] == sweep_interval_seconds(
        resolved(environment["SWEEP_SCHEDULE"])
    )
    assert PACKAGED.settings["worker_batch_size"] == int(parameter_defaults()["WorkerBatchSize"])
    outbox = resources["RelayFunction"]["Properties"]["Events"]["Outbox"]["Properties"]
    assert PACKAGED.relay == {
        "batch_size": int(outbox["BatchSize"]),
        "max_retries": int(outbox["MaximumRetryAttempts"]),
    }


def test_every_numeric_engine_setting_of_the_functions_is_a_testbed_setting() -> None:
    """A new setting in Globals that the testbed does not know would run tests on a
    different engine than the one deployed."""
    environment = template()["Globals"]["Function"]["Environment"]["Variables"]
    defaults = parameter_defaults()

    def default(value: object) -> str:
        ref = value.get("Ref") if isinstance(value, dict) else None
        return defaults.get(str(ref), "") if ref else str(value)

    numeric = {name for name, value in environment.items() if default(value).isdigit()}
    assert numeric == set(SETTINGS_FROM_ENVIRONMENT)
    names = {field.name for field in fields(TestbedSettings)} - {"jitter"}
    assert names == set(PACKAGED.settings)


def test_a_drifted_template_reads_differently(tmp_path: Path) -> None:
    """The comparison above can fail: one changed default is seen."""
    text = TEMPLATE.read_text()
    assert "maxReceiveCount: 5" in text
    drifted = tmp_path / "template.yaml"
    drifted.write_text(text.replace("maxReceiveCount: 5", "maxReceiveCount: 7"))
    assert Definitions.from_template(drifted).content() != PACKAGED.content()
    assert Definitions.from_template(drifted).queues["work"]["maxReceiveCount"] == 7


def test_which_definitions_a_testbed_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEASEHOLD_TEMPLATE", raising=False)
    assert SOURCE_TEMPLATE == TEMPLATE  # in this checkout, template.yaml is found
    assert Definitions.find().source == str(TEMPLATE)
    assert Definitions.find("packaged") is PACKAGED
    monkeypatch.setenv("LEASEHOLD_TEMPLATE", "packaged")
    assert Definitions.find() is PACKAGED
    with pytest.raises(TemplateError, match="not found"):
        Definitions.find(tmp_path / "missing.yaml")
    (tmp_path / "other.yaml").write_text("Resources: {}\n")
    with pytest.raises(TemplateError, match="JobsTable"):
        Definitions.find(tmp_path / "other.yaml")
