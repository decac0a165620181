"""Durable state: the storage interface and the embedded SQLite backend."""

from __future__ import annotations

from .base import IndexRow, IndexTable, Storage, StoredRow, TokenRow, TokenStore
from .sqlite import SQLiteStorage

__all__ = [
    "IndexRow",
    "IndexTable",
    "SQLiteStorage",
    "Storage",
    "StoredRow",
    "TokenRow",
    "TokenStore",
]
