"""Rows and gates of the PostgreSQL store: SQL conditions, and index columns read back.

Shared by the store's reads (:mod:`.postgres`) and its text search
(:mod:`.pg_text`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from ..index import TagQuery
from .base import IndexRow, IndexTable

__all__ = ["gate_sql", "index_row", "table_of"]


def gate_sql(gates: TagQuery) -> tuple[list[str], list[Any]]:
    """SQL conditions (``%s`` placeholders) for the gates a B-tree or GIN index can run."""
    where: list[str] = []
    params: list[Any] = []
    if gates.scopes is not None:
        where.append("scope = ANY(%s)")
        params.append(list(gates.scopes))
    if gates.domain_prime is not None:
        where.append("domain_prime = %s")
        params.append(gates.domain_prime)
    if gates.subdomain_prime is not None:
        where.append("subdomain_prime = %s")
        params.append(gates.subdomain_prime)
    if gates.all_of:
        # The GIN index finds them; the exact divisibility test confirms each.
        where.append("tag_primes @> %s::bigint[]")
        params.append(list(gates.all_of))
        where.append("(tag_product::numeric %% %s::numeric) = 0")
        params.append(str(math.prod(gates.all_of)))
    if gates.any_of:
        where.append("tag_primes && %s::bigint[]")
        params.append(list(gates.any_of))
    if gates.none_of:
        where.append("NOT (tag_primes && %s::bigint[])")
        params.append(list(gates.none_of))
    if gates.since is not None:
        where.append("updated_at >= %s")
        params.append(gates.since)
    if gates.until is not None:
        where.append("updated_at < %s")
        params.append(gates.until)
    return where, params


def index_row(row: Sequence[Any]) -> IndexRow:
    blob = row[8]
    return IndexRow(
        record_id=row[0],
        domain=row[1],
        subdomain=row[2],
        tags=tuple(json.loads(row[3])),
        tag_product=int(row[4]),
        importance=row[5],
        strength=row[6],
        updated_at=row[7],
        vector_blob=None if blob is None else bytes(blob),
        created_at=row[9],
        accessed_at=row[10],
        access_count=row[11],
        strength_at=row[12],
        tier=row[13] if isinstance(row[13], str) else None,
        scope=row[14],
    )


def table_of(rows: Iterable[IndexRow]) -> IndexTable:
    """Index rows as one :class:`IndexTable` of columns."""
    rows = list(rows)
    return IndexTable(
        record_ids=[r.record_id for r in rows],
        domains=[r.domain for r in rows],
        subdomains=[r.subdomain for r in rows],
        tags=[r.tags for r in rows],
        tag_products=[r.tag_product for r in rows],
        importance=[r.importance for r in rows],
        strength=[r.strength for r in rows],
        updated_at=[r.updated_at for r in rows],
        vector_blobs=[r.vector_blob for r in rows],
        created_at=[r.created_at for r in rows],
        accessed_at=[r.accessed_at for r in rows],
        access_count=[r.access_count for r in rows],
        strength_at=[r.strength_at for r in rows],
        tiers=[r.tier for r in rows],
        scopes=[r.scope for r in rows],
    )
