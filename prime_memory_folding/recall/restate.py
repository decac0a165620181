"""Whether a new memory restates an older one with another value: supersession's detector.

"We use PostgreSQL 15" restated as "We moved to PostgreSQL 16" changes a
value of the older memory; the engine then offers "possibly supersedes", and
never applies it by itself. :func:`change` is the test, deterministic and
offline, on the two texts alone: it aligns their tokens with
:class:`difflib.SequenceMatcher` and reads what differs.

A token is a word (:data:`~prime_memory_folding.core.lexicon.WORD`) or words
joined by ``.``, ``-``, ``/`` or an apostrophe, so that ``3.11``,
``auth-service`` and ``don't`` are one token each; tokens compare in lower
case, and the content tokens are those that are not
:data:`~prime_memory_folding.core.lexicon.STOPWORDS`.

The rules, each aimed at precision (a false alarm costs the user attention):

- **The same statement.** The aligned (equal) parts must hold at least half
  of the content tokens of the text with fewer of them (at least two; one
  when it has at most three), and :data:`MIN_SHARE` of those outside the
  changed parts; and :data:`MIN_DENSE_SHARE` of the other text's, which may
  add detail but not be mostly about something else. More than
  :data:`MAX_REWORDED` differing parts with content words that change no value
  make it another text, not a restatement. Words that only tell of a switch
  (``moved``, ``now``, ``use``) or hedge (``currently``, ``think``) do not count.
- **A changed number or version**: a short differing part with a number (a
  digit, or a number word such as ``five``) on each side, the numbers
  different and the words beside them the same: ``15 -> 16``, ``3.11 ->
  3.12``, ``v2 -> v3``, ``3 retries -> 5 retries``; or a number said where the
  other text says another (``MySQL 8.0 since the 5.7 end of life`` beside
  ``MySQL 5.7``). A number that names a thing (``#123``, ``issue 123``,
  ``section 4``) is not a value, and differing ones make two things.
- **A changed name**: a short differing part after an aligned content word,
  where a side looks like a name (a capital past a sentence's start, a digit,
  or ``-``, ``_``, ``.`` or ``/`` inside), or one plain word is put for another
  right after an aligned content word (for a few words at the end of the
  text); not a word's other form (``use``, ``uses``), not words the other text
  still holds (the same words in another order). Before any aligned content
  word it is what the statement is about ("Staging uses Redis" beside
  "Production uses Redis"): two statements, no change.
- **A flipped polarity**: a short differing part where one side holds a
  negative (``not``, ``no``, ``don't``, ``won't``, ``never``, ``disabled``,
  ``false``, ``removed``, ``deprecated``...) and the other does not, the other
  words the same, inside the statement (a negative added at the end is
  detail, not a reversal); or one text calls a thing the other names
  ``deprecated``, ``unmaintained``, ``removed`` or ``dropped``.
- **A stated switch**: one text says ``from X to Y``, ``replaced X with Y``,
  ``X replaced by Y``, ``Y instead of X`` or ``X -> Y``, and the other
  mentions X but not Y.

Texts that are the same, or only add detail, change nothing. Every rule looks
at the pair without regard to which came first (the pair is put in one order
before it is aligned), so ``change(a, b)`` is None exactly when ``change(b,
a)`` is; only the answer's arrow follows the order given. Each text is read
up to :data:`MAX_CHARS` characters and :data:`MAX_TOKENS` tokens, so a call
takes well under a millisecond.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from ..core.lexicon import STOPWORDS, WORD

__all__ = [
    "MAX_CHARS",
    "MAX_REWORDED",
    "MAX_SPAN",
    "MAX_TOKENS",
    "MIN_DENSE_SHARE",
    "MIN_SHARE",
    "change",
]

#: Characters of each text looked at.
MAX_CHARS = 1200
#: Tokens of each text looked at.
MAX_TOKENS = 200
#: Content tokens on each side of a differing part that can be a changed value.
MAX_SPAN = 4
#: The share of the sparser text's content tokens (outside the changed parts)
#: that the aligned parts must hold.
MIN_SHARE = 0.5
#: The share of the denser text's content tokens the aligned parts must hold: it may
#: add detail, not be mostly about something else.
MIN_DENSE_SHARE = 0.35
#: Differing parts with content words that change no value (detail, rewording) a
#: restatement may have, at most.
MAX_REWORDED = 2
#: Changes named in one answer, at most.
MAX_CHANGES = 3

_W = WORD.pattern
#: A token: words joined by ``.``, ``-``, ``/`` or an apostrophe.
TOKEN = re.compile(rf"{_W}(?:[.\-/'\u2019]{_W})*")
_DIGIT = re.compile(r"\d")
#: A change the text states with an arrow: ``X -> Y``.
_ARROW = re.compile(r"(\S+(?: \S+)?) ?(?:->|=>|\u2192) ?(\S+(?: \S+)?)")


def _set(words: str) -> frozenset[str]:
    """The words of a text, apostrophes straightened."""
    return frozenset(words.replace("\u2019", "'").split())


NUMBER_WORDS = _set(
    "zero one two three four five six seven eight nine ten eleven twelve fifteen twenty "
    "thirty forty fifty hundred dozen once twice thrice half"
)
#: Words that deny or undo what they stand by.
NEGATIVES = _set(
    """not no never none nor without cannot can't don't doesn't didn't won't wouldn't isn't
    aren't wasn't weren't shouldn't mustn't haven't hasn't dont doesnt didnt wont isnt
    arent cant shouldnt disabled disable disables disallowed disallow off false removed
    remove removes dropped drop drops deprecated deprecate stopped stop stops avoid avoids
    avoided banned ban forbidden forbid dropping removing deleted delete abandoned
    reverted revert rejected reject optional unsupported unused"""
)
#: Words that say a thing is gone, said after it or before it.
RETIRING = _set("deprecated unmaintained removed dropped retired abandoned discontinued")
#: Words that say the text tells of a switch; they are not part of a changed value.
MARKERS = _set(
    """now longer moved move moving switched switch switching migrated migrate migrating
    upgraded upgrade bumped bump changed change replaced replace renamed rename instead
    went going use uses using used adopted adopt chose choose picked"""
)
#: Words that say how sure or how recent a statement is, not what it states.
FILLERS = _set(
    """currently actually think believe guess recently still also really just probably
    today yesterday anymore though however update updated note way okay ok yet already
    decided plan planning"""
)
#: Words before a number that make the number an identifier, not a value.
_NAMING = _set(
    "issue issues pr prs ticket bug incident commit line lines id ref sec section chapter page "
    "figure fig table step"
)


@dataclass(frozen=True, slots=True)
class _Text:
    raw: list[str]  # tokens as written
    low: list[str]  # lower case, apostrophes straightened
    starts: list[bool]  # whether the token opens a sentence
    hashed: list[bool]  # whether ``#`` comes right before the token


def _tokens(text: str) -> _Text:
    text = text[:MAX_CHARS]
    raw: list[str] = []
    starts: list[bool] = []
    hashed: list[bool] = []
    for match in TOKEN.finditer(text):
        if len(raw) >= MAX_TOKENS:
            break
        at = match.start() - 1
        while at >= 0 and text[at].isspace():
            at -= 1
        raw.append(match.group())
        starts.append(at < 0 or text[at] in ".!?:;")
        hashed.append(match.start() > 0 and text[match.start() - 1] == "#")
    low = [t.lower().replace("\u2019", "'") for t in raw]
    return _Text(raw, low, starts, hashed)


def _is_content(token: str) -> bool:
    """Not a stop word, nor one with an ending (``i've``, ``we're``, ``it's``)."""
    return token not in STOPWORDS and token.split("'", 1)[0] not in STOPWORDS


def _is_identifier(text: _Text, i: int) -> bool:
    """Whether a token with a digit names a thing (``#123``, ``issue 123``)."""
    if not _DIGIT.search(text.low[i]):
        return False
    return text.hashed[i] or (i > 0 and text.low[i - 1] in _NAMING)


def _is_number(text: _Text, i: int) -> bool:
    token = text.low[i]
    if not (_DIGIT.search(token) or token in NUMBER_WORDS):
        return False
    return not _is_identifier(text, i)


def _looks_like_name(text: _Text, i: int) -> bool:
    token = text.raw[i]
    if _DIGIT.search(token) or any(c in token for c in "-_./"):
        return True
    inner_capital = any(c.isupper() for c in token[1:])
    return inner_capital or (token[:1].isupper() and not text.starts[i])


def _stem(word: str) -> str:
    for ending in ("ing", "ed", "es", "s", "e", "d"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)]
    return word


