"""Readers for what other memory tools keep: mem0's JSON and claude-mem's database.

Each reader returns a :class:`~prime_memory_folding.transfer.packs.Source`, which
:func:`~prime_memory_folding.transfer.packs.write_source` writes like every other
import: one transaction, a dry run, a report. Neither names a scope: the import's
``--scope`` (else the current scope) decides where the memories go.

* :func:`read_mem0` reads memories as mem0 returns them from ``get_all`` (and
  ``search``): a JSON list, or an object whose ``results`` holds the list. One
  memory per mem0 memory: its ``memory`` text, tagged with its ``categories``,
  with mem0's id, hash, user, agent and run ids and its own metadata kept.
* :func:`read_claude_mem` reads claude-mem's SQLite database (read-only): one
  memory per observation, in the observation's type as domain, and one per
  session summary, in domain ``session-summary``.

The shapes followed are mem0's ``MemoryItem`` and ``_get_all_from_vector_store``
(mem0ai/mem0 at 8d5b786, Python package 2.0.18) with the platform's documented
``get_all`` output, and claude-mem's ``SessionStore`` schema and migrations
(thedotmack/claude-mem at e2d1df5, version 13.15.3), with the older
``sdk_session_id`` column names of its earlier versions.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

from ..core.primes import Kind, normalise_label
from ..core.records import MAX_TAGS
from ..errors import InvalidInput
from .importers import load_json
from .packs import (
    BadLine,
    PortableRecord,
    Progress,
    Source,
    parse_timestamp,
    portable_record,
)

__all__ = [
    "CLAUDE_MEM_SUMMARY_DOMAIN",
    "read_claude_mem",
    "read_mem0",
    "sniff_format",
]

#: The domain of a claude-mem session summary.
CLAUDE_MEM_SUMMARY_DOMAIN = "session-summary"

#: The first bytes of every SQLite database file.
_SQLITE_HEADER = b"SQLite format 3\x00"

#: How many rows or memories a reader takes between progress reports.
_PROGRESS_EVERY = 500

#: How much of a JSON file :func:`sniff_format` looks at.
_SNIFF_BYTES = 65_536

#: mem0's ids of who a memory is about, promoted to the top of each memory.
_MEM0_IDS = ("user_id", "agent_id", "run_id", "app_id", "actor_id", "role")


# -- telling the formats apart ----------------------------------------------------------


def sniff_format(path: Path) -> str | None:
    """``"claude-mem"`` for an SQLite file, ``"mem0"`` for mem0's JSON, else None.

    Looks only at the start of the file; a reader says later whether the whole
    of it holds what it should.
    """
    try:
        with path.open("rb") as handle:
            head = handle.read(_SNIFF_BYTES)
    except OSError:
        return None
    if head.startswith(_SQLITE_HEADER):
        return "claude-mem"
    text = head.decode("utf-8", errors="ignore").lstrip("\ufeff \t\r\n")
    has_memory = re.search(r'"memory"\s*:\s*"', text) is not None
    if text.startswith("[") and has_memory and re.match(r"\[\s*\{", text):
        return "mem0"
    envelope = re.match(r'\{\s*"(?:results|count|next|previous)"\s*:', text)
    if envelope and has_memory and re.search(r'"results"\s*:\s*\[', text):
        return "mem0"
    return None


# -- mem0 -------------------------------------------------------------------------------


def read_mem0(
    path: str | os.PathLike[str],
    *,
    domain: str = "memory",
    progress: Progress | None = None,
) -> Source:
    """Read mem0's memories: a JSON list, or ``{"results": [...]}`` as ``get_all`` returns.

    Each memory becomes one in ``domain``, subdomain ``semantic``: its
    ``memory`` is the content, its ``categories`` the tags. Metadata keeps
    mem0's own ``metadata`` and, under ``mem0``, its ``id``, ``hash`` and
    ``user_id`` / ``agent_id`` / ``run_id`` (and ``app_id``, ``actor_id``,
    ``role``, ``expiration_date`` when given). ``created_at`` and
    ``updated_at`` are kept. A memory that cannot be read is a bad record,
    numbered from 1. ``progress(memories_checked, memories)`` is called as
    they are checked.

    Raises:
        InvalidInput: the file is missing, not UTF-8 JSON, or not one of those shapes.
    """
    name = str(path)
    data = load_json(path)
    items = data.get("results") if isinstance(data, dict) else data
    if not isinstance(items, list):
        found = f"an object with keys {sorted(data)[:5]}" if isinstance(data, dict) else None
        raise InvalidInput(
            f"{name} is not mem0's memories: expected a JSON list of memories or an object "
            f"whose 'results' is that list, found {found or type(data).__name__}"
        )
    label = normalise_label(domain, Kind.DOMAIN)
    records: list[PortableRecord] = []
    bad: list[BadLine] = []
    total = len(items)
    for number, raw in enumerate(items, start=1):
        if progress is not None and number % _PROGRESS_EVERY == 0:
            progress(number, total)
        try:
            records.append(_mem0_record(raw, number, label))
        except InvalidInput as exc:
            bad.append(BadLine(name, number, f"record {number}: {exc}"))
    if progress is not None:
        progress(total, total)
    return Source(name=name, records=records, bad=bad, lines=total, unit="record")


def _mem0_record(raw: object, number: int, domain: str) -> PortableRecord:
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"a mem0 memory must be a JSON object, got {type(raw).__name__}")
    text = raw.get("memory")
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("'memory' must be a non-empty string")
    categories = raw.get("categories") or []
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        raise InvalidInput("'categories' must be a list of strings")
    own = raw.get("metadata") or {}
    if not isinstance(own, Mapping):
        raise InvalidInput(f"'metadata' must be a JSON object, got {type(own).__name__}")
    about = {
        key: raw[key]
        for key in ("id", "hash", *_MEM0_IDS, "expiration_date")
        if raw.get(key) is not None
    }
    return portable_record(
        {
            "content": text,
            "domain": domain,
            "subdomain": "semantic",
            "tags": [c for c in categories if c.strip()],
            "created_at": raw.get("created_at"),
            "updated_at": raw.get("updated_at") or raw.get("created_at"),
            "metadata": {**own, "mem0": about},
        },
        number,
    )


# -- claude-mem -------------------------------------------------------------------------

#: Columns read from each table when present; the first name of a tuple is preferred.
_SESSION_COLUMNS = ("memory_session_id", "sdk_session_id")
_OBSERVATION_COLUMNS = (
    "id", "project", "type", "title", "subtitle", "narrative", "text", "facts", "concepts",
    "files_read", "files_modified", "prompt_number", "merged_into_project", "agent_type",
    "agent_id", "created_at", "created_at_epoch",
)  # fmt: skip
_SUMMARY_COLUMNS = (
    "id", "project", "request", "investigated", "learned", "completed", "next_steps",
    "files_read", "files_edited", "notes", "prompt_number", "merged_into_project",
    "created_at", "created_at_epoch",
)  # fmt: skip
_REQUIRED = {
    "observations": ("id", "project", "type"),
    "session_summaries": ("id", "project"),
}
_SUMMARY_PARTS = (
    ("request", "Request"),
    ("investigated", "Investigated"),
    ("learned", "Learned"),
    ("completed", "Completed"),
    ("next_steps", "Next steps"),
    ("notes", "Notes"),
)


def read_claude_mem(path: str | os.PathLike[str], *, progress: Progress | None = None) -> Source:
    """Read claude-mem's SQLite database (``~/.claude-mem/claude-mem.db``), read-only.

    Each observation becomes one memory: its title, subtitle, narrative (or
    text) and facts as the content, its type as the domain (subdomain
    ``observation``), its concepts and then the files it modified and read as
    tags (up to the limit on tags). Each session summary becomes one memory in
    domain ``session-summary``: its request, what was investigated, learned and
    completed, the next steps and notes. Both keep claude-mem's session id as
    the session, its creation time, and in metadata the project, claude-mem's
    row id and every file. User prompts and queued messages are not read.
    ``progress(rows_read, rows)`` is called as rows are read.

    The database is opened read-only and never written.

    Raises:
        InvalidInput: the file is missing, not an SQLite database, unreadable,
            or lacks a table or column claude-mem keeps (the message names it).
    """
    target = Path(path)
    name = str(path)
    if target.is_dir():
        raise InvalidInput(f"{target} is a directory; give claude-mem's database file")
    if not target.exists():
        raise InvalidInput(f"{target} does not exist; check the path")
    try:
        with target.open("rb") as handle:
            head = handle.read(len(_SQLITE_HEADER))
    except OSError as exc:
        raise InvalidInput(f"cannot read {target}: {exc.strerror}") from None
    if head != _SQLITE_HEADER:
        raise InvalidInput(
            f"{name} is not an SQLite database; give claude-mem's database "
            "(~/.claude-mem/claude-mem.db)"
        )
    try:
        with closing(_connect_read_only(target)) as db:
            columns = _schema(db, name)
            total = sum(_count(db, table) for table in _REQUIRED)
            records: list[PortableRecord] = []
            bad: list[BadLine] = []
            done = 0
            for done, (table, row) in enumerate(_rows(db, columns), start=1):
                if progress is not None and done % _PROGRESS_EVERY == 0:
                    progress(done, total)
                try:
                    records.append(_claude_mem_record(table, row))
                except InvalidInput as exc:
                    where = f"{table} row {row.get('id')}"
                    bad.append(BadLine(name, 0, f"{where}: {exc}"))
    except sqlite3.DatabaseError as exc:
        raise InvalidInput(f"{name} cannot be read as an SQLite database ({exc})") from None
    if progress is not None:
        progress(done, total)
    return Source(name=name, records=records, bad=bad, lines=done, unit="row")


def _connect_read_only(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    db.execute("PRAGMA query_only = ON")
    return db


def _schema(db: sqlite3.Connection, name: str) -> dict[str, dict[str, str]]:
    """For each table read, the columns to select: our name -> the database's column."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    missing = [table for table in _REQUIRED if table not in tables]
    if missing:
        raise InvalidInput(
            f"{name} is not a claude-mem database: it has no {' or '.join(missing)} table"
        )
    wanted = {"observations": _OBSERVATION_COLUMNS, "session_summaries": _SUMMARY_COLUMNS}
    result: dict[str, dict[str, str]] = {}
    for table, names in wanted.items():
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        session = next((c for c in _SESSION_COLUMNS if c in have), None)
        lacking = [c for c in _REQUIRED[table] if c not in have]
        if session is None:
            lacking.append(_SESSION_COLUMNS[0])
        if lacking:
            raise InvalidInput(
                f"{name} is not a claude-mem database: its {table} table has no "
                f"{', '.join(lacking)} column"
            )
        chosen = {column: column for column in names if column in have}
        chosen["session"] = str(session)
        result[table] = chosen
    return result


