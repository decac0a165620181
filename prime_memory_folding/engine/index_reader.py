"""Reads ranked on the in-memory index: the embedded store (SQLite).

Every live record's gate keys, decay terms and vector are held in a
:class:`~.index.StructuralIndex`; a read gates and ranks there, and reads only
its hits' records from the store. A text query's BM25 comes from the store's
full-text search (:class:`~.storage.base.FullText`, on SQLite
:mod:`~.storage.sqlite_text`) before the gates, so when the gates drop most of
its best matches it looks again at every match.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
import numpy.typing as npt

from ..core.index import Rows, StructuralIndex, TagQuery
from ..core.records import Hit
from ..errors import NotAvailable
from ..recall.context import SessionCache
from ..recall.fusion import TextQuery, gated_rows, rank_text
from ..recall.query import rank_by_salience, rank_by_vector
from ..recall.query_weights import SharesOf
from ..storage import sqlite_text
from ..storage.base import FullText
from .reads import Reader

if TYPE_CHECKING:
    pass

__all__ = ["IndexReader"]


class IndexReader(Reader):
    """The read side of an engine whose whole index is in memory."""

    @functools.cached_property
    def _sessions(self) -> SessionCache:
        """The index's session order, kept between text queries (:mod:`.context`); only
        this reader keeps one, since a window a PostgreSQL query reads is new each time."""
        return SessionCache()

    @property
    def _index(self) -> StructuralIndex:
        return self._live.index  # the same object for the engine's life

    def _full_text(self) -> FullText:
        """The store's full-text search.

        Raises:
            NotAvailable: the store has none.
        """
        storage = self._parts.storage
        if not callable(getattr(storage, "lexical", None)):
            raise NotAvailable(
                f"text queries need the embedded SQLite store, not {type(storage).__name__}"
            )
        return cast(FullText, storage)

    def scope_names(self) -> Sequence[str]:
        return self._index.scopes()

    def has_vectors(self) -> bool:
        return self._index.dim is not None

    def shares_of(self, lent: bool) -> SharesOf:
        search, total = self._full_text(), len(self._index)
        return lambda words: search.word_shares(words, total=total, lent=lent)

    def by_salience(self, gates: TagQuery, limit: int, now: float) -> list[Hit]:
        index = self._index
        return self.hits(rank_by_salience(index, index.select(gates), limit, now=now), index)

    def by_vector(
        self, gates: TagQuery, unit: npt.NDArray[np.float32], limit: int, now: float
    ) -> list[Hit]:
        index = self._index
        rows = None if gates == TagQuery() else index.select(gates)
        return self.hits(rank_by_vector(index, rows, unit, limit, now=now), index)

    def by_text(self, query: TextQuery, gates: TagQuery, limit: int) -> list[Hit]:
        index, full_text, settings = self._index, self._full_text(), query.settings
        gate_rows = None if gates == TagQuery() else index.select(gates)
        depth: int | None = sqlite_text.LEXICAL_DEPTH
        size = len(index)
        budget, exact_store = settings.lexical_budget, settings.exact_store
        while True:
            found = full_text.lexical(
                query.text, depth, store_size=size, budget=budget, exact_store=exact_store
            )
            lexical = gated_rows(index, found.scores, gate_rows)
            # Gates may have dropped most of the best; then look at every match.
            if depth is None or found.exhaustive or len(lexical) >= limit:
                break
            depth = None

        def search(words: str) -> dict[int, float]:
            lent = full_text.lexical(
                words, depth, store_size=size, budget=budget, exact_store=exact_store
            )
            return gated_rows(index, lent.scores, gate_rows)

        ranked = rank_text(query, index, gate_rows, lexical, search, limit, self._sessions)
        return self.hits(ranked, index)

    def lexical_ids(self, text: str, gates: TagQuery, limit: int) -> list[str]:
        index, budget = self._index, self.ranking.lexical_budget
        # Planned at any size, and looked at once: the records that hold the text's
        # rarest words (at most ``budget`` scored) and pass the gates, not every
        # record that shares a word with it.
        found = self._full_text().lexical(
            text, sqlite_text.LEXICAL_DEPTH, store_size=len(index), budget=budget, exact_store=0
        )
        gate_rows = None if gates == TagQuery() else index.select(gates)
        scored = gated_rows(index, found.scores, gate_rows)
        best = sorted(scored.items(), key=lambda item: (-item[1], item[0]))[:limit]
        return index.record_ids(row for row, _ in best)

    def gated_window(self, gates: TagQuery) -> tuple[StructuralIndex, Rows]:
        return self._index, self._index.select(gates)

    def gated_ids(self, gates: TagQuery) -> list[str]:
        return self._index.select_ids(gates)

    def label_counts(self) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
        return self._index.counts()

    def held_scopes(self) -> dict[str, int]:
        return self._index.scope_counts()
