"""Recalled memories' citations checked against the working tree, and their ranks.

Both readers (the in-memory index's and PostgreSQL's) hand their hits here,
through :meth:`.MemoryEngine.query`, so a citation is checked in one place.
A hit whose record cites nothing passes unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from ..core.citations import STALE, Citations
from ..core.records import Hit
from .writes import CITES_KEY

__all__ = ["STALE_FACTOR", "CitationCheck"]

#: What a hit's score is multiplied by when any of its citations is stale:
#: a memory about code that changed ranks lower, but is never dropped.
STALE_FACTOR = 0.5


class CitationCheck:
    """The engine's citation checker: one cache of files read, shared by its queries."""

    def __init__(self, read: Callable[[Path], bytes] | None = None) -> None:
        self._citations = Citations(read)
        self._lock = threading.Lock()

    def apply(self, hits: Sequence[Hit]) -> list[Hit]:
        """``hits`` with their citations checked, stale ones ranked lower, best first again.

        A checked hit gets ``citations`` and the score part ``citations``: 1.0,
        or :data:`STALE_FACTOR` when a citation is stale (its score is then
        multiplied by it). The order is kept among equal scores.
        """
        if not any(CITES_KEY in hit.record.metadata for hit in hits):
            return list(hits)
        checked: list[Hit] = []
        with self._lock:
            for hit in hits:
                cites = hit.record.metadata.get(CITES_KEY)
                if not cites:
                    checked.append(hit)
                    continue
                states = self._citations.check(cites)
                factor = STALE_FACTOR if any(s.state == STALE for s in states) else 1.0
                parts = {**hit.score_parts, "citations": factor}
                checked.append(
                    replace(hit, score=hit.score * factor, score_parts=parts, citations=states)
                )
        if all(s.score_parts.get("citations", 1.0) == 1.0 for s in checked):
            return checked
        return sorted(checked, key=lambda hit: -hit.score)
