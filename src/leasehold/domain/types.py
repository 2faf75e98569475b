"""Names for the two kinds of untyped data the engine handles, so that everything else can be typed.

- `JsonObject`: a JSON object that comes from or goes to the outside world and whose shape is the
  user's — a job's payload, a step's output, a result, a request or response body. The engine checks
  it is storable (size, types) and never reads fields out of it by name.
- `RawItem`: a DynamoDB item or key as boto3 hands it over (attribute values, or the plain values
  `store.items` turns them into). Only `leasehold.store` builds and reads these; it turns them into
  domain values (`Job`, `Schedule`, ledger entries) before they leave the store.

Anything with a shape the engine knows (a ledger entry, an effect intent, a history entry,
`waiting_for`, a job view) gets a `TypedDict` or a dataclass of its own instead.
"""

from __future__ import annotations

from typing import Any, TypeAlias

JsonObject: TypeAlias = dict[str, Any]
RawItem: TypeAlias = dict[str, Any]
