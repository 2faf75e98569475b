"""The fuzz's `flatmap_body` hook (tests/support/fuzz.py) puts lone surrogates into generated
bodies — values and keys, at any depth — in a share of them, and leaves the rest as generated."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fuzz import has_lone_surrogate, lone_surrogates

BODY = {"kind": "synthetic", "payload": {"steps": [{"name": "fetch", "cost": 1}]}}


@settings(max_examples=200, database=None)
@given(st.data())
def test_a_share_of_bodies_carries_one_and_only_there(data: st.DataObject) -> None:
    body = data.draw(lone_surrogates(None, BODY))
    if has_lone_surrogate(body):
        assert body != BODY
    else:
        assert body == BODY


def test_values_and_keys_at_every_depth_are_reached() -> None:
    seen: set[str] = set()

    @settings(max_examples=400, database=None)
    @given(lone_surrogates(None, BODY))
    def draw(body: Any) -> None:
        if has_lone_surrogate(body):
            seen.add(_where(body))

    draw()
    assert {"kind", "kind-key", "payload-key", "name", "name-key", "steps-key"} <= seen


@settings(max_examples=30, database=None)
@given(
    st.sampled_from([None, 3, [1, 2], {}]).flatmap(
        lambda body: st.tuples(st.just(body), lone_surrogates(None, body))
    )
)
def test_a_body_without_strings_is_left_alone(drawn: tuple[Any, Any]) -> None:
    body, after = drawn
    assert after == body


def _where(body: Any) -> str:
    """Which string of BODY got the surrogate (`name`, or `name-key` for the key)."""
    stack: list[Any] = [body]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if has_lone_surrogate(key):
                    return f"{key.encode('utf-8', 'surrogatepass').decode('ascii', 'ignore')}-key"
                if isinstance(value, str) and has_lone_surrogate(value):
                    return str(key)
                stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return "?"
