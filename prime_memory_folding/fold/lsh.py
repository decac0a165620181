"""Candidates among records made mostly of common words: bucketed, not compared pairwise.

A record whose words are mostly common within its group (the residue of the
candidate search, see :func:`~prime_memory_folding.fold.links.linked_pairs`)
can overlap with another such record through common words alone, so the join
on rare words cannot find its links. Within a group whose residue is small
(``EXACT_RESIDUE`` records or fewer) every pair is screened, as before; in a
larger one the residue goes through three steps:

1. **Sizes (exact).** Two records overlapping by ``t`` (Jaccard) have sizes
   within a factor ``t`` of each other, and share only words that another
   residue record of the group holds too. A record whose shareable words
   ``s`` bound the sizes it could overlap with (``|y| <= s (1 + t) / t -
   |x|``) to a range where no residue record of its group lies has no link
   among them, and drops out: records such as ``item 123``, a common word
   and a number of their own, all go here.
2. **MinHash bands (probabilistic).** Each record left gets ``BANDS`` bands of
   ``ROWS`` min-hashes of its words (32-bit hashes of the words' numbers
   within the residue, so that they depend on the words, not on the order
   of the records). Two records whose words overlap by ``J`` share one band
   with probability ``1 - (1 - J**ROWS)**BANDS``: at the default
   ``word_overlap`` of 0.5 that is 0.984, at 0.6 above 0.9998, while two
   records overlapping by 0.05 meet with odds of 4 in 10,000. A bucket of
   more than ``BUCKET_ROWS`` records is split by the signs of the records'
   vectors on random hyperplanes (four at a time, up to four times), so that
   records sharing every common word but not their meaning do not all meet;
   a split keeps a pair at cosine ``c`` together with probability
   ``(1 - acos(c) / pi) ** 4``.
3. **Signs (probabilistic).** A pair met is kept only when its vectors'
   signs on ``SIGN_BITS`` random hyperplanes differ in no more than
   :func:`sign_limit` of them, which drops a pair at the similarity threshold
   with odds of about one in a million.

Every pair kept goes on to the exact checks (cosine, labels, word overlap).
The seeds are fixed: the same records give the same candidates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..core.words import distinct, word_table
from ..storage.archive import UnitVectors

__all__ = [
    "BANDS",
    "BUCKET_ROWS",
    "EXACT_RESIDUE",
    "ROWS",
    "SIGN_BITS",
    "band_recall",
    "pairs_in_runs",
    "residue_candidates",
    "sign_limit",
]

#: A group's residue of at most this many records is screened pairwise (exact).
EXACT_RESIDUE = 2_048
#: MinHash bands per record, and min-hashes per band.
BANDS = 64
ROWS = 4
#: Hyperplane signs kept per vector.
SIGN_BITS = 128
#: A bucket of more records than this is split by the signs of their vectors.
BUCKET_ROWS = 64
#: Hyperplane signs added per split, and splits at most.
_SPLIT_BITS = 4
_SPLITS = 4
_SEED = 0x5EED_F01D
#: Word entries hashed at once, to keep temporaries small.
_ENTRY_SLICE = 1 << 15

Ints = npt.NDArray[np.int64]


def band_recall(overlap: float, rows: int = ROWS, bands: int = BANDS) -> float:
    """The probability that two records overlapping by ``overlap`` share a band."""
    return float(1.0 - (1.0 - overlap**rows) ** bands)


def residue_candidates(
    group_of: Ints,
    contents: Sequence[str],
    residue: npt.NDArray[np.bool_],
    overlap: float,
    unit_vectors: UnitVectors,
    threshold: float,
) -> tuple[Ints, npt.NDArray[np.bool_]]:
    """Candidate pair codes ``low * n + high`` among the residue of large groups,
    and the rows of small groups' residue, which are screened pairwise instead."""
    n = len(group_of)
    rows = np.flatnonzero(residue)
    per_group = np.bincount(group_of[rows], minlength=int(group_of.max()) + 1 if n else 1)
    large = per_group[group_of[rows]] > EXACT_RESIDUE
    screened = np.zeros(n, dtype=bool)
    screened[rows[~large]] = True
    rows = rows[large]
    if len(rows) < 2:
        return np.zeros(0, dtype=np.int64), screened
    local, numbers, hashes, sizes = _word_hashes([contents[i] for i in rows.tolist()])
    groups = group_of[rows]
    keep = _may_overlap(groups, local, numbers, sizes, overlap)
    del numbers
    rows, groups, sizes = rows[keep], groups[keep], sizes[keep]
    take = keep[local]
    renumber = np.cumsum(keep) - 1
    local, hashes = renumber[local[take]], hashes[take]
    if len(rows) < 2:
        return np.zeros(0, dtype=np.int64), screened
    m = len(rows)
    signs = _signs(unit_vectors, rows)
    # Each 64 signs in a flat array of its own: a pair's test gathers from each.
    columns = [np.ascontiguousarray(signs[:, k]) for k in range(signs.shape[1])]
    limit = sign_limit(threshold)
    found: list[Ints] = []
    for band in range(BANDS):
        key = _band_keys(local, hashes, m, band)
        key ^= groups.astype(np.uint64) * np.uint64(0xD6E8FEB86659FD93)
        codes = _bucket_pairs(key, signs, band, m)
        a, b = np.divmod(codes, m)
        differ = sum(_popcount(column[a] ^ column[b]) for column in columns)
        # Keys of two groups may meet by chance; the group is part of the rule.
        near = (differ <= limit) & (groups[a] == groups[b])
        found.append(codes[near])
        if band % 8 == 7:
            found = [distinct(np.concatenate(found))]
    codes = distinct(np.concatenate(found))
    a, b = rows[codes // m], rows[codes % m]
    return a * n + b, screened


def sign_limit(threshold: float) -> int:
    """The most of ``SIGN_BITS`` hyperplane signs two vectors this alike differ in, but for
    odds below one in a million: a pair differing in more is no candidate.

    Two unit vectors at cosine ``c`` fall on opposite sides of a random
    hyperplane with probability ``acos(c) / pi``; the limit lies five
    standard deviations above the mean count at the threshold.
    """
    p = math.acos(min(max(threshold, -1.0), 1.0)) / math.pi
    return min(SIGN_BITS, math.ceil(SIGN_BITS * p + 5 * math.sqrt(SIGN_BITS * p * (1 - p))))


_BYTE_BITS = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def _popcount(values: npt.NDArray[np.uint64]) -> Ints:
    """Set bits of each 64-bit value (``values`` of any shape)."""
    count = getattr(np, "bitwise_count", None)  # numpy 2 and later
    if count is not None:
        counted: Ints = count(values).astype(np.int64)
        return counted
    bytes_ = np.ascontiguousarray(values).view(np.uint8)
    found: Ints = _BYTE_BITS[bytes_].reshape(*values.shape, 8).sum(axis=-1, dtype=np.int64)
    return found


def _word_hashes(contents: list[str]) -> tuple[Ints, Ints, npt.NDArray[np.uint32], Ints]:
    """Each content's distinct words as ``(row, number, hash)`` by row, and how many each has.

    The hash is a 32-bit mix of the word's number (see
    :func:`~prime_memory_folding.core.words.word_table`), which the words
    themselves set, not the order of the records.
    """
    offsets, numbers = word_table(contents)
    sizes: Ints = np.diff(offsets)
    rows: Ints = np.repeat(np.arange(len(contents), dtype=np.int64), sizes)
    with np.errstate(over="ignore"):
        mixed = numbers.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        mixed ^= mixed >> np.uint64(31)
        mixed *= np.uint64(0xBF58476D1CE4E5B9)
    return rows, numbers, (mixed >> np.uint64(32)).astype(np.uint32), sizes


def _may_overlap(
    groups: Ints, local: Ints, numbers: Ints, sizes: Ints, overlap: float
) -> npt.NDArray[np.bool_]:
    """Which records have another of their group within the sizes they could overlap with.

    ``J(x, y) >= t`` needs ``t |x| <= |y| <= |x| / t``, and, as the shared
    words ``o`` are at most the words of ``x`` that another record of the
    group holds (``s``), ``|y| <= o (1 + t) / t - |x| <= s (1 + t) / t - |x|``.
    """
    m = len(sizes)
    # A word is shareable when another record of the group holds it too.
    _, group = np.unique(groups, return_inverse=True)
    width = int(numbers.max()) + 1 if len(numbers) else 1
    key = group[local] * width + numbers
    if (int(group.max()) + 1) * width <= 4 * len(key) + 1_024:
        held = np.bincount(key)[key]
    else:
        order = np.argsort(key, kind="stable")
        ordered = key[order]
        start = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
        length = np.diff(np.concatenate([start, [len(key)]]))
        held = np.empty(len(key), dtype=np.int64)
        held[order] = np.repeat(length, length)
    shareable = np.bincount(local[held >= 2], minlength=m)
    eps = 1e-9
    low = np.ceil(overlap * sizes - eps).astype(np.int64)
    high = np.minimum(
        np.floor(sizes / overlap + eps), np.floor(shareable * (1 + overlap) / overlap - sizes + eps)
    ).astype(np.int64)
    # Records of each group by size: how many lie in [low, high], less the record itself.
    width = int(sizes.max()) + 2
    keys = np.sort(groups * width + sizes)
    high = np.minimum(high, width - 1)
    lo_key = groups * width + np.clip(low, 0, width - 1)
    hi_key = groups * width + np.maximum(high, -1)
    inside = np.searchsorted(keys, hi_key, "right") - np.searchsorted(keys, lo_key, "left")
    inside -= (low <= sizes) & (sizes <= high)
    found: npt.NDArray[np.bool_] = (high >= low) & (inside > 0)
    return found


def _multipliers(count: int, salt: int) -> npt.NDArray[np.uint32]:
    """Odd 32-bit multipliers, fixed by the seed."""
    rng = np.random.default_rng([_SEED, salt])
    found: npt.NDArray[np.uint32] = rng.integers(0, 1 << 31, size=count, dtype=np.uint32)
    found = found * np.uint32(2) + np.uint32(1)
    return found


_MULTIPLIERS = _multipliers(BANDS * ROWS, 1)
_MASKS = _multipliers(BANDS * ROWS, 3)


def _band_keys(local: Ints, hashes: npt.NDArray[np.uint32], m: int, band: int) -> Any:
    """One 64-bit key per record: its band ``band`` of ``ROWS`` min-hashes, mixed.

    A min-hash is the least of ``(word ^ s) * a`` (32 bits) over the record's
    words, with ``s`` and an odd ``a`` of its own: a permutation of the
    words' hashes. A record without words gets the largest value in every
    one: such records overlap fully with each other, and meet.
    """
    starts = np.flatnonzero(np.concatenate([[True], local[1:] != local[:-1]])[: len(local)])
    holders = local[starts]
    key = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for r in range(ROWS):
            at = band * ROWS + r
            mins = np.full(m, np.uint32(0xFFFFFFFF), dtype=np.uint32)
            mins[holders] = np.minimum.reduceat((hashes ^ _MASKS[at]) * _MULTIPLIERS[at], starts)
            key = (key ^ mins.astype(np.uint64)) * np.uint64(0x9E3779B97F4A7C15)
            key ^= key >> np.uint64(29)
    return key


def _signs(unit_vectors: UnitVectors, rows: Ints) -> npt.NDArray[np.uint64]:
    """``SIGN_BITS`` bits per row's vector, 64 to a column: its sign on each of as many
    random hyperplanes (fixed by the seed)."""
    rng = np.random.default_rng([_SEED, 2])
    planes = rng.standard_normal((unit_vectors.shape[1], SIGN_BITS)).astype(np.float32)
    bits = np.zeros((len(rows), SIGN_BITS // 64), dtype=np.uint64)
    for start in range(0, len(rows), _ENTRY_SLICE):
        above = unit_vectors[rows[start : start + _ENTRY_SLICE]] @ planes >= 0
        packed = np.packbits(above, axis=1, bitorder="little")
        bits[start : start + _ENTRY_SLICE] = packed.view("<u8").astype(np.uint64)
    return bits


#: The hyperplanes each split of each band's buckets takes its signs from: drawn
#: afresh for every band, so that a pair one band's split parts rarely parts in all.
_SPLIT_PLANES = np.random.default_rng([_SEED, 4]).integers(
    0, SIGN_BITS, size=(BANDS, _SPLITS, _SPLIT_BITS)
)


def _bucket_pairs(
    key: npt.NDArray[np.uint64], signs: npt.NDArray[np.uint64], band: int, m: int
) -> Ints:
    """Pair codes ``low * m + high`` of the records sharing a key, large buckets split
    by hyperplane signs."""
    local = np.arange(len(key), dtype=np.int64)
    # Key and record in one 64-bit number, so that one sort brings equal keys
    # together; two keys equal in their leading bits only add a candidate.
    bits = np.uint64(max(m - 1, 1).bit_length())
    found: list[Ints] = []
    for split in range(_SPLITS + 1):
        packed = ((key >> bits) << bits) | local.astype(np.uint64)
        packed.sort()
        key = packed >> bits
        local = (packed & ((np.uint64(1) << bits) - np.uint64(1))).astype(np.int64)
        del packed
        start = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
        length = np.diff(np.concatenate([start, [len(key)]]))
        run_of = np.repeat(np.arange(len(start)), length)
        big = length[run_of] > BUCKET_ROWS
        small = (~big) & (length[run_of] >= 2)
        found.append(pairs_in_runs(key[small], local[small], m))
        if not big.any():
            break
        key, local = key[big], local[big]
        if split == _SPLITS:
            found.append(pairs_in_runs(key, local, m))
            break
        part = np.zeros(len(local), dtype=np.uint64)
        for k, plane in enumerate(_SPLIT_PLANES[band % len(_SPLIT_PLANES), split].tolist()):
            bit = (signs[local, plane // 64] >> np.uint64(plane % 64)) & np.uint64(1)
            part |= bit << np.uint64(k)
        with np.errstate(over="ignore"):
            key = (key ^ part) * np.uint64(0xBF58476D1CE4E5B9)
            key ^= key >> np.uint64(31)
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def pairs_in_runs(key: npt.NDArray[Any], rows: Ints, n: int) -> npt.NDArray[np.int64]:
    """Pair codes ``low * n + high`` of the rows within each run of one ``key`` (sorted)."""
    found: list[npt.NDArray[np.int64]] = []
    # Offset by offset: each offset visits only the runs still long enough.
    live = np.flatnonzero(key[1:] == key[:-1])
    gap = 1
    while len(live):
        a, b = rows[live].astype(np.int64), rows[live + gap].astype(np.int64)
        found.append(np.minimum(a, b) * n + np.maximum(a, b))
        gap += 1
        live = live[live + gap < len(key)]
        live = live[key[live] == key[live + gap]]
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
