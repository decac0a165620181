"""The narrow interface between the engine and a storage backend.

The engine talks to storage only through :class:`Storage`, so that another
backend (PostgreSQL, for teams that outgrow one machine) can stand in for the
embedded SQLite store.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ..core.index import TagQuery
from ..core.primes import Kind
from ..core.records import Record
from ..errors import StoreError
from .pg_decay import DecayOrder

__all__ = [
    "SALIENCE_FLOOR",
    "FullText",
    "GatedRead",
    "IndexRow",
    "IndexTable",
    "LexicalCandidates",
    "Pushdown",
    "SqlConnectionLike",
    "SqlRows",
    "SqlStorage",
    "Storage",
    "StoredRow",
    "TokenRow",
    "TokenStore",
]


@dataclass(frozen=True, slots=True)
class StoredRow:
    """A record as stored: the record, its dedupe key and its raw vector blob."""

    record: Record
    dedupe_key: str
    vector_blob: bytes | None
    instance_key: str | None = None
    #: When a fold or an explicit update last set the strength (None: at ``accessed_at``).
    strength_at: float | None = None


@dataclass(frozen=True, slots=True)
class IndexRow:
    """The columns the in-memory structural index keeps for one record."""

    record_id: str
    domain: str
    subdomain: str
    tags: tuple[str, ...]
    tag_product: int
    importance: float
    strength: float
    updated_at: float
    vector_blob: bytes | None
    # Decay inputs (see folding.py); defaults keep other backends working unchanged.
    created_at: float = 0.0
    accessed_at: float = 0.0
    access_count: int = 0
    strength_at: float | None = None
    tier: str | None = None
    scope: str = "global"
    session: str | None = None


@dataclass(frozen=True, slots=True)
class IndexTable:
    """Every record's :class:`IndexRow` columns at once, one sequence per column.

    Rows are in insertion order. Opening a store reads this instead of one
    :class:`IndexRow` per record, so that loading costs a few passes over
    columns rather than an object per record.
    """

    record_ids: Sequence[str]
    domains: Sequence[str]
    subdomains: Sequence[str]
    tags: Sequence[tuple[str, ...]]
    tag_products: Sequence[int]
    importance: Sequence[float]
    strength: Sequence[float]
    updated_at: Sequence[float]
    vector_blobs: Sequence[bytes | None]
    created_at: Sequence[float]
    accessed_at: Sequence[float]
    access_count: Sequence[int]
    strength_at: Sequence[float | None]
    tiers: Sequence[str | None]
    scopes: Sequence[str] = ()
    #: One session (or None) per record; empty means none has one.
    sessions: Sequence[str | None] = ()
    #: The records' full rows by id, when the read asked for them (:class:`GatedRead`).
    stored: Mapping[str, StoredRow] | None = None
    #: The vectors already read into one float32 matrix (then ``vector_blobs``
    #: is empty): row ``i`` is record ``i``'s vector, zero where it has none;
    #: rows past the last record are room for more.
    vector_matrix: npt.NDArray[np.float32] | None = None
    #: Which records have a vector in ``vector_matrix``.
    vector_present: npt.NDArray[np.bool_] | None = None

    def __len__(self) -> int:
        return len(self.record_ids)


def damaged_vectors(path: str) -> StoreError:
    """The error for a store whose vectors are not all of one possible length."""
    return StoreError(
        f"store {path} holds vectors of different or impossible lengths; the store is damaged"
    )


class Storage(Protocol):
    """What the engine needs from a durable backend."""

    path: str

    def close(self) -> None: ...
    def transaction(self) -> AbstractContextManager[None]: ...
    def schema_version(self) -> int: ...
    def data_version(self) -> int: ...
    def size_bytes(self) -> int: ...
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def load_primes(self) -> dict[Kind, dict[str, int]]: ...
    def assign_prime(self, kind: Kind, label: str) -> int: ...
    def find_dedupe(self, keys: Sequence[str]) -> dict[str, StoredRow]: ...
    def existing_ids(self, record_ids: Sequence[str]) -> set[str]: ...
    def insert(self, rows: Iterable[StoredRow]) -> None: ...
    def replace(self, rows: Iterable[StoredRow]) -> None: ...
    def delete(self, record_ids: Sequence[str]) -> None: ...
    def fetch(self, record_ids: Sequence[str]) -> dict[str, StoredRow]: ...
    def count(self) -> int: ...
    def index_rows(self, record_ids: Sequence[str] | None = None) -> Iterator[IndexRow]: ...
    def index_table(self) -> IndexTable: ...
    def changes_since(self, seq: int) -> tuple[list[str], int, bool]: ...
    def newest_change(self) -> int: ...
    def trim_changes(self, keep: int) -> None: ...
    def reading(self) -> AbstractContextManager[None]:
        """This thread's reads, until the end, beside other threads' reads.

        The engine holds its lock for reading meanwhile, so nothing of its own
        writes; a backend whose connections are not per thread gives the reads
        a connection of their own.
        """
        ...

    # Access tokens: the methods of TokenStore, at the end of this file.
    def add_token(self, row: TokenRow) -> None: ...
    def tokens(self) -> list[TokenRow]: ...
    def token_by_hash(self, token_hash: str) -> TokenRow | None: ...
    def revoke_token(self, name: str, when: float) -> bool: ...


# -- SQL: backends whose tables modules may query directly --------------------------


class SqlRows(Protocol):
    """A statement's result: its rows, and how many rows it changed."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class SqlConnectionLike(Protocol):
    """A connection that takes SQLite-style ``?`` placeholders."""

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> SqlRows: ...
    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> SqlRows: ...


