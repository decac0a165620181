"""The values the engine hands out, and the checks every input passes first."""

from __future__ import annotations

import itertools
import json
import math
import sys
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from ..errors import InvalidInput
from .citations import CitationState

__all__ = [
    "MAX_CONTENT_CHARS",
    "MAX_SESSION_CHARS",
    "MAX_TAGS",
    "Chain",
    "ChainLink",
    "Hit",
    "Record",
    "Restatement",
    "Stats",
    "StoreResult",
    "Vector",
    "Version",
    "check_content",
    "check_metadata",
    "check_session",
    "check_unit_interval",
    "check_vector",
    "limit_tags",
]

#: The longest content one record may hold. Memories are notes, not documents:
#: a larger text should be split, and the limit keeps one call from bloating
#: every later query response.
MAX_CONTENT_CHARS = 100_000
#: The longest session name: an id a client makes up for a conversation, not a text.
MAX_SESSION_CHARS = 200
#: The most tags one argument may name (a record's tags; a query's tags, any_tags
#: or exclude_tags; tags to add or remove), and one record may hold. Labels, not
#: keywords: a tag gate's cost grows with the tags it names (docs/security.md).
MAX_TAGS = 32


class Vector(Sequence[float]):
    """A record's vector: immutable float32 values, 4 bytes each.

    It reads like the tuple of its values: ``len``, indexing, slicing (to a
    tuple), iteration, ``==`` with another vector, a tuple or a list, and the
    tuple's hash; ``numpy.asarray`` takes it without copying value by value.
    A tuple of Python floats would take 32 bytes a value.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Iterable[float] = ()) -> None:
        if hasattr(values, "dtype") and hasattr(values, "tobytes"):
            import numpy as np

            packed = array("f")
            packed.frombytes(np.ascontiguousarray(values, dtype=np.float32).tobytes())
            self._values = packed
        else:
            self._values = array("f", values)

    @classmethod
    def from_blob(cls, blob: bytes) -> Vector:
        """Decode a little-endian float32 blob, as the store keeps vectors."""
        vector = cls()
        vector._values.frombytes(blob)
        if sys.byteorder == "big":
            vector._values.byteswap()
        return vector

    def __len__(self) -> int:
        return len(self._values)

    @overload
    def __getitem__(self, index: int) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[float, ...]: ...

    def __getitem__(self, index: int | slice) -> float | tuple[float, ...]:
        if isinstance(index, slice):
            return tuple(self._values[index])
        return self._values[index]

    def __iter__(self) -> Iterator[float]:
        return iter(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Vector):
            return self._values == other._values
        if isinstance(other, (tuple, list)):
            return len(other) == len(self._values) and tuple(self._values) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._values))

    def __repr__(self) -> str:
        return f"Vector({self._values.tolist()!r})"

    def __reduce__(self) -> tuple[type[Vector], tuple[list[float]]]:
        return (Vector, (self._values.tolist(),))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any:
        import numpy as np

        values = np.frombuffer(self._values, dtype=np.float32)
        return values.astype(dtype or np.float32, copy=True)


@dataclass(frozen=True, slots=True)
class Record:
    """One stored memory.

    ``address`` and ``record_id`` are fixed when the record is created and never
    change, even when its labels are updated later.
    """

    record_id: str
    address: int
    domain: str
    subdomain: str
    tags: tuple[str, ...]
    tag_product: int
    content: str
    importance: float
    strength: float
    created_at: float
    updated_at: float
    accessed_at: float
    access_count: int
    metadata: dict[str, Any] = field(default_factory=dict)
    vector: Vector | None = None
    #: The scope the record belongs to: ``global``, ``user:<name>``, ``project:<id>``, ...
    scope: str = "global"
    #: The conversation the record belongs to, when its writer named one.
    session: str | None = None


@dataclass(frozen=True, slots=True)
class Version:
    """An earlier version of a record, as it was before an update replaced it."""

    record: Record
    replaced_at: float


@dataclass(frozen=True, slots=True)
class ChainLink:
    """One version in a memory's validity chain (:meth:`.MemoryEngine.chain`).

    ``valid_to`` is None for the version that is current; ``state`` says where
    the version is: ``live`` (in the store), ``superseded`` (closed by a newer
    memory, kept in the archive), ``replaced`` (an update's earlier version), or
    another archive reason (``folded``, ``pruned``, ``forgotten``, ``stale``)
    for a version that left the store after it was current. ``change`` says,
    in a few words, what differs from the version before it ("" for the first).
    """

    record: Record
    valid_from: float
    valid_to: float | None
    state: str
    change: str = ""


@dataclass(frozen=True, slots=True)
class Chain:
    """A memory's validity chain: the versions before it, and those after it.

    ``predecessors`` run oldest first, ``successors`` nearest first; ``version``
    is the memory asked for. A memory never superseded nor updated has a chain
    of one.
    """

    version: ChainLink
    predecessors: tuple[ChainLink, ...] = ()
    successors: tuple[ChainLink, ...] = ()


@dataclass(frozen=True, slots=True)
class Restatement:
    """An older memory that a newer one seems to restate with another value
    (:meth:`.MemoryEngine.possibly_supersedes`): ``record``, the older one, and
    ``change``, what the newer one changes of it (``"15 -> 16"``)."""

    record: Record
    change: str


@dataclass(frozen=True, slots=True)
class StoreResult:
    """What one store did: the record, and whether it was new or reinforced."""

    record: Record
    created: bool


@dataclass(frozen=True, slots=True)
class Hit:
    """A query result: the record, its score and the parts the score was made of.

    ``citations`` says, for a record that cites files (``store(cites=...)``),
    how each citation compares with the working tree now (docs/citations.md).
    """

    record: Record
    score: float
    score_parts: dict[str, float]
    citations: tuple[CitationState, ...] = ()


@dataclass(frozen=True, slots=True)
class Stats:
    """A summary of a store."""

    path: str
    records: int
    domains: dict[str, int]
    subdomains: dict[str, int]
    tags: dict[str, int]
    registries: dict[str, dict[str, int]]
    store_bytes: int
    embedding_space: str | None
    schema_version: int
    #: Entries in the archive: records pruned, folded away or forgotten (restorable),
    #: and versions that updates replaced.
    archived: int = 0
    #: Archive entries per reason (``pruned``, ``folded``, ``forgotten``, ``replaced``).
    archived_by_reason: dict[str, int] = field(default_factory=dict)
    #: Live records per scope.
    scopes: dict[str, int] = field(default_factory=dict)
    #: Where writes go by default, and how that was resolved.
    current_scope: str = "global"
    scope_reason: str = ""
    #: What a read sees by default.
    visible_scopes: tuple[str, ...] = ()
    #: Records without a vector: text queries rank them on words alone
    #: (``prime-memory reembed`` embeds them, when the store has an embedder).
    without_vector: int = 0


def check_unicode(name: str, text: str) -> str:
    """``text``, when it is text a store can keep: no lone surrogate (such as ``\\ud800``,
    which a JSON escape can carry) that UTF-8 cannot encode.

    Raises:
        InvalidInput: it holds one; the message names ``name`` and where.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"{name} holds a lone surrogate ({text[exc.start]!r} at character {exc.start}), "
            "which is not text; send valid Unicode (a JSON string escapes a character "
            "outside the BMP as a pair)"
        ) from None
    return text


