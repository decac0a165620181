"""Citations: a memory's pointers into a git repository, checked against the working tree.

A citation names a file relative to the repository's root, and optionally
some of it: ``lines`` (``"70-95"``, or one line ``"70"``) or a ``symbol``.
At store time :func:`cite` keeps a fingerprint of what was cited, never the
code itself:

- lines: a hash of the lines with trailing whitespace stripped, and their count;
- a symbol: a hash of its definition block. Only Python-like indentation is
  understood: a line ``def NAME``/``async def NAME``/``class NAME`` up to the
  next non-blank line indented no deeper than it. In a file without such a
  definition, the first line that contains the name as a word stands for it;
- a whole file: its git blob id (what ``git hash-object`` prints).

:func:`check` then compares a fingerprint with the file as it is now:
``verified`` (the same text at the same place), ``moved`` (the same text
elsewhere in the file, or in the file it was renamed to), ``stale`` (changed
or deleted), or ``unchecked`` (the repository is not on this machine).
Standard library only: git is run as a program.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import InvalidInput

__all__ = [
    "MAX_CITES",
    "MOVED",
    "STALE",
    "UNCHECKED",
    "VERIFIED",
    "CitationState",
    "Citations",
    "check",
    "cite",
    "head_commit",
    "read_file",
]

VERIFIED = "verified"
MOVED = "moved"
STALE = "stale"
UNCHECKED = "unchecked"

#: The most citations one memory may hold.
MAX_CITES = 32
#: How long one git command may take before its answer is done without.
GIT_TIMEOUT = 10.0

_CITE_KEYS = frozenset({"path", "lines", "symbol", "commit"})
#: What a commit named in a citation may look like: a hash, a branch, a tag, ``HEAD~2``.
_REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/~^@{}-]{0,199}")
_LINES = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class CitationState:
    """How one citation of a recalled memory compares with the working tree.

    Attributes:
        path: the file now (the new path when it was renamed), relative to the
            repository's root.
        state: ``verified``, ``moved``, ``stale`` or ``unchecked``.
        lines: where the cited text is now (``"72-97"``), when it was found
            and the citation names lines or a symbol.
        detail: one sentence saying what was found.
    """

    path: str
    state: str
    lines: str | None = None
    detail: str = ""


def read_file(path: Path) -> bytes:
    """A file's bytes (one place to read, so that a cache's reads can be counted)."""
    return path.read_bytes()


def head_commit(root: Path) -> str | None:
    """The commit ``HEAD`` names in the repository at ``root``; None without one."""
    out = _git(root, "rev-parse", "--verify", "--quiet", "HEAD")
    return out.strip() or None if out is not None else None


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


# -- fingerprints -------------------------------------------------------------------


def _lines_of(data: bytes) -> list[str]:
    return [line.rstrip() for line in data.decode("utf-8", errors="replace").splitlines()]


def _hash_lines(lines: Sequence[str]) -> str:
    digest = hashlib.sha1("\n".join(lines).encode("utf-8")).hexdigest()
    return f"{len(lines)}:{digest}"


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def _parse_lines(text: object, path: str) -> tuple[int, int]:
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(text)
    match = _LINES.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise InvalidInput(
            f"citation of {path}: lines {text!r} is not a range; give lines as '70-95' or '70'"
        )
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if first < 1 or last < first:
        raise InvalidInput(
            f"citation of {path}: lines {text!r} run backwards or start before line 1; "
            "give the first line, then the last, as '70-95'"
        )
    return first, last


def _symbol_block(lines: Sequence[str], symbol: str) -> tuple[int, int] | None:
    """The 1-based lines of ``symbol``'s definition block, or of its first mention."""
    header = re.compile(rf"^(\s*)(?:async\s+def|def|class)\s+{re.escape(symbol)}\b")
    for i, line in enumerate(lines):
        found = header.match(line)
        if found is None:
            continue
        depth = len(found.group(1).expandtabs())
        end = i
        for j in range(i + 1, len(lines)):
            if not lines[j].strip():
                continue
            if len(lines[j]) - len(lines[j].lstrip()) <= depth and not lines[j].lstrip().startswith(
                (")", "]", "}")
            ):
                break
            end = j
        return i + 1, end + 1
    word = re.compile(rf"\b{re.escape(symbol)}\b")
    for i, line in enumerate(lines):
        if word.search(line):
            return i + 1, i + 1
    return None


