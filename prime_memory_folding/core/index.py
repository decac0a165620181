"""The in-memory structural index.

It answers the structural gates without touching SQLite: a scope index
(scope name -> rows), a domain index (domain prime -> rows), subdomain and
tag posting lists, every record's tag
product, and numpy columns for importance, strength, recency and normalised
vectors. Rows are positions in these columns; a forgotten record leaves a dead
row until the index compacts. Posting lists are compressed (Roaring) bitmaps,
so intersecting them is one call into C over compact memory.
"""

from __future__ import annotations

import array
import hashlib
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap, FrozenBitMap

__all__ = [
    "LABEL_PAIRS",
    "IndexColumns",
    "IndexEntry",
    "StructuralIndex",
    "TagQuery",
    "rows_reaching",
    "session_code",
    "session_code_column",
]

Rows = npt.NDArray[np.int64]
K = TypeVar("K", int, str)
Posting = BitMap | FrozenBitMap
_EMPTY = FrozenBitMap()
_UINT64_LIMIT = 2**64
#: The array typecode of an unsigned 32-bit int, the width of a bitmap's values.
_UINT32 = next(code for code in "IL" if array.array(code).itemsize == 4)
#: Up to this many candidates, exact tests run on Python ints instead of numpy.
_PYTHON_TEST_MAX = 256
#: The per-row numpy columns, all grown and compacted together.
_COLUMNS = (
    "_importance",
    "_strength",
    "_updated",
    "_reinforced",
    "_half_life",
    "_alive",
    "_has_vector",
    "_product64",
    "_product_fits",
    "_id_column",
    "_session",
    "_created",
)
#: Session codes are hashes kept to 63 bits, so that they fit an int64 column
#: as positive numbers.
_SESSION_MASK = (1 << 63) - 1


#: Rows compared with the queries at once by :func:`rows_reaching`, to bound memory.
_REACHING_ROWS = 32_768
#: Up to this many queries, :func:`rows_reaching` multiplies without the BLAS library.
_FEW_QUERIES = 8
#: A fold compares new records with a group label by label when its pairs, every
#: new record with every row, pass this many per label: a label's product costs
#: about as much as this many pairs more in one product.
LABEL_PAIRS = 100_000


