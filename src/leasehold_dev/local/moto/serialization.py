"""A fast path in moto's JSON response serializer for DynamoDB attribute values.

moto 5.2.5 serializes every response by walking the operation's output shape, and finds each
member of each structure with an AttributePicker that tries up to six aliases per member. An
item attribute is an `AttributeValue` — a structure of ten members (S, N, B, SS, NS, BS, M, L,
NULL, BOOL) of which one is set — so every attribute of every item in a GetItem, Query,
BatchGetItem, GetRecords (two images per stream record) or CancellationReasons answer costs ten
picker lookups, recursively for maps and lists. On the local stack that made response
serialization a third of the embedded server's CPU, and a GetRecords of twenty job items 80 ms.

`install()` wraps `BaseJSONSerializer._serialize_type_structure`: for an `AttributeValue`-shaped
structure whose value is a plain dict holding only member names, each member is read with
`dict.get` instead of the picker — which, for such a dict, finds exactly what the picker finds
(no alias of a member can be another member's name, a dict has no `Meta` aliases, and the
response transformers, when any are registered, are applied as moto applies them). Everything
else — the member's own serialization (strings, base64 for blobs, maps, lists), the order of the
members, every other shape and every other value — goes through moto's code unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from leasehold_dev.local.moto.transactions import require_pinned_moto

ATTRIBUTE_VALUE_MEMBERS = frozenset({"S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL"})

_saved: dict[str, Callable[..., None]] = {}  # moto's method, once install() replaced it


def _serialize_type_structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
    """moto's structure serialization, with member lookup by `dict.get` for attribute values."""
    if not (
        type(value) is dict
        and value.keys() <= ATTRIBUTE_VALUE_MEMBERS
        and shape.members.keys() == ATTRIBUTE_VALUE_MEMBERS
        and not shape.is_document_type
    ):
        moto_original()(self, serialized, value, shape, key)
        return
    transformers = self._value_picker.response_transformers
    wrapper: Any = self.MAP_TYPE() if key else serialized
    for member_key, member_shape in shape.members.items():
        member_shape.parent = shape
        member_value = value.get(member_key)
        if transformers:
            key_path = f"{'.'.join(self.path)}.{member_key}"
            for transform_path, transform in transformers.items():
                if key_path.endswith(transform_path):
                    member_value = transform(member_value)
                    break
        if member_value is not None:
            self._serialize(wrapper, member_value, member_shape, member_key)
    if key:
        self._default_serialize(serialized, wrapper, shape, key)


def moto_original() -> Callable[..., None]:
    """moto's own `_serialize_type_structure` of the JSON serializer."""
    from moto.core.serialize import BaseJSONSerializer

    if "moto" in _saved:
        return _saved["moto"]
    method: Callable[..., None] = BaseJSONSerializer._serialize_type_structure
    return method


def installed() -> bool:
    from moto.core.serialize import BaseJSONSerializer

    return BaseJSONSerializer._serialize_type_structure is _serialize_type_structure


def install() -> None:
    """Serialize attribute values through the fast path in every moto JSON response of this
    process. Idempotent. Raises MotoVersionError, changing nothing, on any moto but the pinned
    release (the picker's rules above are moto 5.2.5's)."""
    require_pinned_moto("serialization", "response serializer")
    if installed():
        return
    from moto.core.serialize import BaseJSONSerializer

    _saved["moto"] = BaseJSONSerializer._serialize_type_structure
    BaseJSONSerializer._serialize_type_structure = _serialize_type_structure  # type: ignore[method-assign]
