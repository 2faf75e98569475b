"""The Lambda durable functions rows of `make bench` (the 3-step job and the fan-out's `map`) and
the Step Functions Map rows: what they count, and that a price not found is left out of the
total — and said so — rather than guessed."""

from __future__ import annotations

import pytest
from bench import pricing
from bench.pricing import DURABLE_PRICE_SOURCES, PRICES, durable_functions, durable_map

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


def test_data_charges_are_priced_and_a_missing_price_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = durable_functions(3, input_bytes=200, output_bytes=[40] * 3)
    assert model["not_priced"] == [] and model["total_is"] == "all-in"
    usd = model["usd_per_million"]
    gb = 320 / pricing.GIB
    assert usd["durable_data_written"] == pytest.approx(gb * 0.25 * 1e6, abs=1e-3)
    assert usd["durable_data_retained"] == pytest.approx(gb * 14 / 30 * 0.15 * 1e6, abs=1e-3)
    for name in ("lambda_durable_data_written_gb", "lambda_durable_data_retained_gb_month"):
        assert "write-ups of AWS's pricing page" in DURABLE_PRICE_SOURCES[name]
    assert (
        "https://aws.amazon.com/lambda/pricing/"
        in DURABLE_PRICE_SOURCES["lambda_durable_operation"]
    )
    # a price not found is left out of the total, and the row says so
    monkeypatch.setitem(pricing.PRICES, "lambda_durable_data_retained_gb_month", None)
    lower = durable_functions(3, input_bytes=200, output_bytes=[40] * 3)
    assert lower["not_priced"] == ["data_retained_gb_month"]
    assert lower["total_is"].startswith("a lower bound")
    assert "durable_data_retained" not in lower["usd_per_million"]


def test_a_durable_map_of_100_one_step_items_is_201_operations() -> None:
    nested = durable_map(100, item_input_bytes=50, item_output_bytes=20)
    assert nested["model"]["durable_operations"] == 1 + 100 * (1 + 1)
    # input + step results + iteration results + the map's result
    assert nested["model"]["data_written_bytes"] == 100 * 50 + 3 * 100 * 20
    flat = durable_map(100, item_input_bytes=50, item_output_bytes=20, flat=True)
    assert flat["model"]["durable_operations"] == 101
    per_child = nested["usd_per_million_children"]
    assert per_child["durable_operations"] == pytest.approx(2.01 * 8.00)


def test_step_functions_map_counts_a_transition_per_child() -> None:
    from bench.fanout import step_functions_map

    sfn = step_functions_map(100)
    assert sfn["standard_inline_map"]["model"]["state_transitions_per_fanout"] == 102
    standard = sfn["standard_inline_map"]["usd_per_million_children"]["step_functions"]
    assert standard == pytest.approx(1.02 * 25.0)
    distributed = sfn["distributed_map_express_children"]["usd_per_million_children"]
    # a transition and an Express request (+ 100 ms at 64 MB) per child
    assert distributed["step_functions"] == pytest.approx(
        1.02 * 25.0 + 1.0 + 0.1 * 64 / 1024 * 0.00001667 * 1e6, abs=1e-3
    )