def _count(db: sqlite3.Connection, table: str) -> int:
    return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _rows(
    db: sqlite3.Connection, columns: dict[str, dict[str, str]]
) -> Iterator[tuple[str, dict[str, Any]]]:
    for table, chosen in columns.items():
        select = ", ".join(f'"{column}" AS "{ours}"' for ours, column in chosen.items())
        cursor = db.execute(f"SELECT {select} FROM {table} ORDER BY id")
        names = [d[0] for d in cursor.description]
        for values in cursor:
            yield table, dict(zip(names, values))


def _claude_mem_record(table: str, row: Mapping[str, Any]) -> PortableRecord:
    if table == "observations":
        return _observation(row)
    return _summary(row)


def _observation(row: Mapping[str, Any]) -> PortableRecord:
    facts = _list_column(row.get("facts"))
    concepts = _list_column(row.get("concepts"))
    modified = _list_column(row.get("files_modified"))
    read = _list_column(row.get("files_read"))
    heading = [_text(row.get("title")), _text(row.get("subtitle"))]
    narrative = _text(row.get("narrative"))
    legacy = _text(row.get("text"))
    parts = [
        "\n".join(line for line in heading if line),
        narrative,
        legacy if legacy != narrative else "",
        "\n".join(f"- {fact}" for fact in facts),
    ]
    content = "\n\n".join(part for part in parts if part)
    if not content:
        raise InvalidInput("it has no title, narrative, text or facts")
    tags: list[str] = []
    for tag in (*concepts, *modified, *read):
        if tag.strip() and tag.strip().lower() not in tags and len(tags) < MAX_TAGS:
            tags.append(tag.strip().lower())
    extra = {
        "title": _text(row.get("title")),
        "files_modified": modified,
        "files_read": read,
        "prompt_number": row.get("prompt_number"),
        "merged_into_project": row.get("merged_into_project"),
        "agent_type": row.get("agent_type"),
        "agent_id": row.get("agent_id"),
    }
    return portable_record(
        {
            "content": content,
            "domain": _text(row.get("type")) or "observation",
            "subdomain": "observation",
            "tags": tags,
            "created_at": _created(row),
            "session": row.get("session"),
            "metadata": _metadata(row, "observation", extra),
        }
    )


