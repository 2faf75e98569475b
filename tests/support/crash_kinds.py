"""The crash matrix's kinds, each as a `Scenario` (tests/support/crash_matrix.py): synthetic
with and without an effect step, the reading list's title and enrich (one per provider
capability), doc_prep reading from S3, and an SDK kind with an `Effect(...)` step."""

from __future__ import annotations

from typing import Any

from leasehold import Effect, Kind, Limit, StepContext
from leasehold.testing import DEFAULT_OWNER, LeaseholdTestbed
from leasehold_apps.doc_agent import doc_prep_kind
from leasehold_apps.reading_list import routes
from leasehold_apps.reading_list.enrich import EnrichKind
from leasehold_apps.reading_list.kinds import TitleKind
from leasehold_apps.reading_list.provider import Capability
from leasehold_apps.synthetic import synthetic
from leasehold_dev.local.resources import DOCUMENTS_BUCKET
from tests.support.crash_matrix import AtCrash, Scenario, Side
from tests.support.crash_workflows import workflow_scenarios
from tests.support.documents import CountingReader, sample
from tests.support.fake_provider import FakeProvider
from tests.support.harness import HookedFetcher
from tests.support.resources import create_documents_bucket

READING_ENV = {"TITLE_FETCHER": "fixture", "ENRICHMENT_PROVIDER_CAPABILITY": "none"}
DOCUMENT_KEY = f"tenants/{DEFAULT_OWNER.tenant}/documents/rechnung.txt"


def _synthetic(name: str, *steps: dict[str, Any], unknown: bool = False) -> Scenario:
    effects = frozenset(i for i, step in enumerate(steps) if step.get("effect"))

    def build() -> tuple[list[Any], Side]:
        return [synthetic], Side()

    def start(tb: LeaseholdTestbed, side: Side) -> str:
        return tb.submit("synthetic", {"steps": list(steps)})

    return Scenario(name, build, start, may_end_unknown=unknown, effect_steps=effects)


class _Fetches:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, *_: Any) -> None:
        self.count += 1


def _bookmark(tb: LeaseholdTestbed, bookmark_id: str) -> dict[str, Any]:
    status, view, _ = tb.request("GET", f"/bookmarks/{bookmark_id}")
    assert status == 200, view
    return dict(view)


def _title() -> Scenario:
    state: dict[str, Any] = {}

    def build() -> tuple[list[Any], Side]:
        fetches = _Fetches()
        kind = TitleKind("fixture", slow_seconds=0, fetcher=HookedFetcher(fetches))

        def visible(tb: LeaseholdTestbed, job_id: str) -> int:
            view = _bookmark(tb, state["bookmark"])
            return int(view["title_status"] == "ready" and bool(view["title"]))

        return [kind, routes], Side(effects=lambda: fetches.count, visible=visible)

    def start(tb: LeaseholdTestbed, side: Side) -> str:
        status, view, _ = tb.request("POST", "/bookmarks", {"url": "https://example.org/a/b"})
        assert status == 201, view
        state["bookmark"] = view["id"]
        return str(view["title_job"]["job_id"])

    return Scenario("title", build, start, env=READING_ENV)


def _enrich(capability: str) -> Scenario:
    state: dict[str, Any] = {}

    def build() -> tuple[list[Any], Side]:
        provider = FakeProvider(Capability.parse(capability))
        title = TitleKind("fixture", slow_seconds=0, fetcher=HookedFetcher(lambda *_: None))
        enrich = EnrichKind("http://fake", capability, client=provider)

        def visible(tb: LeaseholdTestbed, job_id: str) -> int:
            view = _bookmark(tb, state["bookmark"])
            return int((view.get("enrichment") or {}).get("job_id") == job_id)

        def charges() -> dict[str, int]:
            return {key: len(made) for key, made in provider.charges.items()}

        return [title, enrich, routes], Side(
            effects=lambda: sum(charges().values()), charges=charges, visible=visible
        )

    def setup(tb: LeaseholdTestbed, side: Side) -> None:
        status, view, _ = tb.request("POST", "/bookmarks", {"url": "https://example.org/a/b"})
        assert status == 201, view
        state["bookmark"] = view["id"]

    def start(tb: LeaseholdTestbed, side: Side) -> str:
        status, view, _ = tb.request("POST", f"/bookmarks/{state['bookmark']}/enrich", {})
        assert status == 202, view
        return str(view["job_id"])

    return Scenario(
        f"enrich ({capability})",
        build,
        start,
        setup,
        may_end_unknown=capability == "none",
        env={
            **READING_ENV,
            "ENRICHMENT_PROVIDER_URL": "http://fake",
            "ENRICHMENT_PROVIDER_CAPABILITY": capability,
        },
    )


