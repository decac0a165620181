"""The engine's maintenance verbs: fold, unfold, restore, archive, forget, reinforce, purge.

:class:`MaintenanceVerbs` holds these methods of
:class:`~prime_memory_folding.engine.MemoryEngine`, which inherits them. Each
checks its arguments and hands the work, with the engine's parts
(:class:`~prime_memory_folding.parts.EngineParts`), to
:mod:`~prime_memory_folding.maintenance`; decay, prune, cluster and merge live
in :mod:`~prime_memory_folding.folding`, the archive's SQL in
:mod:`~prime_memory_folding.storage.archive`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from . import maintenance, writes
from .address import parse_record_id
from .errors import InvalidInput, NotFound
from .folding import FoldPolicy, FoldReport
from .records import Record, Version
from .storage import archive

if TYPE_CHECKING:
    from .parts import EngineParts

__all__ = ["MaintenanceVerbs"]


class MaintenanceVerbs:
    """:class:`~prime_memory_folding.engine.MemoryEngine`'s maintenance methods.

    A class that inherits them sets ``_parts``: the parts its verbs work on.
    """

    __slots__ = ()
    _parts: EngineParts

    @property
    def fold_policy(self) -> FoldPolicy:
        """The policy that decays strength in queries and drives :meth:`fold` by default."""
        return self._parts.fold_policy

    def fold(
        self,
        *,
        dry_run: bool = False,
        now: float | None = None,
        policy: FoldPolicy | None = None,
        progress: Callable[[str, int, int], None] | None = None,
        keep_apart: Iterable[str] = (),
        full: bool = False,
    ) -> FoldReport:
        """Decay, prune, cluster and merge: keep the store small and meaningful.

        Pruned records and the members of each folded record move to the
        archive; nothing is destroyed. The fold is one transaction. Other
        processes may keep writing: the plan is re-made under the write lock if
        anything changed since it was made.

        A fold is incremental when it can be: it screens only the records new
        or changed since the last fold (against the whole store) and finds the
        records due for pruning from their stored prune moments, and gives the
        merges a full fold would. It is full the first time, with
        ``full=True``, with a policy whose decay or link rules differ from the
        last fold's, or when much of the store changed.

        Args:
            dry_run: report what a fold would do, and change nothing.
            now: the time to decay to (Unix seconds); the engine's clock if None.
            policy: overrides the engine's fold policy for this fold.
            progress: called as ``progress(step, done, total)`` when each step
                starts (reading records, decaying and pruning, finding
                candidates, checking candidates, writing) and when the fold is done.
            full: read and screen every record, and write back decayed strengths.
            keep_apart: record ids whose groups are left unmerged this time: a
                group that would fold any of them is skipped (a preview's
                ``folded_from`` names each group's members).

        Raises:
            InvalidInput: ``now`` or ``policy`` is bad.
            NotAvailable: the store takes no SQL (neither SQLite nor PostgreSQL).
        """
        return maintenance.fold(
            self._parts,
            dry_run=dry_run,
            now=now,
            policy=policy,
            progress=progress,
            keep_apart=keep_apart,
            full=full,
        )

    def unfold(self, record_id: str) -> list[Record]:
        """Undo a fold: bring the folded record's members back exactly, and remove it.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no live or archived record has this id.
            InvalidInput: the record is not a folded record, is itself archived
                (restore it first), or a member's id or content is live again.
            NotAvailable: the store takes no SQL (neither SQLite nor PostgreSQL).
        """
        return maintenance.unfold(self._parts, record_id)

    def restore(self, record_id: str) -> Record:
        """Bring one archived record back exactly as it was archived.

        A restored record keeps its old strength, so a record that was pruned
        for decay is pruned again by the next fold unless it is reinforced.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: the archive holds no record with this id.
            InvalidInput: the record is live, or its id or content is live again.
            NotAvailable: the store takes no SQL (neither SQLite nor PostgreSQL).
        """
        return maintenance.restore(self._parts, record_id)

    def archive(self, record_ids: Iterable[str], *, detail: str = "archived by hand") -> int:
        """Move live records to the archive, all or nothing; :meth:`restore` brings each back.

        As with :meth:`forget`, nothing is lost: the records wait in the archive
        (reason ``forgotten``, with ``detail`` saying why) until restored or
        purged. Returns how many moved.

        Raises:
            InvalidRecordId: an id is malformed.
            NotFound: an id names no live record; nothing moved.
            InvalidInput: ``detail`` is empty.
            NotAvailable: the store takes no SQL (neither SQLite nor PostgreSQL).
        """
        if isinstance(record_ids, str):
            raise InvalidInput("record_ids must be a list of ids, not one string; wrap it: [id]")
        return maintenance.archive_by_hand(self._parts, list(record_ids), detail)

    def reinforce(self, record_id: str) -> Record:
        """Recall a record: raise its decayed strength and note the reinforcement.

        Strength moves from its decayed value towards 1; a reinforcement that
        comes well after the previous one also lengthens the half-life.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no live record has this id.
        """
        return maintenance.reinforce(self._parts, record_id, writes.REINFORCE_RATE)

    def purge_archive(self, *, before: float | None = None, reason: str | None = None) -> int:
        """Delete archived records for good and reclaim their space; returns how many.

        Args:
            before: only entries archived before this time (Unix seconds).
            reason: only ``"pruned"``, ``"forgotten"`` or ``"folded"`` entries. Purging folded
                members means their folded records can no longer be unfolded.

        Raises:
            InvalidInput: a bad argument.
            NotAvailable: the store takes no SQL (neither SQLite nor PostgreSQL).
        """
        return maintenance.purge_archive(self._parts, before=before, reason=reason)

    def forget(self, record_id: str) -> Record:
        """Forget a record: move it to the archive, and return what it held.

        Nothing is lost: :meth:`restore` brings it back, until
        :meth:`purge_archive` deletes it for good.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no live record has it.
            NotAvailable: the store takes no SQL (neither SQLite nor PostgreSQL).
        """
        rid = parse_record_id(record_id)
        with self._parts.lock:
            found = self._parts.storage.fetch([rid]).get(rid)
            if found is None:
                raise NotFound(f"no record {rid} in {self._parts.path}")
            maintenance.archive_by_hand(self._parts, [rid], "forgotten")
        return found.record

    def history(self, record_id: str) -> list[Version]:
        """The versions of a record that updates replaced, oldest first.

        An update that changes the content, tags, importance or scope keeps the
        version it replaced in the archive (reason ``replaced``).

        Raises:
            InvalidRecordId: the id is malformed.
            NotAvailable: the store takes no SQL (neither SQLite nor PostgreSQL).
        """
        rid = parse_record_id(record_id)
        with self._parts.lock:
            entries = archive.history(maintenance.sql_storage(self._parts), rid)
        return [Version(entry.stored.record, entry.archived_at) for entry in entries]