def rows_reaching(
    vectors: npt.NDArray[np.float32],
    rows: Rows,
    queries: npt.NDArray[np.float32],
    threshold: float,
) -> Rows:
    """Those of ``rows`` (rows of ``vectors``, a matrix of unit vectors) whose cosine
    with one of ``queries`` (unit rows) reaches ``threshold``, in blocks.

    A block of consecutive rows is a slice of the matrix (no copy); others are gathered.
    """
    found = []
    for start in range(0, len(rows), _REACHING_ROWS):
        block = rows[start : start + _REACHING_ROWS]
        if bool((np.diff(block) == 1).all()):
            held = vectors[int(block[0]) : int(block[0]) + len(block)]
        else:
            held = vectors[block]
        if len(queries) <= _FEW_QUERIES:
            # A product this thin costs the BLAS library's threads more than
            # it saves: numpy's own loop does it in one.
            scores = np.einsum("ij,kj->ik", queries, held)
        else:
            scores = queries @ held.T
        found.append(block[(scores >= threshold).any(axis=0)])
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def session_code(session: str | None) -> int:
    """The stable code the index keeps for a session: a nonzero 63-bit hash; 0 for none.

    The first 8 bytes of the BLAKE2b hash of the name's UTF-8, masked to 63 bits
    (0 becomes 1), so that every process and every run gives a name the same code.
    """
    if session is None:
        return 0
    digest = hashlib.blake2b(session.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") & _SESSION_MASK or 1


def session_code_column(sessions: Sequence[str | None]) -> npt.NDArray[np.int64]:
    """:func:`session_code` of each of ``sessions``, as one int64 array.

    Each distinct name is hashed once; a column without any session is zeros
    without a pass in Python.
    """
    n = len(sessions)
    if not n or sessions.count(None) == n:
        return np.zeros(n, dtype=np.int64)
    codes = {name: session_code(name) for name in set(sessions)}
    return np.fromiter(map(codes.__getitem__, sessions), dtype=np.int64, count=n)


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """What the index keeps for one record, with labels already turned into primes."""

    record_id: str
    domain_prime: int
    subdomain_prime: int
    tag_primes: tuple[int, ...]
    tag_product: int
    importance: float
    strength: float
    updated_at: float
    vector: npt.NDArray[np.float32] | None
    #: Decay: when ``strength`` was last set, and its half-life in seconds (inf: none).
    reinforced_at: float = 0.0
    half_life: float = math.inf
    scope: str = "global"
    #: :func:`session_code` of the record's session (0: none).
    session: int = 0
    #: When the record was first stored (an update or a reinforcement never moves it).
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class IndexColumns:
    """What :meth:`StructuralIndex.load` takes: one sequence per :class:`IndexEntry` field.

    ``vectors`` holds one row per position in ``vector_rows``, the rows that
    have a vector; or, ``aligned``, one row per record (zero where it has
    none), and perhaps spare rows after the last. A writable float32
    ``vectors`` with a row for every record becomes the index's own matrix,
    normalised in place, rather than a copy: its spare rows are the index's
    room to grow.
    """

    record_ids: Sequence[str]
    domain_primes: Sequence[int]
    subdomain_primes: Sequence[int]
    tag_primes: Sequence[tuple[int, ...]]
    tag_products: Sequence[int]
    importance: Sequence[float] | npt.NDArray[np.float64]
    strength: Sequence[float] | npt.NDArray[np.float64]
    updated_at: Sequence[float] | npt.NDArray[np.float64]
    reinforced_at: Sequence[float] | npt.NDArray[np.float64]
    half_life: Sequence[float] | npt.NDArray[np.float64]
    vector_rows: Sequence[int] = ()
    vectors: npt.NDArray[np.float32] | None = None
    #: One scope name per record; empty means every record is in ``global``.
    scopes: Sequence[str] = ()
    #: ``vectors`` has a row per record, in record order (see above).
    aligned: bool = False
    #: One :func:`session_code` per record; empty means none has a session.
    sessions: Sequence[int] | npt.NDArray[np.int64] = ()
    #: When each record was first stored; empty means 0 for every record.
    created_at: Sequence[float] | npt.NDArray[np.float64] = ()


@dataclass(frozen=True, slots=True)
class TagQuery:
    """Structural gates with labels turned into primes.

    ``None`` for a domain or subdomain means "any". Tags unknown to the
    registry must be resolved by the caller: an unknown required tag or domain
    means nothing can match, and the caller should not ask at all.
    """

    domain_prime: int | None = None
    subdomain_prime: int | None = None
    all_of: tuple[int, ...] = ()
    any_of: tuple[int, ...] = ()
    none_of: tuple[int, ...] = ()
    min_strength: float = 0.0
    #: With a time, ``min_strength`` gates on the strength decayed to that time.
    now: float | None = None
    #: Only records in one of these scopes; None means any scope.
    scopes: tuple[str, ...] | None = None
    #: Only records last stored or changed at or after ``since`` and before ``until``.
    since: float | None = None
    until: float | None = None


class StructuralIndex:
    """Columns and posting lists over every live record."""

    def __init__(self) -> None:
        self._ids: list[str | None] = []
        self._row_of: dict[str, int] = {}
        self._domain_rows: dict[int, BitMap] = {}
        self._subdomain_rows: dict[int, BitMap] = {}
        self._tag_rows: dict[int, BitMap] = {}
        self._scope_rows: dict[str, BitMap] = {}
        self._scope_of: list[str] = []
        # Unions of several scopes' rows, kept until the next change.
        self._scope_unions: dict[tuple[str, ...], FrozenBitMap] = {}
        self._entry_keys: list[tuple[int, int, tuple[int, ...]]] = []
        self._tag_product: list[int] = []
        self._capacity = 0
        self._importance = np.zeros(0, dtype=np.float64)
        self._strength = np.zeros(0, dtype=np.float64)
        self._updated = np.zeros(0, dtype=np.float64)
        self._reinforced = np.zeros(0, dtype=np.float64)
        self._half_life = np.zeros(0, dtype=np.float64)
        self._alive = np.zeros(0, dtype=bool)
        self._has_vector = np.zeros(0, dtype=bool)
        # Tag products below 2**64 also live in a numpy column, so the exact
        # divisibility test runs vectorised; larger ones fall back to Python ints.
        self._product64 = np.zeros(0, dtype=np.uint64)
        self._product_fits = np.zeros(0, dtype=bool)
        self._id_column = np.zeros(0, dtype=object)
        self._session = np.zeros(0, dtype=np.int64)
        self._created = np.zeros(0, dtype=np.float64)
        self._vectors: npt.NDArray[np.float32] | None = None
        self._dead = 0
        self._generation = 0

    # -- size ---------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._row_of)

    def __contains__(self, record_id: object) -> bool:
        return record_id in self._row_of

    @property
    def dim(self) -> int | None:
        """The dimension of the indexed vectors, once one has been seen."""
        return None if self._vectors is None else int(self._vectors.shape[1])

    def record_ids(self, rows: Iterable[int]) -> list[str]:
        """Record ids for rows."""
        if isinstance(rows, np.ndarray):
            return self._id_column[rows].tolist()  # type: ignore[no-any-return]
        ids = self._ids
        return [ids[int(r)] for r in rows]  # type: ignore[misc]

    def row_of(self, record_id: str) -> int | None:
        return self._row_of.get(record_id)

    def tag_product(self, row: int) -> int:
        return self._tag_product[row]

    def scopes(self) -> list[str]:
        """The scopes that hold at least one live record."""
        return [scope for scope, rows in self._scope_rows.items() if rows]

    @property
    def generation(self) -> int:
        """A count that every load, upsert and removal moves on.

        What a caller computed from the live rows holds while the count is
        the one it read then.
        """
        return self._generation

    def _reset(self) -> None:
        """Empty the index in place; the generation counts on."""
        generation = self._generation
        self.__init__()  # type: ignore[misc]
        self._generation = generation + 1

    # -- writes -------------------------------------------------------------

    def _grow(self, needed: int) -> None:
        if needed <= self._capacity:
            return
        capacity = max(needed, self._capacity * 2, 1024)
        for name in _COLUMNS:
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)
        if self._vectors is not None:
            vectors = np.zeros((capacity, self._vectors.shape[1]), dtype=np.float32)
            vectors[: len(self._vectors)] = self._vectors
            self._vectors = vectors
        self._capacity = capacity

    def upsert(self, entry: IndexEntry) -> None:
        """Add a record, or replace what the index holds for it."""
        self._generation += 1
        row = self._row_of.get(entry.record_id)
        if row is None:
            row = len(self._ids)
            self._grow(row + 1)
            self._ids.append(entry.record_id)
            self._id_column[row] = entry.record_id
            self._entry_keys.append((0, 0, ()))
            self._scope_of.append(entry.scope)
            self._tag_product.append(1)
            self._row_of[entry.record_id] = row
        else:
            self._unlink(row)
        self._entry_keys[row] = (entry.domain_prime, entry.subdomain_prime, entry.tag_primes)
        self._scope_of[row] = entry.scope
        _posting(self._scope_rows, entry.scope).add(row)
        self._scope_unions.clear()
        _posting(self._domain_rows, entry.domain_prime).add(row)
        _posting(self._subdomain_rows, entry.subdomain_prime).add(row)
        tag_rows = self._tag_rows
        for prime in entry.tag_primes:
            _posting(tag_rows, prime).add(row)
        self._tag_product[row] = entry.tag_product
        fits = entry.tag_product < _UINT64_LIMIT
        self._product_fits[row] = fits
        self._product64[row] = entry.tag_product if fits else 0
        self._importance[row] = entry.importance
        self._strength[row] = entry.strength
        self._updated[row] = entry.updated_at
        self._reinforced[row] = entry.reinforced_at
        self._half_life[row] = entry.half_life
        self._session[row] = entry.session
        self._created[row] = entry.created_at
        self._alive[row] = True
        if entry.vector is None:
            self._has_vector[row] = False
            if self._vectors is not None:
                self._vectors[row] = 0.0
        else:
            if self._vectors is None:
                self._vectors = np.zeros((self._capacity, len(entry.vector)), dtype=np.float32)
            # The norm as a matrix's rows get it (see load), so that a vector
            # comes out the same whichever way it entered the index.
            vector = np.asarray(entry.vector, dtype=np.float32).reshape(1, -1)
            norm = np.linalg.norm(vector, axis=1, keepdims=True)
            self._vectors[row] = vector / norm if norm[0, 0] > 0 else vector
            self._has_vector[row] = True

    def _unlink(self, row: int) -> None:
        domain, subdomain, tags = self._entry_keys[row]
        self._scope_rows[self._scope_of[row]].discard(row)
        self._scope_unions.clear()
        self._domain_rows[domain].discard(row)
        self._subdomain_rows[subdomain].discard(row)
        tag_rows = self._tag_rows
        for prime in tags:
            tag_rows[prime].discard(row)

    def remove(self, record_id: str) -> None:
        """Drop a record; unknown ids are ignored."""
        row = self._row_of.pop(record_id, None)
        if row is None:
            return
        self._generation += 1
        self._unlink(row)
        self._ids[row] = None
        self._id_column[row] = None
        self._entry_keys[row] = (0, 0, ())
        self._alive[row] = False
        self._has_vector[row] = False
        self._dead += 1

    def _remove_rows(self, rows: list[int]) -> None:
        """:meth:`remove` for many rows: each posting list loses its rows in one step."""
        self._generation += 1
        tables: tuple[dict[Any, BitMap], ...] = (
            self._scope_rows, self._domain_rows, self._subdomain_rows, self._tag_rows,
        )  # fmt: skip
        lists: dict[tuple[int, Any], list[int]] = {}
        for row in rows:
            domain, subdomain, tags = self._entry_keys[row]
            for entry in ((0, self._scope_of[row]), (1, domain), (2, subdomain)):
                lists.setdefault(entry, []).append(row)
            for prime in tags:
                lists.setdefault((3, prime), []).append(row)
            self._ids[row] = None
            self._entry_keys[row] = (0, 0, ())
        for (table, label), found in lists.items():
            tables[table][label].difference_update(_bitmap(np.asarray(found, dtype=np.int64)))
        self._scope_unions.clear()
        at = np.asarray(rows, dtype=np.int64)
        self._id_column[at] = None
        self._alive[at] = False
        self._has_vector[at] = False
        self._dead += len(rows)

    def needs_compaction(self) -> bool:
        return self._dead > 1024 and self._dead > len(self._row_of)

    def remove_many(self, record_ids: Iterable[str]) -> None:
        """Drop many records at once (a fold); unknown ids are ignored.

        When that leaves most rows dead, the survivors are compacted in place
        from the columns already held, so nothing is re-read from the store.
        """
        ids = [rid for rid in dict.fromkeys(record_ids) if rid in self._row_of]
        dead = self._dead + len(ids)
        if dead <= 1024 or dead <= len(self._row_of) - len(ids):
            if len(ids) < _BATCH_REMOVE:
                for rid in ids:
                    self.remove(rid)
            else:
                self._remove_rows([self._row_of.pop(rid) for rid in ids])
            return
        self._alive[[self._row_of.pop(rid) for rid in ids]] = False
        self._compact()

    def _compact(self) -> None:
        """Keep only live rows, renumbered in order; values are copied as they are."""
        keep = np.flatnonzero(self._alive[: len(self._ids)])
        kept = keep.tolist()
        ids = [self._ids[row] for row in kept]
        keys = [self._entry_keys[row] for row in kept]
        scopes = [self._scope_of[row] for row in kept]
        products = [self._tag_product[row] for row in kept]
        columns = {name: getattr(self, name)[keep] for name in _COLUMNS}
        vectors = None if self._vectors is None else self._vectors[keep]
        self._reset()
        n = len(kept)
        self._grow(n)
        self._ids = ids
        self._row_of = {rid: row for row, rid in enumerate(ids)}
        self._entry_keys = keys
        self._tag_product = products
        for name, values in columns.items():
            getattr(self, name)[:n] = values
        self._index_postings(
            [key[0] for key in keys], [key[1] for key in keys], [key[2] for key in keys], scopes
        )
        if vectors is not None:
            self._vectors = np.zeros((self._capacity, vectors.shape[1]), dtype=np.float32)
            self._vectors[:n] = vectors

    # -- structural gates ---------------------------------------------------

    def select(self, gates: TagQuery) -> Rows:
        """Rows that pass every structural gate, in row order.

        The posting lists are intersected rarest first; every candidate of a
        tag gate then passes the exact divisibility test on its tag product.
        """
        rows = self._select(gates, as_ids=False)
        assert isinstance(rows, np.ndarray)
        return rows

    def select_ids(self, gates: TagQuery) -> list[str]:
        """Record ids of :meth:`select`'s rows, in row order."""
        ids = self._select(gates, as_ids=True)
        assert isinstance(ids, list)
        return ids

    def _select(self, gates: TagQuery, *, as_ids: bool) -> Rows | list[str]:
        postings: list[Posting] = []
        if gates.scopes is not None:
            postings.append(self._in_scopes(gates.scopes))
        if gates.domain_prime is not None:
            postings.append(self._domain_rows.get(gates.domain_prime, _EMPTY))
        if gates.subdomain_prime is not None:
            postings.append(self._subdomain_rows.get(gates.subdomain_prime, _EMPTY))
        tag_rows = self._tag_rows
        for prime in gates.all_of:
            postings.append(tag_rows.get(prime, _EMPTY))
        if gates.any_of:
            postings.append(BitMap.union(*(tag_rows.get(p, _EMPTY) for p in gates.any_of)))
        found: Posting | None = None
        if len(postings) > 1:
            postings.sort(key=len)  # rarest first: every later one filters less
            found = BitMap.intersection(*postings)
        elif postings:
            found = postings[0]
        if gates.none_of:
            excluded = BitMap.union(*(tag_rows.get(p, _EMPTY) for p in gates.none_of))
            if found is None:
                found = _bitmap(self.alive_rows())
            found = found - excluded
        timed = gates.since is not None or gates.until is not None
        exact_only = not (gates.any_of or gates.min_strength > 0.0 or timed)
        if found is not None and as_ids and exact_only and len(found) <= _PYTHON_TEST_MAX:
            # A few candidates and only the exact test left: plain Python ints
            # touch far less than a chain of small numpy calls.
            ids = self._ids
            if not gates.all_of:
                return [ids[r] for r in found]  # type: ignore[misc]
            products = self._tag_product
            required = math.prod(gates.all_of)
            return [ids[r] for r in found if products[r] % required == 0]  # type: ignore[misc]
        rows: Rows
        if found is None:
            rows = self.alive_rows()
        else:
            rows = np.frombuffer(found.to_array(), dtype=np.uint32).astype(np.int64)
        if gates.all_of and len(rows):
            rows = rows[self._divisible(rows, math.prod(gates.all_of))]
        if gates.any_of and len(rows):
            rows = rows[self._shares_prime(rows, math.prod(gates.any_of))]
        if gates.min_strength > 0.0 and len(rows):
            strength = (
                self._strength[rows]
                if gates.now is None
                else self.effective_strength(rows, gates.now)
            )
            rows = rows[strength >= gates.min_strength]
        if timed and len(rows):
            updated = self._updated[rows]
            keep = np.ones(len(rows), dtype=bool)
            if gates.since is not None:
                keep &= updated >= gates.since
            if gates.until is not None:
                keep &= updated < gates.until
            rows = rows[keep]
        return self.record_ids(rows) if as_ids else rows

    def _in_scopes(self, scopes: tuple[str, ...]) -> Posting:
        """The rows in any of ``scopes``; a union of several is kept until the next change."""
        if len(scopes) == 1:
            return self._scope_rows.get(scopes[0], _EMPTY)
        found = self._scope_unions.get(scopes)
        if found is None:
            rows = self._scope_rows
            found = FrozenBitMap(BitMap.union(*(rows.get(s, _EMPTY) for s in scopes)))
            if len(self._scope_unions) >= 64:
                self._scope_unions.clear()
            self._scope_unions[scopes] = found
        return found

    def _divisible(self, rows: Rows, required: int) -> npt.NDArray[np.bool_]:
        """Exact test: does each row's tag product divide by ``required``?"""
        products = self._tag_product
        if len(rows) <= _PYTHON_TEST_MAX:
            # Few rows: Python ints beat the fixed cost of several numpy calls.
            return np.array([products[r] % required == 0 for r in rows.tolist()], dtype=bool)
        if required >= _UINT64_LIMIT:
            return np.fromiter(
                (products[r] % required == 0 for r in rows), dtype=bool, count=len(rows)
            )
        fits = self._product_fits[rows]
        ok = np.zeros(len(rows), dtype=bool)
        ok[fits] = self._product64[rows[fits]] % np.uint64(required) == 0
        for i in np.flatnonzero(~fits):
            ok[i] = products[rows[i]] % required == 0
        return ok

    def _shares_prime(self, rows: Rows, wanted: int) -> npt.NDArray[np.bool_]:
        """Exact test: does each row's tag product share a prime factor with ``wanted``?"""
        products = self._tag_product
        if len(rows) <= _PYTHON_TEST_MAX or wanted >= _UINT64_LIMIT:
            return np.fromiter(
                (math.gcd(products[r], wanted) > 1 for r in rows), dtype=bool, count=len(rows)
            )
        fits = self._product_fits[rows]
        ok = np.zeros(len(rows), dtype=bool)
        ok[fits] = np.gcd(self._product64[rows[fits]], np.uint64(wanted)) > 1
        for i in np.flatnonzero(~fits):
            ok[i] = math.gcd(products[rows[i]], wanted) > 1
        return ok

    # -- scoring columns --------------------------------------------------------

    def importance(self, rows: Rows) -> npt.NDArray[np.float64]:
        return self._importance[rows]

    def strength(self, rows: Rows) -> npt.NDArray[np.float64]:
        return self._strength[rows]

    def updated_at(self, rows: Rows) -> npt.NDArray[np.float64]:
        return self._updated[rows]

    def created_at(self, rows: Rows) -> npt.NDArray[np.float64]:
        """When each row's record was first stored (updates and reinforcements keep it)."""
        return self._created[rows]

    def session_codes(self, rows: Rows) -> npt.NDArray[np.int64]:
        """Each row's :func:`session_code` (0: the record has no session)."""
        return self._session[rows]

    # -- decay (see folding.py) -------------------------------------------------

    def effective_strength(self, rows: Rows, now: float) -> npt.NDArray[np.float64]:
        """Strength decayed to ``now``: ``strength * 0.5 ** (elapsed / half_life)``."""
        elapsed = np.maximum(now - self._reinforced[rows], 0.0)
        return self._strength[rows] * np.exp2(-elapsed / self._half_life[rows])

    def decay_terms(self, rows: Rows) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Each row's last reinforcement (when its strength was set) and half-life."""
        return self._reinforced[rows], self._half_life[rows]

    def restamp(self, record_id: str, strength: float, reinforced_at: float) -> None:
        """Record a strength persisted at ``reinforced_at``; unknown ids are ignored."""
        row = self._row_of.get(record_id)
        if row is not None:
            self._strength[row] = strength
            self._reinforced[row] = reinforced_at

    # -- end decay --------------------------------------------------------------

    def has_vector(self, rows: Rows) -> npt.NDArray[np.bool_]:
        return self._has_vector[rows]

    def cosine(self, rows: Rows | None, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Cosine similarity of ``query`` (already normalised) with ``rows`` (all rows if None).

        Rows without a vector score ``-inf`` so they sort last.
        """
        n = len(self._ids)
        if self._vectors is None:
            size = n if rows is None else len(rows)
            return np.full(size, -np.inf, dtype=np.float32)
        if rows is None:
            scores = self._vectors[:n] @ query
            scores[~self._has_vector[:n]] = -np.inf
        else:
            scores = self._vectors[rows] @ query
            scores[~self._has_vector[rows]] = -np.inf
        return scores

    def similar(self, queries: npt.NDArray[np.float32], threshold: float) -> list[str]:
        """Ids of live records whose vector's cosine with one of ``queries`` reaches ``threshold``.

        ``queries`` are unit rows of the index's dimension (others find nothing).
        One pass over the vectors, in blocks, whatever the number of queries.
        """
        n = len(self._ids)
        vectors = self._vectors
        if vectors is None or not len(queries) or queries.shape[1] != vectors.shape[1]:
            return []
        found: list[str] = []
        step = 65_536
        for start in range(0, n, step):
            stop = min(start + step, n)
            near = (vectors[start:stop] @ queries.T >= threshold).any(axis=1)
            near &= self._alive[start:stop] & self._has_vector[start:stop]
            found.extend(self.record_ids(np.flatnonzero(near) + start))
        return found

    def vectors_of(
        self, record_ids: Sequence[str]
    ) -> tuple[npt.NDArray[np.float32], Rows, npt.NDArray[np.bool_]] | None:
        """The index's own matrix of unit vectors, the row of each record, and which have one.

        None when a record is not in the index, or the index holds no vectors.
        The matrix is not a copy: read it, never write it.
        """
        if self._vectors is None:
            return None
        row_of = self._row_of
        try:
            rows = np.fromiter(
                (row_of[rid] for rid in record_ids), dtype=np.int64, count=len(record_ids)
            )
        except KeyError:
            return None
        return self._vectors, rows, self._has_vector[rows]

    def alive_rows(self) -> Rows:
        return np.flatnonzero(self._alive[: len(self._ids)]).astype(np.int64)

    # -- summaries --------------------------------------------------------------

    def counts(self) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
        """Live records per domain prime, subdomain prime and tag prime."""

        def sizes(postings: dict[int, BitMap]) -> dict[int, int]:
            return {prime: len(rows) for prime, rows in postings.items() if rows}

        return sizes(self._domain_rows), sizes(self._subdomain_rows), sizes(self._tag_rows)

    def scope_counts(self) -> dict[str, int]:
        """Live records per scope."""
        return {scope: len(rows) for scope, rows in sorted(self._scope_rows.items()) if rows}

    def _index_postings(
        self,
        domain_primes: Sequence[int],
        subdomain_primes: Sequence[int],
        tag_primes: Sequence[tuple[int, ...]],
        scopes: Sequence[str],
    ) -> None:
        """Build every posting list for rows ``0..n-1``, whose keys these are."""
        n = len(domain_primes)
        rows = np.arange(n, dtype=np.int64)
        self._scope_of = list(scopes) if scopes else ["global"] * n
        self._scope_unions = {}
        names = list(dict.fromkeys(self._scope_of))
        if len(names) == 1:
            self._scope_rows = {names[0]: _bitmap(rows)}
        else:
            number = {name: i for i, name in enumerate(names)}
            codes = np.fromiter((number[s] for s in self._scope_of), dtype=np.int64, count=n)
            self._scope_rows = {names[k]: v for k, v in _postings(codes, rows).items()}
        self._domain_rows = _postings(np.asarray(domain_primes, dtype=np.int64), rows)
        self._subdomain_rows = _postings(np.asarray(subdomain_primes, dtype=np.int64), rows)
        lengths = np.fromiter((len(t) for t in tag_primes), dtype=np.int64, count=n)
        flat = np.fromiter(
            itertools.chain.from_iterable(tag_primes), dtype=np.int64, count=int(lengths.sum())
        )
        self._tag_rows = _postings(flat, np.repeat(rows, lengths))

    def load(self, columns: IndexColumns) -> None:
        """Replace everything with ``columns``, filling whole columns at once."""
        self._reset()
        ids = list(columns.record_ids)
        n = len(ids)
        given = columns.vectors
        every_row = len(columns.vector_rows) == n
        aligned = given is not None and (columns.aligned or every_row) and len(given) >= n
        take_over = (
            given is not None
            and aligned
            and given.dtype == np.float32
            and given.flags.c_contiguous
            and given.flags.writeable
            and len(given) >= 1024
        )
        # Room to grow by half before the columns are copied into larger ones.
        self._grow(len(given) if take_over and given is not None else max(n + n // 2, 1024))
        self._ids = list(ids)
        self._row_of = dict(zip(ids, range(n)))
        self._id_column[:n] = ids
        self._entry_keys = list(
            zip(columns.domain_primes, columns.subdomain_primes, columns.tag_primes)
        )
        self._index_postings(
            columns.domain_primes, columns.subdomain_primes, columns.tag_primes, columns.scopes
        )
        products = list(columns.tag_products)
        self._tag_product = products
        fits = [p < _UINT64_LIMIT for p in products]
        self._product_fits[:n] = fits
        self._product64[:n] = np.array(
            [p if ok else 0 for p, ok in zip(products, fits)], dtype=np.uint64
        )
        self._importance[:n] = columns.importance
        self._strength[:n] = columns.strength
        self._updated[:n] = columns.updated_at
        self._reinforced[:n] = columns.reinforced_at
        self._half_life[:n] = columns.half_life
        if len(columns.sessions):
            self._session[:n] = columns.sessions
        if len(columns.created_at):
            self._created[:n] = columns.created_at
        self._alive[:n] = True
        if given is not None and len(columns.vector_rows):
            with_vector = np.asarray(columns.vector_rows, dtype=np.int64)
            if take_over:
                self._vectors = given  # taken over, not copied: its rows are the capacity
                matrix = given[:n]
            else:
                self._vectors = np.zeros((self._capacity, given.shape[1]), dtype=np.float32)
                if aligned:  # in order: fill the column block, normalise it in place
                    matrix = self._vectors[:n]
                    matrix[...] = given[:n]
                else:
                    matrix = np.array(given, dtype=np.float32)
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            np.divide(matrix, norms, out=matrix, where=norms > 0)
            if not aligned:
                self._vectors[with_vector] = matrix
            self._has_vector[with_vector] = True


#: From this many records at once, :meth:`StructuralIndex.remove_many` takes
#: them out of each posting list in one step rather than one by one.
_BATCH_REMOVE = 64


def _posting(postings: dict[K, BitMap], key: K) -> BitMap:
    """The posting list under ``key``, created empty when missing."""
    found = postings.get(key)
    if found is None:
        found = postings[key] = BitMap()
    return found


def _postings(keys: npt.NDArray[np.int64], rows: Rows) -> dict[int, BitMap]:
    """``{key: bitmap of rows}``, grouping ``rows`` by ``keys`` (which pair up)."""
    if not len(keys):
        return {}
    order = np.argsort(keys, kind="stable")
    keys, rows = keys[order], rows[order]
    cuts = np.flatnonzero(np.diff(keys)) + 1
    starts = np.concatenate([[0], cuts]).astype(np.int64)
    return {
        int(key): _bitmap(part) for key, part in zip(keys[starts].tolist(), np.split(rows, cuts))
    }


def _bitmap(rows: Rows) -> BitMap:
    """A bitmap of ``rows``, handed over as a 32-bit array (far faster than one by one)."""
    return BitMap(array.array(_UINT32, rows.astype(np.uint32).tobytes()))