def check_content(content: object) -> str:
    """Raises InvalidInput unless ``content`` is a non-blank string within the size limit."""
    if not isinstance(content, str):
        raise InvalidInput(f"content must be a string, got {type(content).__name__}")
    if not content.strip():
        raise InvalidInput("content is empty; give the text to remember")
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidInput(
            f"content has {len(content)} characters, over the limit of {MAX_CONTENT_CHARS}; "
            "split it into several memories"
        )
    if "\x00" in content:
        raise InvalidInput("content contains a NUL character; remove it")
    return check_unicode("content", content)


def limit_tags(name: str, tags: Any) -> Any:
    """``tags`` to pass on, once it is known to hold at most :data:`MAX_TAGS` tags.

    Counts what was given, before normalising. A list, tuple or set comes back
    as it is; another iterable as a tuple (read no further than one past the
    limit); anything else (None, a bare string) as it is, for the caller's
    own checks to judge.

    Raises:
        InvalidInput: more than :data:`MAX_TAGS` tags, naming the argument.
    """
    if tags is None or isinstance(tags, (str, bytes)):
        return tags
    if isinstance(tags, (list, tuple, set, frozenset)):
        shown = f"{len(tags):,}"
    else:
        try:
            tags = tuple(itertools.islice(iter(tags), MAX_TAGS + 1))
        except TypeError:
            return tags
        shown = f"more than {MAX_TAGS}"
    if len(tags) > MAX_TAGS:
        raise InvalidInput(
            f"{name} has {shown} tags, over the limit of {MAX_TAGS}; name fewer: tags are "
            "labels such as 'architecture' or 'bug', not keywords"
        )
    return tags


