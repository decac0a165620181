"""Versions of a memory in time: supersession, what was valid when, and chains.

A memory is *current* while it is live. ``store(..., supersedes=ID)`` closes
the record ``ID``: it moves to the archive with reason ``superseded``, its
``archived_at`` is the moment it stopped being valid (``valid_to``) and its
``folded_into`` names its successor. An update closes the version it replaces
the same way (reason ``replaced``, successor the record itself). Nothing of a
closed version is lost: ``restore`` brings it back, and a chain
(:func:`chain`) walks predecessors and successors through the archive.

Reads see only live records, so a query without ``as_of`` never returns a
closed version. ``as_of`` (:func:`versions_at`) swaps each current hit for the
version of its chain that was valid at that moment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..core import words
from ..core.records import Chain, ChainLink, Hit, Record, Restatement
from ..errors import InvalidInput, NotFound
from ..recall import restate
from ..storage import SqlStorage, archive
from ..storage.archive import ArchiveEntry

__all__ = [
    "SUPERSEDED",
    "chain",
    "close",
    "describe",
    "hints",
    "probe",
    "versions_at",
]

#: The archive's reason for a version a newer memory superseded.
SUPERSEDED = "superseded"
#: The most older memories one memory is said to restate.
MAX_HINTS = 3


def close(
    storage: SqlStorage,
    closing: Sequence[tuple[str, str, str]],
    now: float,
    where: str,
) -> list[str]:
    """Close the records ``(old_id, new_id, new_scope)``: archive each as superseded by
    its new one. Call inside the transaction that stored the new ones; returns the ids
    closed.

    Raises:
        NotFound: an old id names no record, live or archived.
        InvalidInput: an old record is not live (closed or archived already), is
            of another scope than its successor, is its successor (a memory cannot
            supersede itself), is named twice, or is its successor's own
            successor further down the chain (a cycle).
    """
    if not closing:
        return []
    olds = [old for old, _, _ in closing]
    twice = sorted({old for old in olds if olds.count(old) > 1})
    if twice:
        raise InvalidInput(f"record {twice[0]} is superseded twice in one call; name it once")
    found = storage.fetch(olds)
    for old, new, scope in closing:
        if old == new:
            raise InvalidInput(
                f"supersedes names {old}, the record this store writes: a memory cannot "
                "supersede itself; store the new text, or update the record"
            )
        row = found.get(old)
        if row is None:
            entry = archive.archived(storage, old)
            if entry is None:
                raise NotFound(f"no record {old} in {where}; supersedes needs a live record")
            after = f" by {entry.folded_into}" if entry.reason == SUPERSEDED else ""
            raise InvalidInput(
                f"record {old} is not current: it is archived ({entry.reason}{after}); "
                "supersede the current version, or restore this one first"
            )
        if row.record.scope != scope:
            raise InvalidInput(
                f"record {old} is in scope {row.record.scope!r}, the new memory in {scope!r}: "
                "a memory supersedes only one of its own scope"
            )
        if new in _ancestors(storage, old):
            raise InvalidInput(
                f"record {new} was superseded by {old} before (directly or down its chain): "
                f"superseding {old} with it would make a cycle; restore {new} instead"
            )
    archive.archive_records(
        storage, [(old, SUPERSEDED, f"superseded by {new}", new) for old, new, _ in closing], now
    )
    return olds


def _ancestors(storage: SqlStorage, record_id: str) -> set[str]:
    """Every id superseded into ``record_id``, directly or through others."""
    seen: set[str] = set()
    todo = [record_id]
    while todo:
        for entry in archive.closed_into(storage, todo.pop()):
            rid = entry.stored.record.record_id
            if rid not in seen:
                seen.add(rid)
                todo.append(rid)
    return seen


def probe(content: str, max_words: int) -> str:
    """The head of ``content`` that finds what it may supersede: what the comparison
    reads (:data:`.restate.MAX_CHARS`), cut to at most ``max_words`` distinct words so
    that it passes as a query."""
    head = content[: restate.MAX_CHARS]
    while len(words.word_set(head)) > max_words:
        head = head[: len(head) * 3 // 4]
    return head


def hints(new: str, candidates: Sequence[Record]) -> list[Restatement]:
    """The older memories ``new`` may supersede, with what it changes of each."""
    found: list[Restatement] = []
    for record in candidates:
        if record.content == new:
            continue
        change = restate.change(record.content, new)
        if change is not None:
            found.append(Restatement(record, change))
        if len(found) == MAX_HINTS:
            break
    return found


# -- as of a moment ---------------------------------------------------------------


def versions_at(storage: SqlStorage, hits: Sequence[Hit], moment: float, limit: int) -> list[Hit]:
    """For each hit (a current memory), the versions of its chain valid at ``moment``.

    A memory stored after ``moment`` stands for its predecessors that were
    valid then, or for nothing; one updated since stands for the version its
    update replaced. Each version keeps its current memory's score and rank.
    """
    out: list[Hit] = []
    seen: set[str] = set()
    for hit in hits:
        for version in _valid_at(storage, hit.record, moment, set()):
            if version.record_id in seen:
                continue
            seen.add(version.record_id)
            out.append(replace(hit, record=version, citations=()))
        if len(out) >= limit:
            break
    return out[:limit]


def _valid_at(storage: SqlStorage, record: Record, moment: float, seen: set[str]) -> list[Record]:
    rid = record.record_id
    if rid in seen:
        return []
    seen.add(rid)
    if record.created_at <= moment:
        for entry in archive.history(storage, rid):
            if entry.archived_at > moment:
                return [entry.stored.record]  # the version an update replaced later
        return [record]
    found: list[Record] = []
    for entry in archive.closed_into(storage, rid):
        if entry.archived_at <= moment:
            continue  # closed already then, and so was everything before it
        found.extend(_valid_at(storage, entry.stored.record, moment, seen))
    return found


# -- chains -----------------------------------------------------------------------


def describe(before: Record, after: Record) -> str:
    """What ``after`` changes of ``before``, in a few words."""
    if before.content != after.content:
        return restate.change(before.content, after.content) or "content changed"
    changed = [
        name
        for name in ("tags", "importance", "scope", "domain", "subdomain")
        if getattr(before, name) != getattr(after, name)
    ]
    return f"{', '.join(changed)} changed" if changed else ""


def _own_versions(
    storage: SqlStorage, record: Record, valid_to: float | None, state: str
) -> list[ChainLink]:
    """A record's versions: those its updates replaced, then itself; oldest first."""
    replaced = archive.history(storage, record.record_id)
    links: list[ChainLink] = []
    start = record.created_at
    for entry in replaced:
        links.append(ChainLink(entry.stored.record, start, entry.archived_at, "replaced"))
        start = entry.archived_at
    links.append(ChainLink(record, start, valid_to, state))
    return links


