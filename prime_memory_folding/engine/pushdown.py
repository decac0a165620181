"""Reads on a backend that gates in its own database (PostgreSQL).

The engine holds no record in memory on such a store (:class:`PushdownReader`
is its read side). Each query asks the
database for the records that pass its gates (:class:`~.storage.base.Pushdown`),
loads just those into a small :class:`~.index.StructuralIndex`, the *window*,
and ranks them with the same functions as the embedded store: the same strength
gate and decay, salience, cosine and hybrid fusion. What the window holds:

- **salience** (no text, no vector): the best few gated records of each decay
  class (:mod:`~..storage.pg_decay`), in the database's order of decayed
  salience; more of a class are read until no record of it not read can beat
  the last hit, so the answer is the exact top of every gated record (the
  window keeps storage order, so ties break as in the embedded store). An
  engine whose decay policy is not the one the store's columns compute reads
  by importance x stored strength, which bounds the decayed salience from
  above, instead;
- **vector**: the nearest few by the server's vector cache
  (:mod:`.vector_cache`, exact), at any size; with pgvector, every gated
  record with a vector when at most ``window_max``
  (:class:`~.ranking.RankingSettings`), otherwise the nearest few by its HNSW
  index; with neither, the nearest few found by reading the gated vectors in
  batches and scoring them with numpy; more when too few of them pass the
  strength gate. Either way those candidates are ranked exactly;
- **text**: the BM25 candidates (the server's text cache, :mod:`.text_cache`,
  or the database's text index; gated), the ``nearest_keep`` gated records
  nearest the query's vector (pgvector's HNSW index, or the server's vector
  cache), the records of the words the first hits lend, and the session
  neighbours of all of them: every record the fusion can rank, so the answer
  is the one a window of every gated record gives. Without pgvector and with
  the vector cache off, the nearest are those of the newest ``window_max``
  gated vectors, read in batches, and an older record without a word of the
  query is found only by a vector query.

The window's rows keep the store's order, and it holds the session neighbours
of its candidates, so that neighbours are the same as in the embedded store's
index.
"""

from __future__ import annotations

import contextlib
import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import cast

import numpy as np
import numpy.typing as npt

from ..core.index import IndexColumns, Rows, StructuralIndex, TagQuery
from ..core.primes import Kind
from ..core.records import Hit
from ..fold.folding import FoldPolicy
from ..recall.fusion import TextQuery, gated_rows, rank_text
from ..recall.query import RankedRow, rank_by_salience, rank_by_vector
from ..recall.query_weights import SharesOf
from ..recall.ranking import DEFAULT_RANKING, RankingSettings
from ..storage.base import (
    SALIENCE_FLOOR,
    GatedRead,
    IndexTable,
    LexicalCandidates,
    Pushdown,
    StoredRow,
)
from ..storage.pg_decay import DECAY_FIELDS, DecayOrder
from ..storage.sqlite_text import LEXICAL_DEPTH
from .reads import Reader
from .text_cache import TextCache, TextCacheFailed
from .vector_cache import Passing, cache_enabled

