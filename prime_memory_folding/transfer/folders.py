"""Which files of a folder an import reads, when the folder may come from anyone.

A folder of notes to import may be a cloned repository or a download, so the
walk trusts nothing in it (docs/security.md):

- **Links stay inside.** A link, to a file or a folder, is followed only when
  its target lies inside the folder being imported (resolved, so ``..`` and
  chains of links count too). Each real file and folder is read at most once,
  so links can neither loop nor repeat a note; a path without a link wins over
  a link to the same file.
- **Tools' folders are left out:** version control (``.git``, ``.hg``,
  ``.svn``), virtual environments (``.venv``, ``venv`` and any folder holding
  ``pyvenv.cfg``), dependencies (``node_modules``, ``site-packages``) and
  build output (``__pycache__``, ``dist``, ``build``).
- **What git would not commit is left out:** every ``.gitignore`` inside the
  folder applies to the files below it, as git reads them: comments, ``!``
  to re-include, a trailing ``/`` for folders only, a ``/`` inside to anchor a
  pattern to its ``.gitignore``'s folder, ``*``, ``?``, ``[...]`` and ``**``.
  Git's other sources of patterns (``.git/info/exclude``, ``core.excludesFile``)
  are not read.
- **Only regular files are read,** opened without following a link, so a
  FIFO or a device named ``*.md`` neither blocks nor streams forever.

Every file or folder left out that would otherwise have been read is listed,
with the reason, in :attr:`Walk.left_out`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.portable import LeftOut

__all__ = ["TOOL_FOLDERS", "Walk", "read_text", "walk"]

#: Folders an import never enters, by name, and why.
TOOL_FOLDERS = {
    ".git": "version control",
    ".hg": "version control",
    ".svn": "version control",
    ".venv": "a virtual environment",
    "venv": "a virtual environment",
    "node_modules": "dependencies",
    "site-packages": "dependencies",
    "__pycache__": "build output",
    "dist": "build output",
    "build": "build output",
}


@dataclass
class Walk:
    """What a walk found: the files to read, and what it left out."""

    #: (path relative to the folder, the real path to open), in the order found.
    files: list[tuple[Path, Path]] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Rule:
    """One .gitignore pattern: the folder of its file (relative, "" at the top) and its test."""

    base: str
    pattern: re.Pattern[str]
    negate: bool
    folders_only: bool


def walk(root: Path, suffix: str = ".md") -> Walk:
    """Every file under ``root`` whose name ends in ``suffix``, as the module says.

    Raises:
        OSError: ``root`` itself cannot be read.
    """
    top = root.resolve(strict=True)
    found = Walk()
    claimed_files: set[Path] = set()
    claimed_folders: set[Path] = {top}
    links: list[tuple[Path, Path, list[_Rule]]] = []  # (relative, link path, rules there)
    own_rules: dict[Path, list[_Rule]] = {}  # by real folder, relative to the top

    def leave(relative: Path, reason: str) -> None:
        found.left_out.append(LeftOut(relative.as_posix(), reason))

    def visit_folder(real: Path, relative: Path, rules: list[_Rule]) -> None:
        rules = rules + _rules_in(real, relative, top)
        try:
            entries = sorted(os.scandir(real), key=lambda entry: entry.name)
        except OSError as exc:
            leave(relative, f"cannot be read ({exc.strerror})")
            return
        for entry in entries:
            here = relative / entry.name
            if entry.is_symlink():
                links.append((here, Path(entry.path), rules))
            elif entry.is_dir(follow_symlinks=False):
                why = _why_folder(real / entry.name, here, rules)
                if why is None:
                    enter(real / entry.name, here, rules)
                else:
                    leave(here, why)
            elif entry.name.endswith(suffix):
                if _ignored(rules, here, folder=False):
                    leave(here, "ignored by .gitignore")
                else:
                    take(real / entry.name, here)

    def enter(real: Path, relative: Path, rules: list[_Rule]) -> None:
        if real in claimed_folders:
            leave(relative, "a link to a folder read already")
            return
        claimed_folders.add(real)
        visit_folder(real, relative, rules)

    def take(real: Path, relative: Path) -> None:
        if real in claimed_files:
            leave(relative, "a link to a note read already")
            return
        claimed_files.add(real)
        found.files.append((relative, real))

    def rules_over(inner: Path) -> list[_Rule]:
        """The .gitignore rules that apply inside the top's folder ``inner`` (relative)."""
        if inner not in own_rules:
            above = rules_over(inner.parent) if inner.parts else []
            own_rules[inner] = above + _rules_in(top / inner, inner, top)
        return own_rules[inner]

    def why_target(target: Path, folder: bool) -> str | None:
        """Why a link's target is left out where it lies: the same tests as on the walk."""
        inner = target.relative_to(top)
        for depth in range(1, len(inner.parts) + 1):
            part = Path(*inner.parts[:depth])
            rules = rules_over(part.parent)
            if depth < len(inner.parts) or folder:
                why = _why_folder(top / part, part, rules)
            else:
                why = "ignored by .gitignore" if _ignored(rules, part, folder=False) else None
            if why is not None:
                return f"a link into {part.as_posix()}, {why}"
        return None

    visit_folder(top, Path(""), [])
    # Links last, so that a file or folder is known by its own path before a
    # link to it; following a linked folder may find more links.
    while links:
        relative, link, rules = links.pop(0)
        try:
            target = link.resolve(strict=True)
        except (OSError, RuntimeError):
            if relative.name.endswith(suffix):
                leave(relative, "a broken or looping link")
            continue
        is_folder = target.is_dir()
        if not is_folder and not relative.name.endswith(suffix):
            continue
        if target != top and top not in target.parents:
            leave(relative, "a link to outside the folder")
            continue
        why = (
            _why_folder(target, relative, rules)
            if is_folder
            else ("ignored by .gitignore" if _ignored(rules, relative, folder=False) else None)
        )
        why = why or (why_target(target, is_folder) if target != top else None)
        if why is not None:
            leave(relative, why)
        elif is_folder:
            enter(target, relative, rules)
        else:
            take(target, relative)
    found.files.sort(key=lambda pair: pair[0].as_posix())
    return found


