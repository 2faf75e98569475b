"""The local stack's data directory (`.leasehold/data` unless `--data DIR`): the moto server's
snapshot and journal (leasehold_dev.local.journal) and the local providers' charge ledgers.

`--fresh` does not delete it: the directory is moved whole to `<DIR>.previous` (replacing an
older one), so a `--fresh` typed by mistake can still be undone once, and the stack starts
empty, saying so."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from leasehold_dev.local.journal_format import LOCK, JournalError

PROVIDER_MODES = ("idempotent", "lookup", "none")


def provider_ledger(data: Path, mode: str) -> Path:
    """Where the local provider of capability `mode` keeps its charges."""
    return data / f"provider-{mode}.sqlite3"


def previous_of(data: Path) -> Path:
    return data.with_name(data.name + ".previous")


def set_aside(data: Path) -> Path | None:
    """For `--fresh`: move `data` to `<data>.previous` and return where it went (None: there was
    nothing to move). JournalError when a running stack holds it."""
    if not data.exists() or not any(data.iterdir()):
        return None
    _refuse_if_in_use(data)
    target = previous_of(data)
    if target.exists():
        shutil.rmtree(target)
    data.rename(target)
    return target


def _refuse_if_in_use(data: Path) -> None:
    lock = data / LOCK
    if not lock.exists():
        return
    fd = os.open(lock, os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            raise JournalError(
                f"--fresh: the data directory {data} is in use by a running local stack (pid "
                f"{holder}); stop it first (`leasehold local down`)"
            ) from exc
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def count_charges(data: Path) -> int:
    """Charges in the providers' ledgers of `data` (0 for a ledger not made yet)."""
    total = 0
    for mode in PROVIDER_MODES:
        path = provider_ledger(data, mode)
        if not path.exists():
            continue
        with (
            contextlib.closing(sqlite3.connect(path, timeout=10.0)) as conn,
            contextlib.suppress(sqlite3.OperationalError),  # no table yet
        ):
            total += int(conn.execute("SELECT COUNT(*) FROM charges").fetchone()[0])
    return total


@dataclass(frozen=True)
class RestoreSummary:
    """What a start found in its data directory, as `local up` prints it."""

    data: Path
    items: int
    tables: int
    documents: int
    charges: int
    seconds: float
    set_aside_to: Path | None = None

    def lines(self) -> list[str]:
        said = []
        if self.set_aside_to is not None:
            said.append(
                f"  --fresh: starting EMPTY on purpose; the previous state of {self.data} was "
                f"moved to {self.set_aside_to} (delete it once you are sure)"
            )
        if self.items or self.documents or self.charges:
            said.append(
                f"  restored {_count(self.items, 'item')} in {_count(self.tables, 'table')}, "
                f"{_count(self.documents, 'document')}, {_count(self.charges, 'charge')} from "
                f"{self.data} in {self.seconds:.1f} s"
            )
        else:
            said.append(f"  state: {self.data} (empty: nothing to restore)")
        return said


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}" + ("" if number == 1 else "s")
