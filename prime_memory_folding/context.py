"""Context: a memory's same-session neighbours, and which memories they bring in.

A memory's neighbours are the :data:`CONTEXT_REACH` live memories stored just
before it and just after it, each within :data:`SESSION_GAP_S` seconds of it
(in the same session), and inside the query's gates. The hybrid ranking
(:func:`~prime_memory_folding.recall.hybrid_rank`) adds to each candidate a
share of its best neighbour's fused score, and when the query has a vector
side, the neighbours of its :data:`CONTEXT_POOL` best candidates join the
candidates: a memory that matches nothing itself, such as the answer after a
question that matched, can then rank on its context. (A query without a
vector side is a keyword search, and keeps to the memories its words match.)

Without that pool, which memories could rank on context alone depended on what
the text index keeps: SQLite's FTS5 index keeps stop words, so almost every
memory of a small store matched some word of a question, while PostgreSQL's
``english`` configuration drops them, and a planned query in a large store
scores only the records its rare words choose.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .query import top_k

if TYPE_CHECKING:
    from .index import Rows, StructuralIndex

__all__ = [
    "CONTEXT_POOL",
    "CONTEXT_REACH",
    "SESSION_GAP_S",
    "Around",
    "Sessions",
    "neighbour_best",
    "with_neighbours",
]

#: Neighbours on each side of a memory that lend it context.
CONTEXT_REACH = 2
#: Most seconds between a memory and a neighbour (the same session).
SESSION_GAP_S = 1800.0
#: The best candidates (by fused score) whose neighbours join the candidates; 0: none.
CONTEXT_POOL = 20

Rank = Callable[[npt.NDArray[np.int64]], npt.NDArray[np.float64]]


def _steps() -> list[int]:
    return [s for reach in range(1, CONTEXT_REACH + 1) for s in (-reach, reach)]


class Sessions:
    """An index's live rows, read once per query (a pass over every row), and the
    query's gate: what finding any rows' neighbours needs."""

    def __init__(self, index: StructuralIndex, gate_rows: Rows | None) -> None:
        self.index = index
        self.gate_rows = gate_rows
        self.alive = index.alive_rows()


class Around:
    """The live rows around some rows, looked up once for any number of steps."""

    def __init__(self, sessions: Sessions, rows: npt.NDArray[np.int64]) -> None:
        self.sessions = sessions
        self.at = np.searchsorted(sessions.alive, rows)
        self.stamps = sessions.index.updated_at(rows)

    def step(self, step: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Each row's live neighbour ``step`` rows away, and whether it is one: in
        the gate, and stored within :data:`SESSION_GAP_S` seconds of the row."""
        alive, gate_rows = self.sessions.alive, self.sessions.gate_rows
        pos = self.at + step
        ok = (pos >= 0) & (pos < len(alive))
        neighbours = alive[np.clip(pos, 0, max(len(alive) - 1, 0))]
        ok &= np.abs(self.sessions.index.updated_at(neighbours) - self.stamps) <= SESSION_GAP_S
        if gate_rows is not None:
            slot = np.clip(np.searchsorted(gate_rows, neighbours), 0, len(gate_rows) - 1)
            ok &= gate_rows[slot] == neighbours
        return neighbours, ok


def with_neighbours(
    sessions: Sessions, candidates: npt.NDArray[np.int64], fused: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """``candidates`` (sorted rows) with the neighbours of the :data:`CONTEXT_POOL`
    best of them by ``fused`` (one score per candidate), sorted."""
    if not CONTEXT_POOL or len(candidates) == 0:
        return candidates
    best = candidates[top_k(fused, min(CONTEXT_POOL, len(candidates)))]
    around = Around(sessions, best)
    near = [candidates]
    for step in _steps():
        rows, ok = around.step(step)
        near.append(rows[ok])
    return np.unique(np.concatenate(near))


def neighbour_best(
    sessions: Sessions, candidates: npt.NDArray[np.int64], rank: Rank
) -> npt.NDArray[np.float64]:
    """For each candidate, the best score (``rank`` of rows) of its neighbours."""
    best = np.zeros(len(candidates))
    around = Around(sessions, candidates)
    for step in _steps():
        neighbours, ok = around.step(step)
        if ok.any():
            scores = np.zeros(len(candidates))
            scores[ok] = rank(neighbours[ok])
            best = np.maximum(best, scores)
    return best
