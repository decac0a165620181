"""Context: a memory's neighbours in its session, and which memories they bring in.

A memory belongs to a session only when its writer said so
(``store(..., session=...)``: a conversation, an agent's session). Its
neighbours are the ``context_reach`` live memories stored just before it and
just after it *in the same session*, in stored order, and inside the query's
gates. A memory stored without a session has no neighbours: it neither lends
nor borrows context, however close in time it was stored to others.

The hybrid ranking (:func:`~prime_memory_folding.recall.fusion.hybrid_rank`) adds to
each candidate a share (``context_weight``) of its best neighbour's fused
score, and when the query has a vector side, the neighbours of its
``context_pool`` best candidates join the candidates: a memory that matches
nothing itself, such as the answer after a question that matched, can then
rank on its context. (A query without a vector side is a keyword search, and
keeps to the memories its words match.)

Finding neighbours needs every live sessioned row in (session, stored) order:
:class:`SessionCache` keeps that order per index and builds it again only
after the index changed (its ``generation``), so a query costs a few look-ups.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .query import top_k

if TYPE_CHECKING:
    from ..core.index import Rows, StructuralIndex

__all__ = [
    "Around",
    "SessionCache",
    "SessionOrder",
    "Sessions",
    "neighbour_best",
    "with_neighbours",
]

Rank = Callable[[npt.NDArray[np.int64]], npt.NDArray[np.float64]]


class SessionOrder:
    """An index's live rows that belong to a session, in (session, stored) order.

    ``rows[i]`` is the i-th such row, ``codes[i]`` its session's code, and
    ``place[row]`` the position of ``row`` in ``rows`` (-1 for a row without a
    session, or not live).
    """

    def __init__(self, index: StructuralIndex) -> None:
        self.index = index
        self.generation = index.generation
        alive = index.alive_rows()
        codes = index.session_codes(alive)
        held = codes != 0
        rows, codes = alive[held], codes[held]
        if len(rows):
            order = np.lexsort((rows, codes))  # rows are in stored order already
            rows, codes = rows[order], codes[order]
        self.rows = rows
        self.codes = codes
        self.place = np.full(int(alive[-1]) + 1 if len(alive) else 0, -1, dtype=np.int64)
        self.place[rows] = np.arange(len(rows), dtype=np.int64)

    def fresh(self, index: StructuralIndex) -> bool:
        """Whether this order is still ``index``'s."""
        return self.index is index and self.generation == index.generation


class SessionCache:
    """The last :class:`SessionOrder` one index had, built again when it changed."""

    def __init__(self) -> None:
        self._order: SessionOrder | None = None

    def order(self, index: StructuralIndex) -> SessionOrder:
        if self._order is None or not self._order.fresh(index):
            self._order = SessionOrder(index)
        return self._order


class Sessions:
    """What finding any rows' neighbours in one query needs: the index's session
    order, the query's gate, and how many neighbours a side."""

    def __init__(self, order: SessionOrder, gate_rows: Rows | None, reach: int) -> None:
        self.order = order
        self.gate_rows = gate_rows
        self.reach = reach

    def steps(self) -> list[int]:
        return [s for reach in range(1, self.reach + 1) for s in (-reach, reach)]


class Around:
    """The rows around some rows in their sessions, looked up once for any number of steps."""

    def __init__(self, sessions: Sessions, rows: npt.NDArray[np.int64]) -> None:
        self.sessions = sessions
        place = sessions.order.place
        inside = rows < len(place)
        self.at = np.full(len(rows), -1, dtype=np.int64)
        self.at[inside] = place[rows[inside]]

    def step(self, step: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Each row's neighbour ``step`` places away in its session, and whether it
        is one: the row has a session, the neighbour is in the same one, and in
        the gate."""
        order, gate_rows = self.sessions.order, self.sessions.gate_rows
        size = len(order.rows)
        pos = self.at + step
        ok = (self.at >= 0) & (pos >= 0) & (pos < size)
        if not size:
            return np.zeros(len(pos), dtype=np.int64), ok
        mine = order.codes[np.clip(self.at, 0, size - 1)]
        pos = np.clip(pos, 0, size - 1)
        neighbours = order.rows[pos]
        ok &= order.codes[pos] == mine
        if gate_rows is not None and len(gate_rows):
            slot = np.clip(np.searchsorted(gate_rows, neighbours), 0, len(gate_rows) - 1)
            ok &= gate_rows[slot] == neighbours
        elif gate_rows is not None:
            ok &= False
        return neighbours, ok


def with_neighbours(
    sessions: Sessions,
    candidates: npt.NDArray[np.int64],
    fused: npt.NDArray[np.float64],
    pool: int,
) -> npt.NDArray[np.int64]:
    """``candidates`` (sorted rows) with the session neighbours of the ``pool`` best
    of them by ``fused`` (one score per candidate), sorted."""
    if not pool or len(candidates) == 0 or not len(sessions.order.rows):
        return candidates
    best = candidates[top_k(fused, min(pool, len(candidates)))]
    around = Around(sessions, best)
    near = [candidates]
    for step in sessions.steps():
        rows, ok = around.step(step)
        near.append(rows[ok])
    return np.unique(np.concatenate(near))


def neighbour_best(
    sessions: Sessions, candidates: npt.NDArray[np.int64], rank: Rank
) -> npt.NDArray[np.float64]:
    """For each candidate, the best score (``rank`` of rows) of its session neighbours."""
    best = np.zeros(len(candidates))
    if not len(sessions.order.rows):
        return best
    around = Around(sessions, candidates)
    for step in sessions.steps():
        neighbours, ok = around.step(step)
        if ok.any():
            scores = np.zeros(len(candidates))
            scores[ok] = rank(neighbours[ok])
            best = np.maximum(best, scores)
    return best
