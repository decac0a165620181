"""Where hooks put what they capture until it is stored, and what they injected.

A hook that captures (a prompt, a tool's result, an answer) must answer its
host at once, and many may run at once: parallel tool calls, several sessions.
So it does not open the engine. It appends one row to the spool, a small
SQLite file of its own in the data folder (WAL, so appends never wait for a
reader), and a drain stores the rows later in one engine process
(:mod:`.drain`). Rows are already redacted when they are written.

A drain *claims* the rows of turns that ended (a turn ends with an ``end``
row, which a hook writes when the agent stops, before compaction and at the
session's end), so that a turn's edits and its answer are kept together. It
claims them before it stores them and deletes them only after the
store committed, so nothing is lost: a drain that fails lets its rows go back,
and rows a crashed drain claimed are claimed again once they are
:data:`STALE_CLAIM_S` old. Storing the same capture twice would reinforce, not
copy, the memory.

The spool also remembers which memories were injected into which session, so
that a prompt's context leaves out what the agent has already seen.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.places import data_folder

__all__ = ["Captured", "Spool", "spool_path"]

#: A claim older than this belongs to a drain that died: its rows are free again.
STALE_CLAIM_S = 600.0
#: Captures of a turn that never ended are stored once they are this old.
ABANDONED_S = 3600.0
#: The kind of capture that ends a turn: what the session captured up to it is ready.
END = "end"
#: How long an injection is remembered (a session longer than this may see a memory again).
INJECTED_KEPT_S = 7 * 86400.0
#: How long an append waits for another writer of the spool.
BUSY_TIMEOUT_S = 5.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS captured (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL,
    scope TEXT NOT NULL,
    host TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    at REAL NOT NULL,
    claimed_at REAL
);
CREATE TABLE IF NOT EXISTS injected (
    session TEXT NOT NULL,
    record_id TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (session, record_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sessions (
    session TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    host TEXT NOT NULL,
    first_at REAL NOT NULL,
    last_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sessions_scope ON sessions (scope, last_at);
"""


def spool_path() -> Path:
    """The hooks' spool, in the data folder."""
    return data_folder() / "hooks" / "spool.db"


@dataclass(frozen=True)
class Captured:
    """One spooled capture: ``kind`` is ``prompt``, ``tool``, ``answer`` or ``end``."""

    id: int
    session: str
    scope: str
    host: str
    kind: str
    body: dict[str, Any]
    at: float


class Spool:
    """The spool file at ``path``, created on first use."""

    def __init__(self, path: str | Path, *, timeout: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        if self._db.execute("PRAGMA user_version").fetchone()[0] == 0:
            self._db.execute("PRAGMA journal_mode=WAL")
            # One script, one transaction: executescript commits what is open first.
            self._db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} PRAGMA user_version = 1; COMMIT;")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- captures ------------------------------------------------------------

    def append(
        self, *, session: str, scope: str, host: str, kind: str, body: dict[str, Any], at: float
    ) -> None:
        """Add one capture (already redacted), and note the session as active."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO captured (session, scope, host, kind, body, at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (session, scope, host, kind, json.dumps(body, ensure_ascii=False), at),
            )
            self._active(db, session, scope, host, at)

    # -- sessions ------------------------------------------------------------

    @staticmethod
    def _active(db: sqlite3.Connection, session: str, scope: str, host: str, at: float) -> None:
        db.execute(
            "INSERT INTO sessions (session, scope, host, first_at, last_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (session) DO UPDATE SET last_at = max(last_at, excluded.last_at)",
            (session, scope, host, at, at),
        )

    def active(self, session: str, scope: str, host: str, at: float) -> None:
        """Note that ``session`` of ``scope`` was active at ``at``."""
        with self._transaction() as db:
            self._active(db, session, scope, host, at)

    def last_session(self, scope: str, *, other_than: str | None = None) -> str | None:
        """The session of ``scope`` active last, leaving out ``other_than``."""
        row = self._db.execute(
            "SELECT session FROM sessions WHERE scope = ? AND session != ? "
            "ORDER BY last_at DESC LIMIT 1",
            (scope, other_than or ""),
        ).fetchone()
        return None if row is None else str(row[0])

    def pending(self) -> int:
        """How many captures wait for a drain (claimed or not)."""
        return int(self._db.execute("SELECT count(*) FROM captured").fetchone()[0])

    def claim(self, now: float) -> list[Captured]:
        """Take the captures of every ended turn for a drain, oldest first.

        A turn ends with an ``end`` capture (:data:`END`); what a session
        captured after its last end belongs to a turn still going on, and
        waits, unless it is :data:`ABANDONED_S` old (its session died).
        Unclaimed captures and stale claims are taken.
        """
        with self._transaction() as db:
            rows = db.execute(
                "UPDATE captured SET claimed_at = ? "
                "WHERE (claimed_at IS NULL OR claimed_at < ?) AND (at < ? OR id <= "
                "(SELECT max(e.id) FROM captured e WHERE e.session = captured.session "
                "AND e.kind = ?)) "
                "RETURNING id, session, scope, host, kind, body, at",
                (now, now - STALE_CLAIM_S, now - ABANDONED_S, END),
            ).fetchall()
        return sorted(
            (
                Captured(int(i), str(s), str(sc), str(h), str(k), json.loads(b), float(a))
                for i, s, sc, h, k, b, a in rows
            ),
            key=lambda c: c.id,
        )

    def done(self, ids: Sequence[int]) -> None:
        """Forget captures that are stored."""
        self._by_ids("DELETE FROM captured WHERE id IN ({})", ids)

    def release(self, ids: Sequence[int]) -> None:
        """Give back captures a drain could not store, for the next drain."""
        self._by_ids("UPDATE captured SET claimed_at = NULL WHERE id IN ({})", ids)

    def _by_ids(self, sql: str, ids: Sequence[int]) -> None:
        with self._transaction() as db:
            for start in range(0, len(ids), 500):
                chunk = list(ids[start : start + 500])
                db.execute(sql.format(",".join("?" * len(chunk))), chunk)

    # -- injections ----------------------------------------------------------

    def injected(self, session: str) -> set[str]:
        """The record ids already injected into ``session``."""
        rows = self._db.execute("SELECT record_id FROM injected WHERE session = ?", (session,))
        return {str(row[0]) for row in rows}

    def inject(self, session: str, record_ids: Sequence[str], at: float) -> None:
        """Remember that ``record_ids`` were injected into ``session``."""
        if not record_ids:
            return
        with self._transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO injected (session, record_id, at) VALUES (?, ?, ?)",
                [(session, record_id, at) for record_id in record_ids],
            )
            db.execute("DELETE FROM injected WHERE at < ?", (at - INJECTED_KEPT_S,))
