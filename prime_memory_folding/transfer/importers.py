"""Readers for memories kept in other formats.

Each reader returns a :class:`~prime_memory_folding.transfer.packs.Source`;
:func:`~prime_memory_folding.transfer.packs.write_source` then writes it, so every import
shares one transaction, one dry run and one report.

* :func:`read_json_store` reads the ``prime-memory-folding-store-v1`` JSON
  store: ids, addresses, primes and timestamps are kept.
* :func:`read_markdown` reads a folder of Markdown notes: one memory per
  ``##`` section (or per note without sections). Tags come from front matter
  ``tags`` and from ``#hashtags``; the domain is the folder the note sits in.
* :func:`read_knowledge_graph` reads the reference MCP memory server's
  ``memory.jsonl``: one memory per observation, tagged with the entity's name
  and type, and one memory per relation ("alice works_at acme"), tagged with
  both ends and ``relation``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core.primes import Kind, normalise_label
from ..errors import InvalidInput
from . import folders
from .packs import (
    BadLine,
    PortableRecord,
    Progress,
    Source,
    numbered_lines,
    open_text,
    portable_record,
    registries_from,
)

__all__ = [
    "JSON_STORE_FORMAT",
    "BadFile",
    "front_matter",
    "load_json",
    "read_json_store",
    "read_knowledge_graph",
    "read_markdown",
    "read_note",
    "read_notes",
    "walk_folder",
]

JSON_STORE_FORMAT = "prime-memory-folding-store-v1"

#: How many records or notes a reader takes between progress reports.
_PROGRESS_EVERY = 500

_REGISTRY_KEYS = {
    Kind.DOMAIN: "domain_primes",
    Kind.SUBDOMAIN: "subdomain_primes",
    Kind.TAG: "tag_primes",
}


# -- JSON store ------------------------------------------------------------------------


def read_json_store(path: str | os.PathLike[str], *, progress: Progress | None = None) -> Source:
    """Read a ``prime-memory-folding-store-v1`` JSON file.

    Bad records are collected in ``Source.bad``, numbered by their position
    in ``records`` (from 1). ``progress(records_checked, records)`` is called
    as the records are checked.

    Raises:
        InvalidInput: the file is missing, not JSON, or not that format.
    """
    name = str(path)
    data = load_json(path)
    if not isinstance(data, dict) or data.get("format") != JSON_STORE_FORMAT:
        found = data.get("format") if isinstance(data, dict) else None
        raise InvalidInput(
            f"{name} is not a {JSON_STORE_FORMAT} file (format is {found!r}); "
            "use the importer for its format"
        )
    registries = registries_from(
        {kind.value: data.get(key) for kind, key in _REGISTRY_KEYS.items()}, name
    )
    raw_records = data.get("records") or []
    if not isinstance(raw_records, list):
        raise InvalidInput(f"{name}: records must be a list")
    records: list[PortableRecord] = []
    bad: list[BadLine] = []
    total = len(raw_records)
    for number, raw in enumerate(raw_records, start=1):
        if progress is not None and number % _PROGRESS_EVERY == 0:
            progress(number, total)
        try:
            rec = portable_record(raw, number)
        except InvalidInput as exc:
            bad.append(BadLine(name, number, f"record {number}: {exc}"))
            continue
        records.append(_checked_lanes(rec, registries))
    if progress is not None:
        progress(total, total)
    return Source(
        name=name, records=records, registries=registries, bad=bad, lines=total, unit="record"
    )


def _checked_lanes(rec: PortableRecord, registries: dict[Kind, dict[str, int]]) -> PortableRecord:
    """Drop an address whose lanes do not hold its own labels' primes; it gets a fresh one."""
    if rec.address is None:
        return rec
    domain_prime = registries.get(Kind.DOMAIN, {}).get(rec.domain)
    subdomain_prime = registries.get(Kind.SUBDOMAIN, {}).get(rec.subdomain)
    if rec.address >> 96 == domain_prime and (rec.address >> 64) & 0xFFFFFFFF == subdomain_prime:
        return rec
    return replace(rec, address=None)


# -- Markdown ----------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_SECTION = re.compile(r"^##\s+(.+?)\s*#*\s*$")
_TITLE = re.compile(r"^#\s+(.+?)\s*#*\s*$")
_HASHTAG = re.compile(r"(?<![\w#&/])#([A-Za-z][\w/-]*)")


class BadFile(Exception):
    """A note or file that cannot be read, with the line where the problem is.

    A reader's per-file function raises it; :func:`read_notes` records the file
    as bad (``Source.bad``) and goes on with the next.
    """

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


def load_json(path: str | os.PathLike[str]) -> Any:
    """The JSON document in the file at ``path``.

    Raises:
        InvalidInput: the file is missing, not UTF-8, or not valid JSON.
    """
    name = str(path)
    with open_text(path) as handle:
        try:
            return json.load(handle)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{name}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        except UnicodeDecodeError:
            raise InvalidInput(f"{name} is not UTF-8 text") from None