def _span(first: int, last: int) -> str:
    return f"{first}-{last}"


# -- store time ---------------------------------------------------------------------


def _inside(root: Path, raw: object, *, exists: bool = True) -> tuple[str, Path]:
    """The cited path, normalised, and the file it names.

    Raises:
        InvalidInput: not a relative path inside the repository to an existing
            file (when ``exists``; a path cited at a commit may be gone since).
    """
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInput("a citation's path must be a non-empty string, such as 'src/db.py'")
    text = raw.strip().replace("\\", "/")
    pure = PurePosixPath(text)
    if pure.is_absolute() or re.match(r"^[A-Za-z]:", text):
        raise InvalidInput(
            f"citation path {raw!r} is absolute; give it relative to the repository's root {root}"
        )
    if ".." in pure.parts:
        raise InvalidInput(
            f"citation path {raw!r} climbs out with '..'; give it relative to the "
            f"repository's root {root}"
        )
    relative = pure.as_posix()
    if relative in ("", ".") or pure.parts[0] == ".git":
        raise InvalidInput(f"citation path {raw!r} names no file of the repository at {root}")
    target = root / relative
    try:
        real = target.resolve()
    except (OSError, RuntimeError):
        raise InvalidInput(f"citation path {raw!r} cannot be resolved; fix the link") from None
    if not real.is_relative_to(root.resolve()):
        raise InvalidInput(
            f"citation path {raw!r} is a link that leaves the repository at {root}; "
            "cite the file it points to inside the repository"
        )
    if exists and not real.is_file():
        raise InvalidInput(
            f"citation path {raw!r} is not a file in the repository at {root}; "
            "check the path (relative to the repository's root)"
        )
    return relative, target


def _at_commit(root: Path, revision: object, relative: str) -> tuple[str, bytes]:
    """The commit ``revision`` names (its full hash) and the cited file's bytes in it.

    Raises:
        InvalidInput: the revision is malformed, names no commit of the
            repository, or the commit has no such file.
    """
    if not isinstance(revision, str) or _REVISION.fullmatch(revision.strip()) is None:
        raise InvalidInput(
            f"citation of {relative}: commit {revision!r} is not a revision; give a commit "
            "hash, a branch or a tag"
        )
    found = _git(root, "rev-parse", "--verify", "--quiet", f"{revision.strip()}^{{commit}}")
    sha = (found or "").strip()
    if not sha:
        raise InvalidInput(
            f"citation of {relative}: commit {revision.strip()!r} is not in the repository at "
            f"{root}; fetch it, or cite the working tree without a commit"
        )
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "cat-file", "blob", f"{sha}:{relative}"],
            capture_output=True,
            timeout=GIT_TIMEOUT,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        done = None
    if done is None or done.returncode != 0:
        raise InvalidInput(
            f"citation of {relative}: commit {sha[:12]} has no file {relative}; check the "
            "path as it was then"
        )
    return sha, done.stdout


