"""The store's embedding space: which vectors a store holds, and moving it to another.

A store's vectors all belong to one embedding space, recorded in its ``meta``
table under :data:`SPACE_KEY` (a name) and :data:`DIM_KEY` (the dimension).
The first vector fixes it: the configured text embedder's space when the
engine embeds content itself, or ``custom:<dim>`` when the caller brings
vectors. In a custom space text is never embedded, and text queries rank
lexically only.

A caller's vector is checked against the space (:func:`check_space`, which
claims a custom space in an empty store), a store of another model's space is
refused when it opens (:func:`check_open`), a write learns whether to embed its
contents (:func:`texts_to_embed`, which claims the embedder's space in an empty
store), and :func:`reembed_all` moves a whole store into another space.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import DimensionMismatch, EmbeddingError
from ..storage import SqlStorage, Storage
from .text_embedding import TextEmbedding

__all__ = [
    "CUSTOM_PREFIX",
    "DIM_KEY",
    "REEMBED_BATCH",
    "SPACE_KEY",
    "check_open",
    "check_space",
    "is_custom",
    "reembed_all",
    "set_space",
    "store_space",
    "texts_to_embed",
]

#: The meta key that holds the space's name.
SPACE_KEY = "embedding_space"
#: The meta key that holds the space's dimension.
DIM_KEY = "embedding_dim"
#: The space name's prefix for vectors a caller brings (``custom:<dim>``).
CUSTOM_PREFIX = "custom:"
#: Texts embedded per call when re-embedding a store.
REEMBED_BATCH = 1024


def store_space(storage: Storage) -> tuple[str, int] | None:
    """The store's embedding space as (name, dim), or None before the first vector."""
    name = storage.get_meta(SPACE_KEY)
    if name is None:
        return None
    return name, int(storage.get_meta(DIM_KEY) or 0)


def set_space(storage: Storage, name: str, dim: int) -> None:
    """Record the store's space. Call inside a write transaction."""
    storage.set_meta(SPACE_KEY, name)
    storage.set_meta(DIM_KEY, str(dim))


def is_custom(space: tuple[str, int] | None) -> bool:
    """Whether ``space`` holds the vectors callers bring, which text is never embedded into."""
    return space is not None and space[0].startswith(CUSTOM_PREFIX)


def check_space(storage: Storage, dim: int, *, claim: bool) -> None:
    """Check a vector dimension against the store's embedding space.

    With ``claim``, an empty space is set to ``custom:<dim>``; call it inside
    the write transaction.

    Raises:
        DimensionMismatch: the store's space has another dimension.
    """
    space = store_space(storage)
    if space is None:
        if claim:
            set_space(storage, f"{CUSTOM_PREFIX}{dim}", dim)
        return
    name, expected = space
    if dim != expected:
        raise DimensionMismatch(
            f"vector has dimension {dim}, but this store's embedding space {name} "
            f"uses dimension {expected}; give {expected}-dimensional vectors"
        )


def check_open(storage: Storage, text: TextEmbedding) -> None:
    """Refuse a store whose vectors belong to another model than the configured one.

    Raises:
        EmbeddingError: the spaces differ; the message names the setting and the
            way to re-embed.
    """
    space = store_space(storage)
    if space is None or is_custom(space) or not text.enabled:
        return
    name = text.name()
    if name != space[0]:
        raise EmbeddingError(
            f"store {storage.path} holds vectors of the embedding space {space[0]!r} "
            f"({space[1]} dimensions), but {text.setting} configures {name!r}; set "
            f"{text.setting} to {space[0]!r}, or open the store with embedder='none' and "
            f"call reembed({name!r}) to move it to the new space"
        )


def texts_to_embed(
    storage: Storage, text: TextEmbedding, caller_dims: set[int]
) -> TextEmbedding | None:
    """Whether a write should embed its vector-less contents; claims the space if empty.

    Call inside the write transaction.

    Raises:
        DimensionMismatch: the embedder's dimension does not fit the store's space.
    """
    if not text.enabled:
        return None
    space = store_space(storage)
    if space is None:
        if caller_dims:
            return None  # the caller's vectors claim a custom space
        embedder = text.get()
        set_space(storage, embedder.name, embedder.dim)
        return text
    if is_custom(space):
        return None
    embedder = text.get()
    if embedder.name != space[0] or embedder.dim != space[1]:
        raise DimensionMismatch(
            f"the embedder {embedder.name!r} ({embedder.dim} dimensions) does not fit this "
            f"store's space {space[0]!r} ({space[1]} dimensions); set {text.setting} to "
            f"{space[0]!r}, or reembed() the store"
        )
    return text


def reembed_all(
    storage: SqlStorage,
    text: TextEmbedding,
    progress: Callable[[int, int], None] | None = None,
    batch: int | None = None,
    *,
    missing_only: bool = False,
) -> int:
    """Embed every record's content again into ``text``'s space; returns how many.

    With ``missing_only``, only the records without a vector are embedded, and
    the store's space must already be ``text``'s (or unclaimed).

    Call inside one write transaction, so that a failure leaves nothing half-embedded.
    """
    batch = batch or REEMBED_BATCH
    db = storage.db
    embedder = text.get()
    which = " WHERE vector IS NULL" if missing_only else ""
    rows = db.execute(f"SELECT id, content FROM records{which} ORDER BY id").fetchall()
    total = len(rows)
    if progress is not None:
        progress(0, total)
    for start in range(0, total, batch):
        chunk = rows[start : start + batch]
        vectors = text.embed([content for _, content in chunk])
        db.executemany(
            "UPDATE records SET vector = ? WHERE id = ?",
            (
                (None if v is None else v.astype("<f4").tobytes(), rid)
                for (rid, _), v in zip(chunk, vectors)
            ),
        )
        if progress is not None:
            progress(min(start + batch, total), total)
    set_space(storage, embedder.name, embedder.dim)
    return total
