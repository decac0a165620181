"""The embedded SQLite store: WAL mode, a busy timeout, migrations and a change log.

Records live in one table; a trigger-fed ``changes`` table lets every
connection's in-memory index catch up with what other processes wrote, without
reloading everything.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..core.primes import MAX_PRIME, Kind, next_prime
from ..core.records import Record, Vector
from ..errors import SchemaTooNew, StoreError, StoreLocked
from . import sqlite_text, token_table
from .base import IndexRow, IndexTable, LexicalCandidates, StoredRow, damaged_vectors
from .migrations import MIGRATIONS, Migration, latest_version

__all__ = ["SQLiteStorage", "index_row", "record_values", "stored_row"]

#: How long a writer waits for another connection's lock before giving up, unless
#: the ``PRIME_MEMORY_BUSY_TIMEOUT_MS`` environment variable or ``busy_timeout_ms`` says otherwise.
BUSY_TIMEOUT_MS = 10_000
BUSY_TIMEOUT_ENV = "PRIME_MEMORY_BUSY_TIMEOUT_MS"
#: SQLite caps bound parameters per statement; stay well below it.
_CHUNK = 500
#: Pages in the write-ahead log before a commit copies them into the database
#: (SQLite's default is 1,000). Every store commits, and each commit rewrites
#: the same few hot pages (the newest leaves of the records table and the
#: change log, the full-text structure record); a longer log lets one
#: checkpoint copy each of them once for more commits.
WAL_AUTOCHECKPOINT_PAGES = 4_000

#: The full-text merge (see :meth:`SQLiteStorage.merge_text_segments`): pages
#: written per step, and at most this many steps per index.
_MERGE_PAGES = 64
_MERGE_ROUNDS = 16

_RECORD_COLUMNS = (
    "record_id, dedupe_key, domain, subdomain, tags, tag_product, content, vector, "
    "importance, strength, created_at, updated_at, accessed_at, access_count, metadata, "
    "instance_key, strength_at, scope, session"
)


#: Inserts of at least this many rows go through a staging table (see
#: :meth:`SQLiteStorage.staged`); fewer go one statement per row.
STAGED_MIN = 32
#: Rows per staged statement: enough to share its fixed costs over many rows,
#: while the staging table stays small.
STAGED_CHUNK = 5_000
#: Rows per batch when a whole table is read (a fold).
READ_BATCH = 16_384


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class ColumnReader:
    """Rows read in batches, kept as columns that cost little memory.

    Columns in ``shared`` hold few distinct values (labels, tag lists): each
    value is kept once and every row refers to it. Columns in ``numbers``
    become float64 arrays (None as NaN), batch by batch, rather than an object
    per value. The rest stay lists of what SQLite gave.
    """

    def __init__(self, width: int, *, shared: Sequence[int], numbers: Sequence[int]) -> None:
        self._lists: list[list[Any]] = [[] for _ in range(width)]
        self._arrays: dict[int, list[Any]] = {k: [] for k in numbers}
        self._canonical: dict[int, dict[Any, Any]] = {k: {} for k in shared}

    def add(self, batch: Sequence[Sequence[Any]], skip: Sequence[int] = ()) -> list[Sequence[Any]]:
        """Take in a batch of rows; returns its columns, as read."""
        import numpy as np

        values: list[Sequence[Any]] = list(zip(*batch))
        for k, column in enumerate(values):
            if k in skip:
                continue
            if k in self._arrays:
                self._arrays[k].append(np.array(column, dtype=np.float64))
            elif k in self._canonical:
                same = self._canonical[k]
                self._lists[k].extend(map(same.setdefault, column, column))
            else:
                self._lists[k].extend(column)
        return values

    def texts(self, k: int) -> list[Any]:
        """Column ``k`` as a list."""
        return self._lists[k]

    def numbers(self, k: int) -> Any:
        """Column ``k`` as one float64 array."""
        import numpy as np

        parts = self._arrays[k]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64)


def busy_timeout_from_env() -> int:
    """The busy timeout in milliseconds: ``PRIME_MEMORY_BUSY_TIMEOUT_MS``, else the default.

    Raises:
        StoreError: the variable is set but is not a whole number of milliseconds >= 0.
    """
    raw = os.environ.get(BUSY_TIMEOUT_ENV, "").strip()
    if not raw:
        return BUSY_TIMEOUT_MS
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise StoreError(
            f"{BUSY_TIMEOUT_ENV}={raw!r} is not a whole number of milliseconds; "
            f"set it to e.g. {BUSY_TIMEOUT_MS} or unset it"
        )
    return value


def _translate(exc: sqlite3.Error, path: str, busy_ms: int = BUSY_TIMEOUT_MS) -> StoreError:
    message = str(exc)
    if "locked" in message or "busy" in message:
        return StoreLocked(
            f"store {path} stayed locked by another connection for over {busy_ms / 1000:g} s; "
            f"retry, stop the process holding a long transaction, or raise {BUSY_TIMEOUT_ENV}"
        )
    if "not a database" in message or "malformed" in message:
        return StoreError(
            f"store {path} is not a readable SQLite database ({message}); "
            "restore it from a backup or point --store / PRIME_MEMORY_HOME at another file"
        )
    if "readonly" in message or "unable to open" in message:
        return StoreError(
            f"store {path} cannot be written ({message}); "
            "check the file and folder permissions or choose another path"
        )
    if "disk is full" in message or "database or disk is full" in message:
        return StoreError(f"store {path}: the disk is full; free space and retry")
    if "disk I/O error" in message:
        # SQLite reports only ENOSPC as "full"; a quota (EDQUOT) or the file size
        # limit (EFBIG) ends here, as does a failing disk.
        return StoreError(
            f"store {path}: reading or writing the file failed ({message}); if the disk is "
            "full, or a quota or the file size limit (ulimit -f) is reached, free space or "
            "raise the limit and retry; otherwise check the disk"
        )
    return StoreError(f"store {path}: {message}")


class SQLiteStorage(token_table.TokenTable):
    """Durable state in one SQLite file (or ``:memory:``).

    Args:
        path: the database file, or ``":memory:"``.
        busy_timeout_ms: how long to wait for another connection's write lock
            before raising :class:`StoreLocked`; None for
            :func:`busy_timeout_from_env`.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int | None = None) -> None:
        self.path = str(path)
        self.busy_timeout_ms = (
            busy_timeout_from_env() if busy_timeout_ms is None else busy_timeout_ms
        )
        self._memory = self.path == ":memory:"
        if not self._memory:
            parent = Path(self.path).expanduser().resolve().parent
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the folder for store {self.path}: {exc.strerror}; "
                    "choose a writable path with --store or PRIME_MEMORY_HOME"
                ) from None
            if Path(self.path).is_dir():
                raise StoreError(f"store path {self.path} is a directory; give a file path")
        # Reads that run beside other threads' (:meth:`reading`) take a connection
        # of their own from these: at most as many as read at once.
        self._local = threading.local()
        self._readers_free: list[sqlite3.Connection] = []
        self._readers_open: list[sqlite3.Connection] = []
        self._readers_mutex = threading.Lock()
        #: Query words' shares of the newest records, for planning text queries.
        self._word_shares = sqlite_text.WordShares()
        #: The same for the words a query's first hits may lend it.
        self._lent_shares = sqlite_text.WordShares()
        try:
            self._main = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self.busy_timeout_ms / 1000,
            )
        except sqlite3.Error as exc:
            raise _translate(exc, self.path, self.busy_timeout_ms) from None
        try:
            self._main.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            if not self._memory:
                mode = self.db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if mode.lower() != "wal":
                    raise StoreError(f"store {self.path} could not switch to WAL mode ({mode})")
            # FULL makes each commit durable across power loss, not only process crashes.
            self.db.execute("PRAGMA synchronous = FULL")
            self.db.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
            self.db.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.Error as exc:
            self._main.close()
            raise _translate(exc, self.path, self.busy_timeout_ms) from None
        except StoreError:
            self._main.close()
            raise

    # -- lifecycle ---------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        """This thread's connection: its reading one inside :meth:`reading`, else the store's."""
        reader: sqlite3.Connection | None = getattr(self._local, "reader", None)
        return self._main if reader is None else reader

    def close(self) -> None:
        """Close the connections."""
        with self._readers_mutex:
            readers, self._readers_open, self._readers_free = self._readers_open, [], []
        for reader in readers:
            reader.close()
        self._main.close()

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """This thread's reads, until the end, on a read-only connection of their own.

        So they run beside other threads' reads, in SQLite's own threads of work
        (it lets go of Python's lock while it searches), instead of one after
        the other on one connection. Each statement sees what was committed when
        it started, as on the store's connection outside a transaction. Nested,
        and for a store in memory, which no second connection can open, the
        reads stay on the connection they were on.
        """
        if self._memory or getattr(self._local, "reader", None) is not None:
            yield
            return
        with self._readers_mutex:
            reader = self._readers_free.pop() if self._readers_free else None
        if reader is None:
            reader = self._open_reader()
        self._local.reader = reader
        try:
            yield
        finally:
            self._local.reader = None
            if reader.in_transaction:  # a read snapshot left open by an error
                reader.rollback()
            with self._readers_mutex:
                if reader in self._readers_open:
                    self._readers_free.append(reader)

    def _open_reader(self) -> sqlite3.Connection:
        uri = Path(self.path).expanduser().resolve().as_uri() + "?mode=ro"
        try:
            reader = sqlite3.connect(
                uri,
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=self.busy_timeout_ms / 1000,
            )
            reader.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        except sqlite3.Error as exc:
            raise _translate(exc, self.path, self.busy_timeout_ms) from None
        with self._readers_mutex:
            self._readers_open.append(reader)
        return reader

    def _migrate(self) -> None:
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        applied = {row[0] for row in self.db.execute("SELECT version FROM schema_migrations")}
        newest = latest_version()
        if applied and max(applied) > newest:
            raise SchemaTooNew(
                f"store {self.path} has schema version {max(applied)}, but this version of "
                f"prime-memory-folding knows only up to {newest}; upgrade the package"
            )
        pending = [
            m for m in sorted(MIGRATIONS, key=lambda m: m.version) if m.version not in applied
        ]
        if not applied:
            # A new store is made in one transaction: it appears whole or not at
            # all, and its schema pages reach the log once rather than per step.
            with self.transaction():
                for step in pending:
                    self._apply(step)
            return
        for step in pending:
            with self.transaction():
                self._apply(step)

    def _apply(self, step: Migration) -> None:
        """Apply one schema step, inside the caller's transaction, unless already applied."""
        # Another process may have applied it while this one waited for the lock.
        if self.db.execute(
            "SELECT 1 FROM schema_migrations WHERE version = ?", (step.version,)
        ).fetchone():
            return
        step.apply(self.db)
        self.db.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (step.version, step.name, time.time()),
        )

    def schema_version(self) -> int:
        """The newest migration applied to this store."""
        row = self.db.execute("SELECT max(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction that takes the write lock up front (BEGIN IMMEDIATE).

        Raises:
            StoreLocked: the lock stayed taken past the busy timeout.
            StoreError: SQLite failed; the transaction was rolled back.
        """
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise _translate(exc, self.path, self.busy_timeout_ms) from None
        try:
            yield
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise
        try:
            self.db.execute("COMMIT")
        except sqlite3.Error as exc:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise _translate(exc, self.path, self.busy_timeout_ms) from None

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        """A write transaction no other writer overlaps: every one of SQLite's is."""
        return self.transaction()

    @contextlib.contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """A read transaction: every read inside sees one consistent state."""
        if self.db.in_transaction:
            yield
            return
        self.db.execute("BEGIN")
        try:
            yield
        finally:
            if self.db.in_transaction:
                self.db.execute("COMMIT")

    def batches(self, sql: str, params: Sequence[Any] = ()) -> Iterator[list[tuple[Any, ...]]]:
        """A big read in batches of :data:`READ_BATCH` rows."""
        cursor = self.db.execute(sql, params)
        while True:
            rows = cursor.fetchmany(READ_BATCH)
            if not rows:
                return
            yield rows

    # -- full-text search (sqlite_text.py) ----------------------------------------

    def lexical(
        self, text: str, depth: int | None, *, store_size: int, budget: int, exact_store: int
    ) -> LexicalCandidates:
        """BM25 scores of the best ``depth`` records that match ``text`` (``depth``
        None: every match), planned in a large store (:func:`.sqlite_text.lexical_scores`)."""
        return sqlite_text.lexical_scores(
            self.db,
            sqlite_text.parse_query(text),
            depth,
            store_size,
            self._word_shares,
            budget=budget,
            exact_store=exact_store,
        )

    def word_shares(
        self, words: Sequence[str], *, total: int, lent: bool = False
    ) -> tuple[list[float | None], int] | None:
        """Each word's share of the newest records, and ``total``; None for an empty store.

        Remembered between queries (:class:`.sqlite_text.WordShares`), the words
        a query's first hits lend it (``lent``) apart from queries' own words.
        """
        memo = self._lent_shares if lent else self._word_shares
        return memo.of_store(self.db, total)(words)

    def data_version(self) -> int:
        """Changes whenever another connection commits to this store.

        Always the store's own connection's count, also inside :meth:`reading`.
        """
        return int(self._main.execute("PRAGMA data_version").fetchone()[0])

    def size_bytes(self) -> int:
        """Bytes on disk: the database file and its write-ahead log."""
        if self._memory:
            page_size = self.db.execute("PRAGMA page_size").fetchone()[0]
            pages = self.db.execute("PRAGMA page_count").fetchone()[0]
            return int(page_size * pages)
        return store_file_bytes(self.path)

    # -- meta ---------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # -- prime registries ------------------------------------------------------

    def load_primes(self) -> dict[Kind, dict[str, int]]:
        """Every registry as label -> prime."""
        registries: dict[Kind, dict[str, int]] = {kind: {} for kind in Kind}
        for kind, label, prime in self.db.execute("SELECT kind, label, prime FROM primes"):
            registries[Kind(kind)][label] = int(prime)
        return registries

    def assign_prime(self, kind: Kind, label: str) -> int:
        """The label's prime, assigning the next one if new. Call inside a transaction.

        Raises:
            StoreError: the registry has run out of 32-bit primes.
        """
        row = self.db.execute(
            "SELECT prime FROM primes WHERE kind = ? AND label = ?", (kind.value, label)
        ).fetchone()
        if row is not None:
            return int(row[0])
        highest = self.db.execute(
            "SELECT max(prime) FROM primes WHERE kind = ?", (kind.value,)
        ).fetchone()[0]
        prime = next_prime(int(highest or 1))
        if prime > MAX_PRIME:
            raise StoreError(f"the {kind.value} registry of {self.path} has no 32-bit primes left")
        self.db.execute(
            "INSERT INTO primes (kind, label, prime) VALUES (?, ?, ?)", (kind.value, label, prime)
        )
        return prime

    # -- records ------------------------------------------------------------

    def find_dedupe(self, keys: Sequence[str]) -> dict[str, StoredRow]:
        """Existing rows whose dedupe key is among ``keys``."""
        found: dict[str, StoredRow] = {}
        for chunk in _chunks(list(keys)):
            marks = ",".join("?" * len(chunk))
            for row in self.db.execute(
                f"SELECT {_RECORD_COLUMNS} FROM records WHERE dedupe_key IN ({marks})", chunk
            ):
                stored = stored_row(row)
                found[stored.dedupe_key] = stored
        return found

    def existing_ids(self, record_ids: Sequence[str]) -> set[str]:
        """The subset of ``record_ids`` that are taken."""
        taken: set[str] = set()
        for chunk in _chunks(list(record_ids)):
            marks = ",".join("?" * len(chunk))
            taken.update(
                row[0]
                for row in self.db.execute(
                    f"SELECT record_id FROM records WHERE record_id IN ({marks})", chunk
                )
            )
        return taken

    def insert(self, rows: Iterable[StoredRow]) -> None:
        """Insert new rows, in order. Call inside a transaction."""
        values = [record_values(row) for row in rows]
        if len(values) < STAGED_MIN:
            marks = ",".join("?" * (_RECORD_COLUMNS.count(",") + 1))
            self.db.executemany(f"INSERT INTO records ({_RECORD_COLUMNS}) VALUES ({marks})", values)
            return
        [[last_id]] = self.db.execute("SELECT coalesce(max(id), 0) FROM records")
        for staged in self.staged("staged_records", _RECORD_COLUMNS, values):
            self.db.execute(
                f"INSERT INTO records ({_RECORD_COLUMNS}) "
                f"SELECT {_RECORD_COLUMNS} FROM {staged} ORDER BY rowid"
            )
        if len(values) >= last_id:
            # Most of the text index is new: merge it into one segment while
            # that is cheap. Left to itself, the full-text index would go on
            # merging its many new segments a little in every later commit.
            self.merge_text_segments(everything=True)

    def merge_text_segments(self, *, everything: bool = False) -> None:
        """Merge the full-text indexes' small segments, a bounded amount of work.

        Every commit that stores records adds a small segment to each index,
        which SQLite merges only a little at a time: after a thousand stores in
        ten commits, a store of a million records had 20 segments, and every
        look-up of a word seeks in each (about 0.1 ms, against 0.03 ms in one).
        Merging the levels where segments pile up costs milliseconds, since
        those are the small ones. With ``everything``, each index is merged
        into one segment, without the entries of deleted records (seconds at
        a million records). Call inside a transaction.
        """
        for table in ("records_fts", "records_grams"):
            if everything:
                self.db.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
                continue
            for _ in range(_MERGE_ROUNDS):
                before = self.db.total_changes
                self.db.execute(
                    f"INSERT INTO {table} ({table}, rank) VALUES ('merge', ?)", (_MERGE_PAGES,)
                )
                if self.db.total_changes - before < 2:  # SQLite's sign that nothing was left
                    break

    def staged(self, name: str, columns: str, values: Sequence[Sequence[Any]]) -> Iterator[str]:
        """Load ``values`` into a staging table in chunks; yields its name once per chunk.

        For writes into ``records`` or the archive: the caller writes each
        chunk with one ``INSERT ... SELECT`` from the staging table. Each
        statement that writes ``records`` opens a statement journal (its
        triggers write several tables, and a unique key may abort it), copies
        every page it changes into that journal, and makes the full-text index
        flush its pending terms: one statement per chunk pays for that once,
        where one statement per row pays it for every row. The staging table
        is this connection's own (``temp``), rows keep their order in
        ``rowid``, and it is emptied before each chunk.
        Call inside a transaction, so that a failure leaves nothing behind.
        """
        table = f"temp.{name}"
        self.db.execute(f"CREATE TEMP TABLE IF NOT EXISTS {name} ({columns})")
        marks = ",".join("?" * (columns.count(",") + 1))
        for chunk in _chunks(values, STAGED_CHUNK):
            self.db.execute(f"DELETE FROM {table}")
            self.db.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", chunk)
            yield table
        self.db.execute(f"DELETE FROM {table}")

    def replace(self, rows: Iterable[StoredRow]) -> None:
        """Overwrite existing rows (matched by record id). Call inside a transaction."""
        self.db.executemany(
            "UPDATE records SET dedupe_key = ?, domain = ?, subdomain = ?, tags = ?, "
            "tag_product = ?, content = ?, vector = ?, importance = ?, strength = ?, "
            "created_at = ?, updated_at = ?, accessed_at = ?, access_count = ?, metadata = ?, "
            "instance_key = ?, strength_at = ?, scope = ?, session = ? "
            "WHERE record_id = ?",
            ((*record_values(row)[1:], row.record.record_id) for row in rows),
        )

    def delete(self, record_ids: Sequence[str]) -> None:
        """Delete rows. Call inside a transaction.

        Rows go in the table's own order (``id``), so that deleting many walks
        its pages once, in order, rather than jumping around them.
        """
        rows: list[int] = []
        for chunk in _chunks(list(record_ids)):
            marks = ",".join("?" * len(chunk))
            rows.extend(
                row[0]
                for row in self.db.execute(
                    f"SELECT id FROM records WHERE record_id IN ({marks})", chunk
                )
            )
        rows.sort()
        for chunk in _chunks(rows):
            marks = ",".join("?" * len(chunk))
            self.db.execute(f"DELETE FROM records WHERE id IN ({marks})", chunk)

    def fetch(self, record_ids: Sequence[str]) -> dict[str, StoredRow]:
        """Rows by record id; missing ids are absent from the result."""
        found: dict[str, StoredRow] = {}
        for chunk in _chunks(list(record_ids)):
            marks = ",".join("?" * len(chunk))
            for row in self.db.execute(
                f"SELECT {_RECORD_COLUMNS} FROM records WHERE record_id IN ({marks})", chunk
            ):
                stored = stored_row(row)
                found[stored.record.record_id] = stored
        return found

    def count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM records").fetchone()[0])

    def index_rows(self, record_ids: Sequence[str] | None = None) -> Iterator[IndexRow]:
        """The columns the in-memory index needs, for all rows or the given ids."""
        if record_ids is None:
            for row in self.db.execute(_INDEX_SQL + " ORDER BY id"):
                yield index_row(row)
            return
        for chunk in _chunks(list(record_ids)):
            marks = ",".join("?" * len(chunk))
            for row in self.db.execute(_INDEX_SQL + f" WHERE record_id IN ({marks})", chunk):
                yield index_row(row)

    def index_table(self) -> IndexTable:
        """What :meth:`index_rows` gives for every row, as columns, in one read.

        Rows come in batches, and vectors go straight into one float32 matrix
        with room for half as many rows again (see :class:`IndexTable`), so
        the store's vectors are held once, never as one object per record.
        """
        import numpy as np

        n = self.count()
        found = self.db.execute(
            "SELECT length(vector) FROM records WHERE length(vector) > 0 LIMIT 1"
        ).fetchone()
        size = int(found[0]) if found else 0
        if size % 4:
            raise damaged_vectors(self.path)
        matrix = np.zeros((n + n // 2 + 1_024, size // 4), dtype=np.float32) if size else None
        present = np.zeros(len(matrix) if matrix is not None else 0, dtype=bool)
        columns = ColumnReader(16, shared=(1, 2, 3, 13, 14, 15), numbers=(5, 6, 7, 9, 10, 11, 12))
        at = 0
        for batch in self.batches(_INDEX_SQL + " ORDER BY id"):
            values = columns.add(batch, skip=(8,))
            blobs = values[8]
            if matrix is not None:
                if at + len(batch) > len(matrix):  # rows added since the count: room for more
                    matrix = np.concatenate([matrix, np.zeros_like(matrix)])
                    present = np.concatenate([present, np.zeros_like(present)])
                rows = [i for i, blob in enumerate(blobs) if blob is not None]
                if any(len(blobs[i]) != size for i in rows):
                    raise damaged_vectors(self.path)
                if rows:
                    block = np.frombuffer(b"".join(blobs[i] for i in rows), dtype="<f4")
                    matrix[np.asarray(rows) + at] = block.reshape(len(rows), size // 4)
                    present[np.asarray(rows) + at] = True
            elif any(blob is not None for blob in blobs):
                raise damaged_vectors(self.path)
            at += len(batch)
        parsed = _parse_many_tags(columns.texts(3))
        sessions = columns.texts(15)
        return IndexTable(
            record_ids=columns.texts(0),
            domains=columns.texts(1),
            subdomains=columns.texts(2),
            tags=[parsed[text] for text in columns.texts(3)],
            tag_products=[int(product) for product in columns.texts(4)],
            importance=columns.numbers(5),
            strength=columns.numbers(6),
            updated_at=columns.numbers(7),
            vector_blobs=(),
            created_at=columns.numbers(9),
            accessed_at=columns.numbers(10),
            access_count=columns.numbers(11).astype(np.int64),
            strength_at=columns.numbers(12),
            tiers=[tier if isinstance(tier, str) else None for tier in columns.texts(13)],
            scopes=columns.texts(14),
            sessions=() if sessions.count(None) == len(sessions) else sessions,
            vector_matrix=matrix,
            vector_present=present[:at] if matrix is not None else None,
        )

    def changes_since(self, seq: int) -> tuple[list[str], int, bool]:
        """Record ids changed after ``seq``, the newest seq, and whether history has a gap.

        A gap is a log trimmed past ``seq``, or one that restarted below it (its
        rows deleted by hand): either way the caller must reload.
        """
        # Two subqueries: SQLite reads min() or max() from the key's ends only when
        # each is alone in its SELECT; together they would scan the whole log.
        oldest, latest = self.db.execute(
            "SELECT (SELECT min(seq) FROM changes), (SELECT max(seq) FROM changes)"
        ).fetchone()
        gap = oldest is not None and (oldest > seq + 1 or latest < seq)
        ids: list[str] = []
        newest = seq
        for change_seq, record_id in self.db.execute(
            "SELECT seq, record_id FROM changes WHERE seq > ? ORDER BY seq", (seq,)
        ):
            ids.append(record_id)
            newest = change_seq
        return ids, newest, gap

    def trim_changes(self, keep: int) -> None:
        """Drop all but the newest ``keep`` change-log entries. Call inside a transaction.

        The newest entry always stays: its ``seq`` is what the next one counts
        on from, so sequence numbers never repeat.
        """
        self.db.execute(
            "DELETE FROM changes WHERE seq <= (SELECT max(seq) FROM changes) - ?", (max(keep, 1),)
        )

    def newest_change(self) -> int:
        row = self.db.execute("SELECT max(seq) FROM changes").fetchone()
        return int(row[0] or 0)


def store_file_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes on disk of the store file at ``path`` and its write-ahead log (0 if missing)."""
    total = 0
    for suffix in ("", "-wal"):
        with contextlib.suppress(OSError):
            total += os.path.getsize(f"{os.fspath(path)}{suffix}")
    return total


def record_values(row: StoredRow) -> tuple[Any, ...]:
    rec = row.record
    return (
        rec.record_id,
        row.dedupe_key,
        rec.domain,
        rec.subdomain,
        json.dumps(list(rec.tags), ensure_ascii=False),
        str(rec.tag_product),
        rec.content,
        row.vector_blob,
        rec.importance,
        rec.strength,
        rec.created_at,
        rec.updated_at,
        rec.accessed_at,
        rec.access_count,
        json.dumps(rec.metadata, sort_keys=True, ensure_ascii=False),
        row.instance_key,
        row.strength_at,
        rec.scope,
        rec.session,
    )


def stored_row(row: Sequence[Any]) -> StoredRow:
    blob = row[7]
    vector = None if blob is None else Vector.from_blob(blob)
    record = Record(
        record_id=row[0],
        address=int(row[0], 16),
        domain=row[2],
        subdomain=row[3],
        tags=tuple(json.loads(row[4])),
        tag_product=int(row[5]),
        content=row[6],
        importance=row[8],
        strength=row[9],
        created_at=row[10],
        updated_at=row[11],
        accessed_at=row[12],
        access_count=row[13],
        metadata=json.loads(row[14]),
        vector=vector,
        scope=row[17],
        session=row[18],
    )
    return StoredRow(
        record=record,
        dedupe_key=row[1],
        vector_blob=blob,
        instance_key=row[15],
        strength_at=row[16],
    )


@functools.lru_cache(maxsize=65_536)
def _parse_tags(text: str) -> tuple[str, ...]:
    # Many records share a tag set; parsing each distinct one once speeds up loading.
    return tuple(json.loads(text))


def _parse_many_tags(texts: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """:func:`_parse_tags` of each distinct text, parsed as one JSON document."""
    distinct = list(dict.fromkeys(texts))
    lists = None
    # Each text must be one array on its own, so that joining cannot merge or split them.
    if all(text[:1] == "[" and text[-1:] == "]" for text in distinct):
        with contextlib.suppress(ValueError):
            lists = json.loads("[" + ",".join(distinct) + "]")
    if (
        not isinstance(lists, list)
        or len(lists) != len(distinct)
        or not all(type(tags) is list for tags in lists)
    ):
        return {text: _parse_tags(text) for text in distinct}
    return {text: tuple(tags) for text, tags in zip(distinct, lists)}


#: The columns of :class:`IndexRow`, in its order (tier from the metadata).
_INDEX_SQL = (
    "SELECT record_id, domain, subdomain, tags, tag_product, importance, strength, "
    "updated_at, vector, created_at, accessed_at, access_count, strength_at, "
    "json_extract(metadata, '$.tier'), scope, session FROM records"
)


def index_row(row: Sequence[Any]) -> IndexRow:
    """An :class:`IndexRow` from the columns of ``_INDEX_SQL``, in its order (either backend's)."""
    return IndexRow(
        record_id=row[0],
        domain=row[1],
        subdomain=row[2],
        tags=_parse_tags(row[3]),
        tag_product=int(row[4]),
        importance=row[5],
        strength=row[6],
        updated_at=row[7],
        vector_blob=row[8],
        created_at=row[9],
        accessed_at=row[10],
        access_count=row[11],
        strength_at=row[12],
        tier=row[13] if isinstance(row[13], str) else None,
        scope=row[14],
        session=row[15],
    )