def _other_form(a: str, b: str) -> bool:
    """Whether two words are forms of one (``use``, ``uses``, ``used``; ``serves``, ``served``)."""
    return a.isalpha() and b.isalpha() and _stem(a) == _stem(b)


@dataclass(frozen=True, slots=True)
class _Found:
    kind: str  # "number", "name", "polarity", "switch"
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class _Flanks:
    """What lies around a differing part: aligned words before it (any, and content
    words), and aligned words after it."""

    before: bool
    content_before: bool
    after: bool
    content_next_to: bool  # the aligned words right before it hold a content word


def _words(text: _Text, lo: int, hi: int) -> str:
    return " ".join(text.raw[lo:hi])


def _kept(text: _Text, side: range) -> list[int]:
    """A differing side's tokens that can be a value: content, not a switch's words nor
    filler, not an identifier."""
    return [
        i
        for i in side
        if _is_content(text.low[i])
        and text.low[i] not in MARKERS
        and text.low[i] not in FILLERS
        and not _is_identifier(text, i)
    ]


def _still_there(words: list[str], other: _Text) -> bool:
    """Whether every one of ``words`` (some) is in ``other``, in one form or another."""
    have = set(other.low)
    return bool(words) and all(
        w in have or any(_other_form(w, h) for h in have if h[:2] == w[:2]) for w in words
    )


