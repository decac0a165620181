"""Every record's text in a full-text index of SQLite's, held by the server.

PostgreSQL's own text search splits, stems and counts words its way
(``tsvector``), so BM25 over it is not the embedded store's, and scoring every
record that holds a query's word costs a read of each at a million records.
So, by default, each server of a store that ranks in its own database keeps
the records' text in a private SQLite database (a temporary file that SQLite
deletes when the server closes it) with the embedded store's own full-text
indexes (:func:`~..storage.sqlite_text.text_search_schema`): the same
tokenizer, the same statistics, the same BM25 and the same planning of broad
queries (:func:`~..storage.sqlite_text.lexical_scores`). It is read the first
time a text query needs it and kept coherent through the store's change log, as
:class:`~.vector_cache.VectorCache` is. Its cost is disk, not memory: about
twice the records' text (the index beside the text), in the system's
temporary folder; SQLite keeps a few MiB of it in memory.

``PRIME_MEMORY_TEXT_CACHE=off`` turns it off; a text query then uses
PostgreSQL's own text index (see docs/team.md).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ..storage import fold_marks, sqlite_text
from ..storage.base import LexicalCandidates
from ..storage.migrations import run_script

__all__ = ["TextCache", "TextCacheFailed", "TextSource", "text_cache_enabled"]

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: The setting that turns the cache off.
SETTING = "PRIME_MEMORY_TEXT_CACHE"
#: Pages of the private database SQLite keeps in memory (KiB when negative).
CACHE_KIB = 16 * 1024
#: Record ids deleted by one statement (SQLite's limit on parameters is higher).
CHUNK = 10_000


def text_cache_enabled() -> bool:
    """Whether servers keep the text in a full-text index of their own (:data:`SETTING`)."""
    return os.environ.get(SETTING, "").strip().lower() not in ("off", "0", "false", "no")


class TextCacheFailed(RuntimeError):
    """The private database failed (its disk is full, say): the cache is given up."""


class TextSource(Protocol):
    """What the cache reads of the store: ``(row id, record id, content)`` rows."""

    def text_batches(self) -> Iterator[list[tuple[int, str, str]]]: ...
    def texts_of(self, record_ids: Sequence[str]) -> list[tuple[int, str, str]]: ...
    def newest_change(self) -> int: ...
    def changes_since(self, seq: int) -> tuple[list[str], int, bool]: ...


class TextCache:
    """The store's text, indexed as the embedded store indexes it, caught up before each use.

    Rows keep the store's row ids, so that "the newest records" (which a broad
    query's plan samples and scores first) are the same ones as in the store.
    """

    def __init__(self, source: TextSource) -> None:
        self._source = source
        self._lock = threading.Lock()
        #: Why the cache was given up (its database failed); None while it works.
        self.failed: str | None = None
        self._db: sqlite3.Connection | None = None
        self._seq = -1
        self._size = 0
        self._shares = sqlite_text.WordShares()
        self._lent_shares = sqlite_text.WordShares()

    def __len__(self) -> int:
        return self._size

    def lexical(
        self, text: str, depth: int | None, *, budget: int, exact_store: int
    ) -> LexicalCandidates:
        """BM25 of the best ``depth`` records that match ``text`` (None: every match),
        ungated, as the embedded store scores them
        (:func:`~..storage.sqlite_text.lexical_scores`)."""

        def search(db: sqlite3.Connection) -> LexicalCandidates:
            return sqlite_text.lexical_scores(
                db,
                sqlite_text.parse_query(text),
                depth,
                self._size,
                self._shares,
                budget=budget,
                exact_store=exact_store,
            )

        return self._use(search)

    def word_shares(
        self, words: Sequence[str], *, lent: bool = False
    ) -> tuple[list[float | None], int] | None:
        """Each word's share of the newest records and the store's size, as the
        embedded store samples them (:class:`~..storage.sqlite_text.WordShares`)."""

        def shares(db: sqlite3.Connection) -> tuple[list[float | None], int] | None:
            memo = self._lent_shares if lent else self._shares
            return memo.of_store(db, self._size)(words)

        return self._use(shares)

    def word_lookup(self) -> Callable[[str, int], npt.NDArray[np.int64] | None]:
        """A fold's look-up, ``rows(word, limit)``: the store's row ids of the records
        that hold ``word``, or None past ``limit`` of them, as the embedded store's
        full-text index finds them (:func:`~..storage.fold_marks.word_rows`). The
        cache catches up once, here, rather than asking the store for its newest
        change at each of a fold's many look-ups."""
        self._use(lambda db: None)

        def rows(word: str, limit: int) -> npt.NDArray[np.int64] | None:
            return self._use(lambda db: fold_marks.word_rows(db, word, limit), catch_up=False)

        return rows

    def _use(self, read: Callable[[sqlite3.Connection], T], catch_up: bool = True) -> T:
        """``read`` of the caught-up database (of the database as it is, without
        ``catch_up``, once loaded); a failed database gives the cache up
        (:class:`TextCacheFailed`), and its file goes."""
        with self._lock:
            if self.failed is not None:
                raise TextCacheFailed(self.failed)
            try:
                db = self._db if not catch_up and self._db is not None else self._caught_up()
                return read(db)
            except sqlite3.Error as exc:
                self.failed = f"the text cache failed ({exc}); text is searched in the store"
                logger.warning(self.failed)
                if self._db is not None:
                    self._db.close()
                self._db = None
                raise TextCacheFailed(self.failed) from exc

    # -- keeping up with the store ------------------------------------------------------

    def _caught_up(self) -> sqlite3.Connection:
        """The private database, loaded the first time, then only what changed since."""
        source = self._source
        newest = source.newest_change()
        db = self._db
        if db is not None and newest == self._seq:
            return db
        if db is None:
            return self._load(newest)
        changed, latest, gap = source.changes_since(self._seq)
        if gap:
            db.close()
            self._db = None
            return self._load(newest)
        self._apply(db, sorted(set(changed)))
        self._seq = latest
        return db

    def _load(self, newest: int) -> sqlite3.Connection:
        """Every record's text, read afresh (the change log's position first)."""
        # An empty name: a private temporary database, deleted when it is closed.
        db = sqlite3.connect("", check_same_thread=False, isolation_level=None)
        db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        db.execute("PRAGMA journal_mode = OFF")
        db.execute("PRAGMA synchronous = OFF")
        db.execute(
            "CREATE TABLE records (id INTEGER PRIMARY KEY, record_id TEXT NOT NULL UNIQUE, "
            "content TEXT NOT NULL)"
        )
        run_script(db, sqlite_text.text_search_schema())
        self._size = 0
        db.execute("BEGIN")
        for batch in self._source.text_batches():
            db.executemany("INSERT INTO records (id, record_id, content) VALUES (?, ?, ?)", batch)
            self._size += len(batch)
        db.execute("COMMIT")
        self._db, self._seq = db, newest
        self._shares = sqlite_text.WordShares()
        self._lent_shares = sqlite_text.WordShares()
        return db

    def _apply(self, db: sqlite3.Connection, ids: Sequence[str]) -> None:
        """Catch up on records that changed: new, changed or gone."""
        if not ids:
            return
        rows = self._source.texts_of(ids)
        gone = 0
        db.execute("BEGIN")
        for start in range(0, len(ids), CHUNK):
            chunk = list(ids[start : start + CHUNK])
            held = ",".join("?" * len(chunk))
            gone += db.execute(f"DELETE FROM records WHERE record_id IN ({held})", chunk).rowcount
        db.executemany("INSERT INTO records (id, record_id, content) VALUES (?, ?, ?)", rows)
        db.execute("COMMIT")
        self._size += len(rows) - gone
