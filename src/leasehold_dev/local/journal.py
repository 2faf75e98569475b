"""The local stack's redo journal: what the embedded moto server committed, on disk before it
answers (decision L15).

The state is a map from an entry's key — (space, resource, key): `("dynamodb", "JobsTable",
<the item's key>)`, `("s3", "DocumentsBucket", <object key>)` — to its *image*, a JSON text (the
item as DynamoDB JSON, the object with its body). A write appends one record: the images that
request left (an absent image: the entry was deleted), never the request itself, so replaying a
record needs no condition and applying it twice changes nothing.

Files in the data directory:
- `journal-NNNNNNNN.log`: segments of records, one a line, `<crc32 hex> <entries>` with the
  entries separated by RS (0x1E) and each entry's four fields by US (0x1F); JSON never holds a
  raw control character, and a key that holds one (an S3 key may) or starts with a quote is
  written as a JSON string, so neither separator nor a newline can occur inside a field;
- `snapshot.jsonl`: a header line (`{"format", "journal_from", "entries"}`) and one entry a line,
  each framed and checksummed as a record is (the header too, from format 3): the whole state as
  of the start of segment `journal_from` (a damaged line stops the start, naming it, rather than
  serve a wrong item);
- `lock`: held (flock) by the one process that serves the directory.

`append` writes a record with one `write`; `wait_durable` makes it durable with `fdatasync`
(group commit: the waiters that find a sync running are covered by the next one, so under load
one sync covers many records); the caller answers only after it returns. At start `load` reads
the snapshot and replays the segments after it; a record cut short at the very end of the last
segment (the process died while writing it, so it was never answered: no newline ends it) is
dropped and the file truncated there; anything else that does not check out — a whole record
anywhere, the snapshot's header or any of its lines — stops the start with the file, the byte
offset and the record (or line) named, and nothing on disk changed. `repair` salvages such a
directory: it keeps every record before the damage (and every snapshot line that checks out),
moves the damaged files aside into `damaged-<time>/` (never deletes them) and says what it could
not keep (decisions LS1–LS3). When the
current segment outgrows max(`compact_min_bytes`, the last snapshot), `append` switches to a new
segment and a thread writes a snapshot of the state as of that switch (a temporary file, fsync,
rename, fsync of the directory) and then deletes the older segments — so the journal never only
grows and a restart replays at most about one snapshot's worth of records.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import sys
import threading
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from leasehold.domain.errors import LeaseholdError

FORMAT = 3
"""3: the header line is framed and checked too; 2 (read still): every line but the header;
1 (read still): bare lines."""
SNAPSHOT = "snapshot.jsonl"
LOCK = "lock"
SEGMENT_PREFIX = "journal-"
SEGMENT_SUFFIX = ".log"
COMPACT_MIN_BYTES = 8 * 1024 * 1024
"""A segment this long (or as long as the last snapshot, if that is longer) is compacted."""

_FIELD = "\x1f"
_ENTRY = "\x1e"

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


def _segment_name(number: int) -> str:
    return f"{SEGMENT_PREFIX}{number:08d}{SEGMENT_SUFFIX}"


def _segment_number(path: Path) -> int | None:
    middle = path.name.removeprefix(SEGMENT_PREFIX).removesuffix(SEGMENT_SUFFIX)
    if path.name.startswith(SEGMENT_PREFIX) and path.name.endswith(SEGMENT_SUFFIX):
        return int(middle) if middle.isdigit() else None
    return None


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _encode(change: Change) -> str:
    return _FIELD.join((change.space, change.resource, _key_field(change.key), change.image or ""))


def _decode(text: str) -> Change:
    space, resource, key, image = text.split(_FIELD, 3)
    return Change(space, resource, _key_from_field(key), image or None)


def _key_field(key: str) -> str:
    """A key as a record holds it: as it is, unless it holds a control character (an S3 key
    may hold any, the separators and the newline included) or starts with a quote — then as a
    JSON string, which holds none."""
    if key.startswith('"') or any(ord(c) < 0x20 for c in key):
        return json.dumps(key)
    return key


def _key_from_field(field: str) -> str:
    if field.startswith('"'):
        with contextlib.suppress(ValueError):
            decoded = json.loads(field)
            if isinstance(decoded, str):
                return decoded
    return field


def _torn(line: bytes) -> bool:
    """A line a crash mid-append can leave: the end of the file without its newline — and not a
    whole record whose newline alone was damaged (that one checks out with it put back)."""
    return not line.endswith(b"\n") and parse_record(line[:-1] + b"\n") is None


def _framed(payload: bytes) -> bytes:
    return b"%08x %s\n" % (zlib.crc32(payload), payload)


def _unframed(line: bytes) -> bytes | None:
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
    return _framed(_ENTRY.join(_encode(change) for change in changes).encode())


def parse_record(line: bytes) -> list[Change] | None:
    """The changes of one whole line (its newline included), or None when it is torn or its
    checksum does not match."""
    payload = _unframed(line)
    if payload is None:
        return None
    try:
        text = payload.decode()
        return [_decode(part) for part in text.split(_ENTRY)] if text else []
    except ValueError:
        return None


def _header(line: bytes) -> dict[str, int] | None:
    """A snapshot's header line: framed (format 3) or bare JSON (formats 1 and 2); None when it
    does not check out."""
    payload = line.rstrip(b"\n") if line.startswith(b"{") else _unframed(line)
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


def _claimed_format(line: bytes) -> int | None:
    """The format a header line this leasehold does not read says it is, when it says one (the
    caller trusts it only from a framed line whose checksum matches)."""
    found = re.search(rb'"format": *(\d+)', line)
    return int(found.group(1)) if found else None


def _what_follows(rest: Iterable[bytes], *, later: int) -> str:
    """'N more records (B bytes) follow it in this file[, and K later segments]'."""
    count, size = 0, 0
    for line in rest:
        count, size = count + 1, size + len(line)
    said = f"{count:,} more record{'' if count == 1 else 's'} ({size:,} bytes) follow it"
    if later:
        said += f", and {later} later segment{'' if later == 1 else 's'}"
    return said


def _snapshot_line(line: bytes, version: int) -> Change | None:
    if version == 1:  # written before snapshot lines had a checksum
        try:
            return _decode(line.decode()[:-1]) if line.endswith(b"\n") else None
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
            out.write(_framed(json.dumps(header).encode()))
            out.writelines(record_line([Change(*key, image)]) for key, image in entries)
            out.flush()
            os.fsync(out.fileno())
        staged.replace(path)
        _fsync_directory(directory)
    except OSError:
        with contextlib.suppress(OSError):
            staged.unlink()
        raise
    return path


class Journal:
    """The state of one data directory and its journal (see the module's docstring). Appends are
    serialised by the caller's lock *and* this object's own; `wait_durable` may be called from
    any thread."""

    def __init__(self, directory: Path, *, compact_min_bytes: int = COMPACT_MIN_BYTES) -> None:
        self.directory = directory
        self.compact_min_bytes = compact_min_bytes
        self.entries: dict[EntryKey, str] = {}
        """The current state: each live entry's image (JSON text)."""
        self.compactions = 0
        self.snapshot_bytes = 0
        self._lock_file: int = -1
        self._fd = -1
        self._segment = 0
        self._segment_bytes = 0
        self._appended = 0
        self._durable = 0
        self._append_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._compaction: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._replayed_segments = 0

    # ---------------------------------------------------------------- opening and loading

    def lock(self, owner: int | None = None) -> None:
        """Take the directory for this process (flock, released when the process ends however
        it ends), recording `owner` (default: this pid) as the stack that holds it; JournalError
        when another process holds it."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.directory / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise JournalError(f"cannot use the data directory {self.directory}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise JournalError(
                f"the data directory {self.directory} is in use by another local stack "
                f"(pid {holder}); stop it (`leasehold local down`) or give this one its own "
                "`--data DIR`"
            ) from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(owner or os.getpid()).encode(), 0)
        self._lock_file = fd

    def load(self) -> Loaded:
        """Read the snapshot and replay every segment after it (see the module's docstring)."""
        started = time.monotonic()
        journal_from = self._load_snapshot()
        segments = sorted(
            (number, path)
            for path in self.directory.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}")
            if (number := _segment_number(path)) is not None
        )
        replayed, torn = 0, False
        for index, (number, path) in enumerate(segments):
            if number < journal_from:  # already in the snapshot: a compaction cut short
                path.unlink()
                continue
            count, torn_here = self._replay(path, last=index == len(segments) - 1)
            replayed += count
            torn = torn or torn_here
            self._replayed_segments += 1
        for leftover in self.directory.glob("*.tmp"):
            leftover.unlink()
        self._segment = max([journal_from - 1, *(number for number, _ in segments)], default=0)
        return Loaded(len(self.entries), replayed, torn, time.monotonic() - started)

    def _load_snapshot(self) -> int:
        path = self.directory / SNAPSHOT
        if not path.exists():
            return 0
        try:
            with path.open("rb") as snapshot:
                first = snapshot.readline()
                header = _header(first)
                if header is None:
                    version = _claimed_format(first)
                    if version is not None and version > FORMAT and _unframed(first):
                        raise JournalError(
                            f"{path} is format {version}, newer than this leasehold reads "
                            f"({FORMAT}): use the leasehold that wrote it, or start with "
                            "`--fresh` (the old state is kept aside) or another `--data DIR`"
                        )
                    raise DamageError(path, "line", 1, 0, "the header does not check out")
                entries, offset = self.entries, len(first)
                for number, raw in enumerate(snapshot, start=2):
                    change = _snapshot_line(raw, header["format"])
                    if change is None:
                        raise DamageError(
                            path,
                            "line",
                            number,
                            offset,
                            "its checksum does not match; a snapshot is written whole before "
                            "it is used",
                        )
                    entries[change.entry_key] = change.image or ""
                    offset += len(raw)
        except OSError as exc:
            raise JournalError(f"cannot read the snapshot {path}: {exc}") from exc
        if len(self.entries) != header["entries"]:
            raise JournalError(
                f"the snapshot {path} holds {len(self.entries)} entries, its header says "
                f"{header['entries']}: it is damaged. `leasehold local repair --data "
                f"{self.directory}` keeps the entries it holds and says what it could not keep"
            )
        self.snapshot_bytes = path.stat().st_size
        return header["journal_from"]

    def _replay(self, path: Path, *, last: bool) -> tuple[int, bool]:
        records, offset = 0, 0
        with path.open("rb") as segment:
            for number, line in enumerate(segment, start=1):
                changes = parse_record(line)
                if changes is None:
                    if last and _torn(line):
                        # Cut short at the very end, no newline: the process ended while writing
                        # it, so it was never synced nor answered. (A whole line that does not
                        # check out was written whole and damaged later: it may have been
                        # answered, and what follows it certainly was.)
                        os.truncate(path, offset)
                        return records, True
                    raise DamageError(
                        path,
                        "record",
                        number,
                        offset,
                        "its checksum does not match; "
                        + _what_follows(segment, later=self._later_segments(path)),
                    )
                self._apply(changes)
                records += 1
                offset += len(line)
        return records, False

    def _later_segments(self, path: Path) -> int:
        number = _segment_number(path) or 0
        return sum(
            1
            for other in self.directory.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}")
            if (_segment_number(other) or 0) > number
        )

    def _apply(self, changes: Iterable[Change]) -> None:
        entries = self.entries
        for change in changes:
            if change.image is None:
                entries.pop(change.entry_key, None)
            else:
                entries[change.entry_key] = change.image

    def start(self) -> None:
        """Open a new segment for appends; compact at once when the last run left records
        beyond its snapshot (so a journal left by a crash is folded in)."""
        with self._append_lock:
            self._open_next_segment()
            if self._replayed_segments:
                self._compact_locked()

    def _open_next_segment(self) -> None:
        self._segment += 1
        path = self.directory / _segment_name(self._segment)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._segment_bytes = 0
        _fsync_directory(self.directory)

    # ---------------------------------------------------------------- writing

    @property
    def appended(self) -> int:
        """How many records were appended (a read after them waits for this many)."""
        return self._appended

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    def append(self, changes: list[Change]) -> int:
        """Append one record and apply it to the state; returns its sequence number for
        `wait_durable`. Once a write has failed, every later call raises JournalError."""
        with self._append_lock:
            self._raise_if_failed()
            line = record_line(changes)
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(self._fd, view) :]
            except OSError as exc:
                self.fail(exc)
                raise JournalError(f"the journal could not be written: {exc}") from exc
            self._segment_bytes += len(line)
            self._appended += 1
            self._apply(changes)
            if self._segment_bytes >= max(self.compact_min_bytes, self.snapshot_bytes):
                self._compact_locked()
            return self._appended

    def wait_durable(self, sequence: int) -> None:
        """Return once record `sequence` (and every one before it) is on disk."""
        if self._durable >= sequence:
            self._raise_if_failed()
            return
        with self._sync_lock:
            self._raise_if_failed()
            if self._durable >= sequence:
                return
            target = self._appended  # every record up to here has been written to the file
            try:
                os.fdatasync(self._fd)
            except OSError as exc:
                self.fail(exc)
                raise JournalError(f"the journal could not be synced: {exc}") from exc
            self._durable = target

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise JournalError(f"the journal failed earlier: {self._failure}")

    def fail(self, exc: BaseException) -> None:
        """From now on every append and wait raises JournalError (said once on stderr)."""
        if self._failure is None:
            self._failure = exc
            print(
                f"leasehold: the local journal in {self.directory} failed ({exc}); every "
                "DynamoDB and document write is refused from now on",
                file=sys.stderr,
                flush=True,
            )

    # ---------------------------------------------------------------- compaction

    def _compact_locked(self) -> None:
        """With the append lock held: switch to a new segment and snapshot the state as of the
        switch in a thread (one at a time: while one runs, the segment just grows)."""
        if self._compaction is not None and self._compaction.is_alive():
            return
        with self._sync_lock:
            try:
                os.fdatasync(self._fd)
                os.close(self._fd)
                self._durable = self._appended
                self._open_next_segment()
            except OSError as exc:
                self.fail(exc)
                raise JournalError(f"the journal could not switch segments: {exc}") from exc
        entries = list(self.entries.items())
        self._compaction = threading.Thread(
            target=self._write_snapshot,
            args=(entries, self._segment),
            name="journal-compaction",
            daemon=True,
        )
        self._compaction.start()

    def _write_snapshot(self, entries: list[tuple[EntryKey, str]], journal_from: int) -> None:
        try:
            path = write_snapshot_file(self.directory, entries, journal_from)
            for old in self.directory.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}"):
                number = _segment_number(old)
                if number is not None and number < journal_from:
                    old.unlink()
            self.snapshot_bytes = path.stat().st_size
            self.compactions += 1
        except OSError as exc:  # the journal is whole without it: the next switch tries again
            print(f"leasehold: journal compaction failed ({exc})", file=sys.stderr, flush=True)

    def journal_bytes(self) -> int:
        """The segments' size on disk now."""
        total = 0
        for path in self.directory.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}"):
            with contextlib.suppress(FileNotFoundError):  # deleted by a compaction meanwhile
                total += path.stat().st_size
        return total

    def wait_compacted(self, timeout: float = 60.0) -> None:
        """Wait (bounded) for a compaction in progress."""
        if self._compaction is not None:
            self._compaction.join(timeout)

    def close(self, *, compact: bool = True) -> None:
        """Sync and close; with `compact`, fold the segments into a snapshot first, so the next
        start replays nothing. Idempotent."""
        with self._append_lock:
            if self._fd < 0:
                self._release_lock()
                return
            self.wait_compacted()
            if compact and self._failure is None and self._segment_bytes:
                with contextlib.suppress(JournalError):
                    self._compact_locked()
                self.wait_compacted()
            with contextlib.suppress(OSError):
                os.fdatasync(self._fd)
            os.close(self._fd)
            self._fd = -1
        self._release_lock()

    def _release_lock(self) -> None:
        if self._lock_file >= 0:
            os.close(self._lock_file)
            self._lock_file = -1


