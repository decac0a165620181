"""What a text's words are: the word pattern, stop words, scripts without spaces.

The engine's text rules share these: a word is a run of word characters
(:data:`WORD`, ``\\w``); :data:`STOPWORDS` are too common to say anything;
scripts written without spaces between words (CJK, Thai, emoji...) are
:data:`UNSEGMENTED_RANGES`, which the full-text index, text queries and folds
treat apart.

The words a fold compares: :func:`word_set` is the rule, a text's distinct
words, lower-cased, where unsegmented scripts count their character pairs.
:func:`word_table` gives the same words for many texts at once as numbers,
without an object per word: texts in ASCII (nearly all) are split and hashed
by numpy over their bytes, in chunks; the others go through :func:`word_set`
and are hashed the same way. Equal words get equal numbers. Two different
words share a number only if they share a 64-bit hash, with odds of about one
in 10^19 per pair of words.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from ..errors import InvalidInput
from .lexicon import STOPWORDS, WORD
from .records import check_unicode

__all__ = [
    "STOPWORDS",
    "UNSEGMENTED_GLOB",
    "UNSEGMENTED_QUERY_RUN",
    "UNSEGMENTED_RANGES",
    "UNSEGMENTED_RUN",
    "WORD",
    "SharesOf",
    "check_text",
    "choose_rare",
    "content_words",
    "distinct",
    "word_set",
    "word_table",
]

IntT = TypeVar("IntT", np.int64, np.uint64)
WordT = TypeVar("WordT")


# Scripts written without spaces between words, and emoji: unicode61 makes one
# token of a whole run of them (or none at all), so they go to the trigram index.
UNSEGMENTED_RANGES = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u2600-\u27bf"  # symbols, dingbats
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U0001f000-\U0001faff"  # emoji
    "\U00020000-\U0002fa1f"  # CJK extensions B-F
)
#: Records whose content matches this GLOB are also in the trigram index.
UNSEGMENTED_GLOB = f"*[{UNSEGMENTED_RANGES}]*"
#: A run of scripts written without spaces: a fold's words are its character pairs.
UNSEGMENTED_RUN = re.compile(f"[{UNSEGMENTED_RANGES}]+")
#: Such a run in a text query, with the emoji variation selector and the
#: zero-width joiner that bind emoji sequences: a query looks for its pieces.
UNSEGMENTED_QUERY_RUN = re.compile(f"[{UNSEGMENTED_RANGES}\ufe0f\u200d]+")
#: Given words (lower case, none of them a stop word): each one's share of the
#: store's records (None: the text index keeps no such word) and the store's
#: size; None when the store holds no text.
SharesOf = Callable[[Sequence[str]], "tuple[list[float | None], int] | None"]
#: Bytes of text hashed at once: the chunk's arrays stay within the CPU caches' reach.
_CHUNK_BYTES = 1 << 20
#: The multiplier of the polynomial hash (odd, so it has an inverse modulo 2**64).
_BASE = 0x9E3779B97F4A7C15
#: Which ASCII bytes are word characters (``\w`` on ASCII text), and their lower case.
_ASCII_WORD = np.zeros(256, dtype=bool)
_ASCII_WORD[list((string.ascii_letters + string.digits + "_").encode())] = True
_LOWER = np.arange(256, dtype=np.uint64)
_LOWER[ord("A") : ord("Z") + 1] += 32


def check_text(text: object) -> str:
    """``text`` when it is a non-blank string without a NUL.

    Raises:
        InvalidInput: it is not.
    """
    if not isinstance(text, str):
        raise InvalidInput(f"text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise InvalidInput("text is empty; give words to search for, or leave text out")
    if "\x00" in text:
        raise InvalidInput("text contains a NUL character; remove it")
    return check_unicode("text", text)


def content_words(text: str) -> list[str]:
    """A text query's words: distinct, lower-cased, in order, without stop words
    (unless nothing else is left), and without runs of unsegmented scripts,
    which a query looks for in pieces instead."""
    words = [w.lower() for w in WORD.findall(UNSEGMENTED_QUERY_RUN.sub(" ", text))]
    content = [w for w in words if w not in STOPWORDS]
    return list(dict.fromkeys(content or words))


def choose_rare(
    words: Sequence[WordT], matches: Callable[[WordT], float], total: float, budget: float
) -> tuple[list[WordT], list[WordT]]:
    """Which of a planned text query's words choose its candidates, and which only score.

    ``matches`` estimates how many of the store's ``total`` records hold a
    word. A word in more than half of them is left out (all are: the rarest
    stays); of the rest, the rarest, and then each next rarest while the
    estimates together stay within ``budget``, choose; the others, rarest
    first, only add to the chosen records' scores. Both backends plan so.
    """
    by_rarity = sorted(words, key=matches)
    kept = [w for w in by_rarity if matches(w) <= total / 2] or by_rarity[:1]
    chosen = kept[:1]
    expected = sum(matches(w) for w in chosen)
    for word in kept[1:]:
        if expected + matches(word) > budget:
            break
        chosen.append(word)
        expected += matches(word)
    return chosen, kept[len(chosen) :]


def word_set(text: str) -> frozenset[str]:
    """The distinct words of ``text``, lower-cased; unsegmented scripts as character pairs.

    These are the words the word-overlap rule compares.
    """
    lowered = text.lower()
    runs = UNSEGMENTED_RUN.findall(lowered)
    if not runs:
        return frozenset(WORD.findall(lowered))
    words = set(WORD.findall(UNSEGMENTED_RUN.sub(" ", lowered)))
    for run in runs:
        words.update(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
    return frozenset(words)


def word_table(contents: Sequence[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Each content's distinct words (see :func:`word_set`) as numbers, in CSR form.

    Returns ``(offsets, words)``: row ``i``'s word numbers, ascending, are
    ``words[offsets[i]:offsets[i + 1]]``; equal words get equal numbers, from
    0 up to the number of distinct words.
    """
    n = len(contents)
    rows, hashes = _hashed_words(contents)
    found = distinct(hashes)
    numbers = _positions(found, hashes)
    del hashes
    width = max(len(found), 1)
    step = _CHUNK_BYTES
    for start in range(0, len(numbers), step):  # row and word as one key, in place
        numbers[start : start + step] += rows[start : start + step] * np.int64(width)
    del rows
    # Rows come in order, so the keys are sorted but within each row: a merge
    # sort (numpy's "stable") finds those runs and is several times faster
    # here than its default quicksort.
    numbers.sort(kind="stable")
    keys = numbers[np.concatenate([[True], numbers[1:] != numbers[:-1]])[: len(numbers)]]
    del numbers
    rows, numbers = np.divmod(keys, width)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=offsets[1:])
    return offsets, numbers


