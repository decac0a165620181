"""Memories' citations checked against the working tree: at recall, on demand, at a fold.

Both readers (the in-memory index's and PostgreSQL's) hand their hits here,
through :meth:`.MemoryEngine.query`, so a citation is checked in one place.
A hit whose record cites nothing passes unchanged.

:func:`check_all` re-validates every memory about code in some scopes
(:meth:`.MemoryEngine.check_citations`) and notes when each was last
verified, in the table ``cite_checks`` (beside the record, so a check leaves
no history); :func:`expired_and_stale` tells a fold which memories about code
expired and which of those are stale.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.address import parse_record_id
from ..core.citations import MOVED, STALE, UNCHECKED, VERIFIED, Citations, CitationState
from ..core.records import Hit, Record
from ..errors import InvalidInput, NotFound
from ..storage import SqlStorage, archive
from .writes import CITES_KEY

if TYPE_CHECKING:
    from ..fold.folding import FoldPolicy
    from .parts import EngineParts

__all__ = [
    "STALE_FACTOR",
    "CitationCheck",
    "CitationProgress",
    "CitationReport",
    "CitationState",
    "check_all",
    "check_record",
    "cited_records",
    "expired_and_stale",
    "mark_verified",
]

#: ``progress(done, total)``: memories checked so far, of how many.
CitationProgress = Callable[[int, int], None]

#: Live records whose metadata may hold citations; the same words as the
#: partial index ``records_cites`` (migration 14), so that it answers.
_CITED = "r.metadata LIKE '%\"cites\"%'"
#: Records fetched at once while checking.
_BATCH = 256

#: What a hit's score is multiplied by when any of its citations is stale:
#: a memory about code that changed ranks lower, but is never dropped.
STALE_FACTOR = 0.5


class CitationCheck:
    """The engine's citation checker: one cache of files read, shared by its queries."""

    def __init__(self, read: Callable[[Path], bytes] | None = None) -> None:
        self._citations = Citations(read)
        self._lock = threading.Lock()

    def check(self, cites: object) -> tuple[CitationState, ...]:
        """Stored citations (a record's ``metadata["cites"]``) against the working tree."""
        if not cites:
            return ()
        with self._lock:
            return self._citations.check(cites)

    def apply(self, hits: Sequence[Hit]) -> list[Hit]:
        """``hits`` with their citations checked, stale ones ranked lower, best first again.

        A checked hit gets ``citations`` and the score part ``citations``: 1.0,
        or :data:`STALE_FACTOR` when a citation is stale (its score is then
        multiplied by it). The order is kept among equal scores.
        """
        if not any(CITES_KEY in hit.record.metadata for hit in hits):
            return list(hits)
        checked: list[Hit] = []
        with self._lock:
            for hit in hits:
                cites = hit.record.metadata.get(CITES_KEY)
                if not cites:
                    checked.append(hit)
                    continue
                states = self._citations.check(cites)
                factor = STALE_FACTOR if any(s.state == STALE for s in states) else 1.0
                parts = {**hit.score_parts, "citations": factor}
                checked.append(
                    replace(hit, score=hit.score * factor, score_parts=parts, citations=states)
                )
        if all(s.score_parts.get("citations", 1.0) == 1.0 for s in checked):
            return checked
        return sorted(checked, key=lambda hit: -hit.score)


@dataclass(frozen=True, slots=True)
class CitationReport:
    """What :meth:`.MemoryEngine.check_citations` found.

    Attributes:
        checked_at: when the check ran (the engine's clock), in Unix seconds.
        memories: live memories that cite code, checked.
        citations: their citations, checked.
        verified, moved, stale, unchecked: citations in each state.
        verified_memories: memories whose every citation was verified or
            moved; each has ``checked_at`` noted as when it was last verified.
        findings: ``(record id, states)`` of each memory with a stale or moved
            citation, by record id; ``states`` are all of its citations'.
    """

    checked_at: float
    memories: int = 0
    citations: int = 0
    verified: int = 0
    moved: int = 0
    stale: int = 0
    unchecked: int = 0
    verified_memories: int = 0
    findings: tuple[tuple[str, tuple[CitationState, ...]], ...] = field(default=())

    @property
    def stale_memories(self) -> int:
        """Memories with at least one stale citation."""
        return sum(1 for _, states in self.findings if any(s.state == STALE for s in states))


def is_verified(states: Sequence[CitationState]) -> bool:
    """Whether every citation matches the code: verified or moved (none stale or unchecked)."""
    return bool(states) and all(s.state in (VERIFIED, MOVED) for s in states)


def stale_detail(states: Sequence[CitationState]) -> str | None:
    """A sentence naming a memory's first stale citation; None when none is stale."""
    for state in states:
        if state.state == STALE:
            return f"cited code changed: {state.path}: {state.detail}".rstrip(": ")
    return None


