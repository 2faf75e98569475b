"""The local store keeps what it acknowledged or says why it cannot (issue 28 item 7): damage in
the middle of the journal, or in the snapshot, refuses the start naming the file, the byte offset
and the record; `leasehold local repair` keeps every record before the damage, moves the damaged
files aside (never deletes them) and says what it could not keep."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leasehold_dev.local.journal import Journal
from leasehold_dev.local.journal_format import SNAPSHOT, Change, JournalError
from leasehold_dev.local.salvage import repair


def _open(directory: Path, **options: int) -> Journal:
    journal = Journal(directory, **options)
    journal.lock()
    journal.load()
    journal.start()
    return journal


def _acknowledged(directory: Path, count: int) -> Path:
    """`count` puts, each synced before the next (as the server answers them); never closed
    (its lock let go, as by kill -9). Returns the segment that holds them."""
    journal = _open(directory)
    for n in range(count):
        journal.wait_durable(
            journal.append([Change("dynamodb", "JobsTable", f"job-{n:02d}", f'{{"n": "{n}"}}')])
        )
    journal.close(compact=False)
    segments = sorted(directory.glob("journal-*.log"))
    assert len(segments) == 1
    return segments[0]


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _offset_of_record(path: Path, number: int) -> int:
    """The byte offset at which record `number` (from 1) starts."""
    lines = path.read_bytes().splitlines(keepends=True)
    return sum(len(line) for line in lines[: number - 1])


def _keys(directory: Path) -> list[str]:
    again = Journal(directory)
    again.load()
    return sorted(key for _, _, key in again.entries)


def test_a_byte_flipped_mid_journal_refuses_the_start_naming_file_offset_and_record(
    tmp_path: Path,
) -> None:
    # Given 30 acknowledged writes in the journal and one byte flipped inside the 11th record
    segment = _acknowledged(tmp_path, 30)
    start = _offset_of_record(segment, 11)
    _flip(segment, start + 20)
    before = segment.read_bytes()
    # When the directory is loaded, the start is refused — not 10 of 30 and `ready`
    with pytest.raises(JournalError) as refused:
        Journal(tmp_path).load()
    said = str(refused.value)
    # Then the message names the file, the record's byte offset and its number, and the salvage
    assert segment.name in said
    assert f"byte {start}" in said and "record 11" in said
    assert "leasehold local repair" in said
    # and nothing was truncated: the records after the damage are still on disk
    assert segment.read_bytes() == before


def test_a_whole_last_record_that_does_not_check_out_is_damage_not_a_torn_tail(
    tmp_path: Path,
) -> None:
    """A process that dies mid-append leaves a record without its newline; a whole line whose
    checksum does not match was written whole and damaged afterwards: it may have been
    acknowledged, so it is not dropped in silence."""
    segment = _acknowledged(tmp_path, 5)
    _flip(segment, _offset_of_record(segment, 5) + 12)
    with pytest.raises(JournalError, match=r"record 5"):
        Journal(tmp_path).load()


def test_a_snapshot_header_that_does_not_check_out_refuses_the_start(tmp_path: Path) -> None:
    """The header says from which segment on the journal is replayed: a digit changed there would
    skip (and delete) acknowledged segments, so the header is checksummed like every line."""
    journal = _open(tmp_path)
    for n in range(5):
        journal.wait_durable(journal.append([Change("dynamodb", "JobsTable", f"k{n}", "{}")]))
    journal.close()
    journal = _open(tmp_path)  # records after the snapshot, in segment journal_from
    journal.wait_compacted()
    journal.wait_durable(journal.append([Change("dynamodb", "JobsTable", "later", "{}")]))
    snapshot = tmp_path / SNAPSHOT
    header = snapshot.read_bytes().split(b"\n", 1)[0]
    found = re.search(rb'"journal_from": (\d+)', header)
    assert found is not None
    damaged = header.replace(found.group(0), b'"journal_from": %d' % (int(found.group(1)) + 5))
    snapshot.write_bytes(snapshot.read_bytes().replace(header, damaged, 1))
    with pytest.raises(JournalError, match=r"snapshot.jsonl, line 1, at byte 0, is damaged"):
        Journal(tmp_path).load()
    assert any(tmp_path.glob("journal-*.log")), "no segment may be deleted on a damaged header"


def test_repair_keeps_every_record_before_the_damage_and_says_what_it_could_not_keep(
    tmp_path: Path,
) -> None:
    segment = _acknowledged(tmp_path, 30)
    start = _offset_of_record(segment, 11)
    _flip(segment, start + 20)
    original = segment.read_bytes()
    lost_bytes = len(original) - start
    # When the directory is repaired
    report = repair(tmp_path)
    said = "\n".join(report.lines())
    # Then it kept the 10 records before the damage and said exactly what it could not keep
    assert report.damaged
    assert "kept 10 records" in said
    assert f"20 records ({lost_bytes:,} bytes) from byte {start} of {segment.name}" in said
    # and the damaged original is kept aside, byte for byte
    assert report.moved_to is not None and report.moved_to.parent == tmp_path
    assert (report.moved_to / segment.name).read_bytes() == original
    assert str(report.moved_to) in said
    # and the directory now starts with every record before the damage
    assert _keys(tmp_path) == [f"job-{n:02d}" for n in range(10)]
    journal = _open(tmp_path)
    journal.wait_durable(journal.append([Change("dynamodb", "JobsTable", "after", "{}")]))
    journal.close()
    assert "after" in _keys(tmp_path)


def test_repair_of_a_damaged_snapshot_keeps_every_line_that_checks_out(tmp_path: Path) -> None:
    journal = _open(tmp_path)
    for n in range(10):
        journal.wait_durable(
            journal.append([Change("dynamodb", "JobsTable", f"k{n}", f'{{"v": "value-{n}"}}')])
        )
    journal.close()  # the state is in the snapshot alone
    journal = _open(tmp_path)
    journal.wait_compacted()  # a start compacts what the last run left: let it finish first
    journal.wait_durable(journal.append([Change("dynamodb", "JobsTable", "k10", "{}")]))
    journal.close(compact=False)
    snapshot = tmp_path / SNAPSHOT
    original = snapshot.read_bytes()
    damaged = original.replace(b"value-7", b"valuE-7", 1)
    snapshot.write_bytes(damaged)
    with pytest.raises(JournalError, match=r"snapshot.jsonl, line \d+, at byte \d+, is damaged"):
        Journal(tmp_path).load()
    report = repair(tmp_path)
    said = "\n".join(report.lines())
    assert "1 entry of the snapshot" in said and "k7" in said  # what it could not keep, named
    assert report.moved_to is not None
    assert (report.moved_to / SNAPSHOT).read_bytes() == damaged
    assert _keys(tmp_path) == sorted([f"k{n}" for n in range(11) if n != 7])


def test_repair_of_a_whole_directory_changes_nothing(tmp_path: Path) -> None:
    _acknowledged(tmp_path, 3)
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()}
    report = repair(tmp_path)
    assert not report.damaged and report.moved_to is None
    assert "nothing to repair" in "\n".join(report.lines())
    after = {path.name: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()}
    assert after == before


def test_repair_refuses_a_directory_a_running_stack_holds(tmp_path: Path) -> None:
    running = _open(tmp_path)
    with pytest.raises(JournalError, match="in use"):
        repair(tmp_path)
    running.close()


def test_the_stack_s_server_refuses_the_damaged_directory_and_starts_after_leasehold_local_repair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole path a user walks: the local stack's moto server (what `local up` starts) refuses
    the directory naming the file and offset; `leasehold local repair --data DIR` salvages it and
    says what it could not keep; the server then starts on it."""
    from leasehold_dev.cli import main
    from leasehold_dev.local.moto import process as moto_process

    data = tmp_path / "data"
    segment = _acknowledged(data, 30)
    start = _offset_of_record(segment, 11)
    _flip(segment, start + 20)
    with pytest.raises(moto_process.MotoProcessError) as refused:
        moto_process.spawn(data=data).stop()
    assert segment.name in str(refused.value) and f"byte {start}" in str(refused.value)
    assert main(["local", "repair", "--data", str(data)]) == 0
    said = capsys.readouterr().out
    assert "kept 10 records" in said and f"from byte {start} of {segment.name}" in said
    server = moto_process.spawn(data=data)
    server.stop()
    assert _keys(data) == [f"job-{n:02d}" for n in range(10)]


