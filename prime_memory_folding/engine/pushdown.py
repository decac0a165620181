"""Reads on a backend that gates in its own database (PostgreSQL).

The engine holds no record in memory on such a store (:class:`PushdownReader`
is its read side). Each query asks the
database for the records that pass its gates (:class:`~.storage.base.Pushdown`),
loads just those into a small :class:`~.index.StructuralIndex`, the *window*,
and ranks them with the same functions as the embedded store: the same strength
gate and decay, salience, cosine and hybrid fusion. What the window holds:

- **salience** (no text, no vector): the gated records best by importance x
  stored strength, which bounds the decayed salience from above; more are
  read until the last hit's decayed salience beats the bound of every record
  not read, so the answer is the exact top of every gated record (the window
  keeps storage order, so ties break as in the embedded store);
- **vector**: every gated record with a vector, when at most ``window_max``
  (:class:`~.ranking.RankingSettings`); otherwise the nearest few by
  pgvector's HNSW index where the database has the extension, else by reading the gated vectors in
  batches and scoring them with numpy (memory stays bounded, time grows with
  the gated records); more when too few of them pass the strength gate. Either
  way those candidates are ranked exactly;
- **text**: the BM25 candidates (the database's text index, gated), plus, for
  the vector side and the neighbours that lend context, every gated record
  when at most ``window_max``, else the newest ``window_max`` of them
  and, with pgvector, the ``nearest_keep`` nearest. A text query's vector
  side therefore never reads more than that many vectors, whatever the
  store's size; without pgvector, an older record without a word of the query
  is found only by a vector query.

The window's rows keep the store's order, and it holds the session neighbours
of the lexical hits, so that neighbours are the same as in the embedded
store's index.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import cast

import numpy as np
import numpy.typing as npt

from ..core.index import IndexColumns, Rows, StructuralIndex, TagQuery
from ..core.primes import Kind
from ..core.records import Hit
from ..recall.fusion import TextQuery, gated_rows, rank_text
from ..recall.query import RankedRow, rank_by_salience, rank_by_vector
from ..recall.query_weights import SharesOf
from ..recall.ranking import DEFAULT_RANKING, RankingSettings
from ..storage.base import SALIENCE_FLOOR, GatedRead, IndexTable, Pushdown, StoredRow
from .reads import Reader

__all__ = [
    "PushdownReader",
    "Window",
    "by_salience",
    "by_text",
    "by_vector",
    "matching_ids",
]

#: Records the first salience read takes, at least.
SALIENCE_FIRST = 16
#: Vectors a vector query past ``window_max`` keeps from its first scan, at least.
NEAREST_FIRST = 64

ColumnsOf = Callable[[IndexTable], IndexColumns]


@dataclass(frozen=True, slots=True)
class Window:
    """The records a query ranked, and the ranking (rows of ``index``)."""

    index: StructuralIndex
    ranked: list[RankedRow]
    #: The records' full rows, when the window read them (its hits need no other read).
    stored: Mapping[str, StoredRow] | None = None


def _window(columns_of: ColumnsOf, table: IndexTable) -> StructuralIndex:
    index = StructuralIndex()
    index.load(columns_of(table))
    return index


def matching_ids(store: Pushdown, columns_of: ColumnsOf, gates: TagQuery) -> list[str]:
    """Every gated record's id, oldest first; the strength gate, when set, runs on a window."""
    if gates.min_strength <= 0.0:
        return store.gated_ids(gates)
    return _window(columns_of, store.gated(gates, GatedRead())).select_ids(gates)


def by_salience(
    store: Pushdown, columns_of: ColumnsOf, gates: TagQuery, limit: int, now: float
) -> Window:
    """The gated records best by importance x decayed strength, then recency."""
    size = max(limit * 2, SALIENCE_FIRST)
    while True:
        table = store.gated(gates, GatedRead(order="salience", limit=size, records=True))
        index = _window(columns_of, table)
        ranked = rank_by_salience(index, index.select(gates), limit, now=now)
        if len(table) < size:
            return Window(index, ranked, table.stored)  # every gated record was read
        # Decay only lowers strength: no record not read can beat this bound
        # (ties go on reading: recency, then storage order, break them).
        bound = min(
            max(i, SALIENCE_FLOOR) * max(s, SALIENCE_FLOOR)
            for i, s in zip(table.importance, table.strength)
        )
        if len(ranked) == limit and ranked[-1].score > bound:
            return Window(index, ranked, table.stored)
        size *= 4


def by_vector(
    store: Pushdown,
    columns_of: ColumnsOf,
    gates: TagQuery,
    unit: npt.NDArray[np.float32],
    limit: int,
    now: float,
    settings: RankingSettings = DEFAULT_RANKING,
) -> Window:
    """The gated records nearest ``unit`` (a unit vector) by cosine."""
    window_max = settings.window_max
    table = store.gated(gates, GatedRead(vectors=True, has_vector=True, newest=window_max + 1))
    if len(table) <= window_max:
        index = _window(columns_of, table)
        return Window(index, rank_by_vector(index, index.select(gates), unit, limit, now=now))
    keep = max(limit * 4, NEAREST_FIRST)
    while True:
        near = store.nearest(gates, unit, keep)
        if near is not None:
            # pgvector's index: fewer than asked means none are left.
            best, seen = near, (len(near) + 1 if len(near) >= keep else len(near))
        else:
            best, seen = _nearest(store, gates, unit, keep)
        index = _window(columns_of, store.gated(gates, GatedRead(vectors=True, ids=best)))
        rows = index.select(gates)
        # The strength gate runs on the window: read on until ``limit`` pass it.
        if len(rows) >= limit or len(best) >= seen:
            return Window(index, rank_by_vector(index, rows, unit, limit, now=now))
        keep *= 4