# -------------------------------------------------------------------- salvage


@dataclass
class RepairReport:
    """What `repair` found, kept and could not keep; `lines()` says it."""

    directory: Path
    damaged: bool = False
    snapshot_entries: int = 0
    records_kept: int = 0
    entries: int = 0
    moved_to: Path | None = None
    lost: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        if not self.damaged:
            return [
                f"nothing to repair: {self.directory} loads whole ({self.entries:,} entries)",
                *self.notes,
            ]
        said = [
            f"repaired {self.directory}: kept {self.records_kept:,} records of the journal "
            f"before the damage, over {self.snapshot_entries:,} entries of the snapshot "
            f"({self.entries:,} entries in all)",
            *self.notes,
        ]
        said += [f"  could not keep: {lost}" for lost in self.lost]
        said.append(f"  the damaged files were moved (not deleted) to {self.moved_to}")
        said.append("  `leasehold local up` (with the same --data) starts from what was kept")
        return said


def repair(directory: Path) -> RepairReport:
    """Salvage a data directory that `load` refuses: keep every snapshot line that checks out and
    every journal record before the first damaged one (what comes after it is not replayed over
    a gap), move the snapshot and every segment aside into `damaged-<UTC time>/` (never delete
    them), write what was kept as a new snapshot, and say what could not be kept. A directory
    that loads whole is left as it is. JournalError when a running stack holds it."""
    journal = Journal(directory)
    journal.lock()
    try:
        return _repair_locked(journal)
    finally:
        journal.close(compact=False)


