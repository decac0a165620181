"""Approximate nearest neighbours with pgvector, when the ``vector`` extension exists.

The vectors themselves stay in ``records.vector`` (float32 ``bytea``), which
is what every other path reads and what a copy moves. With pgvector, each
record also gets an ``embedding`` column of the extension's ``vector`` type
under an HNSW index (cosine distance), made when the store's vectors first
have a known length. The engine asks it for the nearest gated records, then
ranks those exactly with numpy (:mod:`~prime_memory_folding.engine.pushdown`), so
scores are the same as without it.

``embedding`` is written with each record. Rows that another path wrote
without it (the archive's restores copy ``records`` columns in SQL) are filled
in before each search, a batch at a time, from a partial index of the rows
that lack it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Vectors", "literal"]

#: Candidates the HNSW search looks at (``hnsw.ef_search``); more than PostgreSQL's
#: default of 40, so that gates after the search still leave enough.
EF_SEARCH = 400
#: Rows filled in per step when some lack their ``embedding``.
FILL_BATCH = 2_000

Run = Callable[[str, Sequence[Any]], Any]


def literal(blob: bytes) -> str:
    """A float32 blob as pgvector's text form, ``[x,y,...]``."""
    values = np.frombuffer(blob, dtype="<f4")
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


class Vectors:
    """The pgvector side of a PostgreSQL store: the column, its index, and searches.

    Args:
        run: runs one statement (``%s`` placeholders) and returns its rows.
    """

    def __init__(self, run: Run) -> None:
        self._run = run
        self.dim: int | None = None

    @staticmethod
    def available(run: Run) -> bool:
        """Whether the extension is installed (or can be) in this database."""
        try:
            run("CREATE EXTENSION IF NOT EXISTS vector", ())
        except Exception:  # no extension on the server, or no right to create it
            return False
        return True

    def prepare(self, dim: int) -> None:
        """Make the ``embedding`` column and its HNSW index for vectors of ``dim``.

        Call inside a transaction that holds the schema lock; a store whose
        column exists keeps its length.
        """
        rows = self._run(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'records'::regclass AND attname = 'embedding' "
            "AND NOT attisdropped",
            (),
        ).fetchall()
        if not rows:
            self._run(f"ALTER TABLE records ADD COLUMN embedding vector({int(dim)})", ())
            self._run(
                "CREATE INDEX records_embedding ON records "
                "USING hnsw (embedding vector_cosine_ops)",
                (),
            )
            self._run(
                "CREATE INDEX records_embedding_missing ON records (id) "
                "WHERE embedding IS NULL AND vector IS NOT NULL",
                (),
            )
            self.dim = int(dim)
            return
        kind = str(rows[0][0])
        self.dim = int(kind[kind.index("(") + 1 : kind.index(")")])

    def load(self) -> None:
        """Learn the column's length, if the store has one."""
        rows = self._run(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'records'::regclass AND attname = 'embedding' "
            "AND NOT attisdropped",
            (),
        ).fetchall()
        if rows:
            kind = str(rows[0][0])
            self.dim = int(kind[kind.index("(") + 1 : kind.index(")")])

    def value(self, blob: bytes | None) -> str | None:
        """The ``embedding`` for a record's vector blob (None when it cannot have one)."""
        if blob is None or self.dim is None or len(blob) != 4 * self.dim:
            return None
        return literal(blob)

    def fill(self) -> int:
        """Give ``embedding`` to rows that lack it; returns how many were filled."""
        if self.dim is None:
            return 0
        filled = 0
        while True:
            rows = self._run(
                "SELECT id, vector FROM records WHERE embedding IS NULL AND vector IS NOT NULL "
                "AND length(vector) = %s ORDER BY id LIMIT %s",
                (4 * self.dim, FILL_BATCH),
            ).fetchall()
            if not rows:
                return filled
            for row_id, blob in rows:
                self._run(
                    "UPDATE records SET embedding = %s::vector WHERE id = %s",
                    (literal(bytes(blob)), row_id),
                )
            filled += len(rows)

    def nearest(
        self,
        where: list[str],
        params: list[Any],
        unit: npt.NDArray[np.float32],
        keep: int,
        transaction: Callable[[], Any],
    ) -> list[str] | None:
        """Ids of about ``keep`` gated records nearest ``unit`` by the HNSW index.

        None when the store has no ``embedding`` column of that length.
        """
        if self.dim is None or self.dim != len(unit):
            return None
        self.fill()
        condition = " AND ".join([*where, "embedding IS NOT NULL"])
        query = "[" + ",".join(repr(float(v)) for v in unit) + "]"
        with transaction():
            self._run(f"SET LOCAL hnsw.ef_search = {max(EF_SEARCH, keep)}", ())
            rows = self._run(
                f"SELECT record_id FROM records WHERE {condition} "
                "ORDER BY embedding <=> %s::vector LIMIT %s",
                (*params, query, keep),
            ).fetchall()
        return [row[0] for row in rows]