def cite(
    root: Path, cites: object, read: Callable[[Path], bytes] = read_file
) -> list[dict[str, Any]]:
    """``cites`` checked against the repository at ``root``, each with its fingerprint.

    Each result is a dict: ``path``, ``lines`` or ``symbol`` when given,
    ``fingerprint``, ``commit`` (``HEAD``, or None) and ``root`` (the
    repository's folder, where recall checks it). A citation that names a
    ``commit`` is fingerprinted from the file as it was in that commit (which
    it keeps as ``commit``), so a working tree that has changed since checks
    stale at once.

    Raises:
        InvalidInput: ``cites`` is not a list of citations, or one names a path
            outside the repository, a missing file, lines past its end or
            malformed, or a symbol it does not hold, or a commit that is not in
            the repository or has no such file.
    """
    if isinstance(cites, (str, bytes, Mapping)) or not isinstance(cites, Sequence):
        raise InvalidInput(
            "cites must be a list of citations such as [{'path': 'src/db.py', 'lines': '70-95'}]"
        )
    if len(cites) > MAX_CITES:
        raise InvalidInput(
            f"cites has {len(cites)} citations, over the limit of {MAX_CITES}; cite fewer"
        )
    commit = head_commit(root) if cites else None
    done: list[dict[str, Any]] = []
    for raw in cites:
        if not isinstance(raw, Mapping):
            raise InvalidInput(
                f"a citation must be a mapping such as {{'path': 'src/db.py'}}, "
                f"got {type(raw).__name__}"
            )
        unknown = set(raw) - _CITE_KEYS
        if unknown:
            raise InvalidInput(
                f"unknown citation key(s) {sorted(map(str, unknown))}; a citation takes "
                f"{sorted(_CITE_KEYS)}"
            )
        revision = raw.get("commit")
        relative, target = _inside(root, raw.get("path"), exists=revision is None)
        lines_given = raw.get("lines") is not None
        symbol = raw.get("symbol")
        if lines_given and symbol is not None:
            raise InvalidInput(
                f"citation of {relative} gives both lines and symbol; give one of them"
            )
        named = None
        if revision is None:
            data = read(target)
        else:
            named, data = _at_commit(root, revision, relative)
        entry: dict[str, Any] = {"path": relative}
        if lines_given:
            first, last = _parse_lines(raw["lines"], relative)
            text = _lines_of(data)
            if last > len(text):
                raise InvalidInput(
                    f"citation of {relative}: lines {first}-{last} run past the end of the "
                    f"file ({len(text)} lines); cite lines that exist"
                )
            entry["lines"] = _span(first, last)
            entry["fingerprint"] = _hash_lines(text[first - 1 : last])
        elif symbol is not None:
            if not isinstance(symbol, str) or _SYMBOL.fullmatch(symbol.strip()) is None:
                raise InvalidInput(
                    f"citation of {relative}: symbol {symbol!r} is not a name; give a function "
                    "or class name such as 'connect'"
                )
            symbol = symbol.strip()
            text = _lines_of(data)
            block = _symbol_block(text, symbol)
            if block is None:
                raise InvalidInput(
                    f"citation of {relative}: symbol {symbol!r} is not in the file; check the "
                    "name, or cite lines instead"
                )
            entry["symbol"] = symbol
            entry["fingerprint"] = _hash_lines(text[block[0] - 1 : block[1]])
        else:
            entry["fingerprint"] = f"blob:{_blob_id(data)}"
        entry["commit"] = commit if named is None else named
        entry["root"] = str(root)
        done.append(entry)
    return done


# -- recall time --------------------------------------------------------------------


