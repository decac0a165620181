"""What incremental folds keep between folds, and look up.

A store remembers where its last fold got to (:func:`fold_state`), each live
record's prune moment, indexed, so that the records due are a range
(:func:`replace_marks`, :func:`due_for_pruning`), and answers which records
hold a word from its full-text index (:func:`rows_with_word`). It also keeps
the groups of records that folds keep apart (:func:`kept_apart`), which an
unfold writes. The SQL runs on both backends (:class:`~.base.SqlStorage`).
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
    "add_kept_apart",
    "carry_kept_apart",
    "drop_kept_apart",
    "due_for_pruning",
    "fold_state",
    "held_by_last_fold",
    "kept_apart",
    "replace_marks",
    "rows_with_word",
    "set_fold_state",
    "tidy_kept_apart",
    "word_rows",
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


def set_fold_state(
    storage: SqlStorage, seq: int, policy_key: str, held: Sequence[str] = ()
) -> None:
    """Note that every record changed up to ``seq`` was screened. Call inside a transaction.

    ``held``: records left unmerged for that fold only, which the next one screens again.
    """
    state: dict[str, object] = {"seq": seq, "policy": policy_key}
    if held:
        state["held"] = list(held)
    storage.set_meta(FOLD_STATE_KEY, json.dumps(state))


def held_by_last_fold(storage: SqlStorage) -> list[str]:
    """The records the last fold left unmerged for itself only (see :func:`set_fold_state`)."""
    raw = storage.get_meta(FOLD_STATE_KEY)
    try:
        held = json.loads(raw).get("held", []) if raw is not None else []
    except (ValueError, AttributeError):
        return []
    return [str(rid) for rid in held] if isinstance(held, list) else []


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
    it may find fewer records than hold a word. A fold there asks its text
    cache instead (:func:`word_rows`), or compares the record by vector,
    which finds every record it can fold with.
    """
    if not isinstance(storage, SQLiteStorage):
        return None
    return word_rows(storage.db, word, limit)


def word_rows(db: sqlite3.Connection, word: str, limit: int) -> npt.NDArray[np.int64] | None:
    """:func:`rows_with_word` on a database with the SQLite store's ``records_fts``
    (the store's own, or a server's text cache of a PostgreSQL store)."""
    if UNSEGMENTED_RUN.search(word) or not any(ch.isalnum() for ch in word):
        return None
    phrase = word.replace('"', '""')
    try:
        # Counted and joined inside SQLite: a common word costs no row objects.
        count, joined = db.execute(
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


# -- groups kept apart ---------------------------------------------------------------------


def kept_apart(storage: SqlStorage) -> list[frozenset[str]]:
    """Every group of records that folds keep apart, in the order they were made."""
    rows = storage.db.execute(
        "SELECT set_id, record_id FROM fold_apart ORDER BY set_id, record_id"
    ).fetchall()
    groups: dict[int, set[str]] = {}
    for set_id, rid in rows:
        groups.setdefault(int(set_id), set()).add(str(rid))
    return [frozenset(members) for members in groups.values() if len(members) > 1]


def add_kept_apart(storage: SqlStorage, record_ids: Sequence[str]) -> bool:
    """Keep ``record_ids`` apart from each other in every later fold. Call inside a transaction.

    Returns False, writing nothing, for fewer than two ids or a group already kept.
    """
    members = sorted(set(record_ids))
    if len(members) < 2 or frozenset(members) in kept_apart(storage):
        return False
    (top,) = storage.db.execute("SELECT max(set_id) FROM fold_apart").fetchone()
    set_id = 1 + (int(top) if top is not None else 0)
    storage.db.executemany(
        "INSERT INTO fold_apart (set_id, record_id) VALUES (?, ?)",
        [(set_id, rid) for rid in members],
    )
    return True


def drop_kept_apart(storage: SqlStorage, record_ids: Sequence[str]) -> int:
    """Forget every group that holds one of ``record_ids``; how many went. In a transaction."""
    ids = sorted(set(record_ids))
    sets: set[int] = set()
    for chunk in _chunks(ids):
        sql = f"SELECT set_id FROM fold_apart WHERE record_id IN ({_placeholders(chunk)})"
        sets.update(int(row[0]) for row in storage.db.execute(sql, chunk))
    numbers = sorted(sets)
    for chunk in _chunks(numbers):
        storage.db.execute(
            f"DELETE FROM fold_apart WHERE set_id IN ({_placeholders(chunk)})", chunk
        )
    return len(numbers)


def carry_kept_apart(storage: SqlStorage, moves: Sequence[tuple[str, Sequence[str]]]) -> None:
    """Let other records stand for gone ones in their groups: ``(gone, [standing, ...])``.

    A fold moves a member's place to the record it was folded into, so that no
    later fold merges that record with the member's group; an unfold moves the
    folded record's place back to the members it restores. Call inside a
    transaction.
    """
    db = storage.db
    # The table holds what unfolds wrote, few rows: read it once rather than
    # ask for each of a large fold's members.
    places: dict[str, list[int]] = {}
    for set_id, rid in db.execute("SELECT set_id, record_id FROM fold_apart"):
        places.setdefault(str(rid), []).append(int(set_id))
    for gone, standing in moves:
        sets = places.get(gone)
        if not sets:
            continue
        db.execute("DELETE FROM fold_apart WHERE record_id = ?", (gone,))
        db.executemany(
            "INSERT INTO fold_apart (set_id, record_id) VALUES (?, ?) "
            "ON CONFLICT (set_id, record_id) DO NOTHING",
            [(set_id, rid) for set_id in sets for rid in standing],
        )


def tidy_kept_apart(storage: SqlStorage) -> None:
    """Drop the members no longer live or archived, then groups left with fewer than two.

    After a purge, so that a group never names a record gone for good. In a transaction.
    """
    db = storage.db
    db.execute(
        "DELETE FROM fold_apart WHERE record_id NOT IN (SELECT record_id FROM records) "
        "AND record_id NOT IN (SELECT record_id FROM archive)"
    )
    db.execute(
        "DELETE FROM fold_apart WHERE set_id IN "
        "(SELECT set_id FROM fold_apart GROUP BY set_id HAVING count(*) < 2)"
    )
