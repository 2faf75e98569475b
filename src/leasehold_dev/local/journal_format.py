"""The on-disk format of the local stack's journal (leasehold_dev.local.journal): file names,
records and snapshot lines — each framed as `<crc32 hex> <entries>`, entries separated by RS
(0x1E) and each entry's four fields by US (0x1F) — how they are written, and how one is checked
and read back. No state: the Journal and the salvage (leasehold_dev.local.salvage) both use it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from leasehold.domain.errors import LeaseholdError

FORMAT = 3
"""3: the header line is framed and checked too; 2 (read still): every line but the header;
1 (read still): bare lines."""
SNAPSHOT = "snapshot.jsonl"
LOCK = "lock"
SEGMENT_PREFIX = "journal-"
SEGMENT_SUFFIX = ".log"

FIELD_SEPARATOR = "\x1f"
ENTRY_SEPARATOR = "\x1e"

EntryKey = tuple[str, str, str]
"""(space, resource, key): `("dynamodb", "JobsTable", '[{"S":"JOB#j_1"},{"S":"JOB"}]')`."""


class JournalError(LeaseholdError, RuntimeError):
    """The data directory cannot be used (in use, unreadable, or a write did not reach disk);
    the message names the file and what to do."""


class DamageError(JournalError):
    """A record or snapshot line that does not check out, where a crash cannot have left it: the
    start is refused (nothing on disk changed) and `leasehold local repair` is offered."""

    def __init__(self, path: Path, what: str, number: int, offset: int, detail: str) -> None:
        self.path, self.number, self.offset = path, number, offset
        kept = (
            "every journal record before the damage"
            if what == "record"
            else "every snapshot line that checks out"
        )
        super().__init__(
            f"{path}, {what} {number}, at byte {offset}, is damaged ({detail}); the start is "
            "refused rather than serve a state without it. `leasehold local repair --data "
            f"{path.parent}` keeps {kept}, moves the damaged files aside (never deletes them) "
            "and says what it could not keep; or start with `--fresh`"
        )


@dataclass(frozen=True)
class Change:
    """One entry as a write left it: `image` is its JSON text, None when it was deleted."""

    space: str
    resource: str
    key: str
    image: str | None

    @property
    def entry_key(self) -> EntryKey:
        return (self.space, self.resource, self.key)


@dataclass(frozen=True)
class Loaded:
    """What `load` found: entries, records replayed, and whether a torn tail was dropped."""

    entries: int
    records_replayed: int
    torn_tail_dropped: bool
    seconds: float


def segment_name(number: int) -> str:
    return f"{SEGMENT_PREFIX}{number:08d}{SEGMENT_SUFFIX}"


def segment_number(path: Path) -> int | None:
    middle = path.name.removeprefix(SEGMENT_PREFIX).removesuffix(SEGMENT_SUFFIX)
    if path.name.startswith(SEGMENT_PREFIX) and path.name.endswith(SEGMENT_SUFFIX):
        return int(middle) if middle.isdigit() else None
    return None


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def encode_change(change: Change) -> str:
    return FIELD_SEPARATOR.join(
        (change.space, change.resource, key_field(change.key), change.image or "")
    )


def decode_change(text: str) -> Change:
    space, resource, key, image = text.split(FIELD_SEPARATOR, 3)
    return Change(space, resource, key_from_field(key), image or None)


def key_field(key: str) -> str:
    """A key as a record holds it: as it is, unless it holds a control character (an S3 key
    may hold any, the separators and the newline included) or starts with a quote — then as a
    JSON string, which holds none."""
    if key.startswith('"') or any(ord(c) < 0x20 for c in key):
        return json.dumps(key)
    return key


def key_from_field(field: str) -> str:
    if field.startswith('"'):
        with contextlib.suppress(ValueError):
            decoded = json.loads(field)
            if isinstance(decoded, str):
                return decoded
    return field


def is_torn(line: bytes) -> bool:
    """A line a crash mid-append can leave: the end of the file without its newline — and not a
    whole record whose newline alone was damaged (that one checks out with it put back)."""
    return not line.endswith(b"\n") and parse_record(line[:-1] + b"\n") is None


def framed(payload: bytes) -> bytes:
    return b"%08x %s\n" % (zlib.crc32(payload), payload)


def unframed(line: bytes) -> bytes | None:
    """The payload of one whole framed line (its newline included), or None when it is torn or
    its checksum does not match."""
    if not line.endswith(b"\n") or len(line) < 10 or line[8:9] != b" ":
        return None
    payload = line[9:-1]
    try:
        return payload if int(line[:8], 16) == zlib.crc32(payload) else None
    except ValueError:
        return None


def record_line(changes: Iterable[Change]) -> bytes:
    """One journal record: `<crc32 of the entries, 8 hex> <entries>\\n`."""
    return framed(ENTRY_SEPARATOR.join(encode_change(change) for change in changes).encode())


def parse_record(line: bytes) -> list[Change] | None:
    """The changes of one whole line (its newline included), or None when it is torn or its
    checksum does not match."""
    payload = unframed(line)
    if payload is None:
        return None
    try:
        text = payload.decode()
        return [decode_change(part) for part in text.split(ENTRY_SEPARATOR)] if text else []
    except ValueError:
        return None


def read_header(line: bytes) -> dict[str, int] | None:
    """A snapshot's header line: framed (format 3) or bare JSON (formats 1 and 2); None when it
    does not check out."""
    payload = line.rstrip(b"\n") if line.startswith(b"{") else unframed(line)
    if payload is None:
        return None
    try:
        header = json.loads(payload)
        version = header.get("format")
        fields = (int(header["journal_from"]), int(header["entries"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if line.startswith(b"{") and version not in {1, 2}:
        return None  # format 3 headers are framed: a bare one is not one
    if not line.startswith(b"{") and version != FORMAT:
        return None
    return {"format": int(version), "journal_from": fields[0], "entries": fields[1]}


def claimed_format(line: bytes) -> int | None:
    """The format a header line this leasehold does not read says it is, when it says one (the
    caller trusts it only from a framed line whose checksum matches)."""
    found = re.search(rb'"format": *(\d+)', line)
    return int(found.group(1)) if found else None


def what_follows(rest: Iterable[bytes], *, later: int) -> str:
    """'N more records (B bytes) follow it in this file[, and K later segments]'."""
    count, size = 0, 0
    for line in rest:
        count, size = count + 1, size + len(line)
    said = f"{count:,} more record{'' if count == 1 else 's'} ({size:,} bytes) follow it"
    if later:
        said += f", and {later} later segment{'' if later == 1 else 's'}"
    return said


def snapshot_entry(line: bytes, version: int) -> Change | None:
    if version == 1:  # written before snapshot lines had a checksum
        try:
            return decode_change(line.decode()[:-1]) if line.endswith(b"\n") else None
        except ValueError:
            return None
    changes = parse_record(line)
    if changes is None or len(changes) != 1 or changes[0].image is None:
        return None
    return changes[0]


def write_snapshot_file(
    directory: Path, entries: list[tuple[EntryKey, str]], journal_from: int
) -> Path:
    """Write `snapshot.jsonl` whole: a temporary file, fsync, rename, fsync of the directory."""
    path = directory / SNAPSHOT
    staged = path.with_suffix(".tmp")
    header = {"format": FORMAT, "journal_from": journal_from, "entries": len(entries)}
    try:
        with staged.open("wb") as out:
            out.write(framed(json.dumps(header).encode()))
            out.writelines(record_line([Change(*key, image)]) for key, image in entries)
            out.flush()
            os.fsync(out.fileno())
        staged.replace(path)
        fsync_directory(directory)
    except OSError:
        with contextlib.suppress(OSError):
            staged.unlink()
        raise
    return path
