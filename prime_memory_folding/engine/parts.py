"""The small interface the engine hands to the write path and to maintenance.

:mod:`~prime_memory_folding.engine.writes` and :mod:`~prime_memory_folding.engine.maintenance`
(and the read side, :mod:`~prime_memory_folding.engine.reads` and
:mod:`~prime_memory_folding.engine.survey`) work on a live store: they need its lock,
storage, registry, embedder, index and clock, and must tell the index what
they changed. They get exactly that through :class:`EngineParts`, which
:class:`~prime_memory_folding.engine.facade.MemoryEngine` implements for them, so none
of them imports the facade that calls it. Policy stays with the engine: it
counts its writes and folds automatically when a write has returned.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..core.filters import Filters
    from ..core.index import Rows, StructuralIndex, TagQuery
    from ..core.labels import LabelRegistry
    from ..fold.folding import FoldPolicy
    from ..recall.text_embedding import TextEmbedding
    from ..storage import SqlStorage, StoredRow
    from .locking import ReadWriteLock
    from .store_caches import StoreCaches

__all__ = ["EngineParts"]


class EngineParts(Protocol):
    """What a live engine lends the functions that write to it."""

    @property
    def path(self) -> str:
        """The store's path, for messages."""
        ...

    @property
    def storage(self) -> SqlStorage:
        """The open storage backend (raises ``StoreError`` once closed)."""
        ...

    @property
    def lock(self) -> ReadWriteLock:
        """The engine's lock: ``with lock:`` for anything that writes, or reads and then
        writes; ``with lock.shared():`` for a read, beside other reads."""
        ...

    @property
    def registry(self) -> LabelRegistry:
        """This process's copy of the prime registries."""
        ...

    @property
    def text(self) -> TextEmbedding:
        """The text embedder, loaded on first use."""
        ...

    @property
    def index(self) -> StructuralIndex:
        """The in-memory structural index."""
        ...

    @property
    def held_index(self) -> StructuralIndex | None:
        """The in-memory index if this engine holds one now, without reading it.

        SQLite always holds it; PostgreSQL only once a survey read it.
        """
        ...

    @property
    def caches(self) -> StoreCaches | None:
        """The text and vector caches of a store that ranks in its own database,
        shared by reads and folds; None on SQLite, whose index holds both."""
        ...

    @property
    def fold_policy(self) -> FoldPolicy:
        """The engine's fold policy."""
        ...

    def now(self) -> float:
        """The engine's clock: Unix seconds."""
        ...

    def refresh(self) -> None:
        """Catch up with what other connections committed."""
        ...

    def reading(self) -> AbstractContextManager[None]:
        """Hold the engine's lock for a read, beside other reads, once the index has
        caught up with other connections' writes."""
        ...

    def gated(self, gates: TagQuery) -> tuple[StructuralIndex, Rows]:
        """An index that holds the gated records, and their rows in it: the whole
        in-memory index, or on a store that gates in its own database, a window
        of just those records."""
        ...

    def gates(self, filters: Filters) -> TagQuery | None:
        """The query gates as the index takes them; None when nothing can match."""
        ...

    def after_write(self, upserts: Iterable[StoredRow], removed: Iterable[str] = ()) -> None:
        """Tell the index what a committed write added, changed or removed."""
        ...

    def caught_up(self, seq: int) -> None:
        """The index holds every change up to ``seq`` of the change log."""
        ...
