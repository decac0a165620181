"""What a hook puts in front of the agent: a session's opening block, a prompt's memories.

Both are read with :class:`~prime_memory_folding.storage.sqlite_peek.Peek`,
without the engine, so that a hook process answers in a few tens of
milliseconds, and both fit a hard token budget as
:func:`~prime_memory_folding.engine.budget.count_tokens` counts it: a block
never holds more tokens than its budget, whatever the store holds.

**Session start** (:func:`opening`): the project's durable memories
(:data:`DURABLE_DOMAINS`) and the user's preferences, ranked by
:func:`standing`: importance times strength, with a lead for recent and
frequent use; then what the project's last session left unfinished (its last
request, and a command that failed and was never fixed); then one line naming
the MCP tools for more. An empty store gets one short line.

**A prompt** (:func:`relevant`): memories that share the prompt's rare words.
A memory's relevance is the share of the prompt's word weight it holds: the
sum of the inverse document frequencies of the prompt's words it holds, over
the sum for the prompt's :data:`MAX_PROMPT_WORDS` heaviest words, counting a
word no memory holds as the heaviest of all. A prompt about something the
store does not know thus scores low against every memory, however many
common words it shares. Only memories at or above :data:`THRESHOLD` are
shown; nothing is better than a wrong memory. Memories
already injected into the session and the session's own captures are left out.

**Citations.** A memory that cites code (``store(cites=...)``) has its
citations checked against the working tree before it is shown, as a query
checks its hits (:mod:`~prime_memory_folding.core.citations`): a line says
when its code moved or went stale, and a stale memory's standing or relevance
is multiplied by :data:`STALE_FACTOR`, so it ranks lower and may fall below
the threshold; a memory whose repository is not on this machine is shown as it is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..core.citations import MOVED, STALE, Citations, CitationState
from ..core.lexicon import STOPWORDS, WORD
from ..engine.budget import count_tokens
from ..storage.sqlite_peek import Peek, PeekRow

__all__ = [
    "DURABLE_DOMAINS",
    "OPENING_BUDGET",
    "PROMPT_BUDGET",
    "STALE_FACTOR",
    "THRESHOLD",
    "Block",
    "opening",
    "relevant",
    "standing",
]

#: The opening block's default budget, in tokens.
OPENING_BUDGET = 1_000
#: A prompt's block's default budget, in tokens.
PROMPT_BUDGET = 400
#: The smallest budget either block takes: below it not even a header fits.
MIN_BLOCK_BUDGET = 40
#: Domains whose memories hold for a whole project, in the order a tie prefers.
DURABLE_DOMAINS = ("decision", "convention", "preference", "pitfall", "workflow", "lesson")
#: The least relevance (share of the prompt's word weight) a memory needs to be injected.
THRESHOLD = 0.5
#: A prompt's heaviest words that make its whole weight; more add time, not precision.
MAX_PROMPT_WORDS = 12
#: A prompt's words looked up in the store, in the prompt's order.
MAX_PROMPT_WORDS_READ = 36
#: Candidates a prompt's words bring back before relevance is measured.
CANDIDATES = 30
#: The most memories a prompt's block shows.
MAX_PROMPT_MEMORIES = 3
#: The most tokens one memory takes in a block; a longer one is cut.
MAX_MEMORY_TOKENS = 120
#: What a memory's standing or relevance is multiplied by when a citation is stale
#: (the engine's queries halve a stale hit's score the same way).
STALE_FACTOR = 0.5
#: Recent use leads by half its weight after this many days.
RECENT_USE_HALF_LIFE_D = 30.0
TOOLS_LINE = "More: prime_memory_query searches this memory; prime_memory_store saves to it."
EMPTY_LINE = "prime-memory: no memories for this project yet (prime_memory_store saves one)."


@dataclass(frozen=True)
class Block:
    """A block of context: its text ("" for none) and the memories it shows."""

    text: str
    record_ids: tuple[str, ...]


def standing(row: PeekRow, now: float) -> float:
    """How strongly a durable memory asks to be shown: importance x strength,
    up to twice that for recent use, and a little more for frequent use."""
    days = max(0.0, now - row.accessed_at) / 86400.0
    recent = math.pow(0.5, days / RECENT_USE_HALF_LIFE_D)
    frequent = 1.0 + 0.1 * math.log1p(row.access_count)
    return row.importance * row.strength * (1.0 + recent) * frequent


def _cut(text: str, tokens: int) -> str:
    """``text`` cut to at most ``tokens`` tokens, with a mark when cut."""
    flat = " ".join(text.split())
    if count_tokens(flat) <= tokens:
        return flat
    low, high = 0, len(flat)
    while low < high:  # the longest head that fits with the mark
        middle = (low + high + 1) // 2
        if count_tokens(flat[:middle] + " […]") <= tokens:
            low = middle
        else:
            high = middle - 1
    return flat[:low].rstrip() + " […]" if low else ""


def citation_states(row: PeekRow, checker: Citations) -> tuple[CitationState, ...]:
    """A memory's citations checked against the working tree; () when it cites nothing.

    One ``checker`` serves a whole block, so a file many memories cite is read,
    and a repository's renames asked of git, once.
    """
    cites = row.metadata.get("cites")
    return checker.check(cites) if cites else ()


def _factor(states: Sequence[CitationState]) -> float:
    return STALE_FACTOR if any(s.state == STALE for s in states) else 1.0


def _note(states: Sequence[CitationState]) -> str:
    """What a line says of its memory's code: stale or moved citations, briefly."""
    stale = [s.path for s in states if s.state == STALE]
    if stale:
        return f" (code changed since: {', '.join(dict.fromkeys(stale))})"
    moved = [f"{s.path}:{s.lines}" if s.lines else s.path for s in states if s.state == MOVED]
    return f" (code moved: now {', '.join(dict.fromkeys(moved))})" if moved else ""