def _span_change(
    a: _Text, b: _Text, i1: int, i2: int, j1: int, j2: int, flanks: _Flanks
) -> _Found | None:
    """What a differing part changes: a number, a polarity, or a name; None when nothing."""
    if i2 - i1 > MAX_SPAN + 2 or j2 - j1 > MAX_SPAN + 2:
        return None
    side_a, side_b = range(i1, i2), range(j1, j2)
    kept_a, kept_b = _kept(a, side_a), _kept(b, side_b)
    if len(kept_a) > MAX_SPAN or len(kept_b) > MAX_SPAN:
        return None
    both = i2 > i1 and j2 > j1
    if not both:
        return _gap_change(a, b, i1, i2, j1, j2, flanks)
    ids_a = {a.low[i] for i in side_a if _is_identifier(a, i)}
    ids_b = {b.low[j] for j in side_b if _is_identifier(b, j)}
    if ids_a and ids_b and ids_a != ids_b:
        return _Found("subject", _words(a, i1, i2), _words(b, j1, j2))  # other things
    plain_a = {a.low[i] for i in kept_a} - NEGATIVES
    plain_b = {b.low[j] for j in kept_b} - NEGATIVES
    neg_a = any(a.low[i] in NEGATIVES for i in side_a)
    neg_b = any(b.low[j] in NEGATIVES for j in side_b)
    # One word put for its opposite, or a negative added to the same words.
    same = plain_a == plain_b or len(plain_a) + len(plain_b) <= 1
    if neg_a != neg_b and same and (flanks.before or flanks.after):
        return _Found("polarity", _words(a, i1, i2), _words(b, j1, j2))
    nums_a = [a.low[i] for i in kept_a if _is_number(a, i)]
    nums_b = [b.low[j] for j in kept_b if _is_number(b, j)]
    if _still_there(nums_a, b) or _still_there(nums_b, a):
        return None  # the same numbers, said in another order
    if nums_a and nums_b and nums_a != nums_b:
        others_a = {a.low[i] for i in kept_a} - set(nums_a)
        others_b = {b.low[j] for j in kept_b} - set(nums_b)
        if others_a == others_b or not others_a or not others_b:
            return _Found("number", _words(a, i1, i2), _words(b, j1, j2))
    if not kept_a or not kept_b:
        return None
    if len(kept_a) == 1 and len(kept_b) == 1 and _other_form(a.low[kept_a[0]], b.low[kept_b[0]]):
        return None
    if _still_there([a.low[i] for i in kept_a], b) or _still_there([b.low[j] for j in kept_b], a):
        return None  # the same words, said in another order
    if min(len(kept_a), len(kept_b)) > 2 or max(len(kept_a), len(kept_b)) > 3:
        return None  # another statement, not another value
    named = any(_looks_like_name(a, i) for i in kept_a) or any(
        _looks_like_name(b, j) for j in kept_b
    )
    old = _words(a, kept_a[0], kept_a[-1] + 1)
    new = _words(b, kept_b[0], kept_b[-1] + 1)
    if not flanks.content_before:
        # Before any aligned content word: what the statement is about.
        return _Found("subject", old, new)
    # Plain words put for others count right after an aligned content word only: one
    # for one, or for a few at the end ("handled with pytz" beside "handled with
    # zoneinfo from the standard library").
    ends = not flanks.after and min(len(kept_a), len(kept_b)) == 1
    plain = flanks.content_next_to and (len(kept_a) == len(kept_b) == 1 or ends)
    return _Found("name", old, new) if named or plain else None


