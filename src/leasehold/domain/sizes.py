"""The job item's size budget (decision SZ1): DynamoDB refuses an item over 400 KB, and every part
of
a job lives on its one item, so each part has a share and the shares add up to well under the
limit — a job can never grow into a write DynamoDB refuses. Sizes are the UTF-8 bytes of the
compact JSON the engine stores (close to what DynamoDB counts: names + values).

| part                                   | budget  | enforced                                  |
|----------------------------------------|---------|-------------------------------------------|
| payload                                | 48 KiB  | at submit (a kind's `max_payload_bytes`)  |
| step outputs, all together             | 96 KiB  | at each checkpoint (each ≤ 16 KiB too)    |
| operation ledger (entries, receipts)   | 64 KiB  | before an entry is written                |
| kind state (`save_progress`)           | 32 KiB  | before it is written                      |
| result                                 | 16 KiB  | when the job succeeds                     |
| history (10 entries, texts ≤ 200 ch.)  | 12 KiB  | by construction (store/history.py)        |
| the engine's own attributes            | 16 KiB  | by construction (keys, counters, error…)  |
| **in all**                             | 284 KiB | 116 KiB under DynamoDB's 400 KB           |

A part that would pass its share ends the job `failed` with error code `item_too_large` and a
message naming the part, the step and the sizes — before the write, so the item stays as it
was. A write DynamoDB refuses for size all the same (belt and braces) ends the job the same way
(service/worker.py). Larger values belong in S3 (the large-data issue)."""

from __future__ import annotations

import json
from typing import Any

KIB = 1024
DYNAMODB_ITEM_LIMIT = 400 * KIB
PAYLOAD_BUDGET = 48 * KIB
"""The most a kind may allow for its payload (the API's whole body is at most 64 KiB)."""
OUTPUT_LIMIT = 16 * KIB
"""The largest single step output."""
OUTPUTS_BUDGET = 96 * KIB
"""All of a job's step outputs together, as the checkpoint stores them."""
LEDGER_BUDGET = 64 * KIB
"""All of a job's operation-ledger entries together (receipts included)."""
KIND_STATE_BUDGET = 32 * KIB
"""What a kind saves with `save_progress`."""
RESULT_LIMIT = 16 * KIB
HISTORY_BUDGET = 12 * KIB
ENGINE_BUDGET = 16 * KIB
ITEM_BUDGET = (
    PAYLOAD_BUDGET
    + OUTPUTS_BUDGET
    + LEDGER_BUDGET
    + KIND_STATE_BUDGET
    + RESULT_LIMIT
    + HISTORY_BUDGET
    + ENGINE_BUDGET
)
"""The most a job item can hold: 284 KiB, far from DynamoDB's 400 KB."""
BLOB_LIMIT = 10 * 1024 * 1024
"""The largest single value (payload, output, result) the engine keeps, in S3 (DESIGN §20)."""
UPLOAD_LIMIT = 32 * 1024 * 1024
"""The largest payload a job may take, through a presigned upload (decision LD7): the API and
the worker each hold it in memory, parsed (a 32 MiB text payload peaks at ~64 MiB in Python,
31 MiB of small objects at ~246 MiB), and every function has 256 MB. A kind allows it with
`max_payload_bytes`; past 10 MiB only an upload reaches it."""
API_BODY_LIMIT = 5 * 1024 * 1024
"""The largest `POST /jobs` body (decision LD2): a Lambda function behind API Gateway takes a
request of at most 6 MB, event included, below API Gateway's own 10 MB."""
ITEM_TOO_LARGE = "item_too_large"
"""The error code of a job ended for its item's size."""


def json_bytes(value: Any) -> int:
    """The size the engine stores `value` at: UTF-8 bytes of its compact JSON."""
    return len(json.dumps(value, separators=(",", ":"), default=str).encode())