def _summary(row: Mapping[str, Any]) -> PortableRecord:
    parts = [
        f"{title}: {_text(row.get(column))}"
        for column, title in _SUMMARY_PARTS
        if _text(row.get(column))
    ]
    if not parts:
        raise InvalidInput("it has no request, learned, completed, next steps or notes")
    extra = {
        "files_read": _list_column(row.get("files_read")),
        "files_edited": _list_column(row.get("files_edited")),
        "prompt_number": row.get("prompt_number"),
        "merged_into_project": row.get("merged_into_project"),
    }
    return portable_record(
        {
            "content": "\n\n".join(parts),
            "domain": CLAUDE_MEM_SUMMARY_DOMAIN,
            "subdomain": "general",
            "created_at": _created(row),
            "session": row.get("session"),
            "metadata": _metadata(row, "session_summary", extra),
        }
    )


def _metadata(row: Mapping[str, Any], kind: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    kept = {key: value for key, value in extra.items() if value not in (None, "", [])}
    return {
        "source": "claude-mem",
        "claude_mem": {"table": kind, "id": row.get("id"), "session": row.get("session")},
        "project": row.get("project"),
        **kept,
    }


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _list_column(value: object) -> list[str]:
    """A JSON array column (facts, concepts, files) as strings; plain text is one item."""
    if not isinstance(value, str) or not value.strip():
        return []
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        return [value.strip()]
    items = parsed if isinstance(parsed, list) else [parsed]
    return [str(item).strip() for item in items if item is not None and str(item).strip()]


def _created(row: Mapping[str, Any]) -> float | None:
    """Unix seconds: claude-mem writes ``created_at_epoch`` in milliseconds."""
    epoch = row.get("created_at_epoch")
    if isinstance(epoch, (int, float)) and not isinstance(epoch, bool) and epoch > 0:
        return epoch / 1000 if epoch > 100_000_000_000 else float(epoch)
    stamp = row.get("created_at")
    if isinstance(stamp, str) and stamp.strip():
        return parse_timestamp(stamp, "created_at")
    return None