def read_note(bad: list[BadLine], relative: Path, real: Path) -> tuple[str, float] | None:
    """A note's text and modification time, or None after adding to ``bad`` why it
    cannot be read (not UTF-8, or an OS error)."""
    try:
        return folders.read_text(real)
    except UnicodeDecodeError:
        bad.append(BadLine(relative.as_posix(), 0, "not UTF-8 text"))
    except OSError as exc:
        bad.append(BadLine(relative.as_posix(), 0, f"cannot read it ({exc.strerror})"))
    return None


#: What a reader makes of one note: (its text, its path under the root, its
#: modification time) -> its memories; it raises :class:`BadFile` for a bad note.
NoteRecords = Callable[[str, Path, float], Iterable[PortableRecord]]


def read_notes(
    root: Path,
    found: folders.Walk,
    records_of: NoteRecords,
    *,
    unit: str,
    progress: Progress | None = None,
) -> Source:
    """Every note ``found`` under ``root`` read into memories by ``records_of``.

    A note that cannot be read, or that ``records_of`` finds bad, is listed in
    ``Source.bad`` and the others go on. ``progress(notes_read, notes)`` is
    called as the notes are read; ``unit`` names what the report counts.
    """
    notes = found.files
    records: list[PortableRecord] = []
    bad: list[BadLine] = []
    for done, (relative, real) in enumerate(notes):
        if progress is not None and done % _PROGRESS_EVERY == 0:
            progress(done, len(notes))
        loaded = read_note(bad, relative, real)
        if loaded is None:
            continue
        text, stamp = loaded
        try:
            records.extend(records_of(text, relative, stamp))
        except BadFile as exc:
            bad.append(BadLine(relative.as_posix(), exc.line, str(exc)))
    if progress is not None:
        progress(len(notes), len(notes))
    return Source(
        name=str(root),
        records=records,
        bad=bad,
        lines=len(notes),
        unit=unit,
        left_out=found.left_out,
    )


def read_markdown(
    folder: str | os.PathLike[str],
    *,
    domain: str = "memory",
    subdomain: str = "document",
    progress: Progress | None = None,
) -> Source:
    """Read every ``*.md`` note under ``folder``, one memory per ``##`` section.

    A note without ``##`` headings is one memory. The domain is the name of
    the folder a note sits in (``domain`` for notes at the top); front matter
    may set ``domain``, ``subdomain``, ``importance`` and ``tags``. Metadata
    records the note's path, title and section. ``progress(notes_read, notes)``
    is called as the notes are read.

    The folder may come from anyone: links leading out of it, tools' folders
    (``.git``, virtual environments, ``node_modules``, build output) and what
    its ``.gitignore`` files ignore are not read, and ``Source.left_out`` says
    which and why (:mod:`~prime_memory_folding.transfer.folders`).

    Raises:
        InvalidInput: ``folder`` is missing or not a directory.
    """
    root = Path(folder)
    if not root.exists():
        raise InvalidInput(f"{root} does not exist; check the path")
    if not root.is_dir():
        raise InvalidInput(f"{root} is a file; give the folder that holds the notes")
    return read_notes(
        root,
        walk_folder(root),
        lambda text, relative, stamp: _note_records(
            text, relative, relative.parent.name or domain, subdomain, stamp
        ),
        unit="note",
        progress=progress,
    )


def walk_folder(root: Path) -> folders.Walk:
    """The files under ``root`` an import reads (:func:`.folders.walk`).

    Raises:
        InvalidInput: ``root`` cannot be read.
    """
    try:
        return folders.walk(root)
    except OSError as exc:
        raise InvalidInput(f"{root} cannot be read ({exc.strerror})") from None


def _note_records(
    text: str, relative: Path, domain: str, subdomain: str, stamp: float
) -> Iterator[PortableRecord]:
    meta, body, body_line = front_matter(text, _scalar)
    title = str(meta.get("title") or "") or None
    try:
        labels = {
            "domain": normalise_label(meta.get("domain", domain), Kind.DOMAIN),
            "subdomain": normalise_label(meta.get("subdomain", subdomain), Kind.SUBDOMAIN),
        }
    except InvalidInput as exc:
        raise BadFile(1, str(exc)) from None
    front_tags = meta.get("tags", [])
    if isinstance(front_tags, str):
        front_tags = [t for t in re.split(r"[,\s]+", front_tags) if t]
    importance = meta.get("importance", 0.5)
    for heading, section, line in _sections(body, body_line):
        if title is None and heading is None:
            title = _first_title(section)
        content = section.strip()
        if not content or (heading is None and _TITLE.match(content) and "\n" not in content):
            continue
        try:
            yield portable_record(
                {
                    "content": content,
                    **labels,
                    "tags": [*front_tags, *_hashtags(section)],
                    "importance": importance,
                    "created_at": stamp,
                    "metadata": {
                        "source": relative.as_posix(),
                        **({"title": title} if title else {}),
                        **({"section": heading} if heading else {}),
                    },
                },
                line,
            )
        except InvalidInput as exc:
            raise BadFile(line, str(exc)) from None