def _why_folder(real: Path, relative: Path, rules: Sequence[_Rule]) -> str | None:
    """Why the walk does not enter a folder, or None when it does."""
    why = TOOL_FOLDERS.get(relative.name)
    if why is None and (real / "pyvenv.cfg").exists():
        why = "a virtual environment"
    if why is None and _ignored(rules, relative, folder=True):
        why = "ignored by .gitignore"
    return why


def read_text(real: Path) -> tuple[str, float]:
    """A note's text and modification time, opened without following a link.

    Raises:
        OSError: not a regular file any more, or unreadable.
        UnicodeDecodeError: not UTF-8.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    handle = os.open(real, flags)
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(0, "not a regular file")
        with os.fdopen(handle, "rb", closefd=False) as stream:
            data = stream.read()
    finally:
        os.close(handle)
    return data.decode("utf-8"), info.st_mtime


# -- .gitignore ------------------------------------------------------------------------


def _rules_in(real: Path, relative: Path, top: Path) -> list[_Rule]:
    """The patterns of the folder's own .gitignore (a link to outside is not read)."""
    path = real / ".gitignore"
    try:
        target = path.resolve(strict=True)
        if top not in target.parents or not target.is_file():
            return []
        text, _ = read_text(target)
    except (OSError, RuntimeError, UnicodeDecodeError):
        return []
    base = relative.as_posix() if relative.parts else ""
    return [rule for line in text.splitlines() if (rule := _rule(line, base)) is not None]


def _rule(line: str, base: str) -> _Rule | None:
    """One line of a .gitignore as a rule; None for a blank line or a comment."""
    text = re.sub(r"(?<!\\) +$", "", line.rstrip("\r"))
    if not text or text.startswith("#"):
        return None
    negate = text.startswith("!")
    if negate or text.startswith(("\\#", "\\!")):
        text = text[1:]
    folders_only = text.endswith("/")
    text = text.rstrip("/")
    if not text:
        return None
    anchored = "/" in text
    body = _translate(text.lstrip("/"))
    regex = body if anchored else "(?:.*/)?" + body
    return _Rule(base, re.compile(regex + r"\Z", re.DOTALL), negate, folders_only)


def _translate(pattern: str) -> str:
    """A gitignore glob as a regular expression over a ``/``-separated path."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape("["))
                i += 1
                continue
            inside = pattern[i + 1 : end].replace("\\", "\\\\")
            if inside.startswith("!"):
                inside = "^" + inside[1:]
            out.append(f"[{inside}]")
            i = end + 1
        elif pattern[i] == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


def _ignored(rules: Sequence[_Rule], relative: Path, *, folder: bool) -> bool:
    """Whether the .gitignore rules over ``relative`` leave it out; the last match decides."""
    path = relative.as_posix()
    verdict = False
    for rule in rules:
        if rule.folders_only and not folder:
            continue
        if rule.base:
            if not path.startswith(rule.base + "/"):
                continue
            inner = path[len(rule.base) + 1 :]
        else:
            inner = path
        if rule.pattern.match(inner):
            verdict = not rule.negate
    return verdict