def _doc_prep() -> Scenario:
    readers: list[CountingReader] = []

    def build() -> tuple[list[Any], Side]:
        readers.clear()
        kind = doc_prep_kind(documents=lambda: readers[0], safety_margin_ms=2_000)
        return [kind], Side(effects=lambda: readers[0].reads if readers else 0)

    def setup(tb: LeaseholdTestbed, side: Side) -> None:
        create_documents_bucket(tb.client("s3"))
        body = sample("02-rechnung-de.txt").encode("utf-8")
        tb.client("s3").put_object(Bucket=DOCUMENTS_BUCKET, Key=DOCUMENT_KEY, Body=body)
        readers.append(CountingReader(DOCUMENTS_BUCKET))

    def start(tb: LeaseholdTestbed, side: Side) -> str:
        return tb.submit("doc_prep", {"document": {"s3_key": DOCUMENT_KEY}})

    def may_fail(crashed: AtCrash | None, view: dict[str, Any]) -> bool:
        # A tool begun is a tool step spent (doc_agent/checkpoint.py): a crash while one was in
        # flight leaves too few of the default three for the tool to run again.
        in_flight = bool(crashed and (crashed.kind_state or {}).get("tool_in_flight"))
        return in_flight and view.get("stop_reason") == "budget_exhausted"

    # The test's bucket is the template's DocumentsBucket: the worker's role reads it.
    resources = {"DocumentsBucket": DOCUMENTS_BUCKET}
    return Scenario("doc_prep", build, start, setup, may_fail=may_fail, resources=resources)


def _sdk_order() -> Scenario:
    def build() -> tuple[list[Any], Side]:
        sends: dict[str, int] = {}
        charged: dict[str, int] = {}
        order = Kind("order")

        @order.step()
        def price(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
            return {"unit": 250}

        @order.step(effect=Effect("acme-pay", capability="idempotent_key"))
        def charge(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
            key = ctx.operation.key
            sends[key] = sends.get(key, 0) + 1
            charged[key] = 1  # the provider deduplicates by key: one charge per key
            return {"id": f"ch_{key}", "amount": ctx.outputs["price"]["unit"] * payload["qty"]}

        @order.step()
        def receipt(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
            return {"sent": ctx.outputs["charge"]["id"]}

        return [order], Side(effects=lambda: sum(sends.values()), charges=lambda: dict(charged))

    def start(tb: LeaseholdTestbed, side: Side) -> str:
        return tb.submit("order", {"qty": 2})

    return Scenario("sdk order (Effect idempotent_key)", build, start)


def _keyed() -> Scenario:
    """An SDK kind limited to one running job per provider account (a payload key: the worker
    reads the job before its claim, then takes the key's entry): after any crash the job ends,
    and the account's limit is not left taken for ever — a second job of the account runs."""

    def build() -> tuple[list[Any], Side]:
        sync = Kind("sync", concurrency=[Limit("payload.account", max=1)])

        @sync.step()
        def fetch(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
            return {"rows": 3}

        @sync.step()
        def store(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
            return {"stored": ctx.outputs["fetch"]["rows"]}

        def after(tb: LeaseholdTestbed, job_id: str) -> list[str]:
            second = tb.submit("sync", {"account": "acct-1", "n": 2})
            try:
                tb.drain(max_seconds=3600)
            except Exception as stuck:  # noqa: BLE001 - said in the table
                return [f"the account's next job is stuck: {stuck}"]
            state = tb.state(second)
            return [] if state == "succeeded" else [f"the account's next job ended {state}"]

        return [sync], Side(after=after)

    def start(tb: LeaseholdTestbed, side: Side) -> str:
        return tb.submit("sync", {"account": "acct-1"})

    return Scenario("sdk sync (concurrency key payload.account)", build, start)


def _raising_hooks() -> Scenario:
    """An SDK kind whose view and related hooks always raise (arch §23): every view the matrix
    reads of the job goes through them, and whatever the crash, the job still ends and its
    view answers (with `view_error`)."""

    def build() -> tuple[list[Any], Side]:
        flaky = Kind("flaky_hooks")

        @flaky.step()
        def first(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
            return {"n": 1.5}

        @flaky.step()
        def second(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
            return {"n": ctx.outputs["first"]["n"] * 2}

        @flaky.view
        def view(job: Any) -> dict[str, Any]:
            raise RuntimeError("the view's own bug")

        @flaky.related
        def related(job: Any) -> dict[str, Any]:
            raise KeyError("related")

        def after(tb: LeaseholdTestbed, job_id: str) -> list[str]:
            view = tb.view(job_id)
            return [] if "view_error" in view else [f"no view_error in {sorted(view)}"]

        return [flaky], Side(after=after)

    def start(tb: LeaseholdTestbed, side: Side) -> str:
        return tb.submit("flaky_hooks", {})

    return Scenario("sdk hooks that raise (view, related)", build, start)


def scenarios() -> list[Scenario]:
    return [
        _synthetic("synthetic", {"name": "a"}, {"name": "b"}, {"name": "c"}),
        _synthetic(
            "synthetic (effect step)",
            {"name": "a"},
            {"name": "pay", "effect": True},
            {"name": "c"},
            unknown=True,
        ),
        _title(),
        _enrich("idempotent_key"),
        _enrich("status_lookup"),
        _enrich("none"),
        _doc_prep(),
        _sdk_order(),
        _keyed(),
        _raising_hooks(),
        *workflow_scenarios(),
    ]