def front_matter(
    text: str, value: Callable[[str], Any] = lambda raw: raw.strip().strip("\"'")
) -> tuple[dict[str, Any], str, int]:
    """Split simple YAML front matter: top-level ``key: value``, ``[a, b]`` and ``- item``
    lists; each value (and list item) as ``value`` reads it (by default, the text
    without quotes). A line indented under a key belongs to a nested mapping,
    which is not read.

    Returns (the keys and values, the body after it, the body's first line number).

    Raises:
        BadFile: the front matter never closes.
    """
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text, 1
    meta: dict[str, Any] = {}
    key: str | None = None
    for number, line in enumerate(lines[1:], start=2):
        stripped = line.strip()
        if stripped in {"---", "..."}:
            return meta, "\n".join(lines[number:]), number + 1
        if stripped.startswith("- ") and key is not None:
            existing = meta.get(key)
            items = existing if isinstance(existing, list) else []
            items.append(value(stripped[2:]))
            meta[key] = items
        elif ":" in stripped and not stripped.startswith("#") and not line[0].isspace():
            key, _, raw = stripped.partition(":")
            key = key.strip()
            raw = raw.strip()
            if raw.startswith("[") and raw.endswith("]"):
                meta[key] = [value(v) for v in raw[1:-1].split(",") if v.strip()]
            else:
                meta[key] = value(raw) if raw else []
    raise BadFile(1, "the front matter never closes with ---")


def _scalar(value: str) -> Any:
    value = value.strip().strip("\"'")
    try:
        return float(value) if "." in value else int(value)
    except ValueError:
        return value


def _sections(body: str, first_line: int) -> Iterator[tuple[str | None, str, int]]:
    """(heading, text, line number) for the preamble and each ``##`` section."""
    heading: str | None = None
    start = first_line
    lines: list[str] = []
    fenced = False
    for number, line in enumerate(body.splitlines(), start=first_line):
        if _FENCE.match(line):
            fenced = not fenced
        match = None if fenced else _SECTION.match(line)
        if match:
            yield heading, "\n".join(lines), start
            heading, start, lines = match.group(1), number, [line]
        else:
            lines.append(line)
    yield heading, "\n".join(lines), start


def _first_title(text: str) -> str | None:
    for line in text.splitlines():
        match = _TITLE.match(line)
        if match:
            return match.group(1)
    return None


def _hashtags(text: str) -> list[str]:
    tags: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or line.lstrip().startswith("#" + " "):
            continue
        tags.extend(_HASHTAG.findall(re.sub(r"`[^`]*`", "", line)))
    return tags


# -- knowledge graph ---------------------------------------------------------------------


def read_knowledge_graph(
    path: str | os.PathLike[str], *, domain: str = "memory", progress: Progress | None = None
) -> Source:
    """Read the reference MCP memory server's ``memory.jsonl``.

    Entities give one memory per observation (subdomain ``semantic``, tags: the
    entity's name and type, metadata: both); an entity with no observations
    gives one memory "<name> is a <type>". Relations give one memory each,
    "<from> <relationType> <to>" (subdomain ``semantic``, tags: both ends and
    ``relation``). ``progress(bytes_read, file_size)`` is called as the file is read.

    Raises:
        InvalidInput: the file is missing, a directory, or not UTF-8 text.
    """
    name = str(path)
    records: list[PortableRecord] = []
    bad: list[BadLine] = []
    lines = 0
    with open_text(path) as handle:
        for number, text in numbered_lines(handle, name, progress):
            lines += 1
            try:
                records.extend(_graph_records(json.loads(text), number, domain))
            except json.JSONDecodeError as exc:
                bad.append(BadLine(name, number, f"not valid JSON ({exc.msg})"))
            except InvalidInput as exc:
                bad.append(BadLine(name, number, str(exc)))
    return Source(name=name, records=records, bad=bad, lines=lines)


def _text_field(raw: Mapping[str, Any], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{key!r} must be a non-empty string")
    return value


def _graph_records(raw: object, line: int, domain: str) -> list[PortableRecord]:
    if not isinstance(raw, dict):
        raise InvalidInput(f"each line must be a JSON object, got {type(raw).__name__}")
    kind = raw.get("type")
    if kind == "entity":
        entity = _text_field(raw, "name")
        entity_type = _text_field(raw, "entityType")
        observations = raw.get("observations") or []
        if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
            raise InvalidInput("'observations' must be a list of strings")
        texts = [o for o in observations if o.strip()] or [f"{entity} is a {entity_type}"]
        meta = {"entity": entity, "entity_type": entity_type}
        return [
            portable_record(
                {
                    "content": text,
                    "domain": domain,
                    "subdomain": "semantic",
                    "tags": [entity, entity_type],
                    "metadata": meta,
                },
                line,
            )
            for text in texts
        ]
    if kind == "relation":
        start = _text_field(raw, "from")
        end = _text_field(raw, "to")
        relation = _text_field(raw, "relationType")
        return [
            portable_record(
                {
                    "content": f"{start} {relation} {end}",
                    "domain": domain,
                    "subdomain": "semantic",
                    "tags": [start, end, "relation"],
                    "metadata": {"from": start, "to": end, "relation_type": relation},
                },
                line,
            )
        ]
    raise InvalidInput(f"unknown type {kind!r}; expected 'entity' or 'relation'")