def _line(row: PeekRow, states: Sequence[CitationState] = ()) -> str:
    return f"- [{row.domain}] {_cut(row.content, MAX_MEMORY_TOKENS)}{_note(states)}"


class _Filler:
    """Lines added while they fit a budget.

    Each line is counted once: the count of lines joined by newlines is at
    most the sum of their counts plus one a line, so a block filled by that
    sum never holds more tokens than its budget.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.lines: list[str] = []
        self.used = 0

    def text(self) -> str:
        return "\n".join(self.lines)

    def add(self, *lines: str) -> bool:
        cost = sum(count_tokens(line) + 1 for line in lines)
        if self.used + cost > self.budget:
            return False
        self.lines.extend(lines)
        self.used += cost
        return True


def _ago(seconds: float) -> str:
    minutes = max(0.0, seconds) / 60
    if minutes < 90:
        return f"{max(1, round(minutes))} min"
    hours = minutes / 60
    return f"{round(hours)} h" if hours < 36 else f"{round(hours / 24)} days"


def opening(
    peek: Peek,
    *,
    scope: str,
    user_scope: str,
    last_session: str | None,
    budget: int = OPENING_BUDGET,
    now: float | None = None,
) -> Block:
    """The block a session starts with (see the module docstring); ``last_session``
    is the project's session before this one, if any."""
    now = time.time() if now is None else now
    filler = _Filler(budget)
    shown: list[str] = []
    durable = peek.in_domains([scope], DURABLE_DOMAINS, limit=200)
    if user_scope != scope:
        durable += peek.in_domains([user_scope], ("preference",), limit=50)
    order = {domain: rank for rank, domain in enumerate(DURABLE_DOMAINS)}
    checker = Citations()
    states = {row.record_id: citation_states(row, checker) for row in durable}
    durable.sort(
        key=lambda row: (
            -standing(row, now) * _factor(states[row.record_id]),
            order.get(row.domain, 99),
            row.record_id,
        )
    )
    header = f"Memory of {scope} (prime-memory), most important first:"
    for row in durable:
        if filler.add(*([] if filler.lines else [header]), _line(row, states[row.record_id])):
            shown.append(row.record_id)
    unfinished = _unfinished(peek, scope, last_session, now)
    for line in unfinished:
        filler.add(line)
    if not filler.lines:
        return Block(EMPTY_LINE if count_tokens(EMPTY_LINE) <= budget else "", ())
    filler.add(TOOLS_LINE)
    return Block(filler.text(), tuple(shown))


