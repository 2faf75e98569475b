"""The sweeper's blob pass (decisions LD10–LD12): a job's blobs live as long as its item.

Only a job that has blobs has a mark (store/blob_marks.py), written before its first blob; the
pass reads the marks that are due, at its rate, and for each reads the job's item collection:

- **the item is gone** (its TTL, or it never came: a refused accept, a failed spawn): the mark
  is held (`claim`) and every object under `jobs/<id>/` goes, a page a visit (ListObjectsV2 +
  DeleteObjects); a prefix longer than a page is finished over later runs;
- **the job has ended** (a terminal state): the objects no item of the collection references —
  a crash's or a stale epoch's orphans (LD4), a refused second payload — go, once per epoch,
  and the mark is due again when the item's TTL may remove it;
- **otherwise** (queued, running, waiting, `unknown`): due again at its deadline, at least
  RECHECK_MS on.

Only keys the engine names by epoch (`e<n>/…`, n at most the item's epoch) or by content
(`payload/<sha>`) are deleted while the item lives: a later epoch's blob (a replay in flight)
and any other shape (a signal's body, whose item may not be written yet) wait for the item to go.
A visit that fails (the table or the bucket) ends the pass, counted as `unavailable`; the next
run repeats it: every step is idempotent, and the mark is only finished once nothing is left."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from leasehold.domain.states import TERMINAL_STATES
from leasehold.store.blob_marks import BlobMarks, Mark, deleted, listed
from leasehold.store.blobs import BlobStore, job_prefix
from leasehold.store.items import JOB_SK, job_from_item

BLOB_PASS = "blobs"
RECHECK_MS = 6 * 3600 * 1000
"""How soon a mark is looked at again when its job's item is still there past the moment it
could have gone (its TTL passed; DynamoDB deletes expired items within days) or when its job is
unfinished with its deadline behind it (`unknown`, waiting for an operator)."""
_EPOCH_NAMED = re.compile(r"^e(\d+)/")
_CONTENT_NAMED = re.compile(r"^payload/[0-9a-f]{16}$")


def settle_mark(
    blobs: BlobStore,
    marks: BlobMarks,
    mark: Mark,
    now: int,
    page: int,
    report: Counter[str],
    progress: Counter[str],
) -> None:
    """One due mark: its job's blobs removed as far as one visit goes (`page` keys at most)."""
    items = marks.collection(mark.job_id)
    if items is None:  # a collection too large to judge in a visit: look again later
        _counted(marks.push(mark, now + RECHECK_MS), "blob_marks_pushed", report, progress)
        return
    job_item = next((i for i in items if i.get("sk", {}).get("S") == JOB_SK), None)
    if job_item is None:
        _remove_prefix(blobs, marks, mark, now, page, report, progress)
        return
    job = job_from_item(job_item)
    if job.state not in TERMINAL_STATES:
        due = max(job.deadline_at, now + RECHECK_MS)
        _counted(marks.push(mark, due), "blob_marks_pushed", report, progress)
        return
    gone_from = int(job_item["expires_at"]["N"]) * 1000 if "expires_at" in job_item else 0
    later = max(gone_from, now + RECHECK_MS)
    if mark.swept == job.epoch and mark.after is None:
        _counted(marks.push(mark, later, swept=job.epoch), "blob_marks_pushed", report, progress)
        return
    keys, more = listed(
        blobs.s3, blobs.bucket, job_prefix(mark.job_id), after=mark.after, limit=page
    )
    progress["blob_keys_listed"] += len(keys)
    orphans = unreferenced(keys, mark.job_id, items, job.epoch)
    progress["blob_orphans_deleted"] += deleted(blobs.s3, blobs.bucket, orphans)
    if more and keys:  # the next run goes on from here (one page a mark a run)
        _counted(marks.push(mark, now + 1, after=keys[-1]), "blob_marks_pushed", report, progress)
    else:
        _counted(marks.push(mark, later, swept=job.epoch), "blob_marks_pushed", report, progress)


def _remove_prefix(
    blobs: BlobStore,
    marks: BlobMarks,
    mark: Mark,
    now: int,
    page: int,
    report: Counter[str],
    progress: Counter[str],
) -> None:
    """The job's item is gone: hold the mark (a blob writer of the job waits), delete a page of
    its prefix, then finish the mark, or release it for the next visit."""
    held = marks.claim(mark, now)
    if held is None:  # a writer marked the job again since the mark was read: its turn
        report["raced"] += 1
        return
    keys, more = listed(blobs.s3, blobs.bucket, job_prefix(mark.job_id), limit=page)
    progress["blob_objects_deleted"] += deleted(blobs.s3, blobs.bucket, keys)
    if more:  # the next run goes on (one page a mark a run: due just past this run's reach)
        marks.release(held, now + 1)
        progress["blob_prefixes_left"] += 1
    elif marks.finish(held, now):
        progress["blob_jobs_cleared"] += 1


def unreferenced(keys: list[str], job_id: str, items: list[Any], epoch: int) -> list[str]:
    """The keys of `keys` no item of the job's collection references that the engine may
    delete while the job's item lives: epoch-named at most `epoch`, or content-named payloads."""
    named = referenced(job_id, items)
    prefix = job_prefix(job_id)
    found: list[str] = []
    for key in keys:
        if key in named or not key.startswith(prefix):
            continue
        name = key.removeprefix(prefix)
        by_epoch = _EPOCH_NAMED.match(name)
        if (by_epoch and int(by_epoch.group(1)) <= epoch) or _CONTENT_NAMED.match(name):
            found.append(key)
    return found


def referenced(job_id: str, items: list[Any]) -> set[str]:
    """Every key under the job's prefix that any attribute of `items` names (at any depth, in
    a JSON string or not): a reference is never missed for the shape of the attribute holding
    it; naming more than the references only keeps more."""
    pattern = re.compile(re.escape(job_prefix(job_id)) + r"[A-Za-z0-9_.:/~-]+")
    found: set[str] = set()
    stack: list[Any] = list(items)
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            found.update(pattern.findall(value))
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list | tuple | set):
            stack.extend(value)
    return found


def _counted(
    written: bool, name: str, report: Counter[str], progress: Counter[str]
) -> None:  # a mark written, or another writer's newer one left as it is
    if written:
        progress[name] += 1
    else:
        report["raced"] += 1
