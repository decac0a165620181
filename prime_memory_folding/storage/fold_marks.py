"""What incremental folds keep between folds, and look up.

A store remembers where its last fold got to (:func:`fold_state`), each live
record's prune moment, indexed, so that the records due are a range
(:func:`replace_marks`, :func:`due_for_pruning`), and answers which records
hold a word from its full-text index (:func:`rows_with_word`). The SQL runs on
both backends (:class:`~.base.SqlStorage`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..core.words import UNSEGMENTED_RUN
from .base import SqlStorage
from .sqlite import SQLiteStorage, _chunks

__all__ = [
    "FOLD_STATE_KEY",
    "due_for_pruning",
    "fold_state",
    "replace_marks",
    "rows_with_word",
    "set_fold_state",
]

#: The meta key where a fold leaves how far it got (see :func:`fold_state`).
FOLD_STATE_KEY = "fold_state"


def fold_state(storage: SqlStorage) -> tuple[int, str] | None:
    """The change-log position and policy key the last fold left, if any."""
    raw = storage.get_meta(FOLD_STATE_KEY)
    if raw is None:
        return None
    try:
        state = json.loads(raw)
        return int(state["seq"]), str(state["policy"])
    except (ValueError, KeyError, TypeError):
        return None


def set_fold_state(storage: SqlStorage, seq: int, policy_key: str) -> None:
    """Note that every record changed up to ``seq`` was screened. Call inside a transaction."""
    storage.set_meta(FOLD_STATE_KEY, json.dumps({"seq": seq, "policy": policy_key}))


def replace_marks(
    storage: SqlStorage,
    marks: Sequence[tuple[str, float]],
    *,
    forget: Sequence[str] = (),
    everything: bool = False,
    compare: bool = False,
) -> None:
    """Write prune moments ``(record_id, prune_at)``; drop ``forget``'s.

    With ``compare``, only those that differ from their stored moments are
    written (an incremental fold plans over records it only read, whose
    moments a store or an earlier fold already wrote).

    With ``everything``, ``marks`` are every live record's moment, and only
    those that differ from the stored ones are written: a store keeps most of
    them from the moment it writes a record. ``forget``'s moments go (the
    records this fold archives: those it prunes were due, and would stay due);
    other moments no live record needs stay behind (:func:`due_for_pruning`
    looks only at live records, and an incremental fold drops those of the
    records it reads), until they and the changes reach a quarter of the
    table: the table is then written anew, without them. Call inside a
    transaction.
    """
    db = storage.db
    if everything:
        stored = dict(db.execute("SELECT record_id, prune_at FROM fold_marks").fetchall())
        changed = [(rid, at) for rid, at in marks if stored.pop(rid, None) != at]
        forget = sorted(rid for rid in forget if stored.pop(rid, None) is not None)
        if len(changed) + len(stored) < max(_REBUILD_MARKS, len(marks) // 4):
            marks = changed
        else:
            # Many moments at once go in faster without the index on prune_at,
            # built again after in one sorted pass (same name and columns on
            # both backends).
            db.execute("DELETE FROM fold_marks")
            db.execute("DROP INDEX fold_marks_prune_at")
            db.executemany("INSERT INTO fold_marks (record_id, prune_at) VALUES (?, ?)", marks)
            db.execute("CREATE INDEX fold_marks_prune_at ON fold_marks (prune_at)")
            return
    elif compare:
        stored = {}
        for chunk in _chunks([rid for rid, _ in marks]):
            sql = "SELECT record_id, prune_at FROM fold_marks WHERE record_id IN "
            stored.update(db.execute(f"{sql}({_placeholders(chunk)})", chunk))
        marks = [(rid, at) for rid, at in marks if stored.get(rid) != at]
    for chunk in _chunks(list(forget)):
        db.execute(f"DELETE FROM fold_marks WHERE record_id IN ({_placeholders(chunk)})", chunk)
    db.executemany(
        "INSERT INTO fold_marks (record_id, prune_at) VALUES (?, ?) "
        "ON CONFLICT (record_id) DO UPDATE SET prune_at = excluded.prune_at",
        marks,
    )


def _placeholders(values: Sequence[object]) -> str:
    """One ``?`` per value, comma-separated."""
    return ",".join("?" * len(values))


#: From this many changed or left-over marks (and a quarter of the table), a
#: full fold writes the table anew rather than row by row.
_REBUILD_MARKS = 50_000


def due_for_pruning(storage: SqlStorage, until: float) -> list[str]:
    """Live records whose prune moment is at or before ``until``, in id order: one range query.

    Sorted here rather than by the query, so that no planner reads the whole
    table in id order instead of the range of the index on ``prune_at``.
    """
    sql = (
        "SELECT m.record_id FROM fold_marks AS m JOIN records AS r USING (record_id) "
        "WHERE m.prune_at <= ?"
    )
    return sorted(row[0] for row in storage.db.execute(sql, (until,)))


def rows_with_word(storage: SqlStorage, word: str, limit: int) -> npt.NDArray[np.int64] | None:
    """Row ids of records whose text holds ``word``, or None past ``limit`` of them.

    Asks the full-text index, whose tokens are stemmed: it may give more
    records than hold the exact word, never fewer, for a word of letters and
    digits. Returns None for a word the index cannot look up: one without a
    letter or digit, or from a script written without spaces, which the index
    keeps as whole runs rather than as folding's character pairs.

    On PostgreSQL it is always None: its ``tsvector`` keeps host names, paths,
    e-mail addresses and numbers as whole tokens and leaves out stop words, so
    it may find fewer records than hold a word. The caller then compares the
    record by vector instead, which finds every record it can fold with.
    """
    if not isinstance(storage, SQLiteStorage):
        return None
    if UNSEGMENTED_RUN.search(word) or not any(ch.isalnum() for ch in word):
        return None
    phrase = word.replace('"', '""')
    try:
        # Counted and joined inside SQLite: a common word costs no row objects.
        count, joined = storage.db.execute(
            "SELECT count(*), group_concat(rowid) FROM "
            "(SELECT rowid FROM records_fts WHERE records_fts MATCH ? LIMIT ?)",
            (f'"{phrase}"', limit + 1),
        ).fetchone()
    except sqlite3.Error:
        return None
    if count > limit:
        return None
    if not count:
        return np.zeros(0, dtype=np.int64)
    return np.array(joined.split(","), dtype=np.int64)
