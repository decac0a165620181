"""The engine's views for people: browse, decay, the archive's entries, the profile.

:class:`Views` holds these methods of
:class:`~prime_memory_folding.engine.MemoryEngine`, which inherits them; each
hands the work, with the engine's parts
(:class:`~prime_memory_folding.parts.EngineParts`), to
:mod:`~prime_memory_folding.survey`, which checks the arguments. None of them
writes anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from . import survey

if TYPE_CHECKING:
    from .parts import EngineParts

__all__ = ["Views"]


class Views:
    """:class:`~prime_memory_folding.engine.MemoryEngine`'s views for people.

    A class that inherits them sets ``_parts``: the parts its views read.
    """

    __slots__ = ()
    _parts: EngineParts

    def browse(
        self,
        *,
        domain: str | None = None,
        subdomain: str | None = None,
        tags: Iterable[str] = (),
        any_tags: Iterable[str] = (),
        exclude_tags: Iterable[str] = (),
        min_strength: float = 0.0,
        max_strength: float = 1.0,
        updated_after: float | None = None,
        updated_before: float | None = None,
        scopes: Iterable[str] | None = None,
        among: Sequence[str] | None = None,
        order: str = "salience",
        offset: int = 0,
        limit: int = 50,
    ) -> survey.Page:
        """One page of the records that pass the gates, in a chosen order, and their count.

        The gates are :meth:`query`'s, plus the strength decayed to now at most
        ``max_strength``, and the last update in ``[updated_after, updated_before)``.
        ``among`` keeps only those ids (unknown ones are skipped). ``order`` is
        ``salience`` (importance x strength), ``newest``, ``oldest`` (by last
        update), ``importance``, ``strength``, or ``given`` (``among``'s order).
        Writes nothing.

        Raises:
            InvalidInput: a bad argument.
        """
        return survey.browse(
            self._parts,
            domain=domain,
            subdomain=subdomain,
            tags=tags,
            any_tags=any_tags,
            exclude_tags=exclude_tags,
            min_strength=min_strength,
            max_strength=max_strength,
            updated_after=updated_after,
            updated_before=updated_before,
            scopes=scopes,
            among=among,
            order=order,
            offset=offset,
            limit=limit,
        )

    def decay(self, record_id: str) -> survey.Decay:
        """A live record's tier, half-life and strength now, to draw its decay.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no live record has it.
        """
        return survey.decay(self._parts, record_id)

    def archive_entries(
        self,
        *,
        reason: str | None = None,
        contains: str | None = None,
        record_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> survey.ArchiveListing:
        """Archived records, newest first, with why and when they left, and their count.

        Args:
            reason: only ``"pruned"``, ``"forgotten"`` or ``"folded"`` entries.
            contains: only records whose content holds this text (any case).
            record_id: only this record's entries and those of the members
                folded into it.

        Raises:
            InvalidInput: a bad argument.
            NotAvailable: the store takes no SQL (neither SQLite nor PostgreSQL).
        """
        return survey.archive_entries(
            self._parts,
            reason=reason,
            contains=contains,
            record_id=record_id,
            limit=limit,
            offset=offset,
        )

    def profile(self) -> survey.Profile:
        """Every live record's id, creation time, access count and strength now.

        Raises:
            NotAvailable: the store takes no SQL (neither SQLite nor PostgreSQL).
        """
        return survey.profile(self._parts)