__all__ = [
    "PushdownReader",
    "Window",
    "by_decay",
    "by_salience",
    "by_text",
    "by_vector",
    "cached_lexical",
    "decay_matches",
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


#: How far above a class's bound the last hit must be: the database and numpy
#: round the decay apart, by far less than this.
DECAY_SLACK = 1e-9


def decay_matches(policy: FoldPolicy, order: DecayOrder) -> bool:
    """Whether the store's salience columns (``order``) compute ``policy``'s decay."""
    return all(getattr(policy, name) == getattr(order, name) for name in DECAY_FIELDS)


def _class_bound(
    index: StructuralIndex, row: int, half: tuple[float, float] | None, now: float
) -> float:
    """The most salience a record of the class can have that its order puts after ``row``.

    Within a class the order is by ``key = since + half * log2(salience)``
    (:mod:`~..storage.pg_decay`), so a record after ``row`` has a key no
    greater than ``row``'s, and its salience is at most ``2 ** ((key - now) /
    half)`` for one of the class's half-lives (the largest, or the smallest
    when the key lies ahead of ``now``). A permanent record never decays.
    """
    rows = np.asarray([row], dtype=np.int64)
    salience = max(float(index.importance(rows)[0]), SALIENCE_FLOOR) * max(
        float(index.strength(rows)[0]), SALIENCE_FLOOR
    )
    if half is None:
        return salience
    since, own = (float(column[0]) for column in index.decay_terms(rows))
    key = since + own * math.log2(salience)
    return float(max(2.0 ** ((key - now) / h) for h in half))


def by_decay(
    store: Pushdown,
    columns_of: ColumnsOf,
    gates: TagQuery,
    limit: int,
    now: float,
    order: DecayOrder,
) -> Window:
    """The gated records best by importance x decayed strength, then recency,
    read class by class in the database's decay order (:mod:`~..storage.pg_decay`).

    Each class gives its best few; a class is read further only while its
    next record could still beat the last hit. Ties within a class of one
    half-life end the read too: the database orders them as the ranking breaks
    them (latest update, then storage order).
    """
    # A class gives at most ``limit`` hits: one more record read shows whether
    # the rest of it can still matter.
    first = limit + 1
    limits: dict[int, int] = {}
    while True:
        heads = store.salience_heads(gates, limits, first)
        # Read by id alone (the unique index): the window tests every gate again.
        ids = [rid for _, rid in heads]
        table = store.gated(TagQuery(), GatedRead(ids=ids, records=True))
        index = _window(columns_of, table)
        ranked = rank_by_salience(index, index.select(gates), limit, now=now)
        read: dict[int, list[str]] = {}
        for salience_class, rid in heads:
            read.setdefault(salience_class, []).append(rid)
        short = [
            salience_class
            for salience_class, got in read.items()
            if len(got) >= limits.get(salience_class, first)
            and not _class_done(index, ranked, limit, got[-1], salience_class, order, now)
        ]
        if not short:
            return Window(index, ranked, table.stored)
        for salience_class in short:
            limits[salience_class] = limits.get(salience_class, first) * 4


def _class_done(
    index: StructuralIndex,
    ranked: Sequence[RankedRow],
    limit: int,
    last_read: str,
    salience_class: int,
    order: DecayOrder,
    now: float,
) -> bool:
    """Whether no record of the class after ``last_read`` can make the top ``limit``."""
    row = index.row_of(last_read)
    if row is None or len(ranked) < limit:
        return False
    last = ranked[-1].score
    half = order.half_range(salience_class)
    if last > _class_bound(index, row, half, now) * (1.0 + DECAY_SLACK):
        return True
    # A tie with the last record read: the class's order breaks ties as the
    # ranking does, so the records after it rank after it too.
    if not order.exact(salience_class) or last <= 0.0 or any(r.row == row for r in ranked):
        return False
    rows = np.asarray([row], dtype=np.int64)
    since = float(index.decay_terms(rows)[0][0])
    read_score = float(index.importance(rows)[0] * index.effective_strength(rows, now)[0])
    return since <= now and read_score == last


def by_vector(
    store: Pushdown,
    columns_of: ColumnsOf,
    gates: TagQuery,
    unit: npt.NDArray[np.float32],
    limit: int,
    now: float,
    settings: RankingSettings = DEFAULT_RANKING,
    nearest: Nearest | None = None,
    exact: bool = False,
) -> Window:
    """The gated records nearest ``unit`` (a unit vector) by cosine.

    Past ``window_max`` gated records, the candidates come from ``nearest``
    (pgvector, or the vector cache), else from every gated vector read in
    batches; either way they are ranked exactly. When ``nearest`` is
    ``exact`` (the vector cache), it is asked at any size.
    """
    window_max = settings.window_max
    if not (exact and nearest is not None):
        read = GatedRead(vectors=True, has_vector=True, newest=window_max + 1)
        table = store.gated(gates, read)
        if len(table) <= window_max:
            index = _window(columns_of, table)
            return Window(index, rank_by_vector(index, index.select(gates), unit, limit, now=now))
    keep = max(limit * 4, NEAREST_FIRST)
    while True:
        near = None if nearest is None else nearest(gates, unit, keep)
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
    store: Pushdown,
    gates: TagQuery,
    unit: npt.NDArray[np.float32],
    keep: int,
    newest: int | None = None,
) -> tuple[list[str], int]:
    """Ids of the ``keep`` gated vectors nearest ``unit`` (of the ``newest`` that many
    gated vectors, when given), read in batches; and how many were read.

    Of equally near vectors the older is kept, as the index's ranking keeps it.
    """
    best: list[tuple[float, int, str]] = []
    seen = 0
    for batch in store.vector_batches(gates, newest):
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


#: Threads that look for a text query's nearest records beside its word search.
_SIDE_BY_SIDE = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pmf-nearest")

#: ``nearest(gates, unit, keep)``: about ``keep`` gated records nearest ``unit``, by
#: an index (pgvector's, or the server's :class:`~.vector_cache.VectorCache`); None
#: when there is none. Fewer than ``keep`` means none are left.
Nearest = Callable[[TagQuery, npt.NDArray[np.float32], int], "list[str] | None"]
#: ``lexical(text, gates, budget)``: BM25 of the gated records that match ``text``.
Lexical = Callable[[str, TagQuery, int], LexicalCandidates]


