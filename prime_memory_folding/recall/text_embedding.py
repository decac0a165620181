"""The engine's text embedder: which model embeds memories and queries, loaded on first use.

:class:`TextEmbedding` reads the setting (an :class:`~.embeddings.Embedder`, a
spec string, ``"none"``, or ``PRIME_MEMORY_EMBEDDER``), loads the model once
per process, and embeds texts for storing and queries for ranking (a query's
words weighted by their rarity in the store, see
:mod:`~prime_memory_folding.recall.query_weights`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..errors import EmbeddingError, InvalidInput, NotAvailable
from .embeddings import BUILTIN_MODEL, EMBEDDER_ENV, Embedder, load_embedder
from .query_weights import SharesOf, WeightedEmbedder, word_weights
from .ranking import DEFAULT_RANKING, RankingSettings

__all__ = ["BUILTIN_SPACE", "NO_EMBEDDER", "TextEmbedding"]

#: The spec that turns automatic embedding off.
NO_EMBEDDER = "none"
#: The bundled model's space name.
BUILTIN_SPACE = f"builtin:{BUILTIN_MODEL}"

_LOADED: dict[str, Embedder] = {}
_LOADING = threading.Lock()


class TextEmbedding:
    """The engine's text embedder, loaded on first use.

    Args:
        embedder: an :class:`Embedder`, a spec string for
            :func:`~prime_memory_folding.recall.embeddings.load_embedder`, ``"none"`` to
            turn automatic embedding off, or None to read ``PRIME_MEMORY_EMBEDDER``
            (the built-in model when that is unset).

    Raises:
        InvalidInput: ``embedder`` is neither a spec nor an Embedder.
    """

    def __init__(self, embedder: str | Embedder | None = None) -> None:
        import os

        self._embedder: Embedder | None = None
        self.spec: str | None
        if embedder is None:
            self.setting = EMBEDDER_ENV
            self.spec = os.environ.get(EMBEDDER_ENV, "").strip() or "builtin"
        elif isinstance(embedder, str):
            self.setting = "embedder="
            self.spec = embedder.strip() or "builtin"
        elif isinstance(embedder, Embedder):
            self.setting = "embedder="
            self.spec = None
            self._embedder = embedder
        else:
            kind = type(embedder).__name__
            raise InvalidInput(f"embedder must be a spec string, an Embedder or None, got {kind}")
        if self.spec is not None and self.spec.lower() == NO_EMBEDDER:
            self.spec = NO_EMBEDDER

    @property
    def enabled(self) -> bool:
        """Whether content is embedded automatically."""
        return self.spec != NO_EMBEDDER

    @property
    def loaded(self) -> bool:
        """Whether the embedder is loaded already."""
        return self._embedder is not None

    def known_name(self) -> str | None:
        """The space name, when it is known without loading a model."""
        if self._embedder is not None:
            return self._embedder.name
        if self.spec in ("builtin", BUILTIN_SPACE):
            return BUILTIN_SPACE
        return None

    def get(self) -> Embedder:
        """The embedder, loading it on first use (shared by every engine in the process).

        Raises:
            NotAvailable: embedding is turned off.
            EmbeddingError, InvalidInput: the backend cannot be loaded; the message
                names the setting to fix.
        """
        if self._embedder is not None:
            return self._embedder
        if self.spec is None or self.spec == NO_EMBEDDER:
            raise NotAvailable("automatic embedding is turned off (embedder='none')")
        with _LOADING:
            loaded = _LOADED.get(self.spec)
            if loaded is None:
                loaded = load_embedder(self.spec)
                _LOADED[self.spec] = loaded
        self._embedder = loaded
        return loaded

    def name(self) -> str:
        """The space name, loading the embedder if that is the only way to know it."""
        return self.known_name() or self.get().name

    def embed(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32] | None]:
        """Unit vectors for ``texts``; None for a text the model cannot represent.

        Raises:
            EmbeddingError: the backend failed or answered in the wrong shape.
        """
        embedder = self.get()
        matrix = np.asarray(embedder.embed(list(texts)), dtype=np.float32)
        if matrix.shape != (len(texts), embedder.dim):
            raise EmbeddingError(
                f"{embedder.name} returned shape {matrix.shape} for {len(texts)} texts; "
                f"set {self.setting} to a working embedding model"
            )
        nonzero = np.any(matrix, axis=1)
        return [row if keep else None for row, keep in zip(matrix, nonzero)]

    def embed_query(
        self, text: str, shares_of: SharesOf, settings: RankingSettings = DEFAULT_RANKING
    ) -> npt.NDArray[np.float32] | None:
        """A text query's unit vector: its words weighted by their rarity in the store
        (``shares_of``, see :mod:`~prime_memory_folding.recall.query_weights`) when the embedder
        can weight them, else :meth:`embed`'s; None when the model cannot represent it.
        """
        embedder = self.get()
        weighing = embedder if isinstance(embedder, WeightedEmbedder) else None
        weights = None if weighing is None else word_weights(text, shares_of, settings)
        if weighing is None or weights is None:
            return self.embed([text])[0]
        vector = np.asarray(weighing.embed_weighted(text, weights), dtype=np.float32)
        if vector.shape != (embedder.dim,) or not np.all(np.isfinite(vector)):
            raise EmbeddingError(
                f"{embedder.name} returned a query vector of shape {vector.shape}; "
                f"set {self.setting} to a working embedding model"
            )
        return vector if vector.any() else None