def test_local_repair_is_in_the_help_and_refuses_a_missing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from leasehold_dev.cli import main

    with pytest.raises(SystemExit):
        main(["local", "--help"])
    assert "repair" in capsys.readouterr().out
    assert main(["local", "repair", "--data", str(tmp_path / "nowhere")]) == 2
    assert "no data directory" in capsys.readouterr().err


_JOURNAL_BYTES = st.integers(min_value=0, max_value=10**9)
_MASKS = st.integers(min_value=1, max_value=255)


@settings(max_examples=150, deadline=None)
@given(where=_JOURNAL_BYTES, mask=_MASKS)
def test_any_one_byte_of_the_journal_damaged_refuses_the_start_or_changes_nothing(
    tmp_path_factory: pytest.TempPathFactory, where: int, mask: int
) -> None:
    """Never a silent subset: one byte changed anywhere in a journal of acknowledged records —
    the last record's newline included — either refuses the start or loads every record."""
    directory = tmp_path_factory.mktemp("flip")
    segment = _acknowledged(directory, 8)
    whole = _keys(directory)
    data = bytearray(segment.read_bytes())
    data[where % len(data)] ^= mask
    segment.write_bytes(bytes(data))
    try:
        loaded = _keys(directory)
    except JournalError as refused:
        assert segment.name in str(refused) and "at byte" in str(refused)
        return
    assert loaded == whole