def _gap_change(
    a: _Text, b: _Text, i1: int, i2: int, j1: int, j2: int, flanks: _Flanks
) -> _Found | None:
    """What words only one text has change: a negative inside the statement (not detail
    added at its end), or a number put before the other's (``MySQL 8.0`` beside ``MySQL
    5.7``, with the older number kept further on)."""
    text, lo, hi, other, at = (a, i1, i2, b, j1) if i2 > i1 else (b, j1, j2, a, i1)
    if flanks.after and hi - lo <= 2 and any(text.low[k] in NEGATIVES for k in range(lo, hi)):
        anchor = text.raw[hi] if _is_content(text.low[hi]) else ""
        with_negative = " ".join(x for x in (_words(text, lo, hi), anchor) if x)
        without = anchor or "yes"
        return _Found(
            "polarity", *((with_negative, without) if text is a else (without, with_negative))
        )
    if (
        flanks.content_before
        and at < len(other.low)
        and _is_number(text, lo)
        and _is_number(other, at)
        and text.low[lo] != other.low[at]
    ):
        pair = (text.raw[lo], other.raw[at])
        return _Found("number", *(pair if text is a else pair[::-1]))
    return None


Span = tuple[int, int]


def _stated_switches(text: _Text) -> list[tuple[Span, Span]]:
    """The switches a text states, as the token ranges of what it left and what it took:
    ``from X to Y``, ``replaced X with Y``, ``X replaced by Y``, ``Y instead of X``."""
    low = text.low
    found: list[tuple[Span, Span]] = []

    def part(token: str) -> bool:  # a token a switched thing's name can hold
        return bool(_DIGIT.search(token)) or (
            _is_content(token) and token not in MARKERS and token not in FILLERS
        )

    def ahead(at: int) -> Span:  # up to 3 content tokens from ``at`` on
        end = at
        while end < len(low) and end - at < 3 and part(low[end]):
            end += 1
        return at, end

    def behind(at: int) -> Span:  # up to 3 content tokens ending at ``at``
        lo = at + 1
        while lo > 0 and at + 1 - lo < 3 and part(low[lo - 1]):
            lo -= 1
        return lo, at + 1

    def keep(x: Span, y: Span) -> None:
        if x[1] > x[0] and y[1] > y[0]:
            found.append((x, y))

    for k, token in enumerate(low):
        if token == "from":
            for m in range(k + 2, min(k + 5, len(low))):
                if low[m] == "to":
                    keep((k + 1, m), ahead(m + 1))
                    break
        elif token in ("replaced", "replace", "swapped", "swap") and k + 1 < len(low):
            if low[k + 1] == "by":  # X replaced by Y
                keep(behind(k - 1), ahead(k + 2))
                continue
            for m in range(k + 2, min(k + 5, len(low))):
                if low[m] in ("with", "by", "for"):
                    keep((k + 1, m), ahead(m + 1))
                    break
        elif token == "instead" and k + 2 < len(low) and low[k + 1] == "of":
            keep(ahead(k + 2), behind(k - 1))
    return found


def _arrows(text: str) -> list[tuple[str, str]]:
    """The switches a text states with an arrow, ``X -> Y``: the word on each side."""
    out = []
    for match in _ARROW.finditer(text[:MAX_CHARS]):
        x, y = TOKEN.findall(match.group(1)), TOKEN.findall(match.group(2))
        if x and y:
            out.append((x[-1], y[0]))
    return out


def _switch(stating: _Text, raw: str, other: _Text) -> _Found | None:
    """A switch ``stating`` tells of whose left side ``other`` holds and whose taken side
    it does not; as (left, taken)."""
    have = set(other.low)
    pairs = [(_words(stating, *x), _words(stating, *y)) for x, y in _stated_switches(stating)]
    for left, taken in pairs + _arrows(raw):
        x = [t.lower() for t in TOKEN.findall(left)]
        y = [t.lower() for t in TOKEN.findall(taken)]
        x_content = [t for t in x if _is_content(t)] or x
        y_content = [t for t in y if _is_content(t)] or y
        if set(x_content) <= have and not set(y_content) & have and set(x) != set(y):
            return _Found("switch", left, taken)
    return None