@runtime_checkable
class SqlStorage(Storage, Protocol):
    """A :class:`Storage` whose tables (records, archive, fold_marks, meta, changes) take SQL.

    Both backends qualify: the archive and folding (:mod:`.archive`,
    :mod:`~prime_memory_folding.engine.maintenance`) are written against this, in SQL
    that SQLite and PostgreSQL both accept.
    """

    @property
    def db(self) -> SqlConnectionLike: ...

    def batches(self, sql: str, params: Sequence[Any] = ()) -> Iterator[list[tuple[Any, ...]]]:
        """A big read (``?`` placeholders) in batches of rows, without holding all at once."""
        ...

    def read_snapshot(self) -> AbstractContextManager[None]:
        """A read transaction: every read inside sees one state that no write straddles."""
        ...

    def exclusive(self) -> AbstractContextManager[None]:
        """A write transaction that no other writer overlaps (what a fold needs)."""
        ...


# -- pushdown: backends that answer queries themselves -------------------------------


#: A backend's salience order (importance x strength, best first) may treat
#: either factor below this as equal to it: the bound a reader derives from
#: that order must then take ``max(factor, SALIENCE_FLOOR)`` too.
SALIENCE_FLOOR = 1e-150


@dataclass(frozen=True, slots=True)
class LexicalCandidates:
    """BM25 scores (higher is better) of a text query's gated candidates, by record id."""

    scores: dict[str, float]
    #: Whether every record that matches the query is in ``scores``.
    exhaustive: bool


class FullText(Protocol):
    """A backend that ranks text itself for a reader that gates in memory (SQLite).

    The reader's index holds every record, so the search is not gated: the
    reader drops what its gates do not pass, and asks again deeper
    (``depth`` None: every match) when they dropped most of the best.
    """

    def lexical(
        self, text: str, depth: int | None, *, store_size: int, budget: int, exact_store: int
    ) -> LexicalCandidates:
        """BM25 scores of the best ``depth`` records that match ``text``; in a store of
        ``store_size`` records over ``exact_store``, planned to score at most ``budget``."""
        ...

    def word_shares(
        self, words: Sequence[str], *, total: int, lent: bool = False
    ) -> tuple[list[float | None], int] | None:
        """Each word's share of the newest records, and ``total``; None for an empty store.
        ``lent``: for the words a query's first hits lend it, remembered apart."""
        ...


