"""Folding: the maintenance pass that keeps a store small and meaningful.

Everything here is a pure function of a store snapshot, a :class:`FoldPolicy`
and a time ``now``; the engine applies the resulting :class:`FoldPlan` in one
transaction. Nothing is destroyed: pruned and folded records move to the
archive, from which they can be restored exactly.

Decay
    A record's strength halves every half-life since it was last reinforced.
    The half-life comes from its tier (``metadata["tier"]`` if set, else from its
    importance); ``permanent`` never decays. Spaced reinforcement lengthens it:
    each reinforcement that came at least a base half-life after the previous
    ones multiplies it by ``spacing_factor``, massed ones count for their share.
    A memory stored at the default importance is long-term: it is what an agent
    chose to keep, so it must outlive conversations that span months. Only an
    importance below the default asks for a short-lived tier.
Prune
    Records whose decayed strength falls below ``prune_below`` are archived.
Cluster
    Within a domain, records with the same subdomain or a shared tag are linked
    when they are near-duplicates: cosine similarity at or above ``similarity``
    and at least ``word_overlap`` of their distinct words in common. Vectors
    alone are not enough, since a text model rates different statements on one
    topic as similar, and folding them would bury each under the other. Leader
    clustering over those links (most-linked record first, ties by id) forms
    the clusters; a leader's neighbours join it most similar first, each only
    if it is linked to every member already in, so every two members of a
    cluster are near-duplicates of each other. :mod:`~prime_memory_folding.fold.links`
    finds the links and forms the clusters.
Merge and promote
    A cluster of two or more becomes one folded record: an extractive summary,
    the strength-weighted mean vector, the union of tags plus ``folded``, a
    boosted importance and a promoted tier. Its members are archived and
    listed in ``metadata["folded_from"]``.
Expiry
    A memory that cites code and was neither used (``accessed_at``) nor
    verified (every citation verified or moved by a check) for
    ``cite_expiry_days`` has expired: from then on its half-life is divided by
    ``cite_expiry_factor`` (see :func:`expired_strengths`). The engine says
    when each such memory expires (``expires``); a memory that cites nothing
    decays exactly as before. An expired memory whose citations are stale is
    archived as ``stale`` (``stale`` of :func:`plan_fold`).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..core.words import STOPWORDS, UNSEGMENTED_RUN, WORD
from ..errors import InvalidInput
from ..storage import StoredRow
from ..storage.archive import Snapshot, SnapshotRow, UnitVectors
from .links import PlanStep, cluster, linked_pairs, word_set

__all__ = [
    "SAME_SENTENCE",
    "TIERS",
    "FoldPlan",
    "FoldPolicy",
    "FoldReport",
    "Merge",
    "Snapshot",
    "SnapshotRow",
    "cluster",
    "decay_terms",
    "effective_columns",
    "effective_strength",
    "expired_strengths",
    "expiry_moments",
    "fold_groups",
    "half_life",
    "linked_pairs",
    "plan_fold",
    "prune_moments",
    "prune_moments_expiring",
    "sentence_words",
    "summarise",
    "tier_of",
    "word_set",
]

#: Tiers from most to least volatile.
TIERS = ("working", "short_term", "long_term", "permanent")
#: The tag every folded record carries.
FOLDED_TAG = "folded"
#: A full fold writes a decayed strength back only once it has fallen by more
#: than this share of the stored one. Decay is a pure function of the stored
#: strength and time, so writing it back changes nothing a query sees; only
#: a record that faded markedly is worth rewriting.
_PERSIST_SHARE = 0.01
#: Caps the spacing exponent so a long-lived record cannot overflow its half-life.
_MAX_SPACED = 64.0

_DAY = 86_400.0
#: The metadata key of a memory's citations (``engine.writes.CITES_KEY``).
CITES_KEY = "cites"
#: Sentence ends: Latin ones before whitespace; the full-width ones of Chinese
#: and Japanese, which no space follows, anywhere.
_FULL_WIDTH_STOPS = "\u3002\uff01\uff1f\uff61"  # ideographic full stop, ! ? and half-width stop
_SENTENCE_STOPS = ".!?" + _FULL_WIDTH_STOPS
_SENTENCE_END = re.compile(rf"(?<=[.!?])\s+|(?<=[{_FULL_WIDTH_STOPS}])\s*|\n+")


@dataclass(frozen=True, slots=True)
class FoldPolicy:
    """What a fold does, all in one place.

    Half-lives are in seconds. An importance at or above ``long_term_from`` is
    long-term, at or above ``permanent_from`` permanent, below
    ``short_term_from`` working memory, and short-term in between. By default
    a memory stored at the default importance (0.5) is long-term: with
    ``prune_below`` at 0.05 it is archived after about four idle years, while
    short-term memories go after about a month and working memory within a
    week.

    Raises:
        InvalidInput: a field is out of range.
    """

    working_half_life: float = 1 * _DAY
    short_term_half_life: float = 7 * _DAY
    long_term_half_life: float = 365 * _DAY
    short_term_from: float = 0.3
    long_term_from: float = 0.5
    permanent_from: float = 0.95
    #: Half-life multiplier for each fully spaced reinforcement (1: no spacing effect).
    spacing_factor: float = 2.0
    #: Archive records whose decayed strength is below this (0: never prune).
    prune_below: float = 0.05
    #: Cosine similarity at or above which two records may fold together.
    similarity: float = 0.85
    #: Share of their distinct words (Jaccard) two records must also have in
    #: common to fold together (0: vectors alone decide).
    word_overlap: float = 0.5
    #: Added to the highest member importance of a folded record.
    importance_boost: float = 0.1
    #: The longest summary a folded record gets, in characters.
    summary_max_chars: int = 2_000
    #: Fold automatically after this many stores (0: never).
    auto_fold_every: int = 0
    #: Fold automatically once the store file passes this many bytes (0: never).
    auto_fold_bytes: int = 0
    #: Find near-duplicates by comparing every pair of records within a domain
    #: instead of by the candidate search. Both find the same links (but for a
    #: pair the buckets of a large residue may miss, see ``fold/lsh.py``); this is
    #: the reference the candidate search is checked against, and it takes
    #: time growing with the square of a domain's size. It implies a full fold.
    exhaustive: bool = False
    #: A memory that cites code expires once it has been neither used nor
    #: verified for this many days (0: never): it then decays faster, and a
    #: fold archives it as ``stale`` when its citations are stale.
    cite_expiry_days: float = 28.0
    #: An expired memory's half-life is divided by this (1: no faster decay).
    cite_expiry_factor: float = 4.0

    def __post_init__(self) -> None:
        for name in ("working_half_life", "short_term_half_life", "long_term_half_life"):
            value = getattr(self, name)
            if not _number(value) or not 0 < value < math.inf:
                raise InvalidInput(f"{name} must be a positive number of seconds, got {value!r}")
        for name in (
            "short_term_from",
            "long_term_from",
            "permanent_from",
            "prune_below",
            "similarity",
            "word_overlap",
            "importance_boost",
        ):
            value = getattr(self, name)
            if not _number(value) or not 0.0 <= value <= 1.0:
                raise InvalidInput(f"{name} must be a number from 0 to 1, got {value!r}")
        if not self.short_term_from <= self.long_term_from <= self.permanent_from:
            raise InvalidInput(
                "tier thresholds must rise: short_term_from <= long_term_from <= permanent_from, "
                f"got {self.short_term_from}, {self.long_term_from}, {self.permanent_from}"
            )
        if self.similarity == 0.0:
            raise InvalidInput("similarity must be above 0, or every record would fold together")
        if not _number(self.spacing_factor) or not 1.0 <= self.spacing_factor <= 100.0:
            raise InvalidInput(
                f"spacing_factor must be from 1 (no spacing effect) to 100, "
                f"got {self.spacing_factor!r}"
            )
        for name in ("summary_max_chars", "auto_fold_every", "auto_fold_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInput(f"{name} must be a whole number >= 0, got {value!r}")
        if not _number(self.cite_expiry_days) or not 0 <= self.cite_expiry_days < math.inf:
            raise InvalidInput(
                f"cite_expiry_days must be a number of days >= 0 (0: never), "
                f"got {self.cite_expiry_days!r}"
            )
        if not _number(self.cite_expiry_factor) or not 1.0 <= self.cite_expiry_factor <= 100.0:
            raise InvalidInput(
                f"cite_expiry_factor must be from 1 (no faster decay) to 100, "
                f"got {self.cite_expiry_factor!r}"
            )
        if not isinstance(self.exhaustive, bool):
            raise InvalidInput(f"exhaustive must be True or False, got {self.exhaustive!r}")
        if self.summary_max_chars < 80:
            raise InvalidInput(
                f"summary_max_chars must be at least 80, got {self.summary_max_chars}"
            )

    @property
    def cite_expiry_s(self) -> float:
        """:attr:`cite_expiry_days` in seconds; ``inf`` when memories never expire."""
        return self.cite_expiry_days * _DAY if self.cite_expiry_days > 0 else math.inf

    def base_half_life(self, tier: str) -> float:
        """The half-life of a tier before spacing; ``inf`` for permanent."""
        return {
            "working": self.working_half_life,
            "short_term": self.short_term_half_life,
            "long_term": self.long_term_half_life,
        }.get(tier, math.inf)


def _number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and not math.isnan(value)


def tier_of(policy: FoldPolicy, importance: float, label: object = None) -> str:
    """A record's tier: ``label`` (from ``metadata["tier"]``) when valid, else by importance."""
    if isinstance(label, str) and label in TIERS:
        return label
    if importance >= policy.permanent_from:
        return "permanent"
    if importance >= policy.long_term_from:
        return "long_term"
    if importance >= policy.short_term_from:
        return "short_term"
    return "working"