def _retired(stating: _Text, other: _Text) -> _Found | None:
    """A thing ``stating`` calls retired (``X is deprecated``, ``dropped X``) that ``other``
    names without calling it so; as (the thing, the thing retired)."""
    if any(t in RETIRING for t in other.low):
        return None
    have = set(other.low)
    low = stating.low
    for k, token in enumerate(low):
        if token not in RETIRING:
            continue
        near = [*range(k - 1, max(k - 4, -1), -1), *range(k + 1, min(k + 3, len(low)))]
        for at in near:
            word = low[at]
            if word in STOPWORDS or word in MARKERS or word in FILLERS:
                continue
            if word in NEGATIVES or _DIGIT.fullmatch(word.replace(".", "")):
                break
            if word in have:
                return _Found("polarity", stating.raw[at], f"{stating.raw[at]} {stating.raw[k]}")
            if at < k:
                break  # the nearest word before it, only
    return None


def _content(text: _Text) -> set[str]:
    """The tokens the shared share counts: content, not a switch's word, negative or filler."""
    return {t for t in text.low if _is_content(t) and t not in MARKERS | NEGATIVES | FILLERS}


def _findings(a_raw: str, b_raw: str) -> list[_Found]:
    """The changes between two texts, read as ``a`` then ``b``."""
    a, b = _tokens(a_raw), _tokens(b_raw)
    if not a.low or not b.low or a.low == b.low:
        return []
    opcodes = SequenceMatcher(None, a.low, b.low, autojunk=False).get_opcodes()
    matched: set[str] = set()
    found: list[_Found] = []
    changed_a: set[str] = set()
    changed_b: set[str] = set()
    aligned_before = False  # an aligned word before this part
    content_before = False  # an aligned content word before this part
    content_next_to = False  # one in the aligned words right before this part
    reworded = 0  # differing parts with content words that change no value
    for n, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            aligned_before = True
            content_next_to = any(_is_content(t) for t in a.low[i1:i2])
            content_before = content_before or content_next_to
            matched.update(a.low[i1:i2])
            continue
        flanks = _Flanks(aligned_before, content_before, n + 1 < len(opcodes), content_next_to)
        one = _span_change(a, b, i1, i2, j1, j2, flanks)
        if one is None:
            if _kept(a, range(i1, i2)) or _kept(b, range(j1, j2)):
                reworded += 1
                if reworded > MAX_REWORDED:
                    return []  # reworded throughout: another text, not a restatement
            continue
        if one.kind == "subject":
            return []  # two statements about different things
        found.append(one)
        changed_a.update(a.low[i1:i2])
        changed_b.update(b.low[j1:j2])
    for stating, raw, other, flip in ((b, b_raw, a, False), (a, a_raw, b, True)):
        switch = _switch(stating, raw, other)
        if switch is not None:
            found.append(_Found("switch", switch.new, switch.old) if flip else switch)
            left = {t.lower() for t in TOKEN.findall(switch.old)}
            taken = {t.lower() for t in TOKEN.findall(switch.new)}
            matched.update(left)
            changed_a.update(taken)
            changed_b.update(taken)
    for stating, other, flip in ((b, a, False), (a, b, True)):
        gone = _retired(stating, other)
        if gone is not None:
            found.append(_Found("polarity", gone.new, gone.old) if flip else gone)
            matched.add(gone.old.lower())
    if not found:
        return []
    content_a, content_b = _content(a), _content(b)
    (sparse, changed), dense = sorted(
        ((content_a, changed_a), (content_b, changed_b)), key=lambda pair: len(pair[0])
    )
    need = sparse - changed
    shared = len(sparse & matched)
    least = 1 if len(sparse) <= 3 else 2
    if shared < least or shared < len(sparse) / 2 or len(need & matched) < MIN_SHARE * len(need):
        return []
    if len(dense[0] & matched) < MIN_DENSE_SHARE * len(dense[0]):
        return []  # the other text is mostly about something else
    return found


def change(old: str, new: str) -> str | None:
    """What ``new`` changes of ``old`` when it restates it with another value, in a few words
    ("15 -> 16", "PostgreSQL -> MySQL", "use -> don't use"); None when it does not restate
    it, or restates it unchanged.

    Deterministic and bounded (see the module's rules); never raises on a string.
    """
    if not isinstance(old, str) or not isinstance(new, str):
        return None
    first, second = sorted((old, new), key=lambda t: (t[:MAX_CHARS], t))
    swapped = first is not old
    if first == second:
        return None
    said: list[str] = []
    for one in _findings(first, second):
        older, newer = (one.new, one.old) if swapped else (one.old, one.new)
        line = f"{older} -> {newer}"
        if line not in said:
            said.append(line)
    return "; ".join(said[:MAX_CHANGES]) or None
