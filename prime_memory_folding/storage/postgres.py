"""The PostgreSQL store: one database behind many servers.

:class:`PostgresStorage` implements the same :class:`~.base.Storage` interface
as the SQLite store, over a ``psycopg_pool`` connection pool, and answers
queries itself (:class:`~.base.Pushdown`), so that a server holds no record in
memory before it answers:

- structural gates run in SQL: scope, domain and subdomain on B-trees, tags on
  a GIN index over ``tag_primes`` (``@>`` all-of, ``&&`` any-of, ``NOT &&``
  none-of), each all-of candidate confirmed by the exact divisibility test on
  the stored tag product;
- a text query's candidates come from the ``lex`` ``tsvector`` (GIN), scored
  with FTS5's BM25 formula (:func:`bm25`) from document frequencies and the
  average length kept per connection pool (a little stale at most);
- vectors are float32 ``bytea``, scored with numpy over gated candidates.

Writes are transactions on one pooled connection. Prime assignment takes a
transaction-level advisory lock per registry, and a write takes one per dedupe
key, so that servers sharing the database assign one prime per label and merge
the same memory into one record.

Faults:

- each connection is checked as the pool lends it. One found dead sends every
  idle one through the check (a restart or ``pg_terminate_backend`` ends them
  all), and the call runs on a new connection: nobody sees an error;
- a connection lost during a call fails that call with a clear
  :class:`~..errors.StoreError` that names the server (never the password).
  Lost inside a transaction, PostgreSQL rolled it back and the message says
  nothing was written; lost while committing, it says the write may or may
  not have been saved;
- while the database does not answer, a call fails after waiting the URL's
  ``connect_timeout`` (else :data:`DEFAULT_TIMEOUT`) seconds for a connection,
  and TCP keepalives find a server that vanished mid-statement. The pool keeps
  reconnecting, so calls succeed again soon after the database is back,
  without a restart.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..core.index import TagQuery
from ..core.primes import MAX_PRIME, Kind, next_prime
from ..errors import NotAvailable, SchemaTooNew, StoreError
from . import pg_rows, token_table
from .base import GatedRead, IndexRow, IndexTable, LexicalCandidates, StoredRow
from .pg_connect import (
    Rows,
    SqlConnection,
    connect_options,
    connection_lost,
    qmark_to_format,
    reason_of,
    redact,
    store_error,
    wait_limit,
    writes,
)
from .pg_decay import STORE_DECAY, DecayOrder
from .pg_rows import (
    INDEX_COLUMNS,
    RECORD_COLUMNS,
    decay_heads_sql,
    gate_sql,
    gated_sql,
    index_row,
    index_row_of,
    sparse_heads_sql,
    table_of,
)
from .pg_schema import PG_MIGRATIONS, latest_pg_version
from .pg_text import STATS_STALE_CHANGES, TextSearch, bm25, unsegmented_pieces
from .pgvector import Vectors
from .sqlite import record_values, stored_row

__all__ = [
    "PostgresStorage",
    "bm25",
    "connection_lost",
    "gate_sql",
    "redact",
    "table_of",
    "unsegmented_pieces",
]

#: The advisory lock that serialises migrations (any constant the app owns).
_MIGRATION_LOCK = 0x706D665F6D6967  # "pmf_mig"
#: The advisory locks (this, bucket) that writers of the same memory take turns on.
_DEDUPE_LOCKS = 0x706D6664  # "pmfd"
#: Buckets of dedupe keys, each one advisory lock.
DEDUPE_BUCKETS = 256
#: The advisory lock every write transaction holds shared and a fold exclusively.
_WRITE_LOCK = 0x706D665F777269  # "pmf_wri"
#: Set to ``off`` to score vectors with numpy even where pgvector is installed.
PGVECTOR_ENV = "PRIME_MEMORY_PGVECTOR"
#: Rows one insert must bring, at least (and a tenth of the table), to update
#: the planner's statistics at once.
ANALYZE_MIN = 1_000
#: Rows per batch when a whole table is read (a fold, a copy).
BATCH = 5_000


class PostgresStorage(token_table.TokenTable):
    """Durable state in a PostgreSQL database, shared by any number of servers.

    Args:
        url: a libpq URL, ``postgresql://user@host:port/database``.
        min_size, max_size: the connection pool's bounds.
        timeout: seconds to wait for a connection before failing a call
            (default: the URL's ``connect_timeout``, else
            :data:`DEFAULT_TIMEOUT`). While the database does not answer,
            every call fails within about that long.

    Raises:
        NotAvailable: psycopg is not installed (the ``postgres`` extra).
        StoreError: the database cannot be reached, or its schema is newer.
    """

    #: Queries run in the database; the engine holds no record in memory.
    pushdown = True

    def __init__(
        self, url: str, *, min_size: int = 1, max_size: int = 4, timeout: float | None = None
    ) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise NotAvailable(
                "a PostgreSQL store needs psycopg; install prime-memory-folding[postgres]"
            ) from None
        self._psycopg = psycopg
        self.url = url
        self.path = redact(url)
        self._local = threading.local()
        self._text = TextSearch(self.run, self.newest_change)
        try:
            timeout = wait_limit(url) if timeout is None else timeout
            options = connect_options(url, timeout)
        except psycopg.Error as exc:
            raise StoreError(
                f"the PostgreSQL URL {self.path} is malformed ({reason_of(exc, url)})"
            ) from None
        self._timeout = timeout
        self._max_size = max_size
        self.db = SqlConnection(self)
        try:
            # One direct connection first: a server that is down, a wrong
            # database or a refused login fails at once, with libpq's reason.
            psycopg.connect(url, **options).close()
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to PostgreSQL at {self.path} ({reason_of(exc, url)}); check that "
                "the server runs, the URL (user, host, port, database) and that the database exists"
            ) from None
        self._pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            kwargs={"autocommit": True, **options},
            # Connections are checked as they are lent (_borrow), so that one
            # found dead sends the whole pool through its check at once.
            check=None,
            # While the database is down the pool retries with a doubling delay;
            # giving up after ``timeout`` keeps that delay short, and the next
            # call starts a fresh attempt, so the pool is back soon after the database.
            reconnect_timeout=max(timeout, 1.0),
            open=False,
            name="prime-memory",
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
        except Exception as exc:  # psycopg_pool.PoolTimeout and connection errors
            self._pool.close()
            raise StoreError(
                f"cannot connect to PostgreSQL at {self.path} ({reason_of(exc, url)}); check that "
                "the server runs, the URL (user, host, port, database) and that the database exists"
            ) from None
        try:
            self._migrate()
            self._vectors = self._open_vectors()
        except BaseException:
            self._pool.close()
            raise

    # -- connections -------------------------------------------------------

    def _error(self, exc: Exception, *, maybe_written: bool = False) -> StoreError:
        """A psycopg error as the store error a caller can act on (see ``store_error``)."""
        return store_error(exc, self.path, self._timeout, maybe_written=maybe_written)

    def _raise(self, exc: Exception, *, maybe_written: bool = False) -> None:
        """Raise a psycopg or pool error as a :class:`StoreError`; other errors as they are."""
        if isinstance(exc, self._psycopg.Error):
            raise self._error(exc, maybe_written=maybe_written) from None

    @contextlib.contextmanager
    def _borrow(self, *, quick: bool = False) -> Iterator[Any]:
        """A pooled connection, checked (an empty statement) before it is lent.

        One dead connection mostly means that every idle one is dead (the
        database restarted, or an administrator ended the sessions): the
        first failed check sends the whole pool through its check, so the next
        try waits for a new connection instead of finding the next dead one.
        A connection that dies later, in use, fails its call.

        ``quick`` (a read that may be tried again, :meth:`_read`) skips the
        round trip of the check unless the connection's socket has something
        to read: an idle connection has nothing, while one the server ended
        has its goodbye or the end of the stream waiting.
        """
        pool = self._pool
        deadline = time.monotonic() + self._timeout
        for attempt in range(self._max_size + 1):
            conn = pool.getconn(timeout=deadline - time.monotonic())
            try:
                if not (quick and _quiet(conn)):
                    conn.execute("")
            except self._psycopg.Error:
                pool.putconn(conn)  # a broken connection is discarded and replaced
                if attempt == 0:
                    pool.check()
                continue
            try:
                yield conn
            finally:
                pool.putconn(conn)
            return
        raise self._psycopg.OperationalError("every pooled connection was found dead")

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        """The transaction's connection, or one lent by the pool for one statement."""
        current = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        try:
            with self._borrow() as conn:
                yield conn
        except Exception as exc:
            self._raise(exc)
            raise

    def run(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        """Execute one statement and read its rows (``%s`` placeholders)."""
        if getattr(self._local, "conn", None) is None and not writes(sql):
            return self._read(sql, params)
        with self._connection() as conn:
            try:
                cur = conn.execute(sql, params)
                rows = cur.fetchall() if cur.description is not None else []
                return Rows(rows, cur.rowcount)
            except self._psycopg.Error as exc:
                if getattr(self._local, "conn", None) is None:
                    # Outside a transaction a statement commits by itself.
                    raise self._error(exc, maybe_written=writes(sql)) from None
                raise

    def _read(self, sql: str, params: Sequence[Any]) -> Rows:
        """A read outside a transaction, on a connection lent without a round trip.

        A read changes nothing, so one that finds its connection lost is tried
        once more, on a connection that passed the full check.
        """
        for attempt in (0, 1):
            try:
                with self._borrow(quick=attempt == 0) as conn:
                    cur = conn.execute(sql, params)
                    rows = cur.fetchall() if cur.description is not None else []
                    return Rows(rows, cur.rowcount)
            except self._psycopg.Error as exc:
                if attempt == 0 and connection_lost(exc):
                    self._pool.check()
                    continue
                raise self._error(exc) from None
            except Exception as exc:
                self._raise(exc)
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def run_many(self, sql: str, seq: Sequence[Sequence[Any]]) -> Rows:
        """Execute one statement for each parameter set."""
        if not seq:
            return Rows([], 0)
        with self._connection() as conn:
            try:
                with conn.cursor() as cur:
                    cur.executemany(sql, seq)
                    return Rows([], cur.rowcount)
            except self._psycopg.Error as exc:
                if getattr(self._local, "conn", None) is None:
                    raise self._error(exc, maybe_written=writes(sql)) from None
                raise

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """A transaction on one pooled connection; nested calls join the outer one.

        It holds the write lock shared (see :meth:`exclusive`) until it ends.
        A connection lost before the commit rolls the whole transaction back
        (PostgreSQL ends it with the session); the error says nothing was
        written. Lost during the commit, the outcome is unknown, and the error
        says that instead.

        Raises:
            StoreError: PostgreSQL failed or the connection was lost; the
                transaction was rolled back (or, lost while committing, may
                have been saved).
        """
        with self._transaction(exclusive=False):
            yield

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """A write transaction that no other writer overlaps, on any server.

        Every write transaction holds one advisory lock shared; this one takes
        it exclusively, so it starts once every write in flight has committed,
        and holds the next ones off until it ends. A fold and the other moves
        to and from the archive run in one, as SQLite's ``BEGIN IMMEDIATE``
        gives every write transaction there.
        """
        with self._transaction(exclusive=True):
            yield

    @contextlib.contextmanager
    def _transaction(self, *, exclusive: bool) -> Iterator[None]:
        if getattr(self._local, "conn", None) is not None:
            if exclusive and not getattr(self._local, "exclusive", False):
                self.run("SELECT pg_advisory_xact_lock(%s)", (_WRITE_LOCK,))
                self._local.exclusive = True
            yield
            return
        lock = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
        committing = False
        try:
            with self._borrow() as conn:
                self._local.conn = conn
                self._local.exclusive = exclusive
                try:
                    with conn.transaction():
                        conn.execute(f"SELECT {lock}(%s)", (_WRITE_LOCK,))
                        yield
                        committing = True
                finally:
                    self._local.conn = None
                    self._local.exclusive = False
        except StoreError:
            raise
        except Exception as exc:
            self._raise(exc, maybe_written=committing)
            raise

    @contextlib.contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """A read-only transaction whose reads all see one state that no write straddles.

        It starts (repeatable read) while it holds the write lock exclusively
        for a moment, so no write is in flight then: whatever commits later
        has a change-log position past every one it sees. A fold relies on
        that to tell, from the newest position alone, whether anything
        changed since it read the store.
        """
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        try:
            with self._borrow() as conn:
                conn.execute("SELECT pg_advisory_lock(%s)", (_WRITE_LOCK,))
                locked = True
                self._local.conn = conn
                self._local.snapshot = True
                try:
                    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    # The snapshot is taken as this statement starts, under the lock.
                    conn.execute("SELECT pg_advisory_unlock(%s)", (_WRITE_LOCK,))
                    locked = False
                    yield
                finally:
                    self._local.conn = None
                    self._local.snapshot = False
                    if not conn.closed:
                        conn.execute("ROLLBACK")
                        if locked:
                            conn.execute("SELECT pg_advisory_unlock(%s)", (_WRITE_LOCK,))
        except StoreError:
            raise
        except Exception as exc:
            self._raise(exc)
            raise

    # -- schema ---------------------------------------------------------------

    def _migrate(self) -> None:
        with self.transaction():
            self.run("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            self.run(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                "name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
            )
            applied = {int(row[0]) for row in self.run("SELECT version FROM schema_migrations")}
            newest = latest_pg_version()
            if applied and max(applied) > newest:
                raise SchemaTooNew(
                    f"store {self.path} has PostgreSQL schema version {max(applied)}, but this "
                    f"version of prime-memory-folding knows only up to {newest}; upgrade it"
                )
            conn = self._local.conn
            for step in sorted(PG_MIGRATIONS, key=lambda m: m.version):
                if step.version in applied:
                    continue
                with conn.cursor() as cur:
                    for statement in step.statements:
                        cur.execute(statement)
                    if step.then is not None:
                        step.then(cur)
                self.run(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
                    (step.version, step.name, time.time()),
                )

    def _open_vectors(self) -> Vectors | None:
        """pgvector's side of the store, when the extension exists and may be used.

        ``PRIME_MEMORY_PGVECTOR=off`` turns it off; vectors are then scored with
        numpy only.
        """
        if os.environ.get(PGVECTOR_ENV, "").strip().lower() in ("0", "off", "no", "false"):
            return None
        if not self.run("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchall():
            return None
        try:
            with self.transaction():
                self.run("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                if not self.run("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchall():
                    self.run("CREATE EXTENSION vector SCHEMA public")
        except StoreError:
            return None  # no right to create it: numpy scores vectors instead
        vectors = Vectors(self.run)
        vectors.load()
        return vectors

    def _embeddings(self, rows: Sequence[StoredRow]) -> list[str | None] | None:
        """The ``embedding`` values for rows about to be written; None without pgvector.

        The first vector of a known length makes the column and its index.
        """
        vectors = self._vectors
        if vectors is None:
            return None
        if vectors.dim is None:
            blob = next((row.vector_blob for row in rows if row.vector_blob), None)
            if blob is None:
                return None
            with self.transaction():
                self.run("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                vectors.prepare(len(blob) // 4)
        return [vectors.value(row.vector_blob) for row in rows]

    def schema_version(self) -> int:
        row = self.run("SELECT max(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0) if row else 0

    def reading(self) -> contextlib.AbstractContextManager[None]:
        """Reads beside other threads': each statement already borrows a pooled
        connection of its own, so nothing changes."""
        return contextlib.nullcontext()

    def data_version(self) -> int:
        """Changes whenever any server writes a record.

        Inside :meth:`read_snapshot`, the snapshot's newest change-log position.
        """
        if getattr(self._local, "snapshot", False):
            return self.newest_change()
        row = self.run("SELECT last_value, is_called FROM changes_seq_seq").fetchone()
        return int(row[0]) if row and row[1] else 0

    def size_bytes(self) -> int:
        """Bytes the store's tables and indexes take."""
        row = self.run(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c "
            "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
        ).fetchone()
        return int(row[0]) if row else 0

    # -- meta ---------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self.run("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.run(
            "INSERT INTO meta (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # -- prime registries ------------------------------------------------------

    def load_primes(self) -> dict[Kind, dict[str, int]]:
        registries: dict[Kind, dict[str, int]] = {kind: {} for kind in Kind}
        for kind, label, prime in self.run("SELECT kind, label, prime FROM primes"):
            registries[Kind(kind)][label] = int(prime)
        return registries

    def assign_prime(self, kind: Kind, label: str) -> int:
        """The label's prime, assigning the next one if new. Call inside a transaction.

        A transaction-level advisory lock per registry makes servers take turns,
        so one label gets one prime and a prime one label, never reused.

        Raises:
            StoreError: the registry has run out of 32-bit primes.
        """
        row = self.run(
            "SELECT prime FROM primes WHERE kind = %s AND label = %s", (kind.value, label)
        ).fetchone()
        if row is not None:
            return int(row[0])
        self.run("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"pmf_primes:{kind.value}",))
        row = self.run(
            "SELECT prime FROM primes WHERE kind = %s AND label = %s", (kind.value, label)
        ).fetchone()
        if row is not None:
            return int(row[0])
        highest = self.run("SELECT max(prime) FROM primes WHERE kind = %s", (kind.value,))
        top = highest.fetchone()
        prime = next_prime(int((top[0] if top else None) or 1))
        if prime > MAX_PRIME:
            raise StoreError(f"the {kind.value} registry of {self.path} has no 32-bit primes left")
        self.run(
            "INSERT INTO primes (kind, label, prime) VALUES (%s, %s, %s)",
            (kind.value, label, prime),
        )
        return prime

    # -- records ------------------------------------------------------------

    def find_dedupe(self, keys: Sequence[str]) -> dict[str, StoredRow]:
        """Existing rows whose dedupe key is among ``keys``.

        Inside a transaction, each key is first locked (advisory, until commit),
        so that two servers writing the same memory take turns: the second
        finds the first's record and merges into it.
        """
        wanted = sorted(set(keys))
        if getattr(self._local, "conn", None) is not None and wanted:
            # One lock per bucket of keys, not per key: a bulk store of many
            # memories would otherwise fill PostgreSQL's lock table. Buckets
            # are taken in order, so two writers never wait on each other in a
            # circle.
            self.run(
                "SELECT pg_advisory_xact_lock(%s, b) FROM (SELECT DISTINCT "
                "(abs(hashtextextended(k, 0)) %% %s)::int AS b FROM unnest(%s::text[]) AS k) "
                "AS buckets ORDER BY b",
                (_DEDUPE_LOCKS, DEDUPE_BUCKETS, wanted),
            )
        found: dict[str, StoredRow] = {}
        for row in self.run(
            f"SELECT {RECORD_COLUMNS} FROM records WHERE dedupe_key = ANY(%s)", (wanted,)
        ):
            stored = stored_row(row)
            found[stored.dedupe_key] = stored
        return found

    def existing_ids(self, record_ids: Sequence[str]) -> set[str]:
        rows = self.run(
            "SELECT record_id FROM records WHERE record_id = ANY(%s)", (list(record_ids),)
        )
        return {row[0] for row in rows}

    def insert(self, rows: Iterable[StoredRow]) -> None:
        """Insert new rows, in order. Call inside a transaction."""
        stored = list(rows)
        values: list[tuple[Any, ...]] = [record_values(row) for row in stored]
        if not values:
            return
        columns = RECORD_COLUMNS
        embeddings = self._embeddings(stored)
        if embeddings is not None:
            columns += ", embedding"
            values = [(*value, e) for value, e in zip(values, embeddings)]
        if len(values) < 64:
            marks = ",".join(["%s"] * len(values[0]))
            self.run_many(f"INSERT INTO records ({columns}) VALUES ({marks})", values)
            return
        with (
            self._connection() as conn,
            conn.cursor() as cur,
            cur.copy(f"COPY records ({columns}) FROM STDIN") as copy,
        ):
            for value in values:
                copy.write_row(value)
        # A batch that is a good part of the table changes what the planner
        # should know of it (how common each tag, scope and domain is) long
        # before autovacuum looks; without it a fresh bulk load can send tag
        # queries through the wrong index.
        if len(values) < ANALYZE_MIN:
            return
        row = self.run("SELECT reltuples FROM pg_class WHERE oid = 'records'::regclass").fetchone()
        known = float(row[0]) if row else -1.0
        if known < 0 or len(values) >= known / 10:
            self.run("ANALYZE records")

    def replace(self, rows: Iterable[StoredRow]) -> None:
        """Overwrite existing rows (matched by record id). Call inside a transaction."""
        stored = list(rows)
        embeddings = self._embeddings(stored)
        extra = "" if embeddings is None else ", embedding = %s::vector"
        self.run_many(
            "UPDATE records SET dedupe_key = %s, domain = %s, subdomain = %s, tags = %s, "
            "tag_product = %s, content = %s, vector = %s, importance = %s, strength = %s, "
            "created_at = %s, updated_at = %s, accessed_at = %s, access_count = %s, metadata = %s, "
            f"instance_key = %s, strength_at = %s, scope = %s, session = %s{extra} "
            "WHERE record_id = %s",
            [
                (
                    *record_values(row)[1:],
                    *(() if embeddings is None else (embeddings[i],)),
                    row.record.record_id,
                )
                for i, row in enumerate(stored)
            ],
        )

    def delete(self, record_ids: Sequence[str]) -> None:
        self.run("DELETE FROM records WHERE record_id = ANY(%s)", (list(record_ids),))

    def fetch(self, record_ids: Sequence[str]) -> dict[str, StoredRow]:
        found: dict[str, StoredRow] = {}
        for row in self.run(
            f"SELECT {RECORD_COLUMNS} FROM records WHERE record_id = ANY(%s)",
            (list(record_ids),),
        ):
            stored = stored_row(row)
            found[stored.record.record_id] = stored
        return found

    def count(self) -> int:
        row = self.run("SELECT count(*) FROM records").fetchone()
        return int(row[0]) if row else 0

    def index_rows(self, record_ids: Sequence[str] | None = None) -> Iterator[IndexRow]:
        sql = "SELECT " + INDEX_COLUMNS.format(vector="vector") + " FROM records"
        if record_ids is None:
            for batch in self._batches(sql + " ORDER BY id", ()):
                yield from (index_row(row) for row in batch)
            return
        for row in self.run(sql + " WHERE record_id = ANY(%s)", (list(record_ids),)):
            yield index_row(row)

    def batches(self, sql: str, params: Sequence[Any] = ()) -> Iterator[list[tuple[Any, ...]]]:
        """A big read (``?`` placeholders) in batches of :data:`BATCH` rows.

        Read through a server-side cursor, so that neither side holds it all.
        """
        return self._batches(qmark_to_format(sql), params)

    def _batches(self, sql: str, params: Sequence[Any]) -> Iterator[list[tuple[Any, ...]]]:
        """A big read in batches of :data:`BATCH` rows, through a server-side cursor."""
        with self._connection() as conn:
            outer = getattr(self._local, "conn", None) is not None
            with contextlib.ExitStack() as stack:
                if not outer:
                    stack.enter_context(conn.transaction())
                with conn.cursor(name=f"pmf_read_{threading.get_ident()}") as cur:
                    cur.itersize = BATCH
                    cur.execute(sql, params)
                    while True:
                        rows = cur.fetchmany(BATCH)
                        if not rows:
                            return
                        yield rows

    def index_table(self) -> IndexTable:
        """Every record's index columns (a fold or a survey reads them in batches)."""
        return table_of(self.index_rows())

    def changes_since(self, seq: int) -> tuple[list[str], int, bool]:
        """Record ids changed after ``seq``, the newest seq, and whether the log has a gap.

        Sequence numbers are handed out when a row is written, not when its
        transaction commits, so a slower transaction can commit a smaller one
        later: the look starts :data:`STATS_STALE_CHANGES` entries back, and
        catching up on a record twice is harmless.
        """
        row = self.run("SELECT min(seq), max(seq) FROM changes").fetchone()
        oldest, latest = (row or (None, None))[:2]
        gap = oldest is not None and (oldest > seq + 1 or latest < seq)
        ids: list[str] = []
        newest = seq
        for change_seq, record_id in self.run(
            "SELECT seq, record_id FROM changes WHERE seq > %s ORDER BY seq",
            (max(seq - STATS_STALE_CHANGES, 0),),
        ):
            ids.append(record_id)
            newest = max(newest, int(change_seq))
        return ids, newest, bool(gap)

    def trim_changes(self, keep: int) -> None:
        self.run(
            "DELETE FROM changes WHERE seq <= (SELECT max(seq) FROM changes) - %s", (max(keep, 1),)
        )

    def newest_change(self) -> int:
        row = self.run("SELECT max(seq) FROM changes").fetchone()
        return int(row[0] or 0) if row else 0

    # -- pushdown: gates, candidates and text in SQL ---------------------------

    def gated(self, gates: TagQuery, read: GatedRead) -> IndexTable:
        """The index columns of the gated records ``read`` names (:class:`~.base.GatedRead`).

        The strength gate and the exact tests run again on what this returns
        (:meth:`~..index.StructuralIndex.select`).
        """
        sql, params = gated_sql(gates, read)
        rows = self.run(sql, params).fetchall()
        if not read.records:
            return table_of(index_row(row) for row in rows)
        stored = [stored_row(row) for row in rows]
        return table_of(
            (index_row_of(row) for row in stored),
            {row.record.record_id: row for row in stored},
        )

    def salience_heads(
        self, gates: TagQuery, limits: Mapping[int, int], default: int
    ) -> list[tuple[int, str]]:
        """(class, record id) of the best gated records of each salience class.

        Each class (:mod:`.pg_decay`) gives up to ``limits[class]`` records
        (``default`` for a class not named), best first by its decay key; the
        classes come in ascending order. The exact gates are left to the reader.
        A class is read in its salience order, for at most
        :data:`~.pg_rows.PREFIX` entries. Where that held too few, the gated
        records of the classes short are found through the gates' indexes and
        sorted, when the gates pass at most :data:`~.pg_rows.SPARSE_ROWS` of
        them (a rare pair of tags: the plain query's own plan); otherwise a
        class is read for :data:`~.pg_rows.DEEP_PREFIX` entries, and where the
        gated records are sparser still, through the gates' indexes whole, so
        that a rare tag never walks the whole class.
        """
        found, short = self._heads(gates, limits, default, pg_rows.PREFIX, None)
        if short:
            sparse = self._sparse_heads(gates, limits, default, short, pg_rows.SPARSE_ROWS)
            if sparse is not None:
                found.update(sparse)
                short = []
        if short:
            deeper, short = self._heads(gates, limits, default, pg_rows.DEEP_PREFIX, short)
            found.update(deeper)
        if short:
            found.update(self._sparse_heads(gates, limits, default, short, None) or {})
        return [(c, rid) for c in sorted(found) for rid in found[c]]

    def _sparse_heads(
        self,
        gates: TagQuery,
        limits: Mapping[int, int],
        default: int,
        classes: Sequence[int],
        at_most: int | None,
    ) -> dict[int, list[str]] | None:
        """The best gated records of ``classes`` through the gates' indexes; None when
        the gates pass ``at_most`` or more of them (not all were read)."""
        wanted = {c: limits.get(c, default) for c in classes}
        sql, params = sparse_heads_sql(gates, wanted, at_most)
        found: dict[int, list[str]] = {c: [] for c in classes}
        for c, rid, gated in self.run(sql, params):
            if at_most is not None and int(gated) >= at_most:
                return None
            found[int(c)].append(str(rid))
        return found

    def _heads(
        self,
        gates: TagQuery,
        limits: Mapping[int, int],
        default: int,
        stretch: int,
        classes: Sequence[int] | None,
    ) -> tuple[dict[int, list[str]], list[int]]:
        """Each class's best gated records within its first ``stretch`` index entries
        (of ``classes``, None: every class), and the classes whose entries held fewer
        than they want."""
        sql, params, prefix = decay_heads_sql(gates, limits, default, stretch, classes)
        found: dict[int, list[str]] = {c: [] for c in classes or ()}
        scanned: dict[int, int] = {}
        for c, rid, count in self.run(sql, params):
            if rid is None:
                scanned[int(c)] = int(count)
            else:
                found.setdefault(int(c), []).append(str(rid))
        short = [
            c
            for c, count in scanned.items()
            if count >= prefix and len(found.get(c, ())) < limits.get(c, default)
        ]
        return found, sorted(short)

    def decay_order(self) -> DecayOrder:
        """The decay rule the store's salience columns compute."""
        return STORE_DECAY

    def gated_among(self, gates: TagQuery, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` that pass the SQL gates (every gate but the strength gate)."""
        where, params = gate_sql(gates)
        where.append("record_id = ANY(%s)")
        sql = "SELECT record_id FROM records WHERE " + " AND ".join(where)
        return [row[0] for row in self.run(sql, [*params, list(ids)])]

    def gated_ids(self, gates: TagQuery) -> list[str]:
        """Record ids that pass the SQL gates, oldest first."""
        where, params = gate_sql(gates)
        sql = "SELECT record_id FROM records"
        if where:
            sql += " WHERE " + " AND ".join(where)
        return [row[0] for row in self.run(sql + " ORDER BY id", params)]

    def nearest(
        self, gates: TagQuery, unit: npt.NDArray[np.float32], keep: int
    ) -> list[str] | None:
        """About ``keep`` gated records nearest ``unit`` by pgvector; None without it."""
        if self._vectors is None:
            return None
        where, params = gate_sql(gates)
        return self._vectors.nearest(where, params, unit, keep, self.transaction)

    def nearest_index(self) -> bool:
        """Whether the store answers :meth:`nearest` (it has pgvector)."""
        return self._vectors is not None

    def labelled_vector_batches(self) -> Iterator[list[tuple[str, bytes, str, str]]]:
        """(record id, vector, subdomain, tags as stored) of every record with a vector,
        in batches, oldest first (what the engine's vector cache reads)."""
        return self._batches(
            "SELECT record_id, vector, subdomain, tags FROM records "
            "WHERE vector IS NOT NULL ORDER BY id",
            (),
        )

    def vector_batches(
        self, gates: TagQuery, newest: int | None = None
    ) -> Iterator[list[tuple[str, bytes]]]:
        """(record id, vector) of every gated record with a vector (only the ``newest``
        that many, when given), in batches, oldest first."""
        where, params = gate_sql(gates)
        where.append("vector IS NOT NULL")
        gated = "FROM records WHERE " + " AND ".join(where)
        sql = f"SELECT record_id, vector {gated} ORDER BY id"
        if newest is not None:
            sql = (
                f"SELECT record_id, vector FROM (SELECT id, record_id, vector {gated} "
                "ORDER BY id DESC LIMIT %s) AS newest ORDER BY id"
            )
            params = [*params, newest]
        for batch in self._batches(sql, params):
            yield [(rid, bytes(blob)) for rid, blob in batch]

    def text_batches(self) -> Iterator[list[tuple[int, str, str]]]:
        """(row id, record id, content) of every record, in batches, oldest first."""
        for batch in self._batches("SELECT id, record_id, content FROM records ORDER BY id", ()):
            yield [(int(row), rid, content) for row, rid, content in batch]

    def texts_of(self, record_ids: Sequence[str]) -> list[tuple[int, str, str]]:
        """(row id, record id, content) of those of ``record_ids`` that are stored."""
        sql = "SELECT id, record_id, content FROM records WHERE record_id = ANY(%s) ORDER BY id"
        rows = self.run(sql, (list(record_ids),))
        return [(int(row), rid, content) for row, rid, content in rows]

    def lexical(self, text: str, gates: TagQuery, budget: int) -> LexicalCandidates:
        """BM25 scores of a text query's gated candidates (:meth:`.pg_text.TextSearch.lexical`)."""
        return self._text.lexical(text, gates, budget)

    def word_shares(self, words: Sequence[str]) -> tuple[list[float | None], int] | None:
        return self._text.word_shares(words)  # see TextSearch.word_shares

    def label_counts(self) -> dict[str, dict[str, int]]:
        """Live records per domain, subdomain and tag label."""
        counts: dict[str, dict[str, int]] = {"domain": {}, "subdomain": {}, "tag": {}}
        for column in ("domain", "subdomain"):
            for label, n in self.run(f"SELECT {column}, count(*) FROM records GROUP BY {column}"):
                counts[column][label] = int(n)
        for label, n in self.run(
            "SELECT t, count(*) FROM records, jsonb_array_elements_text(tags::jsonb) AS t "
            "GROUP BY t"
        ):
            counts["tag"][label] = int(n)
        return counts

    def scope_counts(self) -> dict[str, int]:
        rows = self.run("SELECT scope, count(*) FROM records GROUP BY scope")
        return {scope: int(n) for scope, n in rows}


def _quiet(conn: Any) -> bool:
    """Whether an idle connection's socket has nothing waiting to be read."""
    try:
        ready, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return False
    return not ready
