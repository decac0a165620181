"""Hybrid fusion: one text query's ranking, whichever backend found its candidates.

Both readers (:class:`~.index_reader.IndexReader` on the in-memory index,
:class:`~.pushdown.PushdownReader` on a window the database read) end a text
query in :func:`rank_text`, with the BM25 scores of the gated rows and a way
to score more words the same way. :func:`hybrid_rank` scores the rows that
passed the structural gates:

    fused = (1 - cosine_weight) * bm25 / max(bm25) + cosine_weight * max(cosine, 0)

then adds ``context_weight`` times the best fused score of a row's neighbours:
the memories stored just before it and just after it in the same explicit
session (:mod:`.context`, whose pool of best candidates also brings their
neighbours in as candidates), the words the first hits lend
(:mod:`.feedback`), a lead for the span of time the text names
(:mod:`.priors`) and the asking rule (:mod:`.asking`). The settings
(:class:`~.ranking.RankingSettings`) were chosen on three workloads at once,
each held out in turn: LoCoMo (short chat turns), LongMemEval (longer user
messages) and a project's decision records (``benchmarks/locomo_recall.py``,
``benchmarks/longmemeval_recall.py``, ``benchmarks/decisions_recall.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import numpy.typing as npt

from . import asking as asking_rule
from .asking import Asker
from .context import Around, SessionCache, Sessions, neighbour_best, with_neighbours
from .feedback import Lender
from .priors import time_closeness
from .query import RankedRow, top_k
from .ranking import RankingSettings

if TYPE_CHECKING:
    from ..core.index import Rows, StructuralIndex

__all__ = ["Search", "TextQuery", "gated_rows", "hybrid_rank", "rank_text"]

#: Words' BM25 scores over the gated rows, by row of the index being ranked.
Search = Callable[[str], dict[int, float]]


@dataclass(frozen=True, slots=True)
class TextQuery:
    """What a text query ranks by, once its gates are known."""

    text: str
    #: The query's unit vector (embedded, or the caller's); None ranks lexically only.
    unit: npt.NDArray[np.float32] | None
    settings: RankingSettings
    #: The span of time the text names (start, end), if any.
    window: tuple[float, float] | None
    #: The words the first hits lend the query (:mod:`.feedback`); None for none.
    lender: Lender | None
    #: Which memories only ask (:mod:`.asking`); None for no asking rule.
    asker: Asker | None


def gated_rows(
    index: StructuralIndex, scores: Mapping[str, float], gate_rows: Rows | None
) -> dict[int, float]:
    """``scores`` by record id as scores by ``index`` row, of the rows in ``gate_rows``
    (None: every row) only."""
    lexical = {}
    for rid, score in scores.items():
        row = index.row_of(rid)
        if row is not None:
            lexical[row] = score
    if gate_rows is not None and lexical:
        keep = np.isin(np.fromiter(lexical, dtype=np.int64), gate_rows)
        lexical = {r: v for (r, v), k in zip(lexical.items(), keep) if k}
    return lexical


def rank_text(
    query: TextQuery,
    index: StructuralIndex,
    gate_rows: Rows | None,
    lexical: dict[int, float],
    search: Search,
    limit: int,
    sessions: SessionCache | None = None,
) -> list[RankedRow]:
    """The best ``limit`` rows of ``index`` for ``query``, BM25 and cosine fused.

    ``lexical`` holds the query's BM25 by row, of the rows in ``gate_rows``
    (None: every row) only; ``search`` scores the words the first hits lend
    the same way. ``sessions`` keeps the index's session order between
    queries (None: built for this query).
    """
    lender = query.lender

    def lend(first: Sequence[str]) -> dict[int, float]:
        words = lender(first) if lender is not None else []
        return search(" ".join(words)) if words else {}

    return hybrid_rank(
        index,
        gate_rows,
        lexical,
        query.unit,
        limit,
        settings=query.settings,
        window=query.window,
        lend=lend,
        asks=query.asker,
        sessions=sessions,
    )


# -- the fusion ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Lexical:
    """The lexical side by index row (sorted): the query's BM25, and what fusion reads."""

    rows: npt.NDArray[np.int64]
    raw: npt.NDArray[np.float64]
    norm: npt.NDArray[np.float64]
    lent: npt.NDArray[np.float64] | None = None

    @classmethod
    def of(cls, scores: dict[int, float]) -> _Lexical:
        rows = np.fromiter(scores.keys(), dtype=np.int64, count=len(scores))
        raw = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
        order = np.argsort(rows)
        rows, raw = rows[order], raw[order]
        top = float(raw.max()) if len(raw) else 0.0
        return cls(rows, raw, raw / top if top > 0 else raw)

    def at(
        self, rows: npt.NDArray[np.int64], values: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """``values`` (one per row of this side) at ``rows``, 0 where it has none."""
        out = np.zeros(len(rows))
        if len(self.rows):
            at = np.minimum(np.searchsorted(self.rows, rows), len(self.rows) - 1)
            hit = self.rows[at] == rows
            out[hit] = values[at[hit]]
        return out

    def lending(self, scores: dict[int, float], weight: float) -> _Lexical:
        """This side with ``weight`` of it the BM25 of words its first hits lent."""
        lent = _Lexical.of(scores)
        rows = np.union1d(self.rows, lent.rows)
        share = lent.at(rows, lent.norm)
        norm = (1 - weight) * self.at(rows, self.norm) + weight * share
        return _Lexical(rows, self.at(rows, self.raw), norm, share)


class _Ranking(NamedTuple):
    """One fusion of a query's candidates (``hybrid_rank``), per candidate row."""

    candidates: npt.NDArray[np.int64]
    final: npt.NDArray[np.float64]
    matched: npt.NDArray[np.float64]  # the final score less the time prior
    context: npt.NDArray[np.float64]
    closeness: npt.NDArray[np.float64] | None
    asking: npt.NDArray[np.bool_] | None


def hybrid_rank(
    index: StructuralIndex,
    gate_rows: Rows | None,
    lexical: dict[int, float],
    query_vector: npt.NDArray[np.float32] | None,
    limit: int,
    *,
    settings: RankingSettings,
    window: tuple[float, float] | None = None,
    lend: Callable[[Sequence[str]], dict[int, float]] | None = None,
    asks: asking_rule.Asker | None = None,
    sessions: SessionCache | None = None,
) -> list[RankedRow]:
    """Fuse BM25 (by index row, already gated) and cosine over ``gate_rows`` (None: all).

    ``settings`` hold the weights (:class:`~.ranking.RankingSettings`).
    ``window`` is the span of time the query names, if any: each memory then
    gains ``time_weight`` times its closeness to it
    (:func:`~prime_memory_folding.recall.priors.time_closeness` of when it was first
    stored). ``lend``, given the record ids of the first ``lend_docs`` hits,
    answers the BM25 by row (gated) of the words they lend; the query then
    ranks again with that share of its lexical side (:mod:`.feedback`; only
    with a query vector). ``asks`` says which records (by id) only ask
    (:mod:`.asking`), for the best candidates and the memories before them in
    their sessions. ``sessions`` keeps the index's session order between
    queries (:mod:`.context`). Score parts: ``bm25``, ``bm25_norm``,
    ``cosine`` (when there is a query vector in the index's space), ``lent``
    (when lent words match), ``context`` (when a session neighbour lifted the
    score), ``asks`` (1 for a memory that only asks), ``time`` (the
    closeness, when the query names a window) and ``fused``; without a query
    vector ``lexical_only`` is 1.
    """
    context_weight = settings.context_weight if settings.context_reach else 0.0
    time_weight = settings.time_weight
    if limit <= 0:
        return []
    if gate_rows is None:
        if len(index) == 0:
            return []
    elif len(gate_rows) == 0:
        return []
    cos_raw: npt.NDArray[np.float32] | None = None
    cos_pos: npt.NDArray[np.float32] | None = None
    use_vector = query_vector is not None and index.dim == len(query_vector)
    if use_vector:
        assert query_vector is not None
        cos_raw = index.cosine(gate_rows, query_vector)
        cos_pos = np.where(np.isfinite(cos_raw), cos_raw, np.float32(0.0))
        np.maximum(cos_pos, np.float32(0.0), out=cos_pos)
    w_cos = settings.cosine_weight if use_vector else 0.0
    w_lex = 1.0 - w_cos

    def position(rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        if gate_rows is None:
            return rows
        return np.searchsorted(gate_rows, rows).astype(np.int64)

    # Candidates: every lexical hit, plus the best by cosine (whose lexical part is 0).
    spare = 0 if cos_pos is None else limit * (3 if context_weight else 1)
    by_cosine = np.zeros(0, dtype=np.int64)
    if cos_pos is not None and spare:
        best = top_k(cos_pos, min(spare, len(cos_pos)))
        by_cosine = best if gate_rows is None else gate_rows[best]

    def said(rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        return np.array(asks(index.record_ids(rows)) if asks else [], dtype=bool)

    # The session order is read once for every neighbour look-up of both fusions.
    asking_on = asks is not None and settings.ask_penalty > 0
    around = None
    if context_weight or asking_on:
        order = (sessions or SessionCache()).order(index)
        if len(order.rows):
            around = Sessions(order, gate_rows, max(settings.context_reach, 1))
    pool = settings.context_pool

    def ranked(side: _Lexical) -> _Ranking:
        candidates = np.union1d(side.rows, by_cosine)  # ties go to the older row

        def fused_of(rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
            score = w_lex * side.at(rows, side.norm)
            if cos_pos is not None:
                score += w_cos * cos_pos[position(rows)]
            return score

        fused = fused_of(candidates)
        # The pool's neighbours join, but a keyword search keeps to its matches.
        if around is not None and context_weight and cos_pos is not None:
            candidates = with_neighbours(around, candidates, fused, pool)
            fused = fused_of(candidates)
        context = np.zeros(len(candidates))
        if around is not None and context_weight and len(candidates):
            context = neighbour_best(around, candidates, fused_of)
        matched = fused + context_weight * context
        prior = np.zeros(len(candidates))
        closeness = None
        if window is not None and time_weight and len(candidates):
            stored = index.created_at(candidates)
            closeness = time_closeness(stored, window, settings.time_tail)
            prior = time_weight * closeness
        asking = None
        if asking_on and around is not None and len(candidates):
            top = top_k(matched + prior, min(settings.ask_pool, len(candidates)))
            matched, asking = _asking(
                around,
                (candidates, top),
                (matched, fused),
                (settings, context_weight),
                fused_of,
                said,
            )
        return _Ranking(candidates, matched + prior, matched, context, closeness, asking)

    side = _Lexical.of(lexical)
    found = ranked(side)
    lend_on = lend is not None and cos_pos is not None and settings.lend_weight > 0
    if lend_on and len(found.candidates):
        assert lend is not None
        lexical_hit = side.at(found.candidates, side.raw) > 0
        leading = np.where((found.matched > 0) | lexical_hit, found.final, -np.inf)
        first = top_k(leading, min(settings.lend_docs, len(leading)))
        lent = lend(index.record_ids(found.candidates[first[np.isfinite(leading[first])]]))
        if lent:
            side = side.lending(lent, settings.lend_weight)
            found = ranked(side)
    candidates, final, matched, context, closeness, asking = found
    if len(candidates) == 0:
        return []
    order_ = top_k(final, limit)
    chosen = candidates[order_]
    raw_of = side.at(chosen, side.raw)
    norm_of = side.at(chosen, side.norm)
    lent_of = None if side.lent is None else side.at(chosen, side.lent)
    cos_of = None if cos_raw is None else cos_raw[position(chosen)]
    hits = []
    for n, i in enumerate(order_.tolist()):
        parts = {"bm25": float(raw_of[n]), "bm25_norm": float(norm_of[n])}
        if cos_of is not None:
            cosine = float(cos_of[n])
            parts["cosine"] = cosine if math.isfinite(cosine) else 0.0
        if lent_of is not None and lent_of[n] > 0:
            parts["lent"] = float(lent_of[n])
        if context_weight and context[i] > 0:
            parts["context"] = float(context[i])
        if asking is not None and asking[i]:
            parts["asks"] = 1.0
        if closeness is not None:
            parts["time"] = float(closeness[i])
        if cos_pos is None:
            parts["lexical_only"] = 1.0
        parts["fused"] = float(final[i])
        if matched[i] <= 0 and parts["bm25"] <= 0:  # a prior alone is no match
            continue
        hits.append(RankedRow(int(chosen[n]), float(final[i]), parts))
    return hits


def _asking(
    around: Sessions,
    pooled: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
    scores: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
    weights: tuple[RankingSettings, float],
    fused_of: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.float64]],
    asks: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """``matched`` (of ``scores``: the matched and fused scores) with the pool's
    memories (``pooled``: the candidates, and the positions of the best of
    them) that only ask, in a session, given ``1 - ask_penalty`` of their
    fused score, and the memory after each one in its session more of its
    score as context; and which candidates only ask. A memory without a
    session is a note, not a turn of a conversation: no answer follows it, and
    the rule leaves it as it is."""
    candidates, pool = pooled
    matched, fused = scores
    settings, context_weight = weights
    rows = candidates[pool]
    near = Around(around, rows)
    before, ok = near.step(-1)
    in_session = near.at >= 0
    said = asks(np.concatenate([rows[in_session], before[ok]]))
    mine, theirs = np.zeros(len(rows), dtype=bool), np.zeros(len(rows), dtype=bool)
    mine[in_session] = said[: int(in_session.sum())]
    theirs[ok] = said[int(in_session.sum()) :]
    lent = np.zeros(len(rows))
    if theirs.any():
        lent[theirs] = (context_weight + settings.ask_lend) * fused_of(before[theirs])
    own = fused[pool] * np.where(mine, 1.0 - settings.ask_penalty, 1.0)
    out = matched.copy()
    out[pool] = own + np.maximum(matched[pool] - fused[pool], lent)
    flags = np.zeros(len(candidates), dtype=bool)
    flags[pool] = mine
    return out, flags
