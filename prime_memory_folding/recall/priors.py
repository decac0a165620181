"""Soft priors that text recall adds to a memory's fused score.

:func:`~prime_memory_folding.recall.fusion.hybrid_rank` fuses BM25 and cosine; the
functions here score what a query says beyond its words, each in [0, 1], for
the ranker to weigh:

- :func:`time_closeness`: how close a memory's time is to the span of time the
  query names ("yesterday", "in May", "two years ago"; see
  :func:`~prime_memory_folding.core.when.time_window`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["MIN_TIME_SCALE", "time_closeness"]

#: The shortest span closeness is measured against, so that a one-day window
#: still favours the days around it (people tell of an event a few days later).
MIN_TIME_SCALE = 7 * 86_400.0


def time_closeness(
    stamps: npt.NDArray[np.float64], window: tuple[float, float], tail: float
) -> npt.NDArray[np.float64]:
    """1 for the times in ``window``, falling off outside it.

    Outside ``[start, end)`` closeness is ``exp(-distance / scale)``, where the
    scale is ``tail`` times the window's length, but at least ``tail`` times
    :data:`MIN_TIME_SCALE`.
    """
    start, end = window
    scale = tail * max(end - start, MIN_TIME_SCALE)
    distance = np.maximum(stamps - end, 0.0) + np.maximum(start - stamps, 0.0)
    closeness: npt.NDArray[np.float64] = np.exp(-distance / scale)
    return closeness
