"""The caches an engine keeps of a store that ranks in its own database (PostgreSQL).

A server's text queries and its folds both look at the store's text
(:class:`~.text_cache.TextCache`) and vectors (:class:`~.vector_cache.VectorCache`).
Each cache is made once per engine, at the first use of either, and both
sides use the same one: a fold in a server that has answered a text query
finds the text cache warm, and the server holds the vectors once, not twice.
"""

from __future__ import annotations

import threading
from typing import cast

from ..storage.base import Pushdown
from .text_cache import TextCache, TextSource, text_cache_enabled
from .vector_cache import VectorCache, VectorSource, cache_enabled

__all__ = ["StoreCaches"]


class StoreCaches:
    """One engine's text and vector caches of its store, made at their first use."""

    def __init__(self, store: Pushdown) -> None:
        self._store = store
        self._lock = threading.Lock()  # reads and folds run side by side: one of each
        self._texts: TextCache | None = None
        self._vectors: VectorCache | None = None

    def texts(self) -> TextCache | None:
        """The text cache; None when it is turned off or was given up."""
        if not text_cache_enabled():
            return None
        with self._lock:
            if self._texts is None:
                self._texts = TextCache(cast(TextSource, self._store))
            return None if self._texts.failed else self._texts

    def vectors(self) -> VectorCache | None:
        """The vector cache; None when it is turned off."""
        if not cache_enabled():
            return None
        with self._lock:
            if self._vectors is None:
                self._vectors = VectorCache(cast(VectorSource, self._store))
            return self._vectors
