"""The Lambda durable functions row of `make bench`: what it counts, and that a price that was
not found is left out of the total — and said so — rather than guessed."""

from __future__ import annotations

import pytest
from bench import pricing
from bench.pricing import DURABLE_PRICE_SOURCES, PRICES, durable_functions

pytestmark = pytest.mark.unit


def test_three_steps_are_three_operations_in_one_invocation() -> None:
    model = durable_functions(3, input_bytes=200, output_bytes=[40, 40, 40])
    assert model["model"]["durable_operations"] == 3
    assert model["model"]["lambda_invocations"] == 1
    assert model["model"]["data_written_bytes"] == 320
    assert (
        durable_functions(3, input_bytes=200, output_bytes=[40] * 3, count_start=True)["model"][
            "durable_operations"
        ]
        == 4
    )
    usd = model["usd_per_million"]
    assert usd["durable_operations"] == pytest.approx(3 * PRICES["lambda_durable_operation"] * 1e6)
    assert usd["total"] == pytest.approx(sum(v for k, v in usd.items() if k != "total"), abs=0.01)


def test_prices_not_found_are_left_out_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    model = durable_functions(3, input_bytes=200, output_bytes=[40] * 3)
    assert model["not_priced"] == ["data_written_gb", "data_retained_gb_month"]
    assert model["total_is"].startswith("a lower bound")
    for name in ("lambda_durable_data_written_gb", "lambda_durable_data_retained_gb_month"):
        assert PRICES[name] is None and "not found" in DURABLE_PRICE_SOURCES[name]
    # every price the row uses names where it came from
    assert (
        "https://aws.amazon.com/lambda/pricing/"
        in DURABLE_PRICE_SOURCES["lambda_durable_operation"]
    )
    monkeypatch.setitem(pricing.PRICES, "lambda_durable_data_written_gb", 0.25)
    monkeypatch.setitem(pricing.PRICES, "lambda_durable_data_retained_gb_month", 0.15)
    assert durable_functions(3, input_bytes=200, output_bytes=[40] * 3)["total_is"] == "all-in"