def _unfinished(peek: Peek, scope: str, last: str | None, now: float) -> list[str]:
    """Lines on what the project's last session left: its last request, and what failed."""
    if last is None:
        return []
    rows = peek.of_session(last, scope, limit=50)
    if not rows:
        return []
    lines = [f"Last session here ({_ago(now - rows[-1].created_at)} ago):"]
    prompts = [row for row in rows if row.domain == "session" and row.subdomain == "prompt"]
    if prompts:
        lines.append(f"- last request: {_cut(prompts[-1].content, 80)}")
    answers = [row for row in rows if row.domain == "session" and row.subdomain == "answer"]
    if answers and (not prompts or answers[-1].created_at >= prompts[-1].created_at):
        lines.append(f"- it ended with: {_cut(answers[-1].content, 80)}")
    elif prompts:
        lines.append("- that request got no answer before the session ended")
    for row in rows:
        if row.domain == "session" and row.subdomain == "failure":
            lines.append(f"- still failing: {_cut(row.content.splitlines()[0], 40)}")
    return lines if len(lines) > 1 else []


def prompt_words(text: str) -> list[str]:
    """A prompt's distinct words that say something, in order: no stop word, no
    single letter, no bare number of fewer than four digits."""
    words = (m.group().lower() for m in WORD.finditer(text))
    return list(
        dict.fromkeys(
            w
            for w in words
            if w not in STOPWORDS and len(w) > 1 and not (w.isdigit() and len(w) < 4)
        )
    )


@dataclass(frozen=True)
class Scored:
    """A candidate memory and the share of the prompt's word weight it holds."""

    row: PeekRow
    relevance: float


def scored(
    peek: Peek,
    prompt: str,
    scopes: Sequence[str],
    *,
    threshold: float = 0.0,
    limit: int = CANDIDATES,
) -> list[Scored]:
    """The memories sharing ``prompt``'s rarest words, most relevant first.

    Only memories that can reach ``threshold`` are looked for: one that holds
    none of the rarest words whose weight passes ``1 - threshold`` of the
    whole cannot, so only those words bring candidates back.
    """
    words = prompt_words(prompt)[:MAX_PROMPT_WORDS_READ]
    if not words:
        return []
    total = peek.count()
    frequencies = {word: peek.frequency(word) for word in words}

    def weight(word: str) -> float:
        df = frequencies[word]
        return math.log(1.0 + (total - df + 0.5) / (df + 0.5))

    # The whole: the prompt's heaviest words, those no memory holds included,
    # so that a prompt about what the store does not know scores low.
    whole = sum(sorted((weight(w) for w in words), reverse=True)[:MAX_PROMPT_WORDS])
    known = sorted((w for w in words if frequencies[w] > 0), key=lambda w: frequencies[w])
    known = known[:MAX_PROMPT_WORDS]
    if not known:
        return []
    weights = {word: weight(word) for word in known}
    asking: list[str] = []
    for word in known:  # rarest first
        asking.append(word)
        if sum(weights[w] for w in asking) > (1.0 - threshold) * whole:
            break
    rows = peek.matching(asking, scopes, limit=limit)
    held: dict[int, float] = {}
    ids = [row.row for row in rows]
    for word in known:
        for row_id in peek.holding(word, ids):
            held[row_id] = held.get(row_id, 0.0) + weights[word]
    found = [Scored(row, held.get(row.row, 0.0) / whole) for row in rows]
    # Stable: rows come best BM25 first, which breaks ties in relevance.
    return sorted(found, key=lambda s: -s.relevance)


def relevant(
    peek: Peek,
    prompt: str,
    *,
    scopes: Sequence[str],
    session: str | None,
    seen: set[str],
    budget: int = PROMPT_BUDGET,
    threshold: float = THRESHOLD,
    keep: Callable[[PeekRow], bool] | None = None,
) -> Block:
    """The memories to put before ``prompt`` (see the module docstring); "" when none clears."""
    filler = _Filler(budget)
    header = "Memories that may bear on this (prime-memory):"
    shown: list[str] = []
    checker = Citations()
    candidates = []
    for candidate in scored(peek, prompt, scopes, threshold=threshold):
        if candidate.relevance < threshold:
            break
        states = citation_states(candidate.row, checker)
        candidates.append((candidate.relevance * _factor(states), candidate.row, states))
    candidates.sort(key=lambda found: -found[0])  # stable: ties keep their order
    for relevance, row, states in candidates:
        if relevance < threshold or len(shown) >= MAX_PROMPT_MEMORIES:
            break
        if row.record_id in seen or (session is not None and row.session == session):
            continue
        if row.domain == "session" and row.subdomain == "prompt":
            continue  # an earlier request says less than what came of it
        if keep is not None and not keep(row):
            continue
        if filler.add(*([] if filler.lines else [header]), _line(row, states)):
            shown.append(row.record_id)
    return Block(filler.text() if shown else "", tuple(shown))