def cached_lexical(texts: TextCache, passing: Passing, exact_store: int, limit: int) -> Lexical:
    """A text query's BM25 search through the server's :class:`~.text_cache.TextCache`,
    gated by ``passing``, as the embedded store searches: the best
    ``LEXICAL_DEPTH`` matches, or every match when the gates leave fewer than
    ``limit`` of those; the words the first hits lend are searched as deep.
    """
    depth: list[int | None] = []  # the first search's, for the others

    def gated(found: LexicalCandidates) -> LexicalCandidates:
        good = passing(list(found.scores))
        kept = {rid: score for rid, score in found.scores.items() if rid in good}
        return LexicalCandidates(kept, found.exhaustive)

    def search(text: str, gates: TagQuery, budget: int) -> LexicalCandidates:
        if depth:
            return gated(texts.lexical(text, depth[0], budget=budget, exact_store=exact_store))
        chosen: int | None = LEXICAL_DEPTH
        while True:
            found = texts.lexical(text, chosen, budget=budget, exact_store=exact_store)
            kept = gated(found)
            # Gates may have dropped most of the best; then look at every match.
            if chosen is None or found.exhaustive or len(kept.scores) >= limit:
                break
            chosen = None
        depth.append(chosen)
        return kept

    return search


def by_text(
    store: Pushdown,
    columns_of: ColumnsOf,
    gates: TagQuery,
    query: TextQuery,
    limit: int,
    nearest: Nearest | None = None,
    lexical: Lexical | None = None,
    side_by_side: bool = False,
) -> Window:
    """BM25 and cosine fused (:func:`~.fusion.rank_text`), as the embedded store ranks
    a text query, over a window of the gated records.

    The window holds the candidates the fusion can rank: the BM25 candidates
    (the database's text index, gated), the ``nearest_keep``
    (:class:`~.ranking.RankingSettings`) gated records nearest the query's
    vector by ``nearest``, the records that match the words the first hits
    lend, and the session neighbours of all of them, gated or not. So it
    ranks as a window of every gated record would. Without ``nearest`` (no
    pgvector, no vector cache), the vector side reads the newest
    ``window_max`` gated records instead. ``lexical`` searches the text (the
    store's own text index when None); ``side_by_side`` looks for the nearest
    records in another thread meanwhile (never inside a write, whose
    connection that thread would not share).
    """
    settings, unit = query.settings, query.unit
    budget, window_max = settings.lexical_budget, settings.window_max
    search = store.lexical if lexical is None else lexical
    # Outside a write, the nearest records are looked for while the words are
    # (both wait on numpy, SQLite or the database, which let the other thread run).
    pending: Future[list[str] | None] | None = None
    keep = max(settings.nearest_keep, limit * 4)
    if unit is not None and nearest is not None and side_by_side:
        pending = _SIDE_BY_SIDE.submit(nearest, gates, unit, keep)
    found = search(query.text, gates, budget)
    lexical_ids: list[str] = list(found.scores)
    # The candidates' session neighbours come too, gated or not: they lend
    # context, or stand between a hit and a neighbour further off, as in the
    # full index. Twice the reach: a neighbour that joins the candidates takes
    # context from its own neighbours.
    reach = settings.context_reach if settings.context_weight or settings.ask_penalty else 0
    reach *= 2
    near: list[str] | None = [] if unit is None else None
    if pending is not None:
        near = pending.result()
    elif unit is not None and nearest is not None:
        near = nearest(gates, unit, keep)
    candidates = list(dict.fromkeys([*lexical_ids, *(near or ())]))
    read = GatedRead(
        vectors=unit is not None,
        newest=window_max if near is None else 0,
        also=candidates,
        around=candidates,
        reach=reach,
    )
    lent: dict[str, LexicalCandidates] = {}  # the lent words' search, kept across rounds
    while True:
        window, outside = _rank_text(
            store, columns_of, (gates, search), query, read, found, limit, lent
        )
        # Records that match the words the first hits lend join the window,
        # with their neighbours, and the query ranks again.
        held = set(read.also)
        more = [rid for rid in dict.fromkeys(outside) if rid not in held]
        if not more:
            return window
        read = replace(read, also=[*read.also, *more], around=[*read.around, *more])