def _positions(
    table: npt.NDArray[np.uint64], hashes: npt.NDArray[np.uint64]
) -> npt.NDArray[np.int64]:
    """Where each of ``hashes`` lies in ``table`` (sorted, distinct, holding every one).

    Hashes are uniform, so their top bits point into ``table`` almost
    exactly: each starts at the first entry of its bucket and steps on to its
    own, one or two entries on the average. A binary search per hash would
    cost several misses of the CPU caches each.
    """
    bits = max(len(table) - 1, 1).bit_length()
    shift = np.uint64(64 - bits)
    starts = np.zeros((1 << bits) + 1, dtype=np.int64)
    np.cumsum(np.bincount((table >> shift).astype(np.int64), minlength=1 << bits), out=starts[1:])
    at = np.empty(len(hashes), dtype=np.int64)
    for start in range(0, len(hashes), _CHUNK_BYTES):  # a slice at a time: small temporaries
        part = hashes[start : start + _CHUNK_BYTES]
        found = starts[(part >> shift).astype(np.int64)]
        pending = np.flatnonzero(table[np.minimum(found, len(table) - 1)] != part)
        while len(pending):
            found[pending] += 1
            pending = pending[table[found[pending]] != part[pending]]
        at[start : start + len(part)] = found
    return at


def distinct(values: npt.NDArray[IntT]) -> npt.NDArray[IntT]:
    """The distinct values, ascending: ``np.unique`` by sorting, which is faster here."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    found: npt.NDArray[IntT] = ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])]
    return found


def _hashed_words(
    contents: Sequence[str],
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint64]]:
    """Every word of every content (repeats included): its row and its hash."""
    ascii_rows = [i for i, text in enumerate(contents) if text.isascii()]
    # Room for as many words as there can be (one per two characters of text);
    # pages never written to never take memory, so no list of parts is joined.
    bound = sum(map(len, contents)) // 2 + len(contents) + 1
    rows = np.empty(bound, dtype=np.int32)  # fewer than 2**31 rows: a store holds far fewer
    hashes = np.empty(bound, dtype=np.uint64)
    at = 0
    for chunk in _chunks_of(contents, ascii_rows):
        texts = [contents[i] for i in chunk]
        # One space between texts: no word runs across it.
        data = np.frombuffer(" ".join(texts).encode("ascii"), dtype=np.uint8)
        starts, found = _run_hashes(data, _ASCII_WORD[data])
        ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + 1)
        rows[at : at + len(found)] = np.asarray(chunk)[np.searchsorted(ends, starts, "right")]
        hashes[at : at + len(found)] = found
        at += len(found)
    others = sorted(set(range(len(contents))) - set(ascii_rows))
    if others:
        sets = [sorted(word_set(contents[i])) for i in others]
        # Words joined by NUL, which no word holds: every other byte is a word's.
        data = np.frombuffer(
            b"\x00".join("\x00".join(words).encode() for words in sets if words), dtype=np.uint8
        )
        _, found = _run_hashes(data, data != 0)
        counts = np.fromiter(map(len, sets), dtype=np.int64, count=len(sets))
        if at + len(found) > len(rows):  # character pairs of unsegmented text may pass it
            rows = np.concatenate([rows[:at], np.empty(len(found), dtype=np.int32)])
            hashes = np.concatenate([hashes[:at], np.empty(len(found), dtype=np.uint64)])
        rows[at : at + len(found)] = np.repeat(np.asarray(others), counts)
        hashes[at : at + len(found)] = found
        at += len(found)
    return rows[:at], hashes[:at]


def _chunks_of(contents: Sequence[str], rows: list[int]) -> list[list[int]]:
    """``rows`` in runs of about ``_CHUNK_BYTES`` of text each."""
    chunks: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i in rows:
        current.append(i)
        size += len(contents[i]) + 1
        if size >= _CHUNK_BYTES:
            chunks.append(current)
            current, size = [], 0
    if current:
        chunks.append(current)
    return chunks


def _run_hashes(
    data: npt.NDArray[np.uint8], word: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
    """Where each run of ``word`` bytes starts, and its hash, in order.

    The hash of a run ``b[s:e]`` is ``sum(lower(b[k]) * BASE**(e-1-k))``
    modulo 2**64, taken from prefix sums over the whole chunk and mixed with
    the run's length: it depends only on the run's bytes, not on where the run
    lies. Upper-case ASCII letters count as lower-case.
    """
    m = len(data)
    if m == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
    edge = np.diff(word.astype(np.int8), prepend=0, append=0)
    starts = np.flatnonzero(edge == 1)
    ends = np.flatnonzero(edge == -1)
    powers, inverse = _powers(m)
    with np.errstate(over="ignore"):
        terms = _LOWER[data] * powers[m - 1 :: -1][:m]
        sums = np.cumsum(terms, dtype=np.uint64)
        del terms
        before = np.where(starts > 0, sums[np.maximum(starts - 1, 0)], np.uint64(0))
        raw = (sums[ends - 1] - before) * inverse[m - ends]
        mixed = _mix(raw ^ (ends - starts).astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9))
    return starts.astype(np.int64), mixed


@functools.cache
def _power_table(size: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    with np.errstate(over="ignore"):
        powers = np.cumprod(np.full(size, _BASE, dtype=np.uint64), dtype=np.uint64)
        inverses = np.cumprod(np.full(size, pow(_BASE, -1, 1 << 64), dtype=np.uint64))
    one = np.ones(1, dtype=np.uint64)
    return np.concatenate([one, powers]), np.concatenate([one, inverses])


def _powers(m: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """``BASE**i`` and ``BASE**-i`` modulo 2**64 for ``i`` from 0 to at least ``m``."""
    size = _CHUNK_BYTES
    while size < m:
        size *= 2
    return _power_table(size)


def _mix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """SplitMix64's finaliser: every input bit reaches every output bit."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        mixed: npt.NDArray[np.uint64] = x ^ (x >> np.uint64(31))
        return mixed