def _repair_locked(journal: Journal) -> RepairReport:
    directory = journal.directory
    report = RepairReport(directory)
    segments = sorted(
        (number, path)
        for path in directory.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}")
        if (number := _segment_number(path)) is not None
    )
    journal_from = _salvage_snapshot(directory / SNAPSHOT, journal.entries, report)
    if journal_from is None:  # the header is unreadable: replay every segment there is
        journal_from = segments[0][0] if segments else 1
        report.notes.append(
            f"  the snapshot's header was unreadable: took the journal to start at segment "
            f"{journal_from} (the oldest there)"
        )
    report.snapshot_entries = len(journal.entries)
    stopped: tuple[Path, int, int] | None = None  # the damaged segment, record, offset
    for index, (number, path) in enumerate(segments):
        if number < journal_from:
            continue
        if stopped is not None:
            size = path.stat().st_size
            count = path.read_bytes().count(b"\n")
            report.lost.append(
                f"{count:,} records ({size:,} bytes) of the later segment {path.name}"
            )
            continue
        kept, damage = _salvage_segment(path, journal, last=index == len(segments) - 1)
        report.records_kept += kept
        if damage is not None:
            record, offset = damage
            stopped = (path, record, offset)
            data = path.read_bytes()[offset:]
            count = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
            report.lost.append(
                f"{count:,} records ({len(data):,} bytes) from byte {offset} of {path.name} "
                f"(record {record}, the first that does not check out, and every one after it)"
            )
    report.entries = len(journal.entries)
    if not report.lost:
        return report
    report.damaged = True
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = directory / f"damaged-{stamp}"
    suffix = 1
    while aside.exists():
        suffix += 1
        aside = directory / f"damaged-{stamp}-{suffix}"
    aside.mkdir()
    moved = [directory / SNAPSHOT] if (directory / SNAPSHOT).exists() else []
    for path in [*moved, *(path for _, path in segments)]:
        path.rename(aside / path.name)
    _fsync_directory(directory)
    last = max([journal_from - 1, *(number for number, _ in segments)], default=0)
    write_snapshot_file(directory, list(journal.entries.items()), last + 1)
    report.moved_to = aside
    return report


