"""Durable state: the storage interface, the embedded SQLite backend, and PostgreSQL."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import (
        GatedRead,
        IndexRow,
        IndexTable,
        LexicalCandidates,
        Pushdown,
        SqlStorage,
        Storage,
        StoredRow,
        TokenRow,
        TokenStore,
    )
    from .sqlite import SQLiteStorage

__all__ = [
    "GatedRead",
    "IndexRow",
    "IndexTable",
    "LexicalCandidates",
    "Pushdown",
    "SQLiteStorage",
    "SqlStorage",
    "Storage",
    "StoredRow",
    "TokenRow",
    "TokenStore",
    "is_postgres_url",
    "open_storage",
    "pushdown_of",
    "tidy_text_index",
]


_FROM_BASE = frozenset(
    (
        "GatedRead",
        "IndexRow",
        "IndexTable",
        "LexicalCandidates",
        "Pushdown",
        "SqlStorage",
        "Storage",
        "StoredRow",
        "TokenRow",
        "TokenStore",
    )
)


def __getattr__(name: str) -> Any:
    # The backends load numpy; a short-lived process that only reads a store's
    # file (sqlite_peek.py) imports this package without them.
    if name in _FROM_BASE:
        from . import base

        return getattr(base, name)
    if name == "SQLiteStorage":
        from .sqlite import SQLiteStorage

        return SQLiteStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_postgres_url(path: object) -> bool:
    """Whether a store path names a PostgreSQL database (``postgresql://...``)."""
    if not isinstance(path, str) or "://" not in path:
        return False
    return path.split("://", 1)[0].lower() in ("postgresql", "postgres")


def open_storage(path: str | os.PathLike[str]) -> SqlStorage:
    """The backend a store path names: a ``postgresql://`` URL, else an SQLite file."""
    if is_postgres_url(path):
        from .postgres import PostgresStorage

        return PostgresStorage(str(path))
    from .sqlite import SQLiteStorage

    return SQLiteStorage(path)


def pushdown_of(storage: Storage) -> Pushdown | None:
    """The backend as a :class:`Pushdown`, when it answers queries in its own database."""
    if getattr(storage, "pushdown", False) is True:
        return storage  # type: ignore[return-value]
    return None


def tidy_text_index(storage: Storage, *, everything: bool = False) -> None:
    """Merge the small segments of an SQLite store's full-text index, or with
    ``everything`` all of them (see :meth:`SQLiteStorage.merge_text_segments`),
    in a transaction of its own. PostgreSQL keeps its indexes itself.
    """
    from .sqlite import SQLiteStorage

    if isinstance(storage, SQLiteStorage):
        with storage.transaction():
            storage.merge_text_segments(everything=everything)
