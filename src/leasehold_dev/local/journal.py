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
import os
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from leasehold_dev.local.journal_format import (
    FORMAT,
    LOCK,
    SEGMENT_PREFIX,
    SEGMENT_SUFFIX,
    SNAPSHOT,
    Change,
    DamageError,
    EntryKey,
    JournalError,
    Loaded,
    claimed_format,
    fsync_directory,
    is_torn,
    parse_record,
    read_header,
    record_line,
    segment_name,
    segment_number,
    snapshot_entry,
    unframed,
    what_follows,
    write_snapshot_file,
)

COMPACT_MIN_BYTES = 8 * 1024 * 1024
"""A segment this long (or as long as the last snapshot, if that is longer) is compacted."""


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
        """Read the snapshot and replay every segment after it (see the module's docstring).
        A compaction running beside this reader (the live journal's, when another process
        reads the directory) may fold a listed segment into a new snapshot and delete it before
        it is replayed: the load then starts over from the new snapshot, at most five times."""
        started = time.monotonic()
        for _ in range(5):
            try:
                replayed, torn, journal_from, segments = self._load_once()
                break
            except FileNotFoundError:  # a segment listed a moment ago is gone: compacted
                self.entries.clear()
                self._replayed_segments = 0
        else:
            raise JournalError(
                f"{self.directory}: the journal's segments kept being compacted away while "
                "this reader loaded them; try again"
            )
        for leftover in self.directory.glob("*.tmp"):
            leftover.unlink(missing_ok=True)
        self._segment = max([journal_from - 1, *(number for number, _ in segments)], default=0)
        return Loaded(len(self.entries), replayed, torn, time.monotonic() - started)

    def _load_once(self) -> tuple[int, bool, int, list[tuple[int, Path]]]:
        journal_from = self._load_snapshot()
        segments = sorted(
            (number, path)
            for path in self.directory.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}")
            if (number := segment_number(path)) is not None
        )
        replayed, torn = 0, False
        for index, (number, path) in enumerate(segments):
            if number < journal_from:  # already in the snapshot: a compaction cut short
                path.unlink(missing_ok=True)  # or a running compaction removes it as we look
                continue
            count, torn_here = self._replay(path, last=index == len(segments) - 1)
            replayed += count
            torn = torn or torn_here
            self._replayed_segments += 1
        return replayed, torn, journal_from, segments

    def _load_snapshot(self) -> int:
        path = self.directory / SNAPSHOT
        if not path.exists():
            return 0
        try:
            with path.open("rb") as snapshot:
                first = snapshot.readline()
                header = read_header(first)
                if header is None:
                    version = claimed_format(first)
                    if version is not None and version > FORMAT and unframed(first):
                        raise JournalError(
                            f"{path} is format {version}, newer than this leasehold reads "
                            f"({FORMAT}): use the leasehold that wrote it, or start with "
                            "`--fresh` (the old state is kept aside) or another `--data DIR`"
                        )
                    raise DamageError(path, "line", 1, 0, "the header does not check out")
                entries, offset = self.entries, len(first)
                for number, raw in enumerate(snapshot, start=2):
                    change = snapshot_entry(raw, header["format"])
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
                    if last and is_torn(line):
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
                        + what_follows(segment, later=self._later_segments(path)),
                    )
                self.apply_changes(changes)
                records += 1
                offset += len(line)
        return records, False

    def _later_segments(self, path: Path) -> int:
        number = segment_number(path) or 0
        return sum(
            1
            for other in self.directory.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}")
            if (segment_number(other) or 0) > number
        )

    def apply_changes(self, changes: Iterable[Change]) -> None:
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
        path = self.directory / segment_name(self._segment)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._segment_bytes = 0
        fsync_directory(self.directory)

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
            self.apply_changes(changes)
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
                number = segment_number(old)
                if number is not None and number < journal_from:
                    old.unlink(missing_ok=True)  # a reader's load() may have got there first
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
