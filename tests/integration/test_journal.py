"""leasehold_dev.local.journal: records are on disk when `wait_durable` returns, a restart
replays them (a torn last record dropped, a damaged earlier one refused), compaction keeps the
journal bounded and loses nothing, and one data directory serves one process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from leasehold_dev.local import journal as journal_module
from leasehold_dev.local.journal import Journal
from leasehold_dev.local.journal_format import SNAPSHOT, Change, JournalError


def _open(directory: Path, **options: int) -> Journal:
    journal = Journal(directory, **options)
    journal.lock()
    journal.load()
    journal.start()
    return journal


def _put(journal: Journal, key: str, value: str) -> int:
    return journal.append([Change("dynamodb", "JobsTable", key, f'{{"v": "{value}"}}')])


def _reopened(directory: Path) -> dict[tuple[str, str, str], str]:
    again = Journal(directory)
    again.load()
    return dict(again.entries)


def test_what_was_appended_and_synced_is_there_after_a_restart(tmp_path: Path) -> None:
    # Given a journal with puts, an overwrite and a delete, never closed (as after SIGKILL)
    journal = _open(tmp_path)
    _put(journal, "a", "1")
    _put(journal, "b", "1")
    _put(journal, "a", "2")
    journal.wait_durable(journal.append([Change("dynamodb", "JobsTable", "b", None)]))
    # When another process loads the directory
    entries = _reopened(tmp_path)
    # Then it holds the last image of each entry, and nothing deleted
    assert entries == {("dynamodb", "JobsTable", "a"): '{"v": "2"}'}


def test_one_sync_covers_every_record_appended_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = _open(tmp_path)
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(journal_module.os, "fdatasync", lambda fd: synced.append(fd) or real(fd))
    sequences = [_put(journal, f"k{n}", "x") for n in range(5)]
    journal.wait_durable(sequences[-1])
    for sequence in sequences:  # group commit: already durable
        journal.wait_durable(sequence)
    assert len(synced) == 1


def test_a_record_cut_short_at_the_end_is_dropped_and_the_journal_goes_on(tmp_path: Path) -> None:
    # Given two whole records and a third cut short (the process died writing it)
    journal = _open(tmp_path)
    _put(journal, "a", "1")
    journal.wait_durable(_put(journal, "b", "1"))
    segment = next(tmp_path.glob("journal-*.log"))
    with segment.open("ab") as raw:
        raw.write(b'0000abcd dynamodb\x1fJobsTable\x1fc\x1f{"v')
    # When it is loaded
    again = Journal(tmp_path)
    loaded = again.load()
    # Then the whole records are there, the torn one is gone and later appends read back
    assert loaded.torn_tail_dropped and loaded.records_replayed == 2
    assert set(again.entries) == {("dynamodb", "JobsTable", "a"), ("dynamodb", "JobsTable", "b")}
    again.start()
    again.wait_durable(_put(again, "d", "1"))
    assert ("dynamodb", "JobsTable", "d") in _reopened(tmp_path)


def test_a_damaged_record_before_the_last_segment_stops_the_start(tmp_path: Path) -> None:
    journal = _open(tmp_path)
    journal.wait_durable(_put(journal, "a", "1"))
    first = next(tmp_path.glob("journal-*.log"))
    first.write_bytes(first.read_bytes().replace(b'"1"', b'"9"'))  # the checksum no longer fits
    (tmp_path / "journal-99999999.log").write_bytes(b"")  # a later segment exists
    with pytest.raises(JournalError, match="damaged"):
        Journal(tmp_path).load()


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text.replace(b"value-7", b"valuE-7", 1),  # still JSON: a wrong item
        lambda text: text.replace(b'{"v"', b'{v"', 1),  # no longer JSON
        lambda text: text[:-20],  # cut short
    ],
)
def test_a_damaged_snapshot_line_stops_the_start_naming_it(tmp_path: Path, damage: Any) -> None:
    """A snapshot is fsynced and renamed into place whole, so a line that does not check out
    was damaged afterwards: the start stops, naming the file and line, and never serves it."""
    journal = _open(tmp_path)
    for n in range(10):
        journal.wait_durable(_put(journal, f"k{n}", f"value-{n}"))
    journal.close()  # a clean stop: the state is in the snapshot alone
    snapshot = tmp_path / SNAPSHOT
    assert b"value-7" in snapshot.read_bytes()
    snapshot.write_bytes(damage(snapshot.read_bytes()))
    with pytest.raises(JournalError, match=r"snapshot.jsonl, line \d+, at byte \d+, is damaged"):
        Journal(tmp_path).load()


def test_a_snapshot_of_format_1_is_still_read(tmp_path: Path) -> None:
    (tmp_path / SNAPSHOT).write_text(
        '{"format": 1, "journal_from": 3, "entries": 1}\n'
        'dynamodb\x1fJobsTable\x1fk1\x1f{"v": "one"}\n'
    )
    assert _reopened(tmp_path) == {("dynamodb", "JobsTable", "k1"): '{"v": "one"}'}


def test_compaction_keeps_the_journal_bounded_and_loses_nothing(tmp_path: Path) -> None:
    # Given a journal that compacts past 4 KiB, and 2,000 writes over 50 entries
    journal = _open(tmp_path, compact_min_bytes=4096)
    for n in range(2000):
        journal.wait_durable(_put(journal, f"k{n % 50}", str(n)))  # as the server does
        # the segment in use, the one being compacted, and what came while it was
        assert journal.journal_bytes() < 4 * 4096
    journal.wait_compacted()
    journal.wait_durable(journal.appended)
    assert journal.journal_bytes() < 2 * 4096
    # Then it compacted many times, and a restart (without a clean close) has every entry's
    # last image
    assert journal.compactions >= 10
    assert (tmp_path / SNAPSHOT).is_file()
    entries = _reopened(tmp_path)
    assert len(entries) == 50
    assert entries[("dynamodb", "JobsTable", "k49")] == '{"v": "1999"}'


def test_a_compaction_cut_short_before_its_rename_leaves_the_journal_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given snapshots that never reach their name (the process dies while writing one)
    journal = _open(tmp_path, compact_min_bytes=512)

    def dies_before_the_rename(self: Journal, entries: object, journal_from: int) -> None:
        (self.directory / "snapshot.tmp").write_text("half a snapshot")

    monkeypatch.setattr(Journal, "_write_snapshot", dies_before_the_rename)
    for n in range(100):
        _put(journal, f"k{n}", "v")
    journal.wait_durable(journal.appended)
    # Then every record is still replayed from the segments
    assert len(_reopened(tmp_path)) == 100


def test_a_data_directory_serves_one_process(tmp_path: Path) -> None:
    first = Journal(tmp_path)
    first.lock(owner=4242)
    with pytest.raises(JournalError, match="in use by another local stack \\(pid 4242\\)"):
        Journal(tmp_path).lock()
    first.close()
    Journal(tmp_path).lock()  # free once the first let go


def test_a_write_that_does_not_reach_disk_refuses_every_later_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = _open(tmp_path)

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(journal_module.os, "fdatasync", disk_full)
    sequence = _put(journal, "a", "1")
    with pytest.raises(JournalError, match="No space left"):
        journal.wait_durable(sequence)
    monkeypatch.undo()
    with pytest.raises(JournalError, match="failed earlier"):
        _put(journal, "b", "1")


def test_fresh_moves_the_directory_aside_whole_and_never_one_in_use(tmp_path: Path) -> None:
    from leasehold_dev.local.datadir import set_aside

    data = tmp_path / "data"
    running = _open(data)
    running.wait_durable(_put(running, "a", "1"))
    with pytest.raises(JournalError, match="in use by a running local stack"):
        set_aside(data)
    running.close()
    moved = set_aside(data)
    assert moved == tmp_path / "data.previous" and not data.exists()
    assert _reopened(moved) == {("dynamodb", "JobsTable", "a"): '{"v": "1"}'}
    assert set_aside(data) is None  # nothing left to move


def test_a_segment_compacted_away_while_a_reader_loads_is_read_from_the_new_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a live journal with records in its segment (and no snapshot yet)
    journal = _open(tmp_path)
    _put(journal, "a", "1")
    journal.wait_durable(_put(journal, "b", "2"))
    # And a reader that has listed that segment when the live journal compacts it away (the
    # race a CI run met: FileNotFoundError on a segment the reader had just listed)
    original = Journal._replay
    compacted: list[bool] = []

    def replay_after_compaction(self: Journal, path: Path, *, last: bool) -> Any:
        if not compacted:
            compacted.append(True)
            journal.close(compact=True)  # folds the segment into a snapshot, deletes it
            assert not path.exists()
        return original(self, path, last=last)

    monkeypatch.setattr(Journal, "_replay", replay_after_compaction)
    # When the reader loads, Then it starts over from the new snapshot and misses nothing
    reader = Journal(tmp_path)
    reader.load()
    assert compacted == [True]
    assert dict(reader.entries) == {
        ("dynamodb", "JobsTable", "a"): '{"v": "1"}',
        ("dynamodb", "JobsTable", "b"): '{"v": "2"}',
    }
