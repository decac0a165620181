"""Ranking of the candidates that survived the structural gates.

With a query vector, candidates are ordered by cosine similarity. Without one,
by importance x strength, then by recency. Each ranked row carries the parts its
score was made of.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..core.index import Rows, StructuralIndex

__all__ = ["RankedRow", "best_positions", "rank_by_salience", "rank_by_vector", "top_k"]


@dataclass(frozen=True, slots=True)
class RankedRow:
    """A row of the index with its score and score parts."""

    row: int
    score: float
    parts: dict[str, float]


def top_k(scores: npt.NDArray[np.floating], k: int) -> npt.NDArray[np.int64]:
    """Positions of the ``k`` highest scores, best first; ties keep position order."""
    n = len(scores)
    if k <= 0 or n == 0:
        return np.zeros(0, dtype=np.int64)
    if k < n:
        part = np.argpartition(-scores, k - 1)[:k]
        order = np.lexsort((part, -scores[part]))
        return part[order].astype(np.int64)
    return np.lexsort((np.arange(n), -scores)).astype(np.int64)


def best_positions(
    primary: npt.NDArray[np.floating], secondary: npt.NDArray[np.floating], k: int
) -> npt.NDArray[np.int64]:
    """Positions of the ``k`` best by primary, then secondary (both descending), then position.

    Linear time: only the rows that can reach the top ``k`` are sorted, even
    when many share the same primary score.
    """
    n = len(primary)
    if n <= 4 * k:
        return np.lexsort((np.arange(n), -secondary, -primary))[:k].astype(np.int64)
    kth = np.partition(primary, n - k)[n - k]
    above = np.flatnonzero(primary > kth)
    ties = np.flatnonzero(primary == kth)
    need = k - len(above)
    if len(ties) > need:
        tied = secondary[ties]
        kth2 = np.partition(tied, len(tied) - need)[len(tied) - need]
        better = ties[tied > kth2]
        ties = np.concatenate([better, ties[tied == kth2][: need - len(better)]])
    chosen = np.concatenate([above, ties])
    order = np.lexsort((chosen, -secondary[chosen], -primary[chosen]))
    return chosen[order].astype(np.int64)


def rank_by_vector(
    index: StructuralIndex,
    rows: Rows | None,
    query: npt.NDArray[np.float32],
    limit: int,
    now: float | None = None,
) -> list[RankedRow]:
    """Best-first by cosine similarity; records without a vector are left out.

    With ``now``, the parts also show each hit's strength decayed to that time.
    """
    scores = index.cosine(rows, query)
    best = top_k(scores, limit)
    best = best[np.isfinite(scores[best])]
    chosen = best if rows is None else rows[best]
    strength = None if now is None else index.effective_strength(chosen, now)
    return [
        RankedRow(
            int(row),
            float(scores[pos]),
            {"cosine": float(scores[pos])}
            if strength is None
            else {"cosine": float(scores[pos]), "strength": float(strength[i])},
        )
        for i, (pos, row) in enumerate(zip(best, chosen))
    ]


def rank_by_salience(
    index: StructuralIndex, rows: Rows, limit: int, now: float | None = None
) -> list[RankedRow]:
    """Best-first by importance x strength, then most recently updated.

    With ``now``, strength is the strength decayed to that time.
    """
    if limit <= 0 or len(rows) == 0:
        return []
    importance = index.importance(rows)
    strength = index.strength(rows) if now is None else index.effective_strength(rows, now)
    salience = importance * strength
    order = best_positions(salience, index.updated_at(rows), limit)
    return [
        RankedRow(
            int(rows[i]),
            float(salience[i]),
            {
                "importance": float(importance[i]),
                "strength": float(strength[i]),
                "salience": float(salience[i]),
            },
        )
        for i in order
    ]
