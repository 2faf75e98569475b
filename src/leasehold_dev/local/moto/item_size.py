"""UpdateItem for moto that changes nothing when it refuses the item's size, as DynamoDB does.

moto 5.2.5 enforces the 400 KB item limit in `LimitedSizeDict.__setitem__`, attribute by
attribute, *while* `UpdateExpressionExecutor` applies the update to the stored item in place:
the actions before the one that crossed the limit stay applied (a version counter bumped, an
attribute set) although the caller is told `ValidationException: Item size to update has
exceeded the maximum allowed size`. DynamoDB applies an update whole or not at all. A test of
"a write refused for size ends the job cleanly" would otherwise run against a half-written item.

`install()` wraps `DynamoDBBackend.update_item`: it copies the one item the update names (or
notes its absence) before moto runs, and on `ItemSizeToUpdateTooLarge` puts it back (or removes
the item moto created for the update) before re-raising. No stream record is involved: moto adds
one only after the update succeeded. Transactions already undo their items on any failure
(leasehold_dev.local.moto.transactions calls this `update_item` too)."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

from leasehold_dev.local.moto.transactions import require_pinned_moto

_saved: dict[str, Callable[..., Any]] = {}  # moto's method, once install() replaced it


_bypass: list[bool] = [False]
"""Set by `uninstalled()`: every call goes straight to moto's own update_item."""


def _moto_update_item() -> Callable[..., Any]:
    from moto.dynamodb.models import DynamoDBBackend

    return _saved.get("moto") or DynamoDBBackend.update_item


def update_item(self: Any, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """moto's update_item, undone when it refuses the item's size."""
    from moto.dynamodb.exceptions import ItemSizeToUpdateTooLarge

    original = _moto_update_item()
    if _bypass[0]:
        return original(self, table_name, key, *args, **kwargs)
    try:
        table = self.get_table(table_name)
        hash_key, range_key = self.get_keys_value(table, key)
        current = table.get_item(hash_key, range_key)
    except Exception:  # moto raises it again from its own update, in its own words
        return original(self, table_name, key, *args, **kwargs)
    before = copy.deepcopy(current.attrs) if current is not None else None
    try:
        return original(self, table_name, key, *args, **kwargs)
    except ItemSizeToUpdateTooLarge:
        if current is not None:
            current.attrs = before
        else:
            with contextlib.suppress(KeyError):
                table.delete_item(hash_key, range_key)  # moto created it for the update
        raise


def installed() -> bool:
    # Not `DynamoDBBackend.update_item is update_item`: another patch (moto_index_lag) may wrap
    # this one, and installing again over it would make the two call each other for ever.
    return "moto" in _saved


def install() -> None:
    """Make every moto DynamoDB backend in this process (the in-process mock and the embedded
    server alike) undo an UpdateItem it refuses for size. Idempotent. Raises MotoVersionError,
    changing nothing, when the installed moto is not the pinned release."""
    require_pinned_moto("item_size", "update_item")
    if installed():
        return
    from moto.dynamodb.models import DynamoDBBackend

    _saved["moto"] = DynamoDBBackend.update_item
    DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]


@contextlib.contextmanager
def uninstalled() -> Iterator[None]:
    """moto's own update_item for the block (the test that shows why the patch exists): the
    patch passes every call straight through, wherever it sits among other patches."""
    was, _bypass[0] = _bypass[0], True
    try:
        yield
    finally:
        _bypass[0] = was