class Citations:
    """Checks citations against working trees, caching what it read.

    A file's text is kept by its identity (size, modification time in
    nanoseconds, inode), so a check of an unchanged file reads nothing but
    its ``stat``; a repository's renames are kept by its ``HEAD`` and its
    index file's identity. Not thread-safe on its own: the engine calls it
    under its lock.
    """

    MAX_FILES = 256

    def __init__(self, read: Callable[[Path], bytes] | None = None) -> None:
        self._read = read
        self._files: dict[Path, tuple[tuple[int, int, int], list[str], str]] = {}
        self._renames: dict[tuple[str, str | None], tuple[object, dict[str, str]]] = {}
        self._found: dict[tuple[object, ...], int | None] = {}

    def _text(self, path: Path) -> tuple[list[str], str, tuple[int, int, int]] | None:
        try:
            info = path.stat()
        except OSError:
            return None
        identity = (info.st_size, info.st_mtime_ns, info.st_ino)
        known = self._files.get(path)
        if known is not None and known[0] == identity:
            return known[1], known[2], identity
        try:
            data = (self._read or read_file)(path)
        except OSError:
            return None
        lines, blob = _lines_of(data), _blob_id(data)
        if len(self._files) >= self.MAX_FILES:
            self._files.pop(next(iter(self._files)))
        self._files[path] = (identity, lines, blob)
        return lines, blob, identity

    def _renamed(self, root: Path, commit: str | None) -> dict[str, str]:
        """Old path -> new path, for files git sees renamed since ``commit``, or uncommitted."""
        try:
            index = (root / ".git" / "index").stat()
            head = (root / ".git" / "HEAD").read_text(encoding="utf-8", errors="replace")
            marker: object = (index.st_size, index.st_mtime_ns, index.st_ino, head)
        except OSError:
            marker = None
        key = (str(root), commit)
        known = self._renames.get(key)
        if known is not None and marker is not None and known[0] == marker:
            return known[1]
        moves: dict[str, str] = {}
        if commit is not None:
            out = _git(root, "diff", "--find-renames", "--name-status", "-z", commit)
            if out is not None:
                fields = out.split("\x00")
                i = 0
                while i < len(fields) and fields[i]:
                    status = fields[i]
                    if status.startswith(("R", "C")) and i + 2 < len(fields):
                        moves[fields[i + 1]] = fields[i + 2]
                        i += 3
                    else:
                        i += 2
        out = _git(root, "status", "--porcelain=v1", "-z", "--find-renames")
        if out is not None:
            fields = out.split("\x00")
            i = 0
            while i < len(fields) and fields[i]:
                entry = fields[i]
                if entry[:1] in ("R", "C") or entry[1:2] in ("R", "C"):
                    # v1 -z: "XY new" then the old path as the next field.
                    if i + 1 < len(fields):
                        moves.setdefault(fields[i + 1], entry[3:])
                    i += 2
                else:
                    i += 1
        if len(self._renames) >= self.MAX_FILES:
            self._renames.pop(next(iter(self._renames)))
        self._renames[key] = (marker, moves)
        return moves

    def check(self, cites: object) -> tuple[CitationState, ...]:
        """Each stored citation in ``cites`` compared with its working tree (see :func:`check`)."""
        if not isinstance(cites, list):
            return ()
        return tuple(self._one(c) for c in cites if isinstance(c, Mapping) and "path" in c)

    def _one(self, cite: Mapping[str, Any]) -> CitationState:
        path = str(cite["path"])
        root = Path(str(cite.get("root", "")))
        if not cite.get("root") or not (root / ".git").exists():
            return CitationState(
                path, UNCHECKED, cite.get("lines"), "the repository is not on this machine"
            )
        found = self._text(root / path)
        now_path = path
        if found is None:
            new = self._renamed(root, cite.get("commit")).get(path)
            if new is not None:
                found = self._text(root / new)
                now_path = new
        if found is None:
            return CitationState(path, STALE, None, f"{path} is gone from the working tree")
        lines, blob, identity = found
        moved_file = now_path != path
        where = f" (renamed to {now_path})" if moved_file else ""
        fingerprint = str(cite.get("fingerprint", ""))
        if fingerprint.startswith("blob:"):
            if fingerprint == f"blob:{blob}":
                state = MOVED if moved_file else VERIFIED
                return CitationState(now_path, state, None, f"the file is unchanged{where}")
            return CitationState(now_path, STALE, None, f"the file changed{where}")
        symbol = cite.get("symbol")
        if isinstance(symbol, str):
            block = _symbol_block(lines, symbol)
            if block is not None and _hash_lines(lines[block[0] - 1 : block[1]]) == fingerprint:
                state = MOVED if moved_file else VERIFIED
                return CitationState(
                    now_path, state, _span(*block), f"{symbol} is unchanged{where}"
                )
            detail = "changed" if block is not None else "is gone"
            return CitationState(now_path, STALE, None, f"{symbol} {detail}{where}")
        try:
            first, last = _parse_lines(cite.get("lines"), path)
        except InvalidInput:
            return CitationState(path, STALE, None, "the stored citation is unreadable")
        count = last - first + 1
        if not moved_file and _hash_lines(lines[first - 1 : last]) == fingerprint:
            return CitationState(path, VERIFIED, _span(first, last), "the lines are unchanged")
        key = (str(root / now_path), identity, count, fingerprint, first)
        if key not in self._found:
            if len(self._found) >= self.MAX_FILES * 4:
                self._found.pop(next(iter(self._found)))
            self._found[key] = _locate(lines, count, fingerprint, first)
        at = self._found[key]
        if at is not None:
            return CitationState(
                now_path, MOVED, _span(at, at + count - 1), f"the lines moved{where}"
            )
        return CitationState(now_path, STALE, None, f"the cited lines changed{where}")


def _locate(lines: Sequence[str], count: int, fingerprint: str, near: int) -> int | None:
    """The first line of ``count`` lines hashing to ``fingerprint``, nearest ``near``."""
    best: int | None = None
    for start in range(1, len(lines) - count + 2):
        if _hash_lines(lines[start - 1 : start - 1 + count]) == fingerprint and (
            best is None or abs(start - near) < abs(best - near)
        ):
            best = start
    return best


def check(cites: object, read: Callable[[Path], bytes] | None = None) -> tuple[CitationState, ...]:
    """Stored citations (a record's ``metadata["cites"]``) against the working tree, uncached."""
    return Citations(read).check(cites)
