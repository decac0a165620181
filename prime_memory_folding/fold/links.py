"""Near-duplicate links: which records a fold may merge, and the clusters they form.

Two records are linked when they share the group key (scope and domain), share
the subdomain or a tag, their vectors' cosine reaches the policy's
``similarity`` and their word sets overlap by ``word_overlap`` (see
:mod:`~prime_memory_folding.fold.folding` for the rules). :func:`linked_pairs` finds
the links by a candidate search (a similarity join on the word rule, buckets
for records made of widely shared words, then an exact check of each
candidate), or with ``exhaustive`` by screening every pair within each group.
:func:`cluster` forms the clusters a fold merges. Everything here is a pure
function of its arguments.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..core.words import STOPWORDS, distinct, word_set, word_table
from ..storage.archive import UnitVectors
from .lsh import EXACT_RESIDUE, pairs_in_runs, residue_candidates

__all__ = [
    "COMMON_WORD_ROWS",
    "COMMON_WORD_SHARE",
    "JOIN_PAIRS_PER_ROW",
    "PROBE_ROWS",
    "SCREEN_SLACK",
    "PlanStep",
    "WordCounts",
    "cluster",
    "jaccard",
    "linked_pairs",
    "overlap_floor",
    "probe_rows",
    "unlisted_partner_sizes",
    "word_set",
    "word_table",
]

#: The most elements of one similarity block (float32), to bound memory.
_BLOCK_ELEMENTS = 1 << 24
#: Rows per block within one group: small enough that skipping the lower
#: triangle saves most of its half of the work.
_SCREEN_ROWS = 512
#: A screening bound this far below the threshold still counts: it covers the
#: bound's float32 rounding, so the screen never drops a linked pair.
SCREEN_SLACK = 1e-4
_SCREEN_SLACK = SCREEN_SLACK
#: The screen keeps enough dimensions that a typical record's remaining energy
#: lies this far below the threshold. Only speed depends on it.
_SCREEN_MARGIN = 0.2
#: Pairs checked exactly at once (float64 rows), to bound memory.
_EXACT_CHUNK = 8_192

#: Whole numbers, 32 or 64 bits.
Ints = npt.NDArray[np.signedinteger[Any]]
#: ``step(name)``: called as a plan moves on to its next step.
PlanStep = Callable[[str], None]
#: ``word_counts(sizes)``: told each row's number of distinct words.
WordCounts = Callable[[Ints], None]


def cluster(
    domains: Sequence[str],
    subdomains: Sequence[str],
    tags: Sequence[Sequence[str]],
    unit_vectors: UnitVectors,
    eligible: npt.NDArray[np.bool_],
    threshold: float,
    *,
    contents: Sequence[str] | None = None,
    word_overlap: float = 0.0,
    exhaustive: bool = False,
    ranks: npt.NDArray[np.int64] | None = None,
    step: PlanStep | None = None,
    apart: Sequence[Sequence[int]] = (),
    word_counts: WordCounts | None = None,
) -> list[list[int]]:
    """Clusters of two or more row positions, each led by its most-linked member.

    Two eligible rows are linked when they share the group key (``domains``),
    share the subdomain or a tag, their cosine similarity is at least
    ``threshold`` and, given ``contents``, the Jaccard overlap of their word
    sets is at least ``word_overlap``. The links are found by the candidate
    search (see :func:`linked_pairs`), or with ``exhaustive`` by comparing
    every pair within each group; both give the same links, but for a pair
    the buckets of a large residue may miss (see :func:`linked_pairs`). A
    cluster holds only rows linked to each other. Ties go by ``ranks``
    (default: row order), so the result depends only on the records, not on
    the order they came in.

    ``apart`` lists groups of rows kept apart: no two rows of one group are
    linked, so no cluster holds two of them; each may still join others.
    ``word_counts`` is told each row's number of distinct words, when the
    candidate search counts them (see :func:`linked_pairs`).
    """
    n = len(domains)
    codes = linked_pairs(
        domains,
        subdomains,
        tags,
        unit_vectors,
        eligible,
        threshold,
        contents=contents,
        word_overlap=word_overlap,
        exhaustive=exhaustive,
        step=step,
        word_counts=word_counts,
    )
    if len(codes) and apart:
        kept = [_code(a, b, n) for group in apart for a, b in itertools.combinations(group, 2)]
        codes = codes[~np.isin(codes, np.asarray(kept, dtype=np.int64))]
    if len(codes) == 0:
        return []
    rank = np.arange(n, dtype=np.int64) if ranks is None else ranks
    left, right = codes // n, codes % n
    # Adjacency in CSR form, both directions, each row's neighbours by rank.
    src = np.concatenate([left, right])
    dst = np.concatenate([right, left])
    order = np.lexsort((rank[dst], src))
    src, dst = src[order], dst[order]
    degree = np.bincount(src, minlength=n)
    starts = np.concatenate([[0], np.cumsum(degree)])
    linked = np.flatnonzero(degree)
    leaders = linked[np.lexsort((rank[linked], -degree[linked]))]
    taken = np.zeros(n, dtype=bool)
    pairs = set(codes.tolist())
    clusters: list[list[int]] = []
    for leader in leaders.tolist():
        if taken[leader]:
            continue
        neighbours = dst[starts[leader] : starts[leader + 1]]
        free = neighbours[~taken[neighbours]]
        if len(free) == 0:
            continue
        group = [leader, int(free[0])]
        if len(free) > 1:
            closest = np.argsort(-(unit_vectors[free] @ unit_vectors[leader]), kind="stable")
            group = [leader]
            for candidate in free[closest].tolist():
                # Every neighbour is linked to the leader; it must be to the rest too.
                if all(_code(candidate, member, n) in pairs for member in group[1:]):
                    group.append(candidate)
        taken[group] = True
        clusters.append(group)
    return clusters


def linked_pairs(
    domains: Sequence[str],
    subdomains: Sequence[str],
    tags: Sequence[Sequence[str]],
    unit_vectors: UnitVectors,
    eligible: npt.NDArray[np.bool_],
    threshold: float,
    *,
    contents: Sequence[str] | None = None,
    word_overlap: float = 0.0,
    exhaustive: bool = False,
    step: PlanStep | None = None,
    word_counts: WordCounts | None = None,
) -> npt.NDArray[np.int64]:
    """Sorted pair codes ``low * n + high`` of every linked pair (see :func:`cluster`).

    The candidate search is a similarity join on the word-overlap rule:

    - A word is common within a group when more of the group's eligible
      records hold it than ``COMMON_WORD_ROWS`` or a ``COMMON_WORD_SHARE`` of
      the group, whichever is more; rare otherwise. Words are numbers here,
      64-bit hashes of the words (see :mod:`~prime_memory_folding.core.words`).
    - Two records whose words overlap by ``t`` (Jaccard) share at least
      ``floor(t * |x|)`` words, so at least ``beta(x) = floor(t * |x|) -
      common(x)`` rare ones. Prefix filtering: with every word ranked rarest
      first, two records sharing ``o`` rare words share their ``c``
      lowest-ranked shared ones within the first ``rare - o + c`` rare words
      of each. A record indexes its first ``rare(x) - beta(x) + 2`` rare words
      when ``beta(x) >= 2``, all of them otherwise.
    - A pair where either side has ``beta >= 2`` shares at least two indexed
      words: the join keys each record on every two of its indexed words, so
      records meet only through a pair of rare words, which few records share.
      Records whose ``beta`` are both below 2 also meet through one indexed word.
      Words held by one record alone take no part.
    - A record with ``beta <= 0`` (mostly common words) can overlap enough
      with another such record through common words alone: these records,
      the residue, are also compared with each other within their group.
      A group of more than ``EXACT_RESIDUE`` records whose join would make
      more than ``JOIN_PAIRS_PER_ROW`` pairs per record (its words widely
      shared) joins the residue as a whole. A group's residue of at most
      ``EXACT_RESIDUE`` records is screened pairwise; a larger one is
      bucketed (see :mod:`~prime_memory_folding.fold.lsh`).

    Candidates then pass the exact checks: shared subdomain or tag, cosine
    (float64) and word overlap. Wherever the residue is screened pairwise,
    every linked pair is a candidate, so the links are exactly the exhaustive
    screen's; the buckets of a large residue find a linked pair with a
    probability that :mod:`~prime_memory_folding.fold.lsh` gives (0.984 from
    the bands at the default thresholds), and never make a link the
    exhaustive screen does not. With no ``contents`` or a ``word_overlap`` of 0 there is
    no word rule to join on, and every pair within a group is screened.

    ``word_counts``, when given, is told each row's number of distinct words
    (an array by row) once the candidate search has counted them; the
    exhaustive screen counts none.
    """
    n = len(domains)
    if contents is None or word_overlap <= 0 or exhaustive:
        codes = _screen_all(domains, subdomains, tags, unit_vectors, eligible, threshold)
        if step is not None:
            step("checking candidates")
        if contents is not None and word_overlap > 0 and len(codes):
            codes = codes[_share_words(contents, codes // n, codes % n, word_overlap)]
        return codes
    group_of = _codes(domains)
    a, b, residue = _prefix_candidates(group_of, contents, eligible, word_overlap, word_counts)
    met, screened = residue_candidates(
        group_of, contents, residue, word_overlap, unit_vectors, threshold
    )
    residue_codes = _screen_all(domains, subdomains, tags, unit_vectors, screened, threshold)
    if len(met):
        a, b = np.concatenate([a, met // n]), np.concatenate([b, met % n])
    if step is not None:
        step("checking candidates")
    if len(a):
        keep = _exact_cosine(unit_vectors, a, b) >= threshold
        a, b = a[keep], b[keep]
        keep = _share_label(subdomains, tags, a, b)
        a, b = a[keep], b[keep]
    codes = distinct(np.concatenate([a * n + b, residue_codes]))
    if len(codes):
        # The word rule once more, on the words themselves rather than their hashes.
        codes = codes[_share_words(contents, codes // n, codes % n, word_overlap)]
    return codes


#: A word held by more than this many of a group's records, and by more than
#: ``COMMON_WORD_SHARE`` of them, is common: the candidate search does not
#: join on it (see :func:`linked_pairs`).
COMMON_WORD_ROWS = 256
COMMON_WORD_SHARE = 1 / 500


def _codes(labels: Sequence[str]) -> npt.NDArray[np.int64]:
    """Each label's number: equal labels, equal numbers."""
    table = {label: code for code, label in enumerate(dict.fromkeys(labels))}
    return np.fromiter(map(table.__getitem__, labels), dtype=np.int64, count=len(labels))


