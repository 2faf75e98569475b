"""The kinds SDK's own rules: what a kind may declare, what `LEASEHOLD_KINDS` refuses at cold
start (each with the name that is wrong), the accept-time schema check and the result rule."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

import leasehold
from leasehold import (
    Effect,
    Kind,
    KindDefinitionError,
    KindLoadError,
    Owner,
    SettingError,
    Step,
    StepContext,
    ValidationError,
    int_setting,
)
from leasehold.domain.job import Checkpoint, new_job
from leasehold.sdk.engine_kind import EngineKind
from leasehold.sdk.loading import load_kinds, module_names

pytestmark = pytest.mark.unit

ALICE = Owner("study-group", "alice")


def _noop(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {}


# ----------------------------------------------------------------------- declaring a kind


@pytest.mark.parametrize("name", ["", "Shout", "1st", "with-dash", "x" * 65, "sp ace"])
def test_a_kind_name_must_be_a_lowercase_identifier(name: str) -> None:
    with pytest.raises(KindDefinitionError, match="kind name"):
        Kind(name)


def test_steps_register_in_declaration_order_and_names_are_unique() -> None:
    kind = Kind("ordered")
    kind.step()(_noop)

    @kind.step("second", cost=2, approval=True, timeout_seconds=5)
    def whatever(ctx: StepContext, payload: dict[str, Any]) -> None:
        return None

    assert [step.name for step in kind.steps] == ["_noop", "second"]
    plan = kind.plan({})
    assert [(p.name, p.cost, p.needs_approval, p.duration_ms) for p in plan] == [
        ("_noop", 0, False, 10_000),
        ("second", 2, True, 5_000),
    ]
    with pytest.raises(KindDefinitionError, match="two steps named 'second'"):
        kind.step("second")(_noop)


def test_a_bare_step_decorator_registers_the_step_too() -> None:
    kind = Kind("bare")

    @kind.step
    def first(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
        return {}

    kind.step("second")(_noop)
    assert [step.name for step in kind.steps] == ["first", "second"]
    assert first({}, {}) == {}  # type: ignore[arg-type]  # still the function it decorated


def test_a_kind_has_at_most_twenty_steps() -> None:
    kind = Kind("long")
    for index in range(20):
        kind.step(f"s{index}")(_noop)
    with pytest.raises(KindDefinitionError, match="more than 20 steps"):
        kind.step("s20")(_noop)


def test_declared_steps_and_a_planner_do_not_mix() -> None:
    declared = Kind("declared")
    declared.step()(_noop)
    with pytest.raises(KindDefinitionError, match="declares steps"):
        declared.planner(lambda payload: [])
    planned = Kind("planned")
    planned.planner(lambda payload: [Step("one", _noop)])
    with pytest.raises(KindDefinitionError, match="plans its steps"):
        planned.step()(_noop)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cost": -1}, "cost must be an integer"),
        ({"cost": True}, "cost must be an integer"),
        ({"timeout_seconds": 901}, "timeout_seconds"),
    ],
)
def test_step_options_are_checked_where_they_are_declared(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(KindDefinitionError, match=message):
        Kind("checked").step("bad", **options)(_noop)


def test_an_effect_names_one_of_the_three_capabilities() -> None:
    assert Effect("mailer", "idempotent_key").capability == "idempotent_key"
    with pytest.raises(KindDefinitionError, match="capability"):
        Effect("mailer", "maybe")  # type: ignore[arg-type]
    with pytest.raises(KindDefinitionError, match="provider"):
        Effect("")


@pytest.mark.parametrize(
    "schema", [{"type": "strin"}, {"properties": {"a": {"type": 3}}}, {"pattern": "("}]
)
def test_a_bad_schema_is_refused_naming_the_kind(schema: dict[str, Any]) -> None:
    with pytest.raises(KindDefinitionError, match="kind 'schemed' has a bad schema"):
        Kind("schemed", schema=schema)


# ----------------------------------------------------------------------- accept-time checks


SHOUT_SCHEMA = {
    "type": "object",
    "required": ["text"],
    "properties": {"text": {"type": "string", "maxLength": 5}},
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        ({"text": 3}, "'payload.text'"),
        ({"text": "far too long"}, "'payload.text'"),
        ({}, "text"),
        ({"text": "ok", "other": 1}, "payload"),
    ],
)
def test_a_payload_that_breaks_the_schema_is_a_400_naming_the_field(
    payload: dict[str, Any], named: str
) -> None:
    kind = Kind("shout", schema=SHOUT_SCHEMA)
    with pytest.raises(ValidationError) as refused:
        kind.validate_for(payload, ALICE)
    assert named in str(refused.value)
    assert refused.value.code == "invalid_request"
    kind.validate_for({"text": "ok"}, ALICE)  # and a payload that matches passes


def test_a_kinds_own_check_runs_after_the_schema_with_the_owner() -> None:
    kind = Kind("scoped", schema={"type": "object"})
    seen: list[Owner] = []

    @kind.check
    def only_alice(payload: dict[str, Any], owner: Owner) -> None:
        seen.append(owner)
        if owner.user_id != "alice":
            raise ValidationError("alice only")

    kind.validate_for({}, ALICE)
    with pytest.raises(ValidationError, match="alice only"):
        kind.validate_for({}, Owner("study-group", "bob"))
    with pytest.raises(ValidationError):
        kind.validate_for([], ALICE)  # type: ignore[arg-type]  # the schema first: no check
    assert [owner.user_id for owner in seen] == ["alice", "bob"]


# ----------------------------------------------------------------------- the result rule


def _finished_job(kind: str, outputs: list[Any]) -> tuple[Any, Checkpoint]:
    job = new_job("j_1", kind, ALICE, {}, now=0, steps_total=len(outputs))
    return job, Checkpoint(next_step=len(outputs), cost_used=3, steps_used=len(outputs))


def test_the_result_is_the_last_steps_output_unless_the_kind_says_otherwise() -> None:
    plain = Kind("plain")
    plain.step("a")(_noop)
    plain.step("b")(_noop)
    job, checkpoint = _finished_job("plain", [])
    checkpoint = Checkpoint(next_step=2, steps_used=2, outputs=[{"n": 1}, {"n": 2}])
    assert EngineKind(plain).result(job, checkpoint) == {"n": 2}

    summed = Kind("summed")
    summed.step("a")(_noop)
    summed.step("b")(_noop)
    summed.result(lambda done: {"total": sum(o["n"] for o in done.outputs.values())})
    assert EngineKind(summed).result(job, checkpoint) == {"total": 3}


# ----------------------------------------------------------------------- LEASEHOLD_KINDS


def _module(tmp_path: Path, name: str, source: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    _module(
        tmp_path,
        "sdk_good",
        """
        from leasehold import Kind
        from leasehold.apps import Routes
        one = Kind("one")
        @one.step()
        def go(ctx, payload):
            return {"ok": True}
        routes = Routes()
        """,
    )
    _module(
        tmp_path,
        "sdk_again",
        """
        from leasehold import Kind
        one = Kind("one")
        @one.step()
        def go(ctx, payload):
            return 1
        """,
    )
    _module(tmp_path, "sdk_empty", "VALUE = 1\n")
    _module(tmp_path, "sdk_stepless", "from leasehold import Kind\nidle = Kind('idle')\n")
    _module(tmp_path, "sdk_broken", "import no_such_dependency_anywhere\n")
    _module(
        tmp_path,
        "sdk_slow",
        """
        from leasehold import Kind
        slow = Kind("slow")
        @slow.step(timeout_seconds=120)
        def crawl(ctx, payload):
            return None
        """,
    )
    _module(
        tmp_path,
        "sdk_unset",
        """
        from leasehold import Kind, at_cold_start, setting
        needs = Kind("needs")
        @needs.step()
        def go(ctx, payload):
            return None
        @at_cold_start
        def check():
            setting("SDK_TEST_SETTING_NOBODY_SETS")
        """,
    )
    _module(
        tmp_path,
        "sdk_helper_config",
        """
        from leasehold import at_cold_start, setting
        @at_cold_start
        def check():
            setting("SDK_TEST_HELPER_SETTING")
        """,
    )
    _module(
        tmp_path,
        "sdk_uses_helper",
        """
        import sdk_helper_config
        from leasehold import Kind
        helped = Kind("helped")
        @helped.step()
        def go(ctx, payload):
            return None
        """,
    )
    _module(
        tmp_path,
        "sdk_badschema",
        "from leasehold import Kind\nbad = Kind('bad', schema={'type': 'strin'})\n",
    )
    return tmp_path


def test_every_kind_and_routes_at_module_level_are_registered(modules: Path) -> None:
    loaded = load_kinds(" sdk_good , ")
    assert set(loaded.kinds) == {"one"} and len(loaded.routes) == 1
    assert loaded.kinds["one"].submittable


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("sdk_good,sdk_broken", "module 'sdk_broken' cannot be imported: ModuleNotFoundError"),
        ("sdk_nowhere", "module 'sdk_nowhere' cannot be imported"),
        ("sdk_good,sdk_again", "kind 'one' is defined twice (in 'sdk_good' and 'sdk_again')"),
        ("sdk_empty", "module 'sdk_empty' defines no Kind"),
        ("sdk_stepless", "kind 'idle' (module 'sdk_stepless') has no steps"),
        ("sdk_slow", "kind 'slow' step 'crawl' may run 120 s, over MAX_STEP_SECONDS (60)"),
        ("sdk_badschema", "kind 'bad' has a bad schema"),
        (
            "sdk_good,sdk_unset",
            "module 'sdk_unset' refused to start: SettingError: environment variable "
            "SDK_TEST_SETTING_NOBODY_SETS is not set",
        ),
        ("", "names no module"),
        ("sdk_good,not-a-module", "'not-a-module' is not a Python module name"),
    ],
)
def test_leasehold_kinds_refuses_at_cold_start_naming_what_is_wrong(
    modules: Path, spec: str, message: str
) -> None:
    with pytest.raises(KindLoadError) as refused:
        load_kinds(spec, max_step_seconds=60)
    assert message in str(refused.value)


def test_cold_start_checks_run_only_for_the_modules_loaded_and_can_be_skipped(
    modules: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert set(load_kinds("sdk_unset", start_checks=False).kinds) == {"needs"}
    load_kinds("sdk_good")  # sdk_unset's check is not sdk_good's
    monkeypatch.setenv("SDK_TEST_SETTING_NOBODY_SETS", "set")
    assert set(load_kinds("sdk_unset").kinds) == {"needs"}


def test_a_check_in_a_helper_module_the_kinds_module_imports_runs_too(modules: Path) -> None:
    for _ in range(2):  # the second load finds both modules imported already
        with pytest.raises(KindLoadError, match="module 'sdk_uses_helper' refused to start"):
            load_kinds("sdk_uses_helper")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_payload_bytes": 0}, "max_payload_bytes"),
        ({"max_payload_bytes": 32 * 2**20 + 1}, "max_payload_bytes"),  # over 32 MiB (LD7)
        ({"max_payload_bytes": True}, "max_payload_bytes"),
        ({"submittable": "no"}, "submittable"),
        ({"max_attempts": 11}, "max_attempts"),
    ],
)
def test_kind_options_are_checked_where_they_are_declared(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(KindDefinitionError, match=message):
        Kind("optioned", **options)


def test_a_non_numeric_step_timeout_is_a_definition_error() -> None:
    with pytest.raises(KindDefinitionError, match="timeout_seconds"):
        Kind("timed").step("s", timeout_seconds="soon")(_noop)  # type: ignore[arg-type]


@pytest.mark.parametrize("raw", ["2.9", "inf", "1e3", "ten", ""])
def test_an_integer_setting_is_an_integer(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SDK_TEST_INT", raw)
    with pytest.raises(SettingError, match="SDK_TEST_INT"):
        int_setting("SDK_TEST_INT")
    monkeypatch.setenv("SDK_TEST_INT", " 42 ")
    assert int_setting("SDK_TEST_INT") == 42


def test_module_names_keep_order_and_drop_repeats() -> None:
    assert module_names("a.b, c,,a.b") == ["a.b", "c"]


def test_the_public_api_is_what_all_lists_and_every_name_is_documented() -> None:
    assert sorted(leasehold.__all__) == leasehold.__all__
    for name in leasehold.__all__:
        value = getattr(leasehold, name)
        assert (value.__doc__ or "").strip(), f"leasehold.{name} has no docstring"
        if isinstance(value, type):
            for attribute, member in vars(value).items():
                if attribute.startswith("_") or not callable(member):
                    continue
                assert (member.__doc__ or "").strip(), f"leasehold.{name}.{attribute}"


def test_the_client_is_loaded_only_when_used_never_by_a_handlers_cold_start() -> None:
    """The client is its own namespace, `leasehold.client`: importing `leasehold` (every
    handler does) must not import it."""
    import subprocess
    import sys

    probe = (
        "import sys, leasehold, leasehold.handlers.api, leasehold.handlers.worker, "
        "leasehold.handlers.relay, leasehold.handlers.sweeper\n"
        "assert 'leasehold.client' not in sys.modules, 'a handler imported the client'\n"
        "from leasehold.client import ApiError, Client\n"
        "assert Client.__module__ == 'leasehold.client.http'\n"
        "assert issubclass(ApiError.NotFound, ApiError)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        leasehold.Nope  # noqa: B018
