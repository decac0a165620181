"""Every vector of a store that ranks in its own database, held by the server.

A PostgreSQL store without pgvector has no index to find the nearest vectors,
and reading every gated vector at each query costs seconds at a million
records. So, by default, each server keeps the store's vectors in one float32
matrix (4 bytes per dimension per record: 1 GiB for a million 256-dimension
vectors), read in batches the first time a query needs them and kept coherent
through the store's change log, as the SQLite store's index is. A query then
scores every vector at once and checks the gates on the best, in growing
chunks, until it has as many as it needs: the exact nearest gated records.

``PRIME_MEMORY_VECTOR_CACHE=off`` turns it off (see docs/team.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ..core.address import domain_prime_of
from ..core.index import TagQuery, rows_reaching
from ..storage.base import GatedRead, IndexTable

__all__ = ["VectorCache", "VectorSource", "cache_enabled"]

#: The setting that turns the cache off.
SETTING = "PRIME_MEMORY_VECTOR_CACHE"
#: The first chunk of best-scored records whose gates are checked: this many
#: times the records wanted (more are read, four times as many each step, when
#: the gates turn too many away).
CHUNK_PER_WANTED = 1.25
#: Dead rows (deleted or changed records) past this share of the matrix make it compact.
COMPACT_SHARE = 0.25


def cache_enabled() -> bool:
    """Whether servers keep the vectors in memory (:data:`SETTING` is not ``off``)."""
    return os.environ.get(SETTING, "").strip().lower() not in ("off", "0", "false", "no")


class VectorSource(Protocol):
    """What the cache reads of the store."""

    def vector_batches(self, gates: TagQuery) -> Iterator[list[tuple[str, bytes]]]: ...
    def gated(self, gates: TagQuery, read: GatedRead) -> IndexTable: ...
    def newest_change(self) -> int: ...
    def changes_since(self, seq: int) -> tuple[list[str], int, bool]: ...


#: ``passing(ids)``: those of ``ids`` that pass the query's gates.
Passing = Callable[[list[str]], set[str]]


class VectorCache:
    """The store's vectors of one length, by record id, caught up before each use."""

    def __init__(self, source: VectorSource) -> None:
        self._source = source
        self._lock = threading.Lock()
        self._dim: int | None = None
        self._seq = -1
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._alive = np.zeros(0, dtype=bool)
        self._domains = np.zeros(0, dtype=np.int64)
        self._used = 0
        self._dead = 0

    @property
    def nbytes(self) -> int:
        """The matrix's size in bytes (its capacity)."""
        return int(self._matrix.nbytes)

    def __len__(self) -> int:
        return self._used - self._dead

    def nearest(self, unit: npt.NDArray[np.float32], keep: int, passing: Passing) -> list[str]:
        """Ids of the ``keep`` records nearest ``unit`` (cosine) of those that pass,
        best first; of equally near ones, the one read first."""
        with self._lock:
            self._catch_up(len(unit))
            if self._dim != len(unit) or self._used == 0 or keep <= 0:
                return []
            scores = self._matrix[: self._used] @ unit
            scores[~self._alive[: self._used]] = -np.inf
            return self._best(scores, keep, passing)

    def similar(
        self,
        queries: npt.NDArray[np.float32],
        threshold: float,
        domains: Sequence[int] | None = None,
    ) -> list[str]:
        """Ids of the records whose cosine with one of ``queries`` (unit rows) reaches
        ``threshold``: one pass over the matrix, in blocks, once caught up. With
        ``domains`` (each query's domain prime), a query is compared only with the
        records of its domain (read from their ids, :func:`~..core.address.domain_prime_of`)."""
        with self._lock:
            if not len(queries):
                return []
            self._catch_up(int(queries.shape[1]))
            if self._dim != queries.shape[1]:
                return []
            live = np.flatnonzero(self._alive[: self._used])
            if domains is None:
                near = rows_reaching(self._matrix, live, queries, threshold)
                return [self._ids[int(i)] for i in near]
            wanted = np.asarray(domains, dtype=np.int64)
            held = self._domains[live]
            found: list[str] = []
            for domain in np.unique(wanted).tolist():
                mine = live[held == domain]
                near = rows_reaching(self._matrix, mine, queries[wanted == domain], threshold)
                found.extend(self._ids[int(i)] for i in near)
            return found

    def _best(self, scores: npt.NDArray[np.float32], keep: int, passing: Passing) -> list[str]:
        """The ``keep`` best-scored rows that pass, reading the order in growing chunks."""
        alive = len(self)
        found: list[str] = []
        done = 0
        chunk = max(int(keep * CHUNK_PER_WANTED), 64)
        while len(found) < keep and done < alive:
            upto = min(done + chunk, alive)
            if upto >= len(scores):
                order = np.lexsort((np.arange(len(scores)), -scores))[done:upto]
            else:
                part = np.argpartition(-scores, upto - 1)[:upto]
                part = part[np.lexsort((part, -scores[part]))]
                order = part[done:upto]
            ids = [self._ids[int(i)] for i in order if np.isfinite(scores[int(i)])]
            good = passing(ids)
            found.extend(rid for rid in ids if rid in good)
            done = upto
            chunk *= 4
        return found[:keep]

    # -- keeping up with the store ------------------------------------------------------

    def _catch_up(self, dim: int) -> None:
        """Load the vectors the first time, then only what changed since."""
        source = self._source
        newest = source.newest_change()
        if self._dim == dim and newest == self._seq:
            return
        if self._dim != dim:
            self._load(dim, newest)
            return
        changed, latest, gap = source.changes_since(self._seq)
        if gap:
            self._load(dim, newest)
            return
        self._apply(sorted(set(changed)))
        self._seq = latest
        if self._dead > COMPACT_SHARE * max(self._used, 1):
            self._compact()

    def _load(self, dim: int, newest: int) -> None:
        """Every vector of length ``dim``, read afresh (the change log's position first)."""
        self._dim, self._seq = dim, newest
        self._ids, self._row = [], {}
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._alive = np.zeros(0, dtype=bool)
        self._domains = np.zeros(0, dtype=np.int64)
        self._used = self._dead = 0
        for batch in self._source.vector_batches(TagQuery()):
            self._append([(rid, blob) for rid, blob in batch if len(blob) == 4 * dim])

    def _apply(self, ids: Sequence[str]) -> None:
        """Catch up on records that changed: new, changed or gone."""
        if not ids:
            return
        table = self._source.gated(TagQuery(), GatedRead(ids=list(ids), vectors=True))
        now = dict(zip(table.record_ids, table.vector_blobs))
        added: list[tuple[str, bytes]] = []
        for rid in ids:
            row = self._row.pop(rid, None)
            if row is not None:  # changed or gone: its old row dies
                self._alive[row] = False
                self._dead += 1
            blob = now.get(rid)
            if blob is not None and len(blob) == 4 * (self._dim or 0):
                added.append((rid, blob))
        self._append(added)

    def _append(self, rows: Sequence[tuple[str, bytes]]) -> None:
        if not rows:
            return
        dim = self._dim or 0
        need = self._used + len(rows)
        if need > len(self._matrix):
            capacity = max(need, int(len(self._matrix) * 1.5), 1024)
            grown = np.zeros((capacity, dim), dtype=np.float32)
            grown[: self._used] = self._matrix[: self._used]
            alive = np.zeros(capacity, dtype=bool)
            alive[: self._used] = self._alive[: self._used]
            domains = np.zeros(capacity, dtype=np.int64)
            domains[: self._used] = self._domains[: self._used]
            self._matrix, self._alive, self._domains = grown, alive, domains
        block = np.frombuffer(b"".join(blob for _, blob in rows), dtype="<f4").reshape(
            len(rows), dim
        )
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        start = self._used
        self._matrix[start:need] = block / np.where(norms > 0, norms, 1.0)
        self._alive[start:need] = True
        self._domains[start:need] = [domain_prime_of(rid) for rid, _ in rows]
        for offset, (rid, _) in enumerate(rows):
            self._ids.append(rid)
            self._row[rid] = start + offset
        self._used = need

    def _compact(self) -> None:
        """Drop the dead rows, keeping the order of the live ones."""
        keep = np.flatnonzero(self._alive[: self._used])
        self._matrix = np.ascontiguousarray(self._matrix[keep])
        self._alive = np.ones(len(keep), dtype=bool)
        self._domains = np.ascontiguousarray(self._domains[keep])
        self._ids = [self._ids[int(i)] for i in keep]
        self._row = {rid: n for n, rid in enumerate(self._ids)}
        self._used, self._dead = len(keep), 0