@settings(max_examples=100, deadline=None)
@given(where=_JOURNAL_BYTES, mask=_MASKS)
def test_any_one_byte_of_the_snapshot_damaged_refuses_the_start_or_changes_nothing(
    tmp_path_factory: pytest.TempPathFactory, where: int, mask: int
) -> None:
    directory = tmp_path_factory.mktemp("flip")
    journal = _open(directory)
    for n in range(6):
        journal.wait_durable(journal.append([Change("dynamodb", "JobsTable", f"k{n}", "{}")]))
    journal.close()  # the state is in the snapshot alone
    entries = Journal(directory)
    entries.load()
    whole = dict(entries.entries)
    snapshot = directory / SNAPSHOT
    data = bytearray(snapshot.read_bytes())
    data[where % len(data)] ^= mask
    snapshot.write_bytes(bytes(data))
    again = Journal(directory)
    try:
        again.load()
    except JournalError as refused:
        assert SNAPSHOT in str(refused)
        return
    assert again.entries == whole


def test_a_last_record_whose_newline_alone_was_damaged_is_not_taken_for_a_torn_one(
    tmp_path: Path,
) -> None:
    """A crash leaves a record cut short; a whole record whose newline was changed still checks
    out without it: it was written whole, may have been acknowledged, and is not dropped."""
    segment = _acknowledged(tmp_path, 5)
    _flip(segment, segment.stat().st_size - 1)
    with pytest.raises(JournalError, match=r"record 5, at byte \d+"):
        Journal(tmp_path).load()


def _snapshot_with_later_records(directory: Path) -> None:
    """Ten entries in a snapshot (a clean stop), then `k10` in the journal after it."""
    journal = _open(directory)
    for n in range(10):
        journal.wait_durable(
            journal.append([Change("dynamodb", "JobsTable", f"k{n}", f'{{"v": "value-{n}"}}')])
        )
    journal.close()
    journal = _open(directory)
    journal.wait_compacted()
    journal.wait_durable(journal.append([Change("dynamodb", "JobsTable", "k10", "{}")]))
    journal.close(compact=False)


def test_a_damaged_snapshot_header_is_repaired_from_the_oldest_segment_and_said(
    tmp_path: Path,
) -> None:
    _snapshot_with_later_records(tmp_path)
    snapshot = tmp_path / SNAPSHOT
    data = bytearray(snapshot.read_bytes())
    data[3] ^= 0x01  # inside the header's checksum
    snapshot.write_bytes(bytes(data))
    with pytest.raises(JournalError, match=r"line 1, at byte 0, is damaged"):
        Journal(tmp_path).load()
    report = repair(tmp_path)
    said = "\n".join(report.lines())
    assert "the header of snapshot.jsonl" in said and "header was unreadable" in said
    assert _keys(tmp_path) == sorted(f"k{n}" for n in range(11))


@pytest.mark.parametrize("damage", ["snapshot line", "snapshot header"])
def test_the_stack_s_server_refuses_a_damaged_snapshot_and_starts_after_repair(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from leasehold_dev.cli import main
    from leasehold_dev.local.moto import process as moto_process

    data = tmp_path / "data"
    _snapshot_with_later_records(data)
    snapshot = data / SNAPSHOT
    text = snapshot.read_bytes()
    if damage == "snapshot line":
        snapshot.write_bytes(text.replace(b"value-7", b"valuE-7", 1))
    else:
        snapshot.write_bytes(text.replace(b'"entries": 10', b'"entries": 19', 1))
    with pytest.raises(moto_process.MotoProcessError) as refused:
        moto_process.spawn(data=data).stop()
    assert f"{SNAPSHOT}, line" in str(refused.value) and "at byte" in str(refused.value)
    assert main(["local", "repair", "--data", str(data)]) == 0
    said = capsys.readouterr().out
    assert "could not keep" in said and "damaged files were moved" in said
    moto_process.spawn(data=data).stop()
    expected = [f"k{n}" for n in range(11) if damage == "snapshot header" or n != 7]
    assert _keys(data) == sorted(expected)


def test_a_newer_snapshot_format_is_named_and_a_damaged_format_digit_is_damage(
    tmp_path: Path,
) -> None:
    _snapshot_with_later_records(tmp_path)
    snapshot = tmp_path / SNAPSHOT
    first, rest = snapshot.read_bytes().split(b"\n", 1)
    header = first[9:].replace(b'"format": 3', b'"format": 4')
    snapshot.write_bytes(b"%08x %s\n" % (zlib.crc32(header), header) + rest)
    with pytest.raises(JournalError, match="newer than this leasehold reads"):
        Journal(tmp_path).load()
    snapshot.write_bytes(first.replace(b'"format": 3', b'"format": 7') + b"\n" + rest)
    with pytest.raises(JournalError, match=r"line 1, at byte 0, is damaged"):
        Journal(tmp_path).load()