def _nearest(
    store: Pushdown, gates: TagQuery, unit: npt.NDArray[np.float32], keep: int
) -> tuple[list[str], int]:
    """Ids of the ``keep`` gated vectors nearest ``unit``, read in batches; and how many were read.

    Of equally near vectors the older is kept, as the index's ranking keeps it.
    """
    best: list[tuple[float, int, str]] = []
    seen = 0
    for batch in store.vector_batches(gates):
        matrix = np.frombuffer(b"".join(blob for _, blob in batch), dtype="<f4").reshape(
            len(batch), -1
        )
        if matrix.shape[1] != len(unit):
            seen += len(batch)
            continue
        norms = np.linalg.norm(matrix, axis=1)
        scores = (matrix @ unit) / np.where(norms > 0, norms, 1.0)
        for i in np.argsort(-scores, kind="stable")[:keep]:
            item = (float(scores[i]), -(seen + int(i)), batch[int(i)][0])
            if len(best) < keep:
                heapq.heappush(best, item)
            elif item > best[0]:
                heapq.heapreplace(best, item)
        seen += len(batch)
    return [rid for _, _, rid in best], seen


def by_text(
    store: Pushdown,
    columns_of: ColumnsOf,
    gates: TagQuery,
    query: TextQuery,
    limit: int,
) -> Window:
    """BM25 and cosine fused (:func:`~.fusion.rank_text`), as the embedded store ranks
    a text query, over a window of the gated records.

    The window holds the BM25 candidates (the database's text index, gated),
    their session neighbours, gated or not, and for the vector side the gated
    records up to ``window_max`` (:class:`~.ranking.RankingSettings`), with
    pgvector's nearest past that.
    """
    settings, unit = query.settings, query.unit
    budget, window_max = settings.lexical_budget, settings.window_max
    found = store.lexical(query.text, gates, budget)
    lexical_ids: Sequence[str] = list(found.scores)
    # The lexical hits' session neighbours come too, gated or not: they lend
    # context, or stand between a hit and a neighbour further off, as in the
    # full index.
    reach = settings.context_reach if settings.context_weight or settings.ask_penalty else 0
    read = GatedRead(
        vectors=unit is not None,
        newest=window_max,
        also=lexical_ids,
        around=lexical_ids,
        reach=reach,
    )
    table = store.gated(gates, read)
    if unit is not None and len(table) >= window_max:
        # More gated records than one window: the vector side also looks at
        # pgvector's nearest ones, where the store has the extension.
        near = store.nearest(gates, unit, settings.nearest_keep)
        if near:
            also = list(dict.fromkeys([*lexical_ids, *near]))
            table = store.gated(gates, replace(read, also=also))
    index = _window(columns_of, table)
    rows = index.select(gates)

    def search(words: str) -> dict[int, float]:
        return gated_rows(index, store.lexical(words, gates, budget).scores, rows)

    lexical = gated_rows(index, found.scores, rows)
    return Window(index, rank_text(query, index, rows, lexical, search, limit))


class PushdownReader(Reader):
    """The read side of an engine whose store gates in its own database."""

    @property
    def _store(self) -> Pushdown:
        """The store, as it answers gated reads (the engine chose this reader for it)."""
        return cast(Pushdown, self._parts.storage)

    def scope_names(self) -> None:
        return None  # the store is asked; no shortcut for seeing every scope

    def has_vectors(self) -> bool:
        return True

    def shares_of(self, lent: bool) -> SharesOf:
        return self._store.word_shares

    def _hits_of(self, window: Window) -> list[Hit]:
        return self.hits(window.ranked, window.index, window.stored)

    def by_salience(self, gates: TagQuery, limit: int, now: float) -> list[Hit]:
        return self._hits_of(by_salience(self._store, self._live.columns, gates, limit, now))

    def by_vector(
        self, gates: TagQuery, unit: npt.NDArray[np.float32], limit: int, now: float
    ) -> list[Hit]:
        window = by_vector(self._store, self._live.columns, gates, unit, limit, now, self.ranking)
        return self._hits_of(window)

    def by_text(self, query: TextQuery, gates: TagQuery, limit: int) -> list[Hit]:
        return self._hits_of(by_text(self._store, self._live.columns, gates, query, limit))

    def lexical_ids(self, text: str, gates: TagQuery, limit: int) -> list[str]:
        found = self._store.lexical(text, gates, self.ranking.lexical_budget)
        best = sorted(found.scores.items(), key=lambda item: (-item[1], item[0]))
        return [rid for rid, _ in best[:limit]]

    def gated_window(self, gates: TagQuery) -> tuple[StructuralIndex, Rows]:
        window = _window(self._live.columns, self._store.gated(gates, GatedRead()))
        return window, window.select(gates)

    def gated_ids(self, gates: TagQuery) -> list[str]:
        return matching_ids(self._store, self._live.columns, gates)

    def label_counts(self) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
        held = self._store.label_counts()
        registry = self._parts.registry
        domains, subdomains, tags = (
            {registry.known(kind, label): n for label, n in held[kind.value].items()}
            for kind in (Kind.DOMAIN, Kind.SUBDOMAIN, Kind.TAG)
        )
        return domains, subdomains, tags

    def held_scopes(self) -> dict[str, int]:
        return self._store.scope_counts()
