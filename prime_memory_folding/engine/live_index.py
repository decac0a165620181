"""The engine's in-memory index, kept coherent with a store other processes write too.

:class:`LiveIndex` loads every record's index entry from the store, catches up
with what other connections committed (the store's change log, see
docs/architecture.md), and takes in what this engine's own writes changed. On
a store that gates in its own database (PostgreSQL) it loads nothing until a
fold or a survey asks for the whole index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import numpy.typing as npt

from ..core.index import (
    IndexColumns,
    IndexEntry,
    StructuralIndex,
    session_code,
    session_code_column,
)
from ..core.labels import LabelRegistry
from ..core.primes import Kind
from ..core.records import Record
from ..fold.folding import FoldPolicy, decay_columns, decay_terms
from ..storage import IndexRow, IndexTable, Storage, StoredRow
from ..storage.base import damaged_vectors

__all__ = ["LiveIndex"]


class LiveIndex:
    """A :class:`StructuralIndex` of one store, and where in its change log it stands.

    Args:
        storage: returns the open storage backend (it raises once the engine closed).
        registry: the engine's copy of the prime registries.
        fold_policy: the policy whose decay terms the index's columns hold.
        lock: the engine's lock, held while the whole index is first read.
        path: the store's path, for messages.
        pushdown: the store answers queries itself, so the index is read only on demand.
    """

    def __init__(
        self,
        storage: Callable[[], Storage],
        registry: LabelRegistry,
        fold_policy: FoldPolicy,
        lock: AbstractContextManager[Any],
        path: str,
        *,
        pushdown: bool,
    ) -> None:
        self._storage = storage
        self._registry = registry
        self._fold_policy = fold_policy
        self._lock = lock
        self._path = path
        self._pushdown = pushdown
        #: The index itself; always the same object, loaded again in place.
        self.index = StructuralIndex()
        self._loaded = False
        self._data_version = 0
        self._seq = 0

    @property
    def held(self) -> StructuralIndex | None:
        """The index if it is loaded now, without reading it."""
        return self.index if self._loaded else None

    def load(self) -> None:
        """Read the registries, and the whole index unless the store answers queries itself."""
        storage = self._storage()
        # Read the change position first: anything committed after it is replayed later.
        self._data_version = storage.data_version()
        self._seq = storage.newest_change()
        self._registry.reload()
        if self._pushdown and not self._loaded:
            return
        self.index.load(self.columns(storage.index_table()))
        self._loaded = True

    def full(self) -> StructuralIndex:
        """Every record's index entry: always held on SQLite, read on demand on PostgreSQL."""
        if not self._loaded:
            with self._lock:
                storage = self._storage()
                self._data_version = storage.data_version()
                self._seq = storage.newest_change()
                self.index.load(self.columns(storage.index_table()))
                self._loaded = True
        return self.index

    def columns(self, table: IndexTable) -> IndexColumns:
        """The index's columns for every stored record, from the store's columns."""
        primes = {
            kind: {label: self._registry.known(kind, label) for label in set(labels)}
            for kind, labels in ((Kind.DOMAIN, table.domains), (Kind.SUBDOMAIN, table.subdomains))
        }
        since, half = decay_columns(
            self._fold_policy,
            table.importance,
            table.tiers,
            table.created_at,
            table.accessed_at,
            table.access_count,
            table.strength_at,
        )
        if table.vector_matrix is not None and table.vector_present is not None:
            vector_rows: Sequence[int] = np.flatnonzero(table.vector_present).tolist()
            vectors: npt.NDArray[np.float32] | None = table.vector_matrix
            aligned = True
        else:
            vector_rows, vectors = self._vectors_of(table.vector_blobs)
            aligned = False
        return IndexColumns(
            record_ids=table.record_ids,
            domain_primes=[primes[Kind.DOMAIN][label] for label in table.domains],
            subdomain_primes=[primes[Kind.SUBDOMAIN][label] for label in table.subdomains],
            tag_primes=[self._registry.tag_primes(tags) for tags in table.tags],
            tag_products=table.tag_products,
            importance=table.importance,
            strength=table.strength,
            updated_at=table.updated_at,
            reinforced_at=since,
            half_life=half,
            vector_rows=vector_rows,
            vectors=vectors,
            scopes=table.scopes,
            aligned=aligned,
            sessions=session_code_column(table.sessions),
            created_at=table.created_at,
        )

    def _vectors_of(
        self, blobs: Sequence[bytes | None]
    ) -> tuple[list[int], npt.NDArray[np.float32] | None]:
        """The rows that have a vector, and those vectors as one matrix."""
        vector_rows = [row for row, blob in enumerate(blobs) if blob is not None]
        if not vector_rows:
            return vector_rows, None
        given = [blobs[row] for row in vector_rows]
        sizes = {len(blob) for blob in given}  # type: ignore[arg-type]
        size = sizes.pop() if len(sizes) == 1 else 0
        if size == 0 or size % 4:
            raise damaged_vectors(self._path)
        # A bytearray, so that the index can take the matrix over without a copy.
        joined = bytearray().join(given)  # type: ignore[arg-type]
        return vector_rows, np.frombuffer(joined, dtype="<f4").reshape(len(given), size // 4)

    def entry(
        self, rec: IndexRow | Record, tier: object, blob: bytes | None, strength_at: float | None
    ) -> IndexEntry:
        """The index's entry for one stored record."""
        registry = self._registry
        since, half = decay_terms(
            self._fold_policy,
            rec.importance,
            tier,
            rec.created_at,
            rec.accessed_at,
            rec.access_count,
            strength_at,
        )
        return IndexEntry(
            record_id=rec.record_id,
            domain_prime=registry.known(Kind.DOMAIN, rec.domain),
            subdomain_prime=registry.known(Kind.SUBDOMAIN, rec.subdomain),
            tag_primes=registry.tag_primes(rec.tags),
            tag_product=rec.tag_product,
            importance=rec.importance,
            strength=rec.strength,
            updated_at=rec.updated_at,
            vector=None if blob is None else np.frombuffer(blob, dtype="<f4").astype(np.float32),
            reinforced_at=since,
            half_life=half,
            scope=rec.scope,
            session=session_code(rec.session),
            created_at=rec.created_at,
        )

    def stale(self) -> bool:
        """Whether another connection committed since the last look (one cheap question)."""
        return self._loaded and self._storage().data_version() != self._data_version

    def refresh(self) -> None:
        """Catch up with what other connections committed since the last look."""
        storage = self._storage()
        if not self._loaded:
            return  # nothing held to catch up (pushdown)
        version = storage.data_version()
        if version == self._data_version:
            return
        self._data_version = version
        changed, newest, gap = storage.changes_since(self._seq)
        if gap:
            self.load()
            return
        if changed:
            unique = list(dict.fromkeys(changed))
            present = {row.record_id: row for row in storage.index_rows(unique)}
            for rid in unique:
                row = present.get(rid)
                if row is None:
                    self.index.remove(rid)
                else:
                    self.index.upsert(self.entry(row, row.tier, row.vector_blob, row.strength_at))
        self._seq = newest

    def after_write(self, upserts: Iterable[StoredRow], removed: Iterable[str] = ()) -> None:
        """Take in what a committed write of this engine added, changed or removed."""
        if not self._loaded:
            return
        for rid in removed:
            self.index.remove(rid)
        for stored in upserts:
            rec = stored.record
            tier = rec.metadata.get("tier")
            self.index.upsert(self.entry(rec, tier, stored.vector_blob, stored.strength_at))
        if self.index.needs_compaction():
            self.load()

    def caught_up(self, seq: int) -> None:
        """The index holds every change up to ``seq`` of the change log."""
        self._seq = seq