def _screen_all(
    domains: Sequence[str],
    subdomains: Sequence[str],
    tags: Sequence[Sequence[str]],
    unit_vectors: UnitVectors,
    eligible: npt.NDArray[np.bool_],
    threshold: float,
) -> npt.NDArray[np.int64]:
    """The exhaustive screen: every pair of ``eligible`` rows within each group."""
    n = len(domains)
    by_group: dict[str, list[int]] = {}
    for i in np.flatnonzero(eligible).tolist():
        by_group.setdefault(domains[i], []).append(i)
    found: list[npt.NDArray[np.int64]] = []
    for key in sorted(by_group):
        members = np.asarray(by_group[key], dtype=np.int64)
        if len(members) >= 2:
            found.append(_domain_pairs(members, subdomains, tags, unit_vectors, threshold, n))
    return distinct(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)


def overlap_floor(overlap: float, sizes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Words two records of these sizes share at least, if they overlap by ``overlap``.

    ``J(x, y) >= t`` means ``|x & y| >= t * |x|``; rounding down, and a hair
    lower, keeps the bound safe from floating-point error.
    """
    floor: npt.NDArray[np.int64] = np.maximum(np.floor(overlap * sizes - 1e-9), 0).astype(np.int64)
    return floor


def probe_rows(
    words: frozenset[str],
    overlap: float,
    posting: Callable[[str], npt.NDArray[np.int64] | None],
) -> tuple[list[npt.NDArray[np.int64]], int] | None:
    """The rows lists that lead to every record ``words`` may fold with, and how many
    of them such a record is in; None when only a pass over every vector finds them.

    A record overlapping by ``overlap`` shares ``f = floor(overlap * |words|)``
    of the words or more, so it lacks at most ``|words| - f`` of them: of any
    ``|words| - f + 2`` rare words (each held by few enough records to be
    listed), it holds two or more, and of ``k`` such words ``k - |words| + f``.
    Those are asked for first that are likeliest to be rare (longer words
    before shorter ones, stop words last), and no more words are asked for
    once enough rare ones are found, unless their lists together hold more
    than ``PROBE_ROWS`` rows: the words are then widely shared, and each one
    more asked for raises the count a record must reach. With fewer rare
    words than ``|words| - f + 1``, none of them leads anywhere.
    """
    if overlap <= 0:
        return None
    slack = len(words) - int(overlap_floor(overlap, np.array([len(words)]))[0])
    enough = slack + 2
    lead: list[npt.NDArray[np.int64]] = []
    listed = 0
    for word in sorted(words, key=_likely_rare_first):
        rows = posting(word)
        if rows is not None:
            lead.append(rows)
            listed += len(rows)
            if len(lead) >= enough and listed <= PROBE_ROWS:
                return lead, len(lead) - slack
    need = len(lead) - slack
    return (lead, need) if need >= 1 else None


def unlisted_partner_sizes(size: int, unlisted: int, overlap: float) -> tuple[int, int]:
    """The sizes a record may have that overlaps by ``overlap`` with one of ``size``
    distinct words while sharing none but ``unlisted`` of them (empty when low > high).

    ``o`` shared words of ``x`` give ``J = o / (|x| + |y| - o)``, so ``J >= t``
    needs ``t |x| <= |y| <= o (1 + t) / t - |x|``, and ``o <= unlisted``. An
    incremental fold asks the full-text index for a record's words: a record
    that holds none of those it found lists for shares only the others, and
    where its group holds no record of these sizes it needs no pass over
    every vector. A hair of slack keeps the bounds safe from rounding.
    """
    low = max(math.ceil(overlap * size - 1e-9), 0)
    high = math.floor(min(size / overlap, unlisted * (1 + overlap) / overlap - size) + 1e-9)
    return low, high


#: Rows the lists of an incremental fold's look-up may hold together before it
#: asks for more of a record's words (see :func:`probe_rows`).
PROBE_ROWS = 2_048


def _likely_rare_first(word: str) -> tuple[bool, int, str]:
    """Which words to ask the index for first: the likeliest to be rare."""
    return word in STOPWORDS, -len(word), word


def _prefix_candidates(
    group_of: npt.NDArray[np.int64],
    contents: Sequence[str],
    eligible: npt.NDArray[np.bool_],
    overlap: float,
    word_counts: WordCounts | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Candidate pairs ``(a, b)``, ``a < b``, and the rows left to the exhaustive screen.

    A token is a word within a group. A pair is a candidate when the two
    records index two tokens in common, or one when both have ``beta < 2``
    (see :func:`linked_pairs`). The first kind is found by joining on pairs
    of indexed tokens rather than on single ones: a pair of rare words is held
    by few records, so the join stays close to the pairs it finds. Tokens held
    by one record alone cannot be shared and take no part in either join.
    Every sort is over one packed 64-bit key.
    """
    n = len(group_of)
    offsets, words = word_table(contents)  # held here alone, so that it goes early
    sizes = np.diff(offsets)
    del offsets
    if word_counts is not None:
        word_counts(sizes)
    # 32-bit rows and tokens: half the memory of the largest arrays here.
    rows: Ints = np.repeat(np.arange(n, dtype=np.int32), sizes)
    if not eligible.all():
        take = eligible[rows]
        rows, words = rows[take], words[take]
        del take
    token, count = _tokens(group_of, rows, words)
    del words
    token = token.astype(np.int32) if len(token) and token.max() < 1 << 31 else token
    group_size = np.bincount(group_of[eligible], minlength=int(group_of.max()) + 1 if n else 0)
    limits = np.maximum(COMMON_WORD_ROWS, (group_size * COMMON_WORD_SHARE).astype(np.int64))
    limit = int(limits.max()) if len(limits) else COMMON_WORD_ROWS
    count = np.minimum(count, limit + 1).astype(np.int32)
    rare = count <= (limit if len(limits) == 1 else limits[group_of[rows]])
    common = np.bincount(rows[~rare], minlength=n)
    beta = overlap_floor(overlap, sizes) - common
    residue = eligible & (beta <= 0)
    # Each row's rare words, rarest first. Its prefix is the first
    # rare - beta + 2 of them when beta >= 2, all of them otherwise.
    columns: list[Ints] = [rows[rare], count[rare], token[rare]]
    del token, count, rare
    rows, count, token = _sorted_columns(columns)
    rare_count = np.bincount(rows, minlength=n)
    first = np.concatenate([[0], np.cumsum(rare_count)[:-1]])
    position = np.arange(len(rows), dtype=np.int64)
    position -= first[rows]
    length = np.where(beta >= 2, rare_count - beta + 2, rare_count)
    indexed = (position < length[rows]) & (count >= 2)
    del position, count, first
    rows, token = rows[indexed], token[indexed]
    del indexed
    # When either side's beta is 2 or more, the pair shares at least beta rare
    # words, and the two rarest of them lie in both prefixes: a pair seen
    # through one word only cannot overlap enough. Rows with beta below 2
    # also join on single tokens, among themselves.
    low = beta[rows] < 2
    single: list[Ints] = [token[low], rows[low]]
    del low
    runs = [_token_pair_join(rows, token, n)]
    del rows, token
    single_token, single_rows = _sorted_columns(single)
    runs.append((single_token, single_rows))
    # A large group whose words are widely shared makes long runs, and the
    # pairs they hold grow with the square of the group: such a group goes
    # to the residue's buckets as a whole (see :mod:`.lsh`).
    pairs = np.zeros(len(group_size), dtype=np.float64)
    for key, members in runs:
        pairs += _pairs_per_group(key, members, group_of, len(group_size))
    crowded = (group_size > EXACT_RESIDUE) & (pairs > JOIN_PAIRS_PER_ROW * group_size)
    found = []
    for key, members in runs:
        if crowded.any():
            keep = ~crowded[group_of[members]]
            key, members = key[keep], members[keep]
        found.append(pairs_in_runs(key, members, n))
    codes = distinct(np.concatenate(found))
    residue |= eligible & crowded[group_of]
    return codes // n, codes % n, residue


#: A group of more than ``EXACT_RESIDUE`` records whose join would give more
#: pairs than this per record goes to the residue's buckets as a whole.
JOIN_PAIRS_PER_ROW = 32


def _pairs_per_group(key: Ints, rows: Ints, group_of: Ints, groups: int) -> Any:
    """How many pairs the runs of one (sorted) ``key`` hold, by the group of their rows."""
    if len(key) < 2:
        return np.zeros(groups, dtype=np.float64)
    start = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    length = np.diff(np.concatenate([start, [len(key)]])).astype(np.float64)
    weights = length * (length - 1) / 2
    return np.bincount(group_of[rows[start]], weights=weights, minlength=groups)


def _tokens(
    group_of: npt.NDArray[np.int64], rows: Ints, words: npt.NDArray[np.int64]
) -> tuple[Ints, Ints]:
    """Each entry's token (its word within its row's group, numbered densely) and its count."""
    width = int(words.max()) + 1 if len(words) else 1
    groups = int(group_of.max()) + 1 if len(group_of) else 1
    keys = words if groups == 1 else group_of[rows] * width + words
    if groups * width <= 4 * len(keys) + 1_024:
        counts = np.bincount(keys, minlength=groups * width)
        return keys, counts[keys]
    values = distinct(keys)
    token = np.searchsorted(values, keys).astype(np.int64)
    counts = np.bincount(token, minlength=len(values))
    return token, counts[token]


def _sorted_columns(columns: list[Ints]) -> tuple[Ints, ...]:
    """Non-negative columns sorted together, by the first, then the next...

    One sort of a packed 64-bit key when their values fit, else a lexsort.
    The list is emptied, so that the columns go as soon as they are packed.
    """
    bits = [max(int(c.max()), 1).bit_length() if len(c) else 1 for c in columns]
    if sum(bits) > 63:
        order = np.lexsort(columns[::-1])
        found = tuple(c[order] for c in columns)
        columns.clear()
        return found
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for column, width in zip(columns, bits):
        key <<= width
        key |= column
    columns.clear()
    key.sort(kind="stable")  # fast on runs already in order (rows, in a row's words)
    out: list[Ints] = []
    for width in reversed(bits):
        part = key & ((1 << width) - 1)
        out.append(part.astype(np.int32) if width < 32 else part)
        del part
        key >>= width
    return tuple(reversed(out))


def _token_pair_join(rows: Ints, token: Ints, n: int) -> tuple[Ints, Ints]:
    """Keys and rows, sorted by key, whose runs hold the rows that share two tokens; each
    row's tokens come in one run, in order (see :func:`~.lsh.pairs_in_runs`).

    Each row makes one key per two of its tokens (in the order they come),
    and rows with an equal key share those two tokens. Key and row go into
    one 64-bit number, so one sort brings equal keys together. When two
    tokens do not fit the key's bits exactly, they are hashed into them: a
    collision then only adds a candidate, which the exact checks drop.
    """
    row_bits = max(n - 1, 1).bit_length()
    key_bits = 63 - row_bits
    width = int(token.max()) + 1 if len(token) else 1
    exact = width * width <= 1 << key_bits
    lengths = np.bincount(rows) if len(rows) else np.zeros(0, dtype=np.int64)
    packed = np.empty(int((lengths * (lengths - 1) // 2).sum()), dtype=np.int64)
    at = 0
    longest = int(lengths.max()) if len(lengths) else 0
    # Rows a slice at a time (a slice ends where a row does), so that the
    # temporaries stay small beside the keys.
    start = 0
    while start < len(rows):
        stop = int(np.searchsorted(rows, rows[min(start + _SLICE, len(rows)) - 1], "right"))
        part_rows, part_token = rows[start:stop], token[start:stop]
        for gap in range(1, longest):
            same = part_rows[gap:] == part_rows[:-gap]
            first, second = part_token[:-gap][same], part_token[gap:][same]
            if exact:
                key = first.astype(np.int64)
                key *= width
                key += second
            else:
                with np.errstate(over="ignore"):
                    mixed = first.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
                    mixed ^= second.astype(np.uint64)
                    mixed *= np.uint64(0xBF58476D1CE4E5B9)
                key = (mixed >> np.uint64(64 - key_bits)).astype(np.int64)
            key <<= row_bits
            key |= part_rows[:-gap][same]
            packed[at : at + len(key)] = key
            at += len(key)
        start = stop
    packed.sort()
    # Only entries whose key comes twice or more lead to pairs: find them slice
    # by slice, so that no temporary is as large as the keys.
    runs: list[npt.NDArray[np.int64]] = []
    for start in range(0, len(packed) - 1, _SLICE):
        stop = min(start + _SLICE, len(packed) - 1)
        differ = packed[start + 1 : stop + 1] ^ packed[start:stop]
        differ >>= row_bits
        same = np.flatnonzero(differ == 0) + start
        runs.extend((same, same + 1))
    kept = packed[distinct(np.concatenate(runs))] if runs else packed[:0]
    del packed
    return kept >> row_bits, kept & ((1 << row_bits) - 1)


#: Entries handled at once, to keep temporaries small.
_SLICE = 1 << 21


def _share_label(
    subdomains: Sequence[str],
    tags: Sequence[Sequence[str]],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
) -> npt.NDArray[np.bool_]:
    """Which pairs share the subdomain or a tag."""
    out = np.fromiter(
        (subdomains[x] == subdomains[y] for x, y in zip(a.tolist(), b.tolist())),
        dtype=bool,
        count=len(a),
    )
    for k in np.flatnonzero(~out).tolist():
        out[k] = not set(tags[int(a[k])]).isdisjoint(tags[int(b[k])])
    return out


def _code(a: int, b: int, n: int) -> int:
    """The pair code of rows ``a`` and ``b``, as :func:`_domain_pairs` makes them."""
    return min(a, b) * n + max(a, b)


def _share_words(
    contents: Sequence[str],
    left: npt.NDArray[np.int64],
    right: npt.NDArray[np.int64],
    overlap: float,
) -> npt.NDArray[np.bool_]:
    """Which pairs ``(left[i], right[i])`` have word sets overlapping by ``overlap`` or more."""
    words = {i: word_set(contents[i]) for i in np.union1d(left, right).tolist()}
    return np.fromiter(
        (jaccard(words[a], words[b]) >= overlap for a, b in zip(left.tolist(), right.tolist())),
        dtype=bool,
        count=len(left),
    )


def _domain_pairs(
    members: npt.NDArray[np.int64],
    subdomains: Sequence[str],
    tags: Sequence[Sequence[str]],
    unit_vectors: UnitVectors,
    threshold: float,
    n: int,
) -> npt.NDArray[np.int64]:
    """Pair codes ``low * n + high`` of the linked pairs among one domain's ``members``.

    Pairs in one subdomain are compared within each subdomain; pairs in
    different subdomains only within a shared tag.
    A cheap upper bound on the cosine (see :func:`_bound_matrix`) screens each
    block; the few pairs it lets through are checked exactly.
    """
    vectors = unit_vectors[members]
    screen = _bound_matrix(vectors, threshold)
    subs: dict[str, int] = {}
    sub_of = np.array(
        [subs.setdefault(subdomains[i], len(subs)) for i in members.tolist()], dtype=np.int64
    )
    by_tag: dict[str, list[int]] = {}
    for local, i in enumerate(members.tolist()):
        for tag in dict.fromkeys(tags[i]):
            by_tag.setdefault(tag, []).append(local)
    left: list[npt.NDArray[np.int64]] = []
    right: list[npt.NDArray[np.int64]] = []

    def collect(pairs: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]) -> None:
        left.append(pairs[0])
        right.append(pairs[1])

    # Stable sorts keep each part in row order, so the blocks never depend on label order.
    by_sub = np.argsort(sub_of, kind="stable")
    bounds = np.flatnonzero(np.diff(sub_of[by_sub])) + 1
    for part in np.split(by_sub, bounds):
        if len(part) >= 2:
            collect(_screened_within(screen, part, threshold))
    for tag in sorted(by_tag):
        group = np.asarray(by_tag[tag], dtype=np.int64)
        if len(group) < 2 or (sub_of[group] == sub_of[group[0]]).all():
            continue
        # One product per tag; its same-subdomain pairs were already compared above.
        a, b = _screened_within(screen, group, threshold)
        across = sub_of[a] != sub_of[b]
        collect((a[across], b[across]))
    a = np.concatenate(left) if left else np.zeros(0, dtype=np.int64)
    b = np.concatenate(right) if right else np.zeros(0, dtype=np.int64)
    keep = _exact_cosine(vectors, a, b) >= threshold
    a, b = members[a[keep]], members[b[keep]]
    return np.minimum(a, b) * n + np.maximum(a, b)


def _bound_matrix(vectors: npt.NDArray[np.float32], threshold: float) -> npt.NDArray[np.float32]:
    """Rows whose dot products bound the cosines of ``vectors`` from above.

    Split unit vectors into leading dimensions ``h`` and the rest ``t``:
    ``a.b = h_a.h_b + t_a.t_b <= h_a.h_b + |t_a| |t_b|`` (Cauchy-Schwarz). A row
    is ``h`` followed by ``|t|``, so one product over fewer columns bounds every
    cosine. The leading dimensions are those with the most energy, as few as
    leave a typical record's remaining energy ``_SCREEN_MARGIN`` below the
    threshold; the bound is then far below the threshold for most pairs.
    """
    m, d = vectors.shape
    energy = np.einsum("ij,ij->j", vectors, vectors, dtype=np.float64)
    order = np.argsort(-energy, kind="stable")
    left_over = 1.0 - np.cumsum(energy[order]) / m
    enough = np.flatnonzero(left_over <= threshold - _SCREEN_MARGIN)
    keep = int(enough[0]) + 1 if len(enough) else d
    if keep >= d - 1:
        return vectors
    rest = np.linalg.norm(vectors[:, order[keep:]], axis=1)
    return np.ascontiguousarray(np.column_stack([vectors[:, order[:keep]], rest]))


def _screened_within(
    screen: npt.NDArray[np.float32], part: npt.NDArray[np.int64], threshold: float
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Pairs ``(a, b)`` within ``part`` (a before b) that pass the screen."""
    block = screen[part]
    m = len(part)
    step = max(16, min(_SCREEN_ROWS, _BLOCK_ELEMENTS // m))
    left: list[npt.NDArray[np.int64]] = []
    right: list[npt.NDArray[np.int64]] = []
    for start in range(0, m, step):
        sims = block[start : start + step] @ block[start:].T
        # Row-major positions, as np.nonzero gives them: its two-dimensional
        # path is many times slower than the flat one on these sparse masks.
        rows, cols = np.divmod(np.flatnonzero(sims >= threshold - _SCREEN_SLACK), sims.shape[1])
        # Keep each pair once: the column must lie after the row.
        later = cols > rows
        left.append(part[start + rows[later]])
        right.append(part[start + cols[later]])
    return np.concatenate(left), np.concatenate(right)


def _exact_cosine(
    vectors: UnitVectors, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """The cosine of each pair ``(vectors[a[i]], vectors[b[i]])``, in float64.

    Each pair's value depends only on its two vectors, not on which block found it.
    """
    out = np.empty(len(a), dtype=np.float64)
    for start in range(0, len(a), _EXACT_CHUNK):
        stop = start + _EXACT_CHUNK
        x = vectors[a[start:stop]].astype(np.float64)
        y = vectors[b[start:stop]].astype(np.float64)
        out[start:stop] = np.einsum("ij,ij->i", x, y)
    return out


def jaccard(a: frozenset[Any], b: frozenset[Any]) -> float:
    """The share of their distinct members two sets have in common; 1 for two empty sets."""
    if not a and not b:
        return 1.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)