def half_life(
    policy: FoldPolicy,
    tier: str,
    created_at: float,
    accessed_at: float,
    access_count: int,
) -> float:
    """The half-life in seconds, lengthened by spaced reinforcement.

    The spaced reinforcements are ``min(access_count, span / base)``, where the
    span runs from creation to the last reinforcement: ten reinforcements in
    one minute count as almost none, one after a full half-life counts as one.
    """
    base = policy.base_half_life(tier)
    if math.isinf(base):
        return base
    span = max(accessed_at - created_at, 0.0)
    spaced = min(float(access_count), span / base, _MAX_SPACED)
    return float(base * policy.spacing_factor**spaced)


def decay_terms(
    policy: FoldPolicy,
    importance: float,
    tier_label: object,
    created_at: float,
    accessed_at: float,
    access_count: int,
    strength_at: float | None,
) -> tuple[float, float]:
    """When a record's strength was last set, and its half-life: what decay needs."""
    tier = tier_of(policy, importance, tier_label)
    half = half_life(policy, tier, created_at, accessed_at, access_count)
    since = accessed_at if strength_at is None else max(accessed_at, strength_at)
    return since, half


def decay_columns(
    policy: FoldPolicy,
    importance: Sequence[float],
    tier_labels: Sequence[object],
    created_at: Sequence[float],
    accessed_at: Sequence[float],
    access_count: Sequence[int],
    strength_at: Sequence[float | None] | npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """:func:`decay_terms` for many records at once, with the same values.

    A record never reinforced after its creation keeps its tier's base
    half-life exactly; only the others go through :func:`half_life` one by one.
    """
    weight = np.asarray(importance, dtype=np.float64)
    accessed = np.asarray(accessed_at, dtype=np.float64)
    base = np.select(
        [
            weight >= policy.permanent_from,
            weight >= policy.long_term_from,
            weight >= policy.short_term_from,
        ],
        [math.inf, policy.long_term_half_life, policy.short_term_half_life],
        default=policy.working_half_life,
    )
    labelled = [i for i, label in enumerate(tier_labels) if label is not None]
    for i in labelled:
        base[i] = policy.base_half_life(tier_of(policy, float(weight[i]), tier_labels[i]))
    half = base.copy()
    spaced = (
        np.isfinite(base)
        & (np.asarray(access_count, dtype=np.float64) > 0)
        & (accessed > np.asarray(created_at, dtype=np.float64))
    )
    for i in np.flatnonzero(spaced).tolist():
        tier = tier_of(policy, float(weight[i]), tier_labels[i])
        half[i] = half_life(policy, tier, created_at[i], accessed_at[i], access_count[i])
    set_at = np.asarray(strength_at, dtype=np.float64)  # None as NaN
    return np.fmax(accessed, set_at), half


def effective_strength(strength: float, reinforced_at: float, half: float, now: float) -> float:
    """``strength * 0.5 ** ((now - reinforced_at) / half)``; never grows."""
    elapsed = max(now - reinforced_at, 0.0)
    return float(strength * 2.0 ** (-elapsed / half))


# -- snapshot -------------------------------------------------------------------
# ``Snapshot`` (from storage.archive) holds the live records as columns.


def fold_groups(snapshot: Snapshot) -> Sequence[str]:
    """The key two records must share to fold together: their scope and domain.

    Every step that pairs records (the candidate search, the exhaustive
    screen, an incremental fold's look-up) groups them by this key alone, so
    a fold never merges across scopes or domains. A NUL joins the two, which
    neither a scope name nor a label holds.
    """
    return list(map("\x00".join, zip(snapshot.scopes, snapshot.domains)))


# -- plan -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Merge:
    """One folded record to create from ``member_ids`` (most representative first)."""

    member_ids: tuple[str, ...]
    domain: str
    subdomain: str
    tags: tuple[str, ...]
    content: str
    importance: float
    strength: float
    access_count: int
    vector: npt.NDArray[np.float32]
    metadata: dict[str, Any]
    instance_key: str
    scope: str = "global"


@dataclass(frozen=True, slots=True)
class FoldPlan:
    """What a fold will do; applying it is the engine's job.

    ``marks`` are the prune moments (see :func:`prune_moments`) of the
    records the plan keeps, for the store's ``fold_marks``; ``unmarked`` the
    records whose moments go. ``held`` are the members of the groups left
    unmerged this time (``apart``), which the next fold screens again.
    """

    now: float
    records: int
    decayed: tuple[tuple[str, float], ...]
    pruned: tuple[tuple[str, float], ...]
    merges: tuple[Merge, ...]
    marks: tuple[tuple[str, float], ...] = ()
    unmarked: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    #: Expired memories about code whose citations are stale, to archive as
    #: ``stale``, by id, with a detail naming the stale citation.
    stale: tuple[tuple[str, str], ...] = ()
    #: The numbers of distinct words the planned records have, by group key
    #: (see :func:`fold_groups`), each group's sorted; None when the plan
    #: did not count words (the exhaustive screen, no word rule).
    word_sizes: Mapping[str, tuple[int, ...]] | None = None


@dataclass(frozen=True, slots=True)
class FoldReport:
    """What a fold did (or, with ``dry_run``, would do).

    Attributes:
        decayed: surviving records whose stored strength was lowered to its
            decayed value (a full fold only).
        pruned: records archived because their decayed strength fell below the
            policy's ``prune_below``.
        clustered: clusters of two or more records found.
        folded: records archived as members of a new folded record.
        created: folded records created.
        incremental: the fold screened only the records new or changed since
            the last fold (see :meth:`.MemoryEngine.fold`).
        screened: records screened for near-duplicates: every live record in
            a full fold, the new and changed ones in an incremental fold.
        pruned_ids, created_ids, folded_from: the records involved, for
            explanation; each list holds at most ``MAX_REPORTED`` entries.
        summaries: each created record's content, by its id.
        pruned_strengths: each pruned record's decayed strength, by its id.
        stale: memories about code archived (reason ``stale``) because they
            expired (neither used nor verified for the policy's
            ``cite_expiry_days``) and a citation is stale.
        stale_ids, stale_details: those records (at most ``MAX_REPORTED``),
            and the stale citation each names, by its id.
    """

    dry_run: bool
    now: float
    records_before: int
    records_after: int
    decayed: int
    pruned: int
    clustered: int
    folded: int
    created: int
    bytes_before: int
    bytes_after: int
    duration_s: float
    pruned_ids: tuple[str, ...] = ()
    created_ids: tuple[str, ...] = ()
    folded_from: dict[str, tuple[str, ...]] = field(default_factory=dict)
    summaries: dict[str, str] = field(default_factory=dict)
    pruned_strengths: dict[str, float] = field(default_factory=dict)
    incremental: bool = False
    screened: int = 0
    stale: int = 0
    stale_ids: tuple[str, ...] = ()
    stale_details: dict[str, str] = field(default_factory=dict)


#: The most ids a report lists per kind.
MAX_REPORTED = 100


def effective_columns(
    snapshot: Snapshot, policy: FoldPolicy, now: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Every row's strength decayed to ``now``, with when it was set and its half-life."""
    since, half = decay_columns(
        policy,
        snapshot.importance,  # type: ignore[arg-type]
        snapshot.tiers,
        snapshot.created_at,  # type: ignore[arg-type]
        snapshot.accessed_at,  # type: ignore[arg-type]
        snapshot.access_count,  # type: ignore[arg-type]
        snapshot.strength_at,
    )
    elapsed = np.maximum(now - since, 0.0)
    return snapshot.strength * np.exp2(-elapsed / half), since, half


def prune_moments(
    strength: npt.NDArray[np.float64],
    since: npt.NDArray[np.float64],
    half: npt.NDArray[np.float64],
    prune_below: float,
) -> npt.NDArray[np.float64]:
    """When each strength decays below ``prune_below``; NaN for never.

    ``strength * 2 ** (-(t - since) / half) < prune_below`` holds from
    ``since + half * log2(strength / prune_below)`` on; a strength already
    below the threshold is due at any time (``-inf``). Permanent records
    (an infinite half-life) and a threshold of 0 never fade out.
    """
    out = np.full(len(strength), np.nan, dtype=np.float64)
    if prune_below <= 0:
        return out
    finite = np.isfinite(half)
    below = finite & (strength < prune_below)
    fading = finite & ~below
    out[below] = -np.inf
    out[fading] = since[fading] + half[fading] * np.log2(strength[fading] / prune_below)
    return out


def prune_moment(strength: float, since: float, half: float, prune_below: float) -> float:
    """:func:`prune_moments` for one record, to the last bit (numpy's ``log2`` for both)."""
    if prune_below <= 0 or not math.isfinite(half):
        return math.nan
    if strength < prune_below:
        return -math.inf
    return since + half * float(np.log2(strength / prune_below))


def expiry_moments(
    record_ids: Sequence[str], expires: Mapping[str, float] | None
) -> npt.NDArray[np.float64] | None:
    """When each record expired or expires (``inf``: never); None when none ever does."""
    if not expires:
        return None
    knee = np.fromiter(
        (expires.get(rid, math.inf) for rid in record_ids), dtype=np.float64, count=len(record_ids)
    )
    return knee if bool(np.isfinite(knee).any()) else None


def expired_strengths(
    effective: npt.NDArray[np.float64],
    strength: npt.NDArray[np.float64],
    since: npt.NDArray[np.float64],
    half: npt.NDArray[np.float64],
    knee: npt.NDArray[np.float64],
    now: float,
    factor: float,
) -> npt.NDArray[np.float64]:
    """``effective`` with the records expired by ``now`` decayed faster since they expired.

    A record's strength halves every ``half`` until ``knee`` (when it
    expired), then every ``half / factor``:
    ``strength * 2 ** (-(start - since) / half - (now - start) * factor / half)``
    with ``start = max(knee, since)``. The other rows are returned untouched,
    to the last bit.
    """
    start = np.maximum(knee, since)
    rows = np.flatnonzero(np.isfinite(knee) & (now > start))
    if not len(rows):
        return effective
    out: npt.NDArray[np.float64] = effective.copy()
    h, s0, at = half[rows], since[rows], start[rows]
    out[rows] = strength[rows] * np.exp2(-(at - s0) / h - (now - at) * factor / h)
    return out


def prune_moments_expiring(
    moments: npt.NDArray[np.float64],
    strength: npt.NDArray[np.float64],
    since: npt.NDArray[np.float64],
    half: npt.NDArray[np.float64],
    knee: npt.NDArray[np.float64],
    prune_below: float,
    factor: float,
) -> npt.NDArray[np.float64]:
    """:func:`prune_moments` (``moments``) moved earlier for the records that expire
    first: past ``knee`` their strength halves every ``half / factor``. The other
    rows are returned untouched."""
    rows = np.flatnonzero(np.isfinite(knee) & np.isfinite(moments) & (moments > knee))
    if not len(rows) or prune_below <= 0:
        return moments
    out: npt.NDArray[np.float64] = moments.copy()
    h, s0 = half[rows], since[rows]
    at = np.maximum(knee[rows], s0)
    left = strength[rows] * np.exp2(-(at - s0) / h)
    with np.errstate(divide="ignore"):
        out[rows] = at + h / factor * np.log2(np.maximum(left, 1e-300) / prune_below)
    return out


def stored_prune_moments(
    policy: FoldPolicy, rows: Sequence[StoredRow]
) -> tuple[list[tuple[str, float]], list[str]]:
    """The prune moments of rows as they are written: ``(marks, unmarked ids)``.

    The same moments a fold computes from the same columns (see
    :func:`plan_fold`), so that a store can keep them from the moment it
    writes a record and a later full fold finds them already in place.
    ``unmarked`` are the rows that never fade out (no moment).
    """
    if not rows:
        return [], []
    records = [row.record for row in rows]
    labels = [r.metadata.get("tier") for r in records]
    expiring = math.isfinite(policy.cite_expiry_s) and any(
        r.metadata.get(CITES_KEY) for r in records
    )
    # One store: the same arithmetic without the columns' overhead.
    if len(rows) == 1 and not expiring:
        r, label = records[0], labels[0]
        set_at, lasts = decay_terms(
            policy, r.importance, label if isinstance(label, str) else None,
            r.created_at, r.accessed_at, r.access_count, rows[0].strength_at,
        )  # fmt: skip
        at = prune_moment(r.strength, set_at, lasts, policy.prune_below)
        return ([], [r.record_id]) if math.isnan(at) else ([(r.record_id, at)], [])
    since, half = decay_columns(
        policy,
        [r.importance for r in records],
        [label if isinstance(label, str) else None for label in labels],
        [r.created_at for r in records],
        [r.accessed_at for r in records],
        [r.access_count for r in records],
        [row.strength_at for row in rows],
    )
    strength = np.array([r.strength for r in records], dtype=np.float64)
    found = prune_moments(strength, since, half, policy.prune_below)
    if expiring:
        # A memory about code stored now expires cite_expiry_days after its last use.
        knee = np.array(
            [
                r.accessed_at + policy.cite_expiry_s if r.metadata.get(CITES_KEY) else math.inf
                for r in records
            ],
            dtype=np.float64,
        )
        found = prune_moments_expiring(
            found, strength, since, half, knee, policy.prune_below, policy.cite_expiry_factor
        )
    moments = found.tolist()
    marks = [(r.record_id, at) for r, at in zip(records, moments) if not math.isnan(at)]
    unmarked = [r.record_id for r, at in zip(records, moments) if math.isnan(at)]
    return marks, unmarked


def prune_margin(now: float) -> float:
    """How far past ``now`` a stored prune moment still counts as due.

    It covers the moment's rounding; the decayed strength then decides.
    """
    return 1.0 + 1e-9 * abs(now)


def plan_fold(
    snapshot: Snapshot,
    policy: FoldPolicy,
    now: float,
    *,
    incremental: bool = False,
    step: PlanStep | None = None,
    apart: frozenset[str] = frozenset(),
    kept_apart: Sequence[frozenset[str]] = (),
    expires: Mapping[str, float] | None = None,
    stale: Sequence[tuple[str, str]] = (),
) -> FoldPlan:
    """Decide what a fold does: decay, prune, cluster and merge. Reads nothing else.

    A group that holds any record in ``apart`` is left unmerged this time. No
    merge holds two records of one group of ``kept_apart`` (what unfolds
    recorded); each may still merge with other records.

    A full plan sees every live record. An incremental one sees the records
    new or changed since the last fold, every record they might fold with and
    the records due for pruning: by the invariant that a fold leaves no two
    live records linked, these hold every link of the store, so it finds the
    same merges a full plan would. It writes back no decayed strengths.

    ``expires`` says when each memory that cites code expires (see the
    module's *Expiry*): past that moment its strength decays
    ``cite_expiry_factor`` times faster. ``stale`` are the expired memories
    whose citations are stale, ``(id, detail)``: the plan archives them (they
    need not be in the snapshot) and neither prunes nor merges them.
    """
    n = len(snapshot)
    effective, since, half = effective_columns(snapshot, policy, now)
    knee = expiry_moments(snapshot.record_ids, expires)
    if knee is not None:
        effective = expired_strengths(
            effective, snapshot.strength, since, half, knee, now, policy.cite_expiry_factor
        )
    stale = tuple(sorted(dict(stale).items()))
    stale_mask = np.zeros(n, dtype=bool)
    if stale:
        gone_stale = {rid for rid, _ in stale}
        stale_mask[[i for i, rid in enumerate(snapshot.record_ids) if rid in gone_stale]] = True
    pruned_mask = np.isfinite(half) & (effective < policy.prune_below) & ~stale_mask
    ranks = snapshot.id_ranks()
    pruned_rows = np.flatnonzero(pruned_mask)
    pruned_rows = pruned_rows[np.argsort(ranks[pruned_rows], kind="stable")]
    pruned = tuple((snapshot.record_ids[i], float(effective[i])) for i in pruned_rows.tolist())
    if step is not None:
        step("finding candidates")
    keys = fold_groups(snapshot)
    counted: list[npt.NDArray[np.signedinteger[Any]]] = []
    groups = cluster(
        keys,
        snapshot.subdomains,
        snapshot.tags,
        snapshot.vectors,
        snapshot.has_vector & ~pruned_mask & ~stale_mask,
        policy.similarity,
        contents=snapshot.contents,
        word_overlap=policy.word_overlap,
        exhaustive=policy.exhaustive,
        ranks=ranks,
        step=step,
        apart=_positions_of(snapshot, kept_apart),
        word_counts=counted.append,
    )
    held: tuple[str, ...] = ()
    if apart:
        ids = snapshot.record_ids
        skipped = [g for g in groups if not apart.isdisjoint(ids[i] for i in g)]
        held = tuple(sorted(ids[i] for g in skipped for i in g))
        groups = [g for g in groups if apart.isdisjoint(ids[i] for i in g)]
    means = _mean_vectors(groups, snapshot.vectors, effective)
    merges = tuple(
        _merge(snapshot, members, mean, effective, policy, now)
        for members, mean in zip(groups, means)
    )
    gone = pruned_mask | stale_mask
    for members in groups:
        gone[members] = True
    kept = np.flatnonzero(~gone)
    kept = kept[np.argsort(ranks[kept], kind="stable")]
    decayed: list[tuple[str, float]] = []
    if not incremental:
        lowered = kept[effective[kept] < snapshot.strength[kept] * (1.0 - _PERSIST_SHARE)]
        decayed = [(snapshot.record_ids[i], float(effective[i])) for i in lowered.tolist()]
    moments = prune_moments(snapshot.strength, since, half, policy.prune_below)
    if knee is not None:
        moments = prune_moments_expiring(
            moments, snapshot.strength, since, half, knee, policy.prune_below,
            policy.cite_expiry_factor,
        )  # fmt: skip
    ids = snapshot.record_ids
    marked = kept[~np.isnan(moments[kept])]
    marks = tuple(zip([ids[i] for i in marked.tolist()], moments[marked].tolist()))
    unmarked = tuple(ids[i] for i in np.flatnonzero(gone).tolist())
    unmarked += tuple(ids[i] for i in kept[np.isnan(moments[kept])].tolist())
    return FoldPlan(
        now=now,
        records=n,
        decayed=tuple(decayed),
        pruned=pruned,
        merges=merges,
        marks=marks,
        unmarked=unmarked,
        held=held,
        stale=stale,
        word_sizes=_sizes_by_group(keys, counted[0]) if counted else None,
    )


def _sizes_by_group(
    keys: Sequence[str], sizes: npt.NDArray[np.signedinteger[Any]]
) -> dict[str, tuple[int, ...]]:
    """The distinct values of ``sizes`` within each group key, sorted."""
    table = {key: code for code, key in enumerate(dict.fromkeys(keys))}
    codes = np.fromiter(map(table.__getitem__, keys), dtype=np.int64, count=len(keys))
    width = int(sizes.max()) + 1 if len(sizes) else 1
    pairs = np.unique(codes * width + sizes.astype(np.int64))
    names = list(table)
    found: dict[str, list[int]] = {}
    for code, size in zip((pairs // width).tolist(), (pairs % width).tolist()):
        found.setdefault(names[code], []).append(size)
    return {key: tuple(values) for key, values in found.items()}


# -- merge ----------------------------------------------------------------------


def _positions_of(snapshot: Snapshot, groups: Sequence[frozenset[str]]) -> list[list[int]]:
    """Each group's records in the snapshot, as row positions; groups of fewer than two go."""
    wanted = set().union(*groups) if groups else set()
    if not wanted:
        return []
    where = {rid: i for i, rid in enumerate(snapshot.record_ids) if rid in wanted}
    found = [sorted(where[rid] for rid in group if rid in where) for group in groups]
    return [rows for rows in found if len(rows) > 1]


def _mean_vectors(
    groups: Sequence[list[int]],
    unit_vectors: UnitVectors,
    effective: npt.NDArray[np.float64],
) -> list[npt.NDArray[np.float32]]:
    """Each cluster's strength-weighted mean direction, all clusters at once."""
    if not groups:
        return []
    flat = np.fromiter(itertools.chain.from_iterable(groups), dtype=np.int64)
    sizes = np.fromiter((len(g) for g in groups), dtype=np.int64, count=len(groups))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    weights = np.maximum(effective[flat], 1e-6).astype(np.float32)
    firsts = unit_vectors[flat[starts]]
    # Member by member across all clusters: a few large gathers, where a
    # reduction over one (members x dim) matrix would leave the CPU caches.
    sums = firsts * weights[starts, None]
    for position in range(1, int(sizes.max())):
        longer = np.flatnonzero(sizes > position)
        at = starts[longer] + position
        sums[longer] += unit_vectors[flat[at]] * weights[at, None]
    norms = np.linalg.norm(sums, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(norms[:, None] > 0, sums / norms[:, None], firsts)
    return list(means.astype(np.float32))


def _merge(
    snapshot: Snapshot,
    members: list[int],
    vector: npt.NDArray[np.float32],
    effective: npt.NDArray[np.float64],
    policy: FoldPolicy,
    now: float,
) -> Merge:
    idx = np.asarray(members, dtype=np.int64)
    representative = snapshot.vectors[idx] @ vector
    ids = snapshot.record_ids
    order = sorted(range(len(members)), key=lambda k: (-float(representative[k]), ids[members[k]]))
    ordered = [members[k] for k in order]
    subdomains = Counter(snapshot.subdomains[i] for i in ordered)
    top = max(subdomains.values())
    subdomain = next(
        snapshot.subdomains[i] for i in ordered if subdomains[snapshot.subdomains[i]] == top
    )
    tags = tuple(sorted({FOLDED_TAG, *(t for i in ordered for t in snapshot.tags[i])}))
    highest = max(
        TIERS.index(tier_of(policy, float(snapshot.importance[i]), snapshot.tiers[i]))
        for i in members
    )
    promoted = TIERS[highest] if TIERS[highest] == "permanent" else TIERS[min(highest + 1, 2)]
    member_ids = tuple(ids[i] for i in ordered)
    digest = hashlib.blake2b("\x1f".join(sorted(member_ids)).encode(), digest_size=16)
    return Merge(
        member_ids=member_ids,
        domain=snapshot.domains[ordered[0]],
        subdomain=subdomain,
        tags=tags,
        content=summarise([snapshot.contents[i] for i in ordered], policy.summary_max_chars),
        importance=min(
            1.0, max(float(snapshot.importance[i]) for i in ordered) + policy.importance_boost
        ),
        strength=float(min(1.0, 1.0 - np.prod(1.0 - effective[idx]))),
        access_count=int(sum(int(snapshot.access_count[i]) for i in ordered)),
        vector=vector,
        metadata={"folded_at": now, "folded_from": list(member_ids), "tier": promoted},
        instance_key=f"folded:{digest.hexdigest()}",
        scope=snapshot.scopes[ordered[0]],
    )


def summarise(contents: Sequence[str], max_chars: int) -> str:
    """An extractive summary: distinct sentences in the given order, within ``max_chars``.

    A sentence is left out when it says again what an earlier one of the
    summary says: its :func:`sentence_words` are all among an earlier
    sentence's, or overlap them by ``SAME_SENTENCE`` or more (Jaccard, each
    word as often as the sentence says it). The first sentence to say it
    stays. The members stay whole in the archive.
    """
    summary = ""
    seen: list[Counter[str]] = []
    distinct: set[frozenset[tuple[str, int]]] = set()
    for content in contents:
        for raw in _SENTENCE_END.split(content):
            sentence = " ".join(raw.split())
            if not sentence:
                continue
            words = sentence_words(sentence)
            key = frozenset(words.items())
            # The same words again overlap fully; only new word sets need comparing.
            if key in distinct or any(_says_again(words, other) for other in seen):
                continue
            if sentence[-1] not in _SENTENCE_STOPS:
                sentence += "."
            if not summary:
                summary = sentence[:max_chars]
            else:
                # No space after a full-width stop, as Chinese and Japanese are written.
                gap = "" if summary[-1] in _FULL_WIDTH_STOPS else " "
                if len(summary) + len(gap) + len(sentence) > max_chars:
                    return summary
                summary += gap + sentence
            seen.append(words)
            distinct.add(key)
    return summary


#: Two sentences whose :func:`sentence_words` overlap at least this much
#: (Jaccard) say the same thing; a fold's summary keeps the first. Higher than
#: the records' ``word_overlap`` (0.5): "Deploys run on Fridays" and "Deploys
#: run on Thursdays" share three of five such words (0.6) and say different things.
SAME_SENTENCE = 0.7

#: Stop words that change what a sentence says, kept among its words.
_MEANINGFUL = frozenset(
    ("no", "nor", "not", "only", "before", "after", "against", "off", "on", "up", "down",
     "more", "most", "few", "over", "under", "out", "all")
)  # fmt: skip


def sentence_words(sentence: str) -> Counter[str]:
    """The words a summary compares sentences by, each as often as the sentence says it.

    Lower-cased words (character pairs for scripts written without spaces, as
    :func:`word_set` splits them) without stop words (those of
    :data:`_MEANINGFUL`, such as ``not``, stay) and without a plural ``s``. A
    sentence of stop words only keeps them all.
    """
    words = _word_list(sentence)
    content = [w for w in words if w not in STOPWORDS or w in _MEANINGFUL]
    return Counter(_singular(w) for w in (content or words))


def _word_list(sentence: str) -> list[str]:
    """``sentence``'s words as :func:`word_set` splits them, each as often as it occurs."""
    lowered = sentence.lower()
    words = WORD.findall(UNSEGMENTED_RUN.sub(" ", lowered))
    for run in UNSEGMENTED_RUN.findall(lowered):
        words.extend(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
    return words


def _singular(word: str) -> str:
    """``word`` without a plural ``s``: tests, deploys; not class, bus or is."""
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _says_again(words: Counter[str], earlier: Counter[str]) -> bool:
    """Whether a sentence of ``words`` says nothing that one of ``earlier`` did not."""
    if not words:
        return False
    shared = (words & earlier).total()
    return shared == words.total() or shared / (words | earlier).total() >= SAME_SENTENCE