def check_session(session: object) -> str | None:
    """A session name stripped, or None for none (None, or blank).

    Raises:
        InvalidInput: not a string, over :data:`MAX_SESSION_CHARS`, or holding a
            control character.
    """
    if session is None:
        return None
    if not isinstance(session, str):
        raise InvalidInput(
            f"session must be a string naming the conversation, got {type(session).__name__}"
        )
    name = session.strip()
    if not name:
        return None
    if len(name) > MAX_SESSION_CHARS:
        raise InvalidInput(
            f"session has {len(name)} characters, over the limit of {MAX_SESSION_CHARS}; "
            "give a shorter id for the conversation"
        )
    if any(ch < " " or "\x7f" <= ch <= "\x9f" for ch in name):
        raise InvalidInput(
            "session contains a control character (a tab, newline or the like); remove it"
        )
    return check_unicode("session", name)


def check_unit_interval(name: str, value: object) -> float:
    """Raises InvalidInput unless ``value`` is a finite number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name} must be a number from 0 to 1, got {type(value).__name__}")
    number = float(value)
    if not (math.isfinite(number) and 0.0 <= number <= 1.0):
        raise InvalidInput(f"{name} must be from 0 to 1, got {value!r}")
    return number


def check_metadata(metadata: Mapping[str, Any] | None) -> tuple[dict[str, Any], str]:
    """Return the metadata and its canonical JSON text.

    Raises:
        InvalidInput: not a mapping with string keys, or not JSON-serialisable.
    """
    if metadata is None:
        return {}, "{}"
    if not isinstance(metadata, Mapping):
        raise InvalidInput(f"metadata must be a JSON object, got {type(metadata).__name__}")
    try:
        text = json.dumps(dict(metadata), sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"metadata is not JSON-serialisable: {exc}") from None
    check_unicode("metadata", text)
    loaded: dict[str, Any] = json.loads(text)
    if len(loaded) != len(metadata):
        raise InvalidInput("metadata keys must be strings")
    return loaded, text


def check_vector(vector: object) -> list[float]:
    """Return ``vector`` as a list of finite floats.

    Raises:
        InvalidInput: not a non-empty sequence of finite numbers.
    """
    if vector is None or isinstance(vector, (str, bytes, Mapping)):
        raise InvalidInput("vector must be a list of numbers")
    if hasattr(vector, "tolist"):
        vector = vector.tolist()
    if not isinstance(vector, Sequence):
        raise InvalidInput(f"vector must be a list of numbers, got {type(vector).__name__}")
    values: list[float] = []
    for i, item in enumerate(vector):
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            raise InvalidInput(f"vector[{i}] must be a number, got {type(item).__name__}")
        number = float(item)
        if not math.isfinite(number):
            raise InvalidInput(f"vector[{i}] is {item!r}; every value must be finite")
        values.append(number)
    if not values:
        raise InvalidInput("vector is empty; give at least one number")
    return values
