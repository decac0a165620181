"""Rows and gates of the PostgreSQL store: SQL conditions and reads, and index columns read back.

Shared by the store's reads (:mod:`.postgres`) and its text search
(:mod:`.pg_text`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.index import TagQuery
from .base import SALIENCE_FLOOR, GatedRead, IndexRow, IndexTable, StoredRow
from .pg_decay import TIER_SQL
from .sqlite import index_row

__all__ = [
    "INDEX_COLUMNS",
    "RECORD_COLUMNS",
    "decay_heads_sql",
    "gate_sql",
    "gated_sql",
    "index_row",
    "sparse_heads_sql",
    "table_of",
]

#: The records table's columns, in the order ``sqlite.stored_row`` reads them.
RECORD_COLUMNS = (
    "record_id, dedupe_key, domain, subdomain, tags, tag_product, content, vector, "
    "importance, strength, created_at, updated_at, accessed_at, access_count, metadata, "
    "instance_key, strength_at, scope, session"
)
#: The columns of an index row (:func:`index_row`); ``{vector}`` is ``vector`` or ``NULL``.
INDEX_COLUMNS = (
    "record_id, domain, subdomain, tags, tag_product, importance, strength, "
    "updated_at, {vector}, created_at, accessed_at, access_count, strength_at, "
    f"{TIER_SQL}, scope, session"
)


def gate_sql(gates: TagQuery, *, exact: bool = True) -> tuple[list[str], list[Any]]:
    """SQL conditions (``%s`` placeholders) for the gates a B-tree or GIN index can run.

    With ``exact``, each all-of candidate is also confirmed by the divisibility
    test on its stored tag product; a caller that confirms it itself, on the
    rows it reads (a query's window, :meth:`~..index.StructuralIndex.select`),
    leaves it out.
    """
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
        if exact:
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


def index_row_of(stored: StoredRow) -> IndexRow:
    """A stored record's index row."""
    rec = stored.record
    tier = rec.metadata.get("tier")
    return IndexRow(
        record_id=rec.record_id,
        domain=rec.domain,
        subdomain=rec.subdomain,
        tags=rec.tags,
        tag_product=rec.tag_product,
        importance=rec.importance,
        strength=rec.strength,
        updated_at=rec.updated_at,
        vector_blob=stored.vector_blob,
        created_at=rec.created_at,
        accessed_at=rec.accessed_at,
        access_count=rec.access_count,
        strength_at=stored.strength_at,
        tier=tier if isinstance(tier, str) else None,
        scope=rec.scope,
        session=rec.session,
    )


def gated_sql(gates: TagQuery, read: GatedRead) -> tuple[str, list[Any]]:
    """The query (``%s`` placeholders) for :meth:`.PostgresStorage.gated`, and its parameters.

    It reads :data:`INDEX_COLUMNS` (``vector`` only with ``read.vectors``),
    and, for the salience order, the row's id last.
    """
    ids, newest, also, order, limit = read.ids, read.newest, read.also, read.order, read.limit
    around, reach = read.around, read.reach
    where, params = gate_sql(gates, exact=False)  # the window confirms them
    if read.has_vector:
        where.append("vector IS NOT NULL")
    if ids is not None:
        where.append("record_id = ANY(%s)")
        params.append(list(ids))
    condition = " AND ".join(where) or "TRUE"
    columns = RECORD_COLUMNS if read.records else INDEX_COLUMNS
    sql = "SELECT " + columns.format(vector="vector" if read.vectors else "NULL")
    sql += " FROM records WHERE "
    if newest is not None:
        # The ids of each source, united, then the rows read by primary key: each
        # source runs on its own index (a disjunction would scan the table).
        gated_params = params
        sources = []
        params = []
        if newest > 0:
            sources.append(f"(SELECT id FROM records WHERE {condition} ORDER BY id DESC LIMIT %s)")
            params += [*gated_params, newest]
        if also:
            sources.append(f"SELECT id FROM records WHERE record_id = ANY(%s) AND {condition}")
            params += [list(also), *gated_params]
        if around and reach > 0:
            # The same session's records on each side, by (session, id): none
            # for a record without a session.
            sources.append(
                "SELECT x.id FROM records AS h, LATERAL ("
                "(SELECT r.id FROM records AS r WHERE r.session = h.session AND r.id < h.id "
                "ORDER BY r.id DESC LIMIT %s) "
                "UNION ALL (SELECT r.id FROM records AS r WHERE r.session = h.session "
                "AND r.id > h.id ORDER BY r.id LIMIT %s)) AS x "
                "WHERE h.record_id = ANY(%s) AND h.session IS NOT NULL"
            )
            params += [reach, reach, list(around)]
        union = " UNION ".join(sources) or "SELECT NULL::bigint WHERE FALSE"
        sql += f"id IN ({union}) ORDER BY id"
    elif order == "salience":
        # The best by stored salience, chosen on the narrow columns the order
        # needs (the rows' other columns, a vector among them, would otherwise
        # ride through the sort of every gated row), then read whole and handed
        # back in storage order. Each factor is kept above SALIENCE_FLOOR, so
        # that the product cannot underflow (PostgreSQL raises an error where
        # numpy rounds to 0); below it the order is no bound, and the caller
        # reads on.
        sql += (
            f"id IN (SELECT id FROM records WHERE {condition} "
            f"ORDER BY greatest(importance, {SALIENCE_FLOOR}) * "
            f"greatest(strength, {SALIENCE_FLOOR}) DESC, updated_at DESC, id DESC"
            + ("" if limit is None else " LIMIT %s")
            + ") ORDER BY id"
        )
        params.extend([] if limit is None else [limit])
    else:
        sql += condition + " ORDER BY id"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(limit)
    return sql, params


#: The index entries of one decay class a salience read scans first for the
#: gated records it wants. Where they were too few, the gated records are read
#: through the gates' own indexes, up to :data:`SPARSE_ROWS` of them
#: (:func:`sparse_heads_sql`); where the gates pass more, a class is scanned for
#: :data:`DEEP_PREFIX` entries, and one whose gated records are sparser still
#: is read through the gates' indexes whole.
PREFIX = 256
DEEP_PREFIX = 4096
SPARSE_ROWS = 2048


def _limit_sql(limits: Mapping[int, int], default: int) -> str:
    """Each class's limit, written into the statement (the planner then knows how
    few rows it reads, and its estimate stays below what makes it compile)."""
    cases = " ".join(f"WHEN {int(c)} THEN {int(n)}" for c, n in sorted(limits.items()))
    return f"CASE cls.c {cases} ELSE {int(default)} END" if cases else str(int(default))


def decay_heads_sql(
    gates: TagQuery,
    limits: Mapping[int, int],
    default: int,
    stretch: int = PREFIX,
    classes: Sequence[int] | None = None,
) -> tuple[str, list[Any], int]:
    """The query for :meth:`.PostgresStorage.salience_heads`, its parameters, and
    how many entries of each class it scans at most.

    The classes are ``classes``, or those present, from a skip scan of the
    salience index. Each class then gives its best gated records from the
    first ``stretch`` entries of that index (more for a larger limit), and
    one more row with a null id and the number of entries scanned.
    """
    where, params = gate_sql(gates, exact=False)  # the window confirms them
    condition = " AND ".join(where) or "TRUE"
    limit = _limit_sql(limits, default)
    prefix = max(stretch, 2 * max([default, *limits.values()]))
    if classes is None:
        present = (
            "WITH RECURSIVE cls(c) AS ("
            "(SELECT salience_class FROM records ORDER BY salience_class LIMIT 1) "
            "UNION ALL SELECT (SELECT r.salience_class FROM records AS r "
            "WHERE r.salience_class > cls.c ORDER BY r.salience_class LIMIT 1) "
            "FROM cls WHERE cls.c IS NOT NULL) "
        )
    else:
        named = ",".join(str(int(c)) for c in classes)
        present = f"WITH cls(c) AS (SELECT unnest(ARRAY[{named}]::int[])) "
    sql = (
        present + "SELECT cls.c, x.record_id, x.scanned FROM cls CROSS JOIN LATERAL ("
        "WITH p AS (SELECT record_id, salience_key, updated_at, id, scope, domain_prime, "
        "subdomain_prime, tag_primes FROM records WHERE salience_class = cls.c "
        f"ORDER BY salience_key DESC, updated_at DESC, id LIMIT {prefix}) "
        "(SELECT record_id, salience_key, updated_at, id, NULL::bigint AS scanned FROM p "
        f"WHERE {condition} ORDER BY salience_key DESC, updated_at DESC, id LIMIT {limit}) "
        "UNION ALL (SELECT NULL, NULL, NULL, NULL, count(*) FROM p)) AS x "
        "WHERE cls.c IS NOT NULL "
        "ORDER BY cls.c, x.salience_key DESC NULLS LAST, x.updated_at DESC, x.id"
    )
    return sql, params, prefix


def sparse_heads_sql(
    gates: TagQuery, limits: Mapping[int, int], at_most: int | None = None
) -> tuple[str, list[Any]]:
    """The best gated records of each class of ``limits`` (class: how many), found
    through the gates' indexes in one scan and sorted, not through the salience
    index (whose order would pass over every record of a class).

    Rows are ``(class, record id, gated)``. With ``at_most``, no more than that
    many gated records are read: ``gated`` is then how many were, and an answer
    where it equals ``at_most`` may have missed some (the caller reads otherwise).
    """
    where, params = gate_sql(gates, exact=False)
    classes = sorted(limits)
    # ``+ 0``: a test the salience index cannot answer, so that the planner
    # finds the rows by the gates.
    where.append("salience_class + 0 = ANY(%s)")
    params.append(classes)
    wanted = " ".join(f"WHEN {int(c)} THEN {int(limits[c])}" for c in classes)
    gated = (
        "SELECT salience_class, record_id, salience_key, updated_at, id FROM records "
        f"WHERE {' AND '.join(where)}"
    )
    if at_most is not None:
        gated += f" LIMIT {int(at_most)}"
    sql = (
        "SELECT c, record_id, gated FROM (SELECT salience_class AS c, record_id, salience_key, "
        "updated_at, id, row_number() OVER (PARTITION BY salience_class "
        "ORDER BY salience_key DESC, updated_at DESC, id) AS n, count(*) OVER () AS gated "
        f"FROM ({gated}) AS g) AS x "
        f"WHERE n <= CASE c {wanted} END "
        "ORDER BY c, salience_key DESC, updated_at DESC, id"
    )
    return sql, params


def table_of(rows: Iterable[IndexRow], stored: Mapping[str, StoredRow] | None = None) -> IndexTable:
    """Index rows as one :class:`IndexTable` of columns (with ``stored``, their full rows)."""
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
        sessions=[r.session for r in rows],
        stored=stored,
    )