def _rank_text(
    store: Pushdown,
    columns_of: ColumnsOf,
    searched: tuple[TagQuery, Lexical],
    query: TextQuery,
    read: GatedRead,
    found: LexicalCandidates,
    limit: int,
    lent: dict[str, LexicalCandidates],
) -> tuple[Window, list[str]]:
    """One ranking over the window ``read`` names, and the ids of records that
    match the lent words but lie outside it (``lent`` keeps each search of
    lent words, for the next round); ``searched``: the gates, and the text search."""
    gates, lexical_search = searched
    budget = query.settings.lexical_budget
    index = _window(columns_of, store.gated(gates, read))
    rows = index.select(gates)
    outside: list[str] = []

    def search(words: str) -> dict[int, float]:
        if words not in lent:
            lent[words] = lexical_search(words, gates, budget)
        scores = lent[words].scores
        outside.extend(rid for rid in scores if index.row_of(rid) is None)
        return gated_rows(index, scores, rows)

    lexical = gated_rows(index, found.scores, rows)
    return Window(index, rank_text(query, index, rows, lexical, search, limit)), outside


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
        texts, store = self._text_cache(), self._store
        if texts is None:
            return store.word_shares

        def shares(words: Sequence[str]) -> tuple[list[float | None], int] | None:
            try:
                return texts.word_shares(words, lent=lent)
            except TextCacheFailed:
                return store.word_shares(words)

        return shares

    def _hits_of(self, window: Window) -> list[Hit]:
        return self.hits(window.ranked, window.index, window.stored)

    def by_salience(self, gates: TagQuery, limit: int, now: float) -> list[Hit]:
        order = self._store.decay_order()
        if order is not None and decay_matches(self._parts.fold_policy, order):
            window = by_decay(self._store, self._live.columns, gates, limit, now, order)
        else:  # the store's decay order computes another policy's decay
            window = by_salience(self._store, self._live.columns, gates, limit, now)
        return self._hits_of(window)

    def by_vector(
        self, gates: TagQuery, unit: npt.NDArray[np.float32], limit: int, now: float
    ) -> list[Hit]:
        # Without pgvector, the vector cache is exact: it answers at any size.
        exact = cache_enabled() and not self._store.nearest_index()
        window = by_vector(
            self._store,
            self._live.columns,
            gates,
            unit,
            limit,
            now,
            self.ranking,
            self._nearest,
            exact,
        )
        return self._hits_of(window)

    def by_text(self, query: TextQuery, gates: TagQuery, limit: int) -> list[Hit]:
        texts = self._text_cache()
        lexical = None
        if texts is not None:
            passing = self._passing(gates)
            lexical = cached_lexical(texts, passing, query.settings.exact_store, limit)
        side_by_side = not self._parts.lock.writing()
        columns_of, nearest = self._live.columns, self._text_nearest
        try:
            window = by_text(
                self._store, columns_of, gates, query, limit, nearest, lexical, side_by_side
            )
        except TextCacheFailed:  # given up: the store's own text index answers
            window = by_text(
                self._store, columns_of, gates, query, limit, nearest, None, side_by_side
            )
        return self._hits_of(window)

    def _text_cache(self) -> TextCache | None:
        """The server's text index (:mod:`.text_cache`); None when it is turned off
        or was given up."""
        caches = self._parts.caches
        return None if caches is None else caches.texts()

    def _passing(self, gates: TagQuery) -> Passing:
        """Which of some ids pass ``gates``: in SQL, and the strength gate on a window."""
        store, columns_of = self._store, self._live.columns

        def passing(ids: list[str]) -> set[str]:
            if gates.min_strength <= 0.0:  # every other gate runs in SQL
                return set(store.gated_among(gates, ids))
            window = _window(columns_of, store.gated(gates, GatedRead(ids=ids)))
            return set(window.select_ids(gates))

        return passing

    def _text_nearest(
        self, gates: TagQuery, unit: npt.NDArray[np.float32], keep: int
    ) -> list[str] | None:
        """A text query's nearest records: :meth:`_nearest`'s, or with neither pgvector
        nor the vector cache, those nearest among the newest ``window_max`` gated
        vectors, read in batches (an older record without a word of the query is
        then found only by a vector query)."""
        near = self._nearest(gates, unit, keep)
        if near is not None:
            return near
        return _nearest(self._store, gates, unit, keep, self.ranking.window_max)[0]

    def _nearest(
        self, gates: TagQuery, unit: npt.NDArray[np.float32], keep: int
    ) -> list[str] | None:
        """About ``keep`` gated records nearest ``unit``: pgvector's, else the vector
        cache's (exact); None when the store has neither."""
        store = self._store
        near = store.nearest(gates, unit, keep)
        caches = self._parts.caches
        vectors = None if near is not None or caches is None else caches.vectors()
        if vectors is None:
            return near
        return vectors.nearest(unit, keep, self._passing(gates))

    def lexical_ids(self, text: str, gates: TagQuery, limit: int) -> list[str]:
        texts, budget = self._text_cache(), self.ranking.lexical_budget
        found = None
        if texts is not None:  # planned at any size, as the embedded store's
            with contextlib.suppress(TextCacheFailed):
                found = cached_lexical(texts, self._passing(gates), 0, limit)(text, gates, budget)
        if found is None:
            found = self._store.lexical(text, gates, budget)
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