def _salvage_snapshot(path: Path, entries: dict[EntryKey, str], report: RepairReport) -> int | None:
    """Every line of the snapshot that checks out, into `entries`; each one that does not is
    noted in `report.lost`. The snapshot's `journal_from`, or None when its header is unreadable
    (or 0 when there is no snapshot)."""
    if not path.exists():
        return 0
    with path.open("rb") as snapshot:
        first = snapshot.readline()
        header = _header(first)
        version = header["format"] if header else FORMAT
        if header is None:
            report.lost.append(f"the header of {path.name} (line 1, at byte 0)")
        offset = len(first)
        for number, raw in enumerate(snapshot, start=2):
            change = _snapshot_line(raw, version)
            if change is None and header is None and version == FORMAT:
                change = _snapshot_line(raw, 2)  # format 2 and 3 lines are framed alike
            if change is None:
                report.lost.append(
                    f"1 entry of the snapshot (line {number}, at byte {offset}{_best_guess(raw)})"
                )
            else:
                entries[change.entry_key] = change.image or ""
            offset += len(raw)
    if header is not None and len(entries) + _lost_lines(report) != header["entries"]:
        report.lost.append(
            f"{header['entries'] - len(entries) - _lost_lines(report):,} entries the header of "
            f"{path.name} counts and no line holds"
        )
    return header["journal_from"] if header else None


def _lost_lines(report: RepairReport) -> int:
    return sum(1 for lost in report.lost if lost.startswith("1 entry of the snapshot"))


def _best_guess(raw: bytes) -> str:
    """Which entry a damaged snapshot line held, as far as it can still be read."""
    fields = raw[9:].decode(errors="replace").split(_FIELD)
    if len(fields) < 4:
        return ""
    return f": {fields[0]} {fields[1]} {_key_from_field(fields[2])[:200]}"


def _salvage_segment(
    path: Path, journal: Journal, *, last: bool
) -> tuple[int, tuple[int, int] | None]:
    """Apply the records of `path` up to the first that does not check out: (records applied,
    (record number, byte offset) of the damage or None). A torn tail of the last segment is not
    damage (it was never acknowledged): the start drops it."""
    kept, offset = 0, 0
    with path.open("rb") as segment:
        for number, line in enumerate(segment, start=1):
            changes = parse_record(line)
            if changes is None:
                if last and _torn(line):
                    return kept, None
                return kept, (number, offset)
            journal._apply(changes)
            kept += 1
            offset += len(line)
    return kept, None
