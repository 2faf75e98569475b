"""`leasehold local repair`: salvage a data directory that the journal refuses to load as
damaged (decisions LS1–LS3). It keeps every record before the damage and every snapshot line that
checks out, moves the damaged files aside into `damaged-<time>/` (never deletes them) and says
what it could not keep."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from leasehold_dev.local.journal import Journal
from leasehold_dev.local.journal_format import (
    FIELD_SEPARATOR,
    FORMAT,
    SEGMENT_PREFIX,
    SEGMENT_SUFFIX,
    SNAPSHOT,
    EntryKey,
    fsync_directory,
    is_torn,
    key_from_field,
    parse_record,
    read_header,
    segment_number,
    snapshot_entry,
    write_snapshot_file,
)


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
        if (number := segment_number(path)) is not None
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
    fsync_directory(directory)
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
        header = read_header(first)
        version = header["format"] if header else FORMAT
        if header is None:
            report.lost.append(f"the header of {path.name} (line 1, at byte 0)")
        offset = len(first)
        for number, raw in enumerate(snapshot, start=2):
            change = snapshot_entry(raw, version)
            if change is None and header is None and version == FORMAT:
                change = snapshot_entry(raw, 2)  # format 2 and 3 lines are framed alike
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
    fields = raw[9:].decode(errors="replace").split(FIELD_SEPARATOR)
    if len(fields) < 4:
        return ""
    return f": {fields[0]} {fields[1]} {key_from_field(fields[2])[:200]}"


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
                if last and is_torn(line):
                    return kept, None
                return kept, (number, offset)
            journal.apply_changes(changes)
            kept += 1
            offset += len(line)
    return kept, None
