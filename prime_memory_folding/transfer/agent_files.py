"""Readers for the Markdown files coding agents keep their memory in.

Each reader returns a :class:`~prime_memory_folding.transfer.packs.Source`, as
the readers of :mod:`~prime_memory_folding.transfer.importers` do, so these
imports share their transaction, dry run and report.

* :func:`read_agents_md` reads ``CLAUDE.md`` and ``AGENTS.md`` files: one
  memory per rule (a list item with what is nested in it, or a paragraph), in
  domain ``convention``, subdomain the nearest heading. Claude Code's ``@path``
  imports are followed only to Markdown files inside the folder.
* :func:`read_claude_auto_memory` reads Claude Code's auto memory folder
  (``MEMORY.md`` and its topic files): one memory per entry of each topic
  file, in the domain the topic file names; index lines are not memories.
* :func:`read_basic_memory` reads a basic-memory project folder: one memory
  per observation, one per relation, and one for a note's text before them.

Folders may come from anyone, so they are walked by
:mod:`~prime_memory_folding.transfer.folders`: no link out of the folder is
followed, and ``Source.left_out`` lists what was not read, and why.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.portable import LeftOut
from ..errors import InvalidInput
from .importers import BadFile, front_matter, read_note, read_notes, walk_folder
from .packs import BadLine, PortableRecord, Progress, Source, portable_record

__all__ = [
    "AGENT_FILES",
    "AUTO_MEMORY_INDEX",
    "read_agents_md",
    "read_basic_memory",
    "read_claude_auto_memory",
]

#: The agent instruction files read by :func:`read_agents_md`, and the tag each gets.
AGENT_FILES = {
    "CLAUDE.md": "claude-md",
    "CLAUDE.local.md": "claude-md",
    "AGENTS.md": "agents-md",
}
#: The index file of Claude Code's auto memory folder.
AUTO_MEMORY_INDEX = "MEMORY.md"

#: How deep ``@path`` imports are followed: Claude Code's own limit, five hops.
_IMPORT_DEPTH = 5
_PROGRESS_EVERY = 500

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d{1,9}[.)])\s+(.*)$")
_RULE_LINE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_IMPORT = re.compile(r"(?<![\w@`])@((?:~|\.{1,2}|/|[\w-])[^\s`]*)")
_CODE_SPAN = re.compile(r"`[^`]*`")
_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HASHTAG = re.compile(r"(?<![\w#&/])#([A-Za-z][\w/-]*)")


# -- shared parts ---------------------------------------------------------------------


@dataclass
class _Block:
    """One rule of a Markdown file: its lines, the heading over it, the line it starts on."""

    heading: str | None
    line: int
    lines: list[str] = field(default_factory=list)
    #: The list item's indentation, or None for a paragraph.
    indent: int | None = None

    @property
    def text(self) -> str:
        return _dedent("\n".join(self.lines)).strip()


def _dedent(text: str) -> str:
    lines = text.splitlines()
    widths = [len(line) - len(line.lstrip()) for line in lines[1:] if line.strip()]
    if not widths:
        return text
    cut = min(widths)
    return "\n".join([lines[0], *(line[cut:] if line.strip() else "" for line in lines[1:])])


def _blocks(body: str, first_line: int) -> Iterator[_Block]:
    """The rules of a Markdown body, in order.

    A list item is one rule, with its continuation lines and the items nested
    in it; a paragraph is one rule; a fenced block belongs to the rule before
    it under the same heading (or stands alone when none comes before it).
    A blank line between them does not part them.
    Headings and thematic breaks are not rules.
    """
    heading: str | None = None
    current: _Block | None = None
    fence: str | None = None
    blank = False
    for number, line in enumerate(body.splitlines(), start=first_line):
        if fence is not None:
            assert current is not None
            current.lines.append(line)
            if line.strip().startswith(fence):
                fence = None
            continue
        opened = _FENCE.match(line)
        if opened:
            fence = opened.group(1)
            if current is None:
                current = _Block(heading, number)
            current.lines.append(line)
            blank = False
            continue
        if not line.strip():
            blank = True
            continue
        heading_match = _HEADING.match(line)
        if heading_match or _RULE_LINE.match(line):
            if current is not None:
                yield current
            if heading_match:
                heading = heading_match.group(2).strip() or heading
            current = None
            blank = False
            continue
        item = _ITEM.match(line)
        indent = len(line) - len(line.lstrip())
        if (
            current is not None
            and current.indent is not None
            and indent > current.indent
            and (item is not None or not blank or indent >= current.indent + 2)
        ):
            current.lines.append(line)
        elif item is not None:
            if current is not None:
                yield current
            current = _Block(heading, number, [item.group(2)], indent)
        elif current is not None and not blank:
            current.lines.append(line)
        else:
            if current is not None:
                yield current
            current = _Block(heading, number, [line.strip()])
        blank = False
    if current is not None:
        yield current


def _slug(text: str) -> str:
    """A heading or file name as a label: lower case, words joined by ``-``."""
    plain = _LINK.sub(r"\1", text).replace("`", "").replace("*", "")
    return re.sub(r"[\W_]+", "-", plain.lower()).strip("-")[:60].strip("-")


def _text(meta: dict[str, Any], key: str) -> str:
    value = meta.get(key)
    return value.strip() if isinstance(value, str) else ""


def _tag_list(value: object) -> list[str]:
    if isinstance(value, str):
        return [t for t in re.split(r"[,\s]+", value) if t]
    if isinstance(value, list):
        return [t for t in value if isinstance(t, str) and t]
    return []


@dataclass
class _Files:
    """The files a reader takes: (path relative to the root, real path), and what it left out."""

    root: Path
    files: list[tuple[Path, Path]]
    left_out: list[LeftOut]
    #: Every Markdown file under the root, by its relative path, for ``@path`` imports.
    markdown: dict[str, Path] | None = None


def _walk(root: Path, wanted: set[str] | None) -> _Files:
    """The Markdown files under ``root`` (those named in ``wanted``, when given).

    Raises:
        InvalidInput: ``root`` cannot be read.
    """
    found = walk_folder(root)
    files = [pair for pair in found.files if wanted is None or pair[0].name in wanted]
    markdown = {relative.as_posix(): real for relative, real in found.files}
    return _Files(root, files, found.left_out, markdown)


def _record(raw: dict[str, Any], relative: Path, line: int) -> PortableRecord:
    try:
        return portable_record(raw, line)
    except InvalidInput as exc:
        raise BadFile(line, str(exc)) from None


# -- CLAUDE.md and AGENTS.md -----------------------------------------------------------


def read_agents_md(path: str | os.PathLike[str], *, progress: Progress | None = None) -> Source:
    """Read ``CLAUDE.md`` and ``AGENTS.md`` files: one file, or every one under a folder.

    Each rule (a list item with its continuation and nested items, or a
    paragraph) is one memory in domain ``convention``; the subdomain is the
    nearest heading above it (``general`` without one); tags are the file's
    kind (``claude-md`` or ``agents-md``) and the heading. A fenced code block
    belongs to the rule before it. ``CLAUDE.local.md`` counts as ``claude-md``.

    ``@path`` imports (Claude Code's, outside code) are followed up to five hops,
    only to Markdown files inside the folder (the file's own folder for one
    file) that the folder walk would read; the rest are listed in
    ``Source.left_out``. An imported file's rules carry the importing file's tag.
    A line that is nothing but imports is not a memory.

    Raises:
        InvalidInput: ``path`` is missing, or a file not named like one of these.
    """
    root = Path(path)
    if not root.exists():
        raise InvalidInput(f"{root} does not exist; check the path")
    if root.is_dir():
        files = _walk(root, set(AGENT_FILES))
    elif root.name in AGENT_FILES:
        files = _Files(root.parent, [(Path(root.name), root)], [])
    else:
        raise InvalidInput(
            f"{root} is not a CLAUDE.md or AGENTS.md file; give one of those or the "
            "folder that holds them"
        )
    records: list[PortableRecord] = []
    bad: list[BadLine] = []
    read: set[str] = set()
    queue: list[tuple[Path, Path, str, int, str | None]] = [
        (relative, real, AGENT_FILES[relative.name], 0, None) for relative, real in files.files
    ]
    while queue:
        relative, real, kind, depth, imported_by = queue.pop(0)
        if relative.as_posix() in read:
            continue
        read.add(relative.as_posix())
        if progress is not None and len(read) % _PROGRESS_EVERY == 0:
            progress(len(read), None)
        loaded = read_note(bad, relative, real)
        if loaded is None:
            continue
        text, stamp = loaded
        imports: list[str] = []
        try:
            records.extend(_rule_records(text, relative, kind, stamp, imported_by, imports))
        except BadFile as exc:
            bad.append(BadLine(relative.as_posix(), exc.line, str(exc)))
            continue
        for target in imports:
            found = _import_target(files, relative, target)
            if isinstance(found, str):
                files.left_out.append(LeftOut(f"{relative.as_posix()}: @{target}", found))
            elif depth + 1 > _IMPORT_DEPTH:
                files.left_out.append(
                    LeftOut(f"{relative.as_posix()}: @{target}", "more than five imports deep")
                )
            else:
                queue.append((found[0], found[1], kind, depth + 1, relative.as_posix()))
    if progress is not None:
        progress(len(read), len(read))
    return Source(
        name=str(root),
        records=records,
        bad=bad,
        lines=len(read),
        unit="file",
        left_out=files.left_out,
    )


def _import_target(files: _Files, importer: Path, target: str) -> tuple[Path, Path] | str:
    """The file an ``@path`` import names, or why it is not followed."""
    if target.startswith(("~", "/")) or re.match(r"^[A-Za-z]:[\\/]", target):
        return "an import from outside the folder"
    inner = posixpath.normpath(posixpath.join(importer.parent.as_posix(), target))
    if inner == ".." or inner.startswith("../"):
        return "an import from outside the folder"
    if not inner.endswith(".md"):
        return "an import of a file that is not Markdown"
    if files.markdown is None:
        files.markdown = _walk(files.root, None).markdown
    assert files.markdown is not None
    real = files.markdown.get(inner)
    if real is None:
        return "an import of a file the folder walk does not read (missing, ignored or a link out)"
    return Path(inner), real


def _imports_in(line: str) -> list[str]:
    return [m.rstrip(".,;:!?)]}'\"") for m in _IMPORT.findall(_CODE_SPAN.sub("", line))]


def _without_import_lines(text: str) -> str:
    """A rule's text less the lines (outside code) that hold nothing but ``@path`` imports."""
    kept: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and not re.search(r"\w", _IMPORT.sub("", _CODE_SPAN.sub("", line))):
            continue
        kept.append(line)
    return "\n".join(kept).strip()


def _rule_records(
    text: str,
    relative: Path,
    kind: str,
    stamp: float,
    imported_by: str | None,
    imports: list[str],
) -> Iterator[PortableRecord]:
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            imports.extend(t for t in _imports_in(line) if t)
    for block in _blocks(text, 1):
        content = _without_import_lines(block.text)
        if not content:
            continue
        heading = _slug(block.heading) if block.heading else ""
        yield _record(
            {
                "content": content,
                "domain": "convention",
                "subdomain": heading or "general",
                "tags": [kind, *([heading] if heading else [])],
                "created_at": stamp,
                "metadata": {
                    "source": relative.as_posix(),
                    **({"section": block.heading} if block.heading else {}),
                    **({"imported_by": imported_by} if imported_by else {}),
                },
            },
            relative,
            block.line,
        )


# -- Claude Code auto memory -----------------------------------------------------------


def read_claude_auto_memory(
    path: str | os.PathLike[str], *, progress: Progress | None = None
) -> Source:
    """Read Claude Code's auto memory: a folder holding ``MEMORY.md`` and topic files.

    ``path`` is the folder (``~/.claude/projects/<project>/memory``) or its
    ``MEMORY.md``. Each entry (a list item, or a paragraph) of a topic file is
    one memory whose domain is the topic file's name (``debugging.md``:
    ``debugging``), subdomain the nearest heading, tags ``claude-auto-memory``,
    the heading and the ``type`` its front matter names; front matter ``name``,
    ``description`` and ``type`` go to metadata. Entries of ``MEMORY.md`` are
    memories in domain ``memory``, except index lines: those that link to a
    topic file of the folder, which is imported itself.

    Raises:
        InvalidInput: ``path`` is missing, or holds no ``MEMORY.md``.
    """
    given = Path(path)
    root = given.parent if given.name == AUTO_MEMORY_INDEX and given.is_file() else given
    if not root.exists():
        raise InvalidInput(f"{root} does not exist; check the path")
    if not root.is_dir() or not (root / AUTO_MEMORY_INDEX).is_file():
        raise InvalidInput(
            f"{given} is not a Claude Code auto memory folder: it has no {AUTO_MEMORY_INDEX}; "
            "give the folder that holds it (~/.claude/projects/<project>/memory)"
        )
    found = walk_folder(root)
    topics = {relative.as_posix() for relative, _ in found.files}
    return read_notes(
        root,
        found,
        lambda text, relative, stamp: _topic_records(text, relative, stamp, topics),
        unit="file",
        progress=progress,
    )


def _links_to_topic(content: str, relative: Path, topics: set[str]) -> bool:
    here = relative.parent.as_posix()
    targets = [target for _, target in _LINK.findall(content)]
    targets += re.findall(r"`([^`\s]+\.md)`", content)
    for target in targets:
        inner = posixpath.normpath(posixpath.join(here, target.split("#", 1)[0]))
        if inner in topics and inner != relative.as_posix():
            return True
    return False


def _topic_records(
    text: str, relative: Path, stamp: float, topics: set[str]
) -> Iterator[PortableRecord]:
    meta, body, body_line = front_matter(text)
    is_index = relative.name == AUTO_MEMORY_INDEX
    domain = _slug(relative.stem) or "memory"
    kind = _text(meta, "type")
    about = {k: meta[k] for k in ("name", "description", "type") if isinstance(meta.get(k), str)}
    for block in _blocks(body, body_line):
        content = block.text
        if not content or (is_index and _links_to_topic(content, relative, topics)):
            continue
        heading = _slug(block.heading) if block.heading else ""
        yield _record(
            {
                "content": content,
                "domain": domain,
                "subdomain": heading or "general",
                "tags": ["claude-auto-memory", *([heading] if heading else []), *_tag_list(kind)],
                "created_at": stamp,
                "metadata": {
                    "source": relative.as_posix(),
                    **about,
                    **({"section": block.heading} if block.heading else {}),
                },
            },
            relative,
            block.line,
        )


# -- basic-memory ----------------------------------------------------------------------

_SEMANTIC_SECTION = re.compile(r"^\s{0,3}#{1,6}\s+(observations|relations)\s*#*\s*$", re.I)
_OBSERVATION = re.compile(r"^\[([^\[\]()]+)\]\s+(.+)$")
_RELATION = re.compile(r"^(\"[^\"]+\"|'[^']+'|[^\s\[\]\"']+)\s+\[\[([^\[\]]+)\]\]\s*(?:\((.*)\))?$")


def read_basic_memory(
    folder: str | os.PathLike[str], *, domain: str = "note", progress: Progress | None = None
) -> Source:
    """Read a basic-memory project folder: Markdown notes with observations and relations.

    Per note (front matter ``title``, ``type``, ``permalink``, ``tags``):

    * each observation, a list item ``[category] text #tag (context)``, is one
      memory (subdomain ``observation``) tagged with its category and ``#tags``;
    * each relation, a list item ``relation_type [[Target]] (context)``, is one
      memory "Title relation_type Target" (subdomain ``relation``, tags
      ``relation`` and the relation type);
    * the text before the ``## Observations`` or ``## Relations`` section, less
      a ``# Title`` heading, is one memory (subdomain ``note``) when not empty,
      tagged with the front matter's ``tags``.

    The domain is the note's ``type`` (unless it is basic-memory's default,
    ``note``), else the folder it sits in, else ``domain``. Metadata keeps
    the note's path, title and permalink, and an observation's category and
    context or a relation's ends.

    Raises:
        InvalidInput: ``folder`` is missing or not a directory.
    """
    root = Path(folder)
    if not root.exists():
        raise InvalidInput(f"{root} does not exist; check the path")
    if not root.is_dir():
        raise InvalidInput(f"{root} is a file; give the basic-memory project folder")
    return read_notes(
        root,
        walk_folder(root),
        lambda text, relative, stamp: _basic_memory_records(text, relative, stamp, domain),
        unit="note",
        progress=progress,
    )


def _basic_memory_records(
    text: str, relative: Path, stamp: float, default_domain: str
) -> Iterator[PortableRecord]:
    meta, body, body_line = front_matter(text)
    title = _text(meta, "title") or relative.stem
    kind = _slug(_text(meta, "type"))
    domain = (kind if kind != "note" else "") or _slug(relative.parent.name) or default_domain
    permalink = _text(meta, "permalink")
    about = {
        "source": relative.as_posix(),
        "title": title,
        **({"permalink": permalink} if permalink else {}),
    }
    lines = body.splitlines()
    preamble: list[str] = []
    in_preamble = True
    fenced = False
    for number, line in enumerate(lines, start=body_line):
        if _FENCE.match(line):
            fenced = not fenced
        if not fenced and _SEMANTIC_SECTION.match(line):
            in_preamble = False
            continue
        item = None if fenced else _ITEM.match(line)
        parsed = _semantic_item(item.group(2).strip()) if item else None
        if parsed is None:
            if in_preamble:
                preamble.append(line)
            continue
        if parsed[0] == "observation":
            _, category, content, context = parsed
            tags = [*([category] if category else []), *_HASHTAG.findall(content)]
            yield _record(
                {
                    "content": content,
                    "domain": domain,
                    "subdomain": "observation",
                    "tags": tags,
                    "created_at": stamp,
                    "metadata": {
                        **about,
                        **({"category": category} if category else {}),
                        **({"context": context} if context else {}),
                    },
                },
                relative,
                number,
            )
        else:
            _, relation, target, context = parsed
            yield _record(
                {
                    "content": f"{title} {relation} {target}",
                    "domain": domain,
                    "subdomain": "relation",
                    "tags": ["relation", relation],
                    "created_at": stamp,
                    "metadata": {
                        **about,
                        "from": title,
                        "to": target,
                        "relation_type": relation,
                        **({"context": context} if context else {}),
                    },
                },
                relative,
                number,
            )
    while preamble and not preamble[0].strip():
        preamble.pop(0)
    if preamble:
        heading = _HEADING.match(preamble[0])
        if heading and len(heading.group(1)) == 1 and heading.group(2).strip() == title.strip():
            preamble.pop(0)
    content = "\n".join(preamble).strip()
    if content:
        yield _record(
            {
                "content": content,
                "domain": domain,
                "subdomain": "note",
                "tags": _tag_list(meta.get("tags")),
                "created_at": stamp,
                "metadata": about,
            },
            relative,
            body_line,
        )


def _semantic_item(text: str) -> tuple[str, str, str, str] | None:
    """("observation", category, text, context) or ("relation", type, target, context)."""
    relation = _RELATION.match(text)
    if relation:
        kind = relation.group(1).strip("\"'").strip()
        return "relation", kind, relation.group(2).strip(), (relation.group(3) or "").strip()
    observation = _OBSERVATION.match(text)
    if observation is None:
        return None
    category = observation.group(1).strip()
    if not category or (len(category) == 1 and (category in "xX" or not category.isalnum())):
        return None  # a task's checkbox, not a category
    content = observation.group(2).strip()
    context = ""
    if content.endswith(")") and "(" in content:
        start = content.rfind("(")
        context = content[start + 1 : -1].strip()
        content = content[:start].strip()
    return ("observation", category, content, context) if content else None