@dataclass(frozen=True, slots=True)
class GatedRead:
    """Which of the gated records a query's window reads (:meth:`Pushdown.gated`).

    ``ids`` keeps only those records; ``newest`` only the newest that many,
    plus those of ``also`` that pass the gates, plus the ``reach`` records of
    the same session on each side (in storage order) of each of ``around``,
    gated or not (none for a record without a session): a text query's
    context neighbours, where a record the gates drop still stands between
    two others of its session. Rows come in storage order; with
    ``order="salience"`` they are the ``limit`` best by importance x stored
    strength (the upper bound of the decayed salience; see
    :data:`SALIENCE_FLOOR`). ``vectors`` reads the vectors too, and
    ``has_vector`` keeps only records that have one.
    """

    vectors: bool = False
    ids: Sequence[str] | None = None
    newest: int | None = None
    also: Sequence[str] = ()
    order: str = "storage"
    limit: int | None = None
    has_vector: bool = False
    around: Sequence[str] = ()
    reach: int = 0
    #: Also the records' full rows (``IndexTable.stored``): a small window then
    #: hands back its hits without another read.
    records: bool = False


class Pushdown(Protocol):
    """A backend that gates and scores in its own database (PostgreSQL).

    With one, the engine holds no record in memory: each query asks for the
    candidates that pass the gates, and ranks them with the same code as the
    in-memory index (see :mod:`~prime_memory_folding.engine.pushdown`).
    """

    def gated(self, gates: TagQuery, read: GatedRead) -> IndexTable: ...
    def salience_heads(
        self, gates: TagQuery, limits: Mapping[int, int], default: int
    ) -> list[tuple[int, str]]: ...
    def decay_order(self) -> DecayOrder | None: ...
    def gated_ids(self, gates: TagQuery) -> list[str]: ...
    def gated_among(self, gates: TagQuery, ids: Sequence[str]) -> list[str]: ...
    def vector_batches(
        self, gates: TagQuery, newest: int | None = None
    ) -> Iterator[list[tuple[str, bytes]]]: ...
    def nearest(
        self, gates: TagQuery, unit: npt.NDArray[np.float32], keep: int
    ) -> list[str] | None: ...
    def nearest_index(self) -> bool: ...
    def lexical(self, text: str, gates: TagQuery, budget: int) -> LexicalCandidates: ...
    def word_shares(self, words: Sequence[str]) -> tuple[list[float | None], int] | None: ...
    def label_counts(self) -> dict[str, dict[str, int]]: ...
    def scope_counts(self) -> dict[str, int]: ...


# -- access tokens ---------------------------------------------------------------------
#
# Per-user bearer tokens for the HTTP server (see ``prime_memory_folding.engine.tokens``).
# A backend keeps them beside the records, so that every server sharing a store
# sees a new or revoked token at its next request.


@dataclass(frozen=True, slots=True)
class TokenRow:
    """One access token as stored: never the secret, only its hash.

    Attributes:
        name: the user name, normalised like a label (lower case, ``a-z0-9._-``);
            unique among live tokens.
        token_hash: the hex SHA-256 of the secret.
        scopes: the scope patterns the token may touch, e.g. ``("project:*",
            "global")``; ``user:<name>`` is always among them.
        read_only: the token may read, never write.
        created_at: when it was made, in Unix seconds.
        revoked_at: when it was revoked; None while it is live.
    """

    name: str
    token_hash: str
    scopes: tuple[str, ...]
    read_only: bool
    created_at: float
    revoked_at: float | None = None


class TokenStore(Protocol):
    """Where access tokens live."""

    def add_token(self, row: TokenRow) -> None:
        """Keep a new token. Call inside a transaction.

        Raises:
            InvalidInput: a live token already has this name (or this hash).
        """
        ...

    def tokens(self) -> list[TokenRow]:
        """Every token, revoked ones too, oldest first (by ``created_at``)."""
        ...

    def token_by_hash(self, token_hash: str) -> TokenRow | None:
        """The token with this hash, live or revoked, or None."""
        ...

    def revoke_token(self, name: str, when: float) -> bool:
        """Revoke the live token of ``name`` at ``when``. Call inside a transaction.

        Returns False when no live token has that name.
        """
        ...