def cited_records(storage: SqlStorage) -> list[tuple[str, str, float, float | None]]:
    """Every live record that may cite code: ``(id, scope, accessed_at, verified_at)``.

    ``verified_at`` is when a check last verified it (None: never). The
    metadata decides (a record listed here may turn out to cite nothing).
    """
    rows = storage.db.execute(
        "SELECT r.record_id, r.scope, r.accessed_at, c.verified_at FROM records AS r "
        f"LEFT JOIN cite_checks AS c ON c.record_id = r.record_id WHERE {_CITED}"
    ).fetchall()
    return [
        (str(rid), str(scope), float(accessed), None if verified is None else float(verified))
        for rid, scope, accessed, verified in rows
    ]


def mark_verified(storage: SqlStorage, record_ids: Iterable[str], when: float) -> None:
    """Note ``when`` as the time these records were last verified (inside a transaction)."""
    storage.db.executemany(
        "INSERT INTO cite_checks (record_id, verified_at) VALUES (?, ?) "
        "ON CONFLICT (record_id) DO UPDATE SET verified_at = excluded.verified_at",
        [(rid, when) for rid in record_ids],
    )


def _cites_of(record: Record) -> Any:
    return record.metadata.get(CITES_KEY)


def check_record(
    engine: EngineParts, checker: CitationCheck, record_id: str
) -> tuple[CitationState, ...]:
    """See :meth:`.MemoryEngine.citations`."""
    rid = parse_record_id(record_id)
    storage = engine.storage
    with engine.reading():
        found = storage.fetch([rid]).get(rid)
        record = found.record if found is not None else None
        if record is None:
            entry = archive.archived(storage, rid)
            record = entry.stored.record if entry is not None else None
    if record is None:
        raise NotFound(f"no live or archived record {rid} in {engine.path}")
    return checker.check(_cites_of(record))


def check_all(
    engine: EngineParts,
    checker: CitationCheck,
    visible: Sequence[str] | None,
    progress: CitationProgress | None = None,
) -> CitationReport:
    """See :meth:`.MemoryEngine.check_citations`; ``visible`` are the scopes (None: all)."""
    if progress is not None and not callable(progress):
        raise InvalidInput("progress must be a function of (done, total), or None")
    storage = engine.storage
    when = engine.now()
    with engine.reading():
        listed = cited_records(storage)
    seen = None if visible is None else frozenset(visible)
    ids = sorted(rid for rid, scope, _, _ in listed if seen is None or scope in seen)
    total = len(ids)
    counts = {VERIFIED: 0, MOVED: 0, STALE: 0, UNCHECKED: 0}
    memories = 0
    verified: list[str] = []
    findings: list[tuple[str, tuple[CitationState, ...]]] = []
    if progress is not None:
        progress(0, total)
    for start in range(0, total, _BATCH):
        batch = ids[start : start + _BATCH]
        with engine.reading():
            rows = storage.fetch(batch)
        for rid in batch:
            row = rows.get(rid)
            states = checker.check(_cites_of(row.record)) if row is not None else ()
            if not states:
                continue
            memories += 1
            for state in states:
                counts[state.state] = counts.get(state.state, 0) + 1
            if is_verified(states):
                verified.append(rid)
            if any(s.state in (STALE, MOVED) for s in states):
                findings.append((rid, states))
        if progress is not None:
            progress(min(start + _BATCH, total), total)
    if verified:
        with engine.lock, storage.transaction():
            mark_verified(storage, verified, when)
    return CitationReport(
        checked_at=when,
        memories=memories,
        citations=sum(counts.values()),
        verified=counts[VERIFIED],
        moved=counts[MOVED],
        stale=counts[STALE],
        unchecked=counts[UNCHECKED],
        verified_memories=len(verified),
        findings=tuple(findings),
    )


def expired_and_stale(
    storage: SqlStorage, checker: CitationCheck, policy: FoldPolicy, now: float
) -> tuple[dict[str, float], list[tuple[str, str]]]:
    """What a fold at ``now`` needs to know of the memories about code.

    Returns when each live memory that cites code expires (its last use or
    verification, whichever is later, plus ``cite_expiry_days``), and the
    expired ones whose citations are stale now, ``(id, detail)``. A citation
    that could not be checked (``unchecked``) never makes a memory stale.
    Call inside the fold's read.
    """
    lasts = policy.cite_expiry_s
    if not math.isfinite(lasts):
        return {}, []
    expires = {
        rid: max(accessed, -math.inf if verified is None else verified) + lasts
        for rid, _, accessed, verified in cited_records(storage)
    }
    due = sorted(rid for rid, at in expires.items() if now >= at)
    stale: list[tuple[str, str]] = []
    for start in range(0, len(due), _BATCH):
        batch = due[start : start + _BATCH]
        rows = storage.fetch(batch)
        for rid in batch:
            row = rows.get(rid)
            cites = _cites_of(row.record) if row is not None else None
            if not cites:  # the metadata only mentions them: it cites nothing
                expires.pop(rid, None)
                continue
            detail = stale_detail(checker.check(cites))
            if detail is not None:
                stale.append((rid, detail))
    return expires, stale
