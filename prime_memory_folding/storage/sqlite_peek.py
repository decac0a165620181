"""Reads of an SQLite store for a short-lived process, with the standard library only.

A host's hook starts a process for each prompt; loading the engine (numpy, the
index, the embedding model) would cost it more than its whole budget. A
:class:`Peek` opens the store's file read-only and answers the few questions a
hook asks in SQL: the memories of some domains in some scopes, a scope's last
session, and the records whose words match a text, through the same FTS5 index
(porter, unicode61) the engine's text queries use. It never writes, so it
cannot harm a store another process is writing; a store it cannot read raises
:class:`~prime_memory_folding.errors.StoreError`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import StoreError

__all__ = ["Peek", "PeekRow"]

#: Columns a :class:`PeekRow` is read from, in its fields' order.
_COLUMNS = (
    "r.id, r.record_id, r.domain, r.subdomain, r.tags, r.content, r.importance, r.strength, "
    "r.created_at, r.accessed_at, r.access_count, r.scope, r.session, r.metadata"
)
#: How long a read waits for a writer's lock before it gives up.
BUSY_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class PeekRow:
    """One live record, as a hook reads it."""

    row: int
    record_id: str
    domain: str
    subdomain: str
    tags: tuple[str, ...]
    content: str
    importance: float
    strength: float
    created_at: float
    accessed_at: float
    access_count: int
    scope: str
    session: str | None
    metadata: dict[str, object]


def _row(values: Sequence[Any]) -> PeekRow:
    tags = json.loads(str(values[4]) or "[]")
    metadata = json.loads(str(values[13]) or "{}")
    return PeekRow(
        row=int(values[0]),
        record_id=str(values[1]),
        domain=str(values[2]),
        subdomain=str(values[3]),
        tags=tuple(str(tag) for tag in tags) if isinstance(tags, list) else (),
        content=str(values[5]),
        importance=float(values[6]),
        strength=float(values[7]),
        created_at=float(values[8]),
        accessed_at=float(values[9]),
        access_count=int(values[10]),
        scope=str(values[11]),
        session=None if values[12] is None else str(values[12]),
        metadata=metadata if isinstance(metadata, dict) else {},
    )


def _marks(count: int) -> str:
    return ",".join("?" * count)


def _phrase(word: str) -> str:
    """``word`` as an FTS5 string: a word of ``\\w`` characters holds no quote."""
    return '"' + word.replace('"', '""') + '"'


class Peek:
    """A read-only view of an SQLite store's records.

    Raises:
        StoreError: the file does not exist, or is no store this version reads.
    """

    def __init__(self, path: str | Path, *, timeout: float = BUSY_TIMEOUT_S) -> None:
        file = Path(path)
        if not file.is_file():
            raise StoreError(f"no store at {file}")
        try:
            self._db = sqlite3.connect(
                f"{file.resolve().as_uri()}?mode=ro", uri=True, timeout=timeout
            )
            self._db.execute("SELECT id FROM records LIMIT 0")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the store {file}: {exc}") from exc

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Peek:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[PeekRow]:
        return [_row(values) for values in self._all(sql, params)]

    def _all(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        try:
            return list(self._db.execute(sql, tuple(params)))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the store: {exc}") from exc

    def count(self) -> int:
        """How many live records the store holds."""
        return int(self._all("SELECT count(*) FROM records")[0][0])

    def in_domains(
        self, scopes: Sequence[str], domains: Sequence[str], *, limit: int
    ) -> list[PeekRow]:
        """Records of ``domains`` in ``scopes``, most important and strongest first."""
        if not scopes or not domains:
            return []
        # The best ids first, from the covering index alone; then their rows.
        return self._rows(
            f"SELECT {_COLUMNS} FROM records r WHERE r.id IN ("
            f"SELECT id FROM records WHERE scope IN ({_marks(len(scopes))}) "
            f"AND domain IN ({_marks(len(domains))}) "
            "ORDER BY importance * strength DESC LIMIT ?) "
            "ORDER BY r.importance * r.strength DESC, r.accessed_at DESC",
            [*scopes, *domains, limit],
        )

    def of_session(self, session: str, scope: str, *, limit: int) -> list[PeekRow]:
        """The last ``limit`` records of ``session`` in ``scope``, oldest first."""
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM records r WHERE r.session = ? AND r.scope = ? "
            "ORDER BY r.created_at DESC, r.id DESC LIMIT ?",
            [session, scope, limit],
        )
        return rows[::-1]

    def matching(self, words: Iterable[str], scopes: Sequence[str], *, limit: int) -> list[PeekRow]:
        """Records in ``scopes`` holding any of ``words``, best BM25 first."""
        query = " OR ".join(_phrase(word) for word in words)
        if not query or not scopes:
            return []
        return self._rows(
            f"SELECT {_COLUMNS} FROM records_fts JOIN records r ON r.id = records_fts.rowid "
            f"WHERE records_fts MATCH ? AND r.scope IN ({_marks(len(scopes))}) "
            "ORDER BY bm25(records_fts) LIMIT ?",
            [query, *scopes, limit],
        )

    def holding(self, word: str, rows: Sequence[int]) -> set[int]:
        """Which of ``rows`` hold ``word``, as the full-text index reads words."""
        if not rows:
            return set()
        found = self._all(
            f"SELECT rowid FROM records_fts WHERE records_fts MATCH ? "
            f"AND rowid IN ({_marks(len(rows))})",
            [_phrase(word), *rows],
        )
        return {int(values[0]) for values in found}

    def frequency(self, word: str) -> int:
        """How many records hold ``word``."""
        found = self._all(
            "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?", [_phrase(word)]
        )
        return int(found[0][0])

    def stored(self, scope: str, contents: Sequence[str]) -> set[str]:
        """Which of ``contents`` a record of ``scope`` already holds, word for word."""
        held: set[str] = set()
        for start in range(0, len(contents), 500):
            chunk = list(contents[start : start + 500])
            held.update(
                str(values[0])
                for values in self._all(
                    f"SELECT content FROM records WHERE scope = ? "
                    f"AND content IN ({_marks(len(chunk))})",
                    [scope, *chunk],
                )
            )
        return held
