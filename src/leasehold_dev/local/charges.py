"""The local provider's charge ledger: one SQLite file, durable across restarts.

The ledger is the provider's side of the truth about money: every successful enrichment is one
row, committed (WAL, synchronous=FULL) before any answer leaves. Under an idempotent key the
first charge is the only one — enforced twice: the check-and-insert runs in one `BEGIN
IMMEDIATE` transaction (writers queue behind each other, across threads and processes), and a
UNIQUE column (`dedupe_key`) makes a second idempotent charge for a key impossible even if that
check were skipped. Each operation opens its own connection, so request threads share nothing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leasehold.domain.clock import Clock, iso

MAX_LISTED_CHARGES = 1000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS charges (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    receipt TEXT NOT NULL UNIQUE,
    amount INTEGER NOT NULL CHECK (amount > 0),
    at TEXT NOT NULL,
    answer TEXT NOT NULL,
    dedupe_key TEXT UNIQUE
);
CREATE INDEX IF NOT EXISTS charges_by_key ON charges (key, seq);
"""


@dataclass(frozen=True)
class ChargeOutcome:
    """The answer to send, and whether this call created a new charge (False: an idempotent
    repeat answered from the first charge)."""

    answer: dict[str, Any]
    charged: bool


class ChargeLedger:
    def __init__(self, db_path: Path, clock: Clock) -> None:
        self.db_path = db_path
        self._clock = clock
        db_path.parent.mkdir(parents=True, exist_ok=True)
        with self._connection() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.db_path, timeout=10.0, isolation_level=None)
        with closing(conn):
            conn.execute("PRAGMA synchronous=FULL")
            yield conn

    def charge(
        self,
        key: str,
        build_answer: Callable[[str], dict[str, Any]],
        *,
        amount: int,
        new_receipt: Callable[[], str],
        idempotent: bool,
    ) -> ChargeOutcome:
        """Record one charge under `key` and return the answer that goes with it. With
        `idempotent`, a key that was already charged returns the first answer and charges
        nothing. The row is committed before this returns: the caller may lose the answer, the
        ledger never loses the charge."""
        with self._connection() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
                if idempotent:
                    first = _first_answer(conn, key)
                    if first is not None:
                        conn.execute("COMMIT")
                        return ChargeOutcome(first, charged=False)
                receipt = new_receipt()
                answer = build_answer(receipt)
                conn.execute(
                    "INSERT INTO charges (key, receipt, amount, at, answer, dedupe_key)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        key,
                        receipt,
                        amount,
                        iso(self._clock.now_ms()),
                        json.dumps(answer),
                        key if idempotent else None,
                    ),
                )
                conn.execute("COMMIT")
                return ChargeOutcome(answer, charged=True)
            except sqlite3.IntegrityError:
                conn.execute("ROLLBACK")
                first = _first_answer(conn, key) if idempotent else None
                if first is None:
                    raise
                return ChargeOutcome(first, charged=False)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def first_answer(self, key: str) -> dict[str, Any] | None:
        """The answer of the first charge under `key`, or None when nothing was charged."""
        with self._connection() as conn:
            return _first_answer(conn, key)

    def list_charges(self, key: str | None = None) -> tuple[int, list[dict[str, Any]]]:
        """(how many charges match, the oldest MAX_LISTED_CHARGES of them)."""
        where, args = ("WHERE key = ?", (key,)) if key is not None else ("", ())
        with self._connection() as conn:
            (count,) = conn.execute(f"SELECT COUNT(*) FROM charges {where}", args).fetchone()
            rows = conn.execute(
                f"SELECT key, amount, at, receipt FROM charges {where} ORDER BY seq LIMIT ?",
                (*args, MAX_LISTED_CHARGES),
            ).fetchall()
        charges = [{"key": k, "amount": a, "at": at, "receipt": r} for k, a, at, r in rows]
        return int(count), charges


def _first_answer(conn: sqlite3.Connection, key: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT answer FROM charges WHERE key = ? ORDER BY seq LIMIT 1", (key,)
    ).fetchone()
    return None if row is None else dict(json.loads(row[0]))
