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
(service/worker.py). Larger values belong in S3 (the large-data issue).

With a data bucket (`DATA_BUCKET`, every deployed function and the testbed) a second table holds,
and no item of a job passes 64,000 bytes whatever its data (decision LD16): every part keeps at
most an inline share and puts the rest in S3, leaving a reference of at most `REF_LIMIT` bytes.

| part (with a bucket)                   | inline share                       | bytes  |
|----------------------------------------|------------------------------------|--------|
| payload                                | ≤ 4 KiB inline, else a reference   |  4,096 |
| step outputs or the result (a succeeded| 8 KiB inline together + 20 refs of |        |
|  job keeps the result, not the outputs)|  ≤ 200 B + 21 B of brackets/commas | 12,213 |
| operation ledger (entries, receipts)   | 11 KiB; a receipt or output over   |        |
|                                        |  1 KiB (or past the share) spilled | 11,264 |
| kind state (`save_progress`)           | ≤ 7 KiB inline, else a reference   |  7,168 |
| history (as above)                     | by construction                    | 12,288 |
| the engine's own attributes (as above) | by construction                    | 16,384 |
| **in all**                             | 587 bytes under 64,000             | 63,413 |

A value's size here is its JSON as the item stores it (`json_bytes`: compact, non-ASCII
escaped), so a 4 KiB value of emoji is not 12 KiB on the item. The ledger with references still
past its share (hundreds of operations) is refused before the write, as without a bucket."""

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
ITEM_CAP = 64_000
"""No item of a job over 64 KB (the smaller reading of 64 KB), with a data bucket (LD16)."""
INLINE_LIMIT = 4 * KIB
"""The largest payload, output or result kept on the item; larger ones go to S3 (LD1)."""
REF_LIMIT = 200
"""The most a reference (`{"$blob": {key, size, sha256}}`) takes on the item: its key is
`jobs/<id ≤ 26>/e<epoch ≤ 10 digits>/<name ≤ 20>`, a size of ≤ 8 digits and a 64-digit hash."""
OUTPUTS_INLINE = 8 * KIB
"""All of a job's inline step outputs together; later large ones go to S3 (LD1)."""
OUTPUTS_WITH_BUCKET = OUTPUTS_INLINE + 20 * REF_LIMIT + 21
"""The most the outputs take on the item with a bucket: 8 KiB inline, 20 references (a job
has at most 20 steps, domain/policies.MAX_STEPS) and the list's brackets and commas."""
LEDGER_INLINE = 11 * KIB
"""The operation ledger's share of the item with a bucket (entries with references): 20 SDK
effect steps' entries, each with a 64-character provider and its receipt a reference, take
10,551 bytes (tests/unit/test_item_bound.py)."""
RECEIPT_INLINE = 1 * KIB
"""The largest receipt or output a ledger entry keeps inline with a bucket."""
KIND_STATE_INLINE = 7 * KIB
"""The largest kind state kept on the item with a bucket (the document agent's checkpoint, ≤ 6
KiB of UTF-8 by its own bound, stays inline when ASCII, so its view hook reads it whole)."""
BUCKET_SHARES = {
    "payload": INLINE_LIMIT,
    "outputs or result": max(OUTPUTS_WITH_BUCKET, INLINE_LIMIT),
    "ledger": LEDGER_INLINE,
    "kind state": KIND_STATE_INLINE,
    "history": HISTORY_BUDGET,
    "engine": ENGINE_BUDGET,
}
"""Each part's most on the item with a data bucket (the docstring's second table)."""
BUCKET_ITEM_BUDGET = sum(BUCKET_SHARES.values())
"""63,413 bytes: under `ITEM_CAP` by construction."""
ITEM_TOO_LARGE = "item_too_large"
"""The error code of a job ended for its item's size."""


def json_bytes(value: Any) -> int:
    """The size the engine stores `value` at: UTF-8 bytes of its compact JSON."""
    return len(json.dumps(value, separators=(",", ":"), default=str).encode())
