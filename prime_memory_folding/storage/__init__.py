"""Durable state: the storage interface and the embedded SQLite backend."""

from __future__ import annotations

from .base import IndexRow, Storage, StoredRow
from .sqlite import SQLiteStorage

__all__ = ["IndexRow", "SQLiteStorage", "Storage", "StoredRow"]
