"""Salience in PostgreSQL's own order: decay classes and keys, computed by the database.

A record's salience at time ``now`` is ``importance * strength * 2 ** (-(now -
since) / half)`` (see :mod:`~prime_memory_folding.fold.folding`), where ``since``
is when its strength was last set and ``half`` its half-life: its tier's, lengthened
by spaced reinforcement. Two records of one half-life keep their order as time
passes, so the store keeps, for each record, two generated columns that an
index orders:

- ``salience_class``: the tier (``permanent`` is class 0), and for a record
  reinforced apart in time a bucket of its half-life (:data:`BUCKETS_PER_DOUBLING`
  buckets per doubling; bucket 0 holds only records at their tier's half-life);
- ``salience_key``: ``since + half * log2(importance * strength)``, the moment
  the decayed salience would reach 1 (``log2(importance * strength)`` for a
  permanent record, which never decays). Within a class the key is the
  salience's order at every ``now``: ``salience = 2 ** ((key - now) / half)``.

A salience read takes the best few of each class by the index
``(salience_class, salience_key DESC, updated_at DESC, id)``, so its cost does not
depend on how many records tie or match; the reader ranks them exactly and
bounds each class's unread records by its last row read
(:func:`~prime_memory_folding.engine.pushdown.by_decay`).

The columns are generated from constants fixed when the schema was made
(:data:`STORE_DECAY`, the default decay policy): an engine whose decay policy
differs reads by the stored salience bound instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

__all__ = [
    "BUCKETS_PER_DOUBLING",
    "DECAY_FIELDS",
    "PERMANENT_CLASS",
    "STORE_DECAY",
    "TIER_SQL",
    "DecayOrder",
    "class_sql",
    "key_sql",
]

#: Half-life buckets per doubling, for records reinforced apart in time.
BUCKETS_PER_DOUBLING = 8
#: The class of records that never decay.
PERMANENT_CLASS = 0
#: Class numbers per tier: ``tier * _TIER_STRIDE + bucket``.
_TIER_STRIDE = 1000
#: The importance and strength below which the order treats a factor as this
#: (the logarithm of 0 is undefined); numpy's product then is 0 or nearly so.
_FLOOR = 1e-150
_TIERS = ("working", "short_term", "long_term")


@dataclass(frozen=True, slots=True)
class DecayOrder:
    """The decay rule the generated columns compute (a fold policy's decay fields)."""

    working_half_life: float
    short_term_half_life: float
    long_term_half_life: float
    short_term_from: float
    long_term_from: float
    permanent_from: float
    spacing_factor: float
    max_spaced: float

    def half_lives(self) -> tuple[float, float, float]:
        return (self.working_half_life, self.short_term_half_life, self.long_term_half_life)

    def half_range(self, salience_class: int) -> tuple[float, float] | None:
        """The least and greatest half-life of a class's records; None for permanent."""
        tier, bucket = divmod(salience_class, _TIER_STRIDE)
        if salience_class == PERMANENT_CLASS or not 1 <= tier <= len(_TIERS):
            return None
        base = self.half_lives()[tier - 1]
        if bucket == 0:
            return base, base
        step = 1.0 / BUCKETS_PER_DOUBLING
        return base * 2.0 ** ((bucket - 1) * step), base * 2.0 ** (bucket * step)

    @staticmethod
    def exact(salience_class: int) -> bool:
        """Whether every record of the class has the same half-life (or none)."""
        return salience_class % _TIER_STRIDE == 0


#: The fields of a fold policy that decay reads (all of :class:`DecayOrder`'s but
#: the fixed most spaced reinforcements, ``max_spaced``).
DECAY_FIELDS = tuple(f.name for f in fields(DecayOrder) if f.name != "max_spaced")

#: What a new store's columns compute: the default decay policy.
STORE_DECAY = DecayOrder(
    working_half_life=86_400.0,
    short_term_half_life=7 * 86_400.0,
    long_term_half_life=365 * 86_400.0,
    short_term_from=0.3,
    long_term_from=0.5,
    permanent_from=0.95,
    spacing_factor=2.0,
    max_spaced=64.0,
)


#: A record's ``metadata["tier"]``. PostgreSQL's ``jsonb`` holds no NUL
#: character, which JSON text may escape (``\u0000``): such metadata has no tier
#: here (a label beside a NUL in the same metadata is the one case where this
#: and the engine's reading differ).
TIER_SQL = (
    "(CASE WHEN strpos(metadata, '\\u0000') > 0 THEN NULL ELSE metadata::jsonb ->> 'tier' END)"
)


def _float(value: float) -> str:
    return f"{value!r}::float8"


def _tier(order: DecayOrder) -> str:
    """The record's tier: its ``metadata`` label when valid, else by importance."""
    label = TIER_SQL
    return (
        f"CASE WHEN {label} IN ('working', 'short_term', 'long_term', 'permanent') "
        f"THEN {label} "
        f"WHEN importance >= {_float(order.permanent_from)} THEN 'permanent' "
        f"WHEN importance >= {_float(order.long_term_from)} THEN 'long_term' "
        f"WHEN importance >= {_float(order.short_term_from)} THEN 'short_term' "
        "ELSE 'working' END"
    )


def _base(order: DecayOrder) -> str:
    cases = " ".join(
        f"WHEN '{tier}' THEN {_float(half)}" for tier, half in zip(_TIERS, order.half_lives())
    )
    return f"(CASE {_tier(order)} {cases} END)"


def _spaced(order: DecayOrder) -> str:
    """Spaced reinforcements, as the fold policy's ``half_life`` counts them."""
    return (
        f"least(access_count::float8, greatest(accessed_at - created_at, 0::float8) "
        f"/ {_base(order)}, {_float(order.max_spaced)})"
    )


def _log2_salience() -> str:
    return (
        f"(ln(greatest(importance, {_float(_FLOOR)}) * greatest(strength, {_float(_FLOOR)}))"
        f" / ln(2::float8))"
    )


def class_sql(order: DecayOrder) -> str:
    """SQL for a record's salience class (see the module's text)."""
    tier_code = " ".join(
        f"WHEN '{tier}' THEN {n * _TIER_STRIDE}" for n, tier in enumerate(_TIERS, start=1)
    )
    per_doubling = BUCKETS_PER_DOUBLING * math.log2(order.spacing_factor)
    spaced = _spaced(order)
    return (
        f"(CASE {_tier(order)} {tier_code} ELSE {PERMANENT_CLASS} END) + "
        f"(CASE WHEN {_tier(order)} = 'permanent' OR {spaced} <= 0 THEN 0 "
        f"ELSE 1 + floor({spaced} * {_float(per_doubling)})::int END)"
    )


def key_sql(order: DecayOrder) -> str:
    """SQL for a record's salience key (see the module's text)."""
    since = (
        "CASE WHEN strength_at IS NULL THEN accessed_at ELSE greatest(accessed_at, strength_at) END"
    )
    half = f"({_base(order)} * power({_float(order.spacing_factor)}, {_spaced(order)}))"
    return (
        f"CASE WHEN {_tier(order)} = 'permanent' THEN {_log2_salience()} "
        f"ELSE ({since}) + {half} * {_log2_salience()} END"
    )