def _closed_version(storage: SqlStorage, entry: ArchiveEntry) -> list[ChainLink]:
    return _own_versions(storage, entry.stored.record, entry.archived_at, entry.reason)


def _newest(storage: SqlStorage, record_id: str) -> list[ChainLink] | None:
    """A record's versions, the newest as it is now: live, or its last archive entry."""
    live = storage.fetch([record_id]).get(record_id)
    if live is not None:
        return _own_versions(storage, live.record, None, "live")
    entry = archive.archived(storage, record_id)
    if entry is None or entry.reason == "replaced":
        return None  # never stored, or purged
    return _closed_version(storage, entry)


def chain(storage: SqlStorage, record_id: str, where: str) -> Chain:
    """The validity chain of ``record_id`` (live or archived).

    Raises:
        NotFound: no record has this id, live or archived.
    """
    versions = _newest(storage, record_id)
    if versions is None:
        raise NotFound(f"no record {record_id} in {where}, live or archived")
    seen = {record_id}
    before = _predecessors(storage, record_id, seen) + versions[:-1]
    current = versions[-1]
    after: list[ChainLink] = []
    link = current
    while link.state == SUPERSEDED:
        entry = archive.archived(storage, link.record.record_id)
        successor = None if entry is None else entry.folded_into
        if successor is None or successor in seen:
            break
        seen.add(successor)
        found = _newest(storage, successor)
        if found is None:
            break
        after.extend(found)
        link = found[-1]
    return Chain(
        version=_changed(before[-1] if before else None, current),
        predecessors=tuple(_with_changes(before)),
        successors=tuple(_with_changes(after, current)),
    )


def _predecessors(storage: SqlStorage, record_id: str, seen: set[str]) -> list[ChainLink]:
    links: list[ChainLink] = []
    for entry in archive.closed_into(storage, record_id):
        rid = entry.stored.record.record_id
        if rid in seen:
            continue
        seen.add(rid)
        links.extend(_predecessors(storage, rid, seen))
        links.extend(_closed_version(storage, entry))
    return sorted(links, key=lambda link: (link.valid_to or 0.0, link.valid_from))


def _changed(previous: ChainLink | None, link: ChainLink) -> ChainLink:
    if previous is None:
        return link
    return replace(link, change=describe(previous.record, link.record))


def _with_changes(links: Sequence[ChainLink], first: ChainLink | None = None) -> list[ChainLink]:
    out: list[ChainLink] = []
    previous = first
    for link in links:
        out.append(_changed(previous, link))
        previous = link
    return out
