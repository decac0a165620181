"""Every vector of a store that ranks in its own database, held by the server.

A PostgreSQL store without pgvector has no index to find the nearest vectors,
and reading every gated vector at each query costs seconds at a million
records. So, by default, each server keeps the store's vectors in one float32
matrix (4 bytes per dimension per record: 1 GiB for a million 256-dimension
vectors), read in batches the first time a query needs them and kept coherent
through the store's change log, as the SQLite store's index is. A query then
scores every vector at once and checks the gates on the best, in growing
chunks, until it has as many as it needs: the exact nearest gated records.
Beside each vector it keeps the record's domain, a code of its subdomain and a
mask of its tags (24 bytes), which an incremental fold gates its comparisons
on (:meth:`VectorCache.similar`).

``PRIME_MEMORY_VECTOR_CACHE=off`` turns it off (see docs/team.md).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ..core.address import domain_prime_of
from ..core.index import LABEL_PAIRS, TagQuery, rows_reaching, session_code
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
#: A label's bit among the 64 of a row's tag mask.
_BITS = 64
_Cell = TypeVar("_Cell", bound=np.generic)


def tag_bits(tags: Iterable[str]) -> list[int]:
    """The bits of a row's tag mask that ``tags`` set: each tag's stable 63-bit code
    (:func:`~..core.index.session_code`, the index's hash of a name) modulo 64. Two
    tags may share a bit; a comparison gated on the mask then lets more rows through,
    never fewer."""
    return sorted({session_code(tag) % _BITS for tag in tags})


def _tag_mask(tags: Iterable[str]) -> int:
    return sum(1 << bit for bit in tag_bits(tags))


def cache_enabled() -> bool:
    """Whether servers keep the vectors in memory (:data:`SETTING` is not ``off``)."""
    return os.environ.get(SETTING, "").strip().lower() not in ("off", "0", "false", "no")


class VectorSource(Protocol):
    """What the cache reads of the store."""

    def labelled_vector_batches(self) -> Iterator[list[tuple[str, bytes, str, str]]]: ...
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
        self._subdomains = np.zeros(0, dtype=np.int64)
        self._tag_masks = np.zeros(0, dtype=np.uint64)
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
        labels: Sequence[tuple[str, Sequence[str]]] | None = None,
    ) -> list[str]:
        """Ids of the records whose cosine with one of ``queries`` (unit rows) reaches
        ``threshold``: one pass over the matrix, in blocks, once caught up.

        With ``domains`` (each query's domain prime), a query is compared only with the
        records of its domain (read from their ids, :func:`~..core.address.domain_prime_of`).
        With ``labels`` too (each query's subdomain and tags), only with those of them
        that share its subdomain or one of its tags: label by label once the pairs pass
        :data:`~..core.index.LABEL_PAIRS` per label, as the fold does on the engine's
        index. Tags are compared through each row's 64-bit mask of them, which may let
        a row through that shares none, never turn one away that shares one.
        """
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
            found: list[npt.NDArray[np.int64]] = []
            for domain in np.unique(wanted).tolist():
                mine = live[held == domain]
                asked = np.flatnonzero(wanted == domain)
                if labels is None:
                    found.append(rows_reaching(self._matrix, mine, queries[asked], threshold))
                else:
                    found.extend(self._by_label(mine, queries, asked, labels, threshold))
            rows = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
            return [self._ids[int(i)] for i in rows]

    def _by_label(
        self,
        mine: npt.NDArray[np.int64],
        queries: npt.NDArray[np.float32],
        asked: npt.NDArray[np.int64],
        labels: Sequence[tuple[str, Sequence[str]]],
        threshold: float,
    ) -> Iterator[npt.NDArray[np.int64]]:
        """:meth:`similar`'s rows of one domain (``mine``) for its queries ``asked``."""
        groups: dict[tuple[bool, int], list[int]] = {}
        for q in asked.tolist():
            subdomain, tags = labels[q]
            groups.setdefault((True, session_code(subdomain)), []).append(q)
            for bit in tag_bits(tags):
                groups.setdefault((False, bit), []).append(q)
        if len(asked) * len(mine) <= LABEL_PAIRS * len(groups):
            yield rows_reaching(self._matrix, mine, queries[asked], threshold)
            return
        subdomains, masks = self._subdomains[mine], self._tag_masks[mine]
        for (by_subdomain, value), members in groups.items():
            if by_subdomain:
                rows = mine[subdomains == value]
            else:
                rows = mine[(masks >> np.uint64(value)) & np.uint64(1) == 1]
            yield rows_reaching(self._matrix, rows, queries[members], threshold)

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
        self._subdomains = np.zeros(0, dtype=np.int64)
        self._tag_masks = np.zeros(0, dtype=np.uint64)
        self._used = self._dead = 0
        stored: dict[str, tuple[str, ...]] = {}  # tags as stored (JSON), parsed once each
        for batch in self._source.labelled_vector_batches():
            for text in {text for _, _, _, text in batch} - stored.keys():
                stored[text] = tuple(str(tag) for tag in json.loads(text))
            self._append(
                [
                    (rid, blob, subdomain, stored[text])
                    for rid, blob, subdomain, text in batch
                    if len(blob) == 4 * dim
                ]
            )

    def _apply(self, ids: Sequence[str]) -> None:
        """Catch up on records that changed: new, changed or gone."""
        if not ids:
            return
        table = self._source.gated(TagQuery(), GatedRead(ids=list(ids), vectors=True))
        now = {
            rid: (blob, subdomain, tuple(tags))
            for rid, blob, subdomain, tags in zip(
                table.record_ids, table.vector_blobs, table.subdomains, table.tags
            )
        }
        added: list[tuple[str, bytes, str, tuple[str, ...]]] = []
        for rid in ids:
            row = self._row.pop(rid, None)
            if row is not None:  # changed or gone: its old row dies
                self._alive[row] = False
                self._dead += 1
            blob, subdomain, tags = now.get(rid, (None, "", ()))
            if blob is not None and len(blob) == 4 * (self._dim or 0):
                added.append((rid, blob, subdomain, tags))
        self._append(added)

    def _append(self, rows: Sequence[tuple[str, bytes, str, tuple[str, ...]]]) -> None:
        """Add rows of (record id, vector, subdomain, tags)."""
        if not rows:
            return
        dim = self._dim or 0
        need = self._used + len(rows)
        if need > len(self._matrix):
            capacity = max(need, int(len(self._matrix) * 1.5), 1024)
            grown = np.zeros((capacity, dim), dtype=np.float32)
            grown[: self._used] = self._matrix[: self._used]
            self._matrix = grown
            self._alive = _grown(self._alive, capacity, self._used)
            self._domains = _grown(self._domains, capacity, self._used)
            self._subdomains = _grown(self._subdomains, capacity, self._used)
            self._tag_masks = _grown(self._tag_masks, capacity, self._used)
        block = np.frombuffer(b"".join(row[1] for row in rows), dtype="<f4").reshape(len(rows), dim)
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        start = self._used
        self._matrix[start:need] = block / np.where(norms > 0, norms, 1.0)
        self._alive[start:need] = True
        self._domains[start:need] = [domain_prime_of(row[0]) for row in rows]
        # Many rows share a subdomain and a tag set: each distinct one is worked out once.
        codes = {name: session_code(name) for name in {row[2] for row in rows}}
        masks = {tags: _tag_mask(tags) for tags in {row[3] for row in rows}}
        self._subdomains[start:need] = [codes[row[2]] for row in rows]
        self._tag_masks[start:need] = [masks[row[3]] for row in rows]
        for offset, row in enumerate(rows):
            self._ids.append(row[0])
            self._row[row[0]] = start + offset
        self._used = need

    def _compact(self) -> None:
        """Drop the dead rows, keeping the order of the live ones."""
        keep = np.flatnonzero(self._alive[: self._used])
        self._matrix = np.ascontiguousarray(self._matrix[keep])
        self._alive = np.ones(len(keep), dtype=bool)
        self._domains = np.ascontiguousarray(self._domains[keep])
        self._subdomains = np.ascontiguousarray(self._subdomains[keep])
        self._tag_masks = np.ascontiguousarray(self._tag_masks[keep])
        self._ids = [self._ids[int(i)] for i in keep]
        self._row = {rid: n for n, rid in enumerate(self._ids)}
        self._used, self._dead = len(keep), 0


def _grown(column: npt.NDArray[_Cell], capacity: int, used: int) -> npt.NDArray[_Cell]:
    """``column``'s first ``used`` cells in a new zeroed array of ``capacity``."""
    grown = np.zeros(capacity, dtype=column.dtype)
    grown[:used] = column[:used]
    return grown
