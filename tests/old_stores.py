"""Stores as an older release left them: migrated only up to a given schema version."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from prime_memory_folding.storage.migrations import MIGRATIONS


def build_store(path: Path, version: int) -> None:
    """A store migrated only up to ``version``, as an older release left it."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(
            "CREATE TABLE schema_migrations ("
            "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        for step in sorted(MIGRATIONS, key=lambda m: m.version):
            if step.version > version:
                break
            db.execute("BEGIN")
            step.apply(db)
            db.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)", (step.version, step.name, 0.0)
            )
            db.execute("COMMIT")
    finally:
        db.close()
