"""Install, uninstall and list our hook entries in a host's settings file.

Install merges into the file the host already has: every key and every hook
there stays, and ours are added at the end of their events' lists. The
original is kept next to the file as ``NAME.YYYYmmdd-HHMMSS.bak`` before the
first change, and every write goes through a temporary file and
``os.replace``. The file keeps its indentation, newlines and escaping; and
when uninstall leaves a structure that equals one a backup holds, it writes
that backup's bytes back, so install then uninstall gives the file back byte
for byte.

A file that is not a JSON object, or whose hooks are not what the host
documents, is refused with :class:`~prime_memory_folding.errors.InvalidInput`
naming it, and nothing is written.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from ..errors import InvalidInput
from .hosts import EVENTS, HOSTS, Binding, Host, hook_command, is_ours

__all__ = ["Change", "Installed", "entry", "install", "status", "uninstall"]

Where = Literal["user", "project"]
Clock = Callable[[], datetime]

_BOM = "\ufeff"
_BACKUP = re.compile(r"\.(\d{8}-\d{6})(?:-(\d+))?\.bak$")


@dataclass(frozen=True)
class Change:
    """What install or uninstall did, or would do with ``dry_run``, to one file.

    Attributes:
        host: the host's name.
        where: ``"user"`` or ``"project"``.
        path: the settings file.
        before: its bytes before, or None if it did not exist.
        after: its bytes after, or None if it does not exist after.
        backup: the backup written before the change, if one was.
    """

    host: str
    where: str
    path: Path
    before: bytes | None
    after: bytes | None
    backup: Path | None

    @property
    def changed(self) -> bool:
        """Whether the file is (or would be) different."""
        return self.before != self.after

    def diff(self) -> str:
        """The change as a unified diff ("" when nothing changes)."""
        if not self.changed:
            return ""
        old = _lines(self.before)
        new = _lines(self.after)
        name = str(self.path)
        return "".join(
            difflib.unified_diff(
                old,
                new,
                fromfile=name if self.before is not None else "/dev/null",
                tofile=name if self.after is not None else "/dev/null",
            )
        )


@dataclass(frozen=True)
class Installed:
    """Our entries found in one host settings file.

    Attributes:
        host: the host's name.
        where: ``"user"`` or ``"project"``.
        path: the settings file.
        events: our events with an entry there, in :data:`EVENTS` order.
        missing: our events the host has but the file lacks.
    """

    host: str
    where: str
    path: Path
    events: tuple[str, ...]
    missing: tuple[str, ...]


def _lines(data: bytes | None) -> list[str]:
    if data is None:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


# -- reading and writing a settings file in its own style ----------------------------


@dataclass(frozen=True)
class _Style:
    indent: int | str | None = 2
    newline: str = "\n"
    final_newline: bool = True
    item_separator: str = ","
    key_separator: str = ": "
    ensure_ascii: bool = False
    bom: bool = False


def _style_of(text: str, bom: bool) -> _Style:
    newline = "\r\n" if "\r\n" in text else "\n"
    body = text.strip()
    ensure_ascii = not any(ord(c) > 127 for c in text) and "\\u" in text
    key_sep = ": " if re.search(r'"\s*:\s', text) or ":" not in body else ":"
    final = text.endswith(("\n", "\r"))
    if "\n" not in body:
        item_sep = ", " if re.search(r",\s", body) else ","
        return _Style(None, newline, final, item_sep, key_sep, ensure_ascii, bom)
    indent: int | str = 0
    for line in body.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            lead = line[: len(line) - len(stripped)]
            indent = len(lead) if set(lead) == {" "} else lead
            break
    return _Style(indent, newline, final, ",", key_sep, ensure_ascii, bom)


def _dump(doc: dict[str, Any], style: _Style) -> bytes:
    text = json.dumps(
        doc,
        indent=style.indent,
        separators=(style.item_separator, style.key_separator),
        ensure_ascii=style.ensure_ascii,
    )
    if style.final_newline:
        text += "\n"
    text = text.replace("\n", style.newline)
    return ((_BOM if style.bom else "") + text).encode("utf-8")


def _strip_comments(text: str) -> str:
    """``text`` without // and /* */ comments outside strings, nor trailing commas."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] not in "\r\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(c)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def _parse(path: Path, data: bytes) -> tuple[dict[str, Any], _Style]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{path} is not UTF-8 text; fix or move it, then try again") from None
    bom = text.startswith(_BOM)
    text = text.removeprefix(_BOM)
    if not text.strip():
        return {}, _Style(bom=bom)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        try:
            json.loads(_strip_comments(text))
        except ValueError:
            pass
        else:
            raise InvalidInput(
                f"{path} holds comments (JSON with comments); prime-memory will not rewrite it "
                "and lose them: add the hooks by hand (see docs/hooks.md) or remove the comments"
            ) from None
        raise InvalidInput(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            "fix it, then try again"
        ) from None
    if not isinstance(doc, dict):
        raise InvalidInput(f"{path} holds a JSON {type(doc).__name__}, not an object; fix it first")
    return doc, _style_of(text, bom)


def _hooks_of(path: Path, doc: dict[str, Any]) -> dict[str, Any] | None:
    hooks = doc.get("hooks")
    if hooks is None:
        return None
    if not isinstance(hooks, dict):
        raise InvalidInput(
            f'{path}: "hooks" is a {type(hooks).__name__}, not an object of events; fix it first'
        )
    for event, entries in hooks.items():
        if not isinstance(entries, list):
            raise InvalidInput(
                f'{path}: "hooks"."{event}" is a {type(entries).__name__}, not a list; fix it first'
            )
    return hooks


def _read(path: Path) -> tuple[bytes | None, dict[str, Any], _Style]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, {}, _Style()
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from None
    doc, style = _parse(path, data)
    _hooks_of(path, doc)
    return data, doc, style


def _write(path: Path, data: bytes | None) -> None:
    if data is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    try:
        with open(temp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def _backup_path(path: Path, now: datetime) -> Path:
    stamp = now.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.{stamp}.bak")
    count = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.{stamp}-{count}.bak")
        count += 1
    return candidate


def _backups(path: Path) -> list[Path]:
    """The backups of ``path``, newest first."""
    found: list[tuple[str, int, Path]] = []
    if not path.parent.is_dir():
        return []
    prefix = path.name + "."
    for item in path.parent.iterdir():
        if not item.name.startswith(prefix):
            continue
        match = _BACKUP.fullmatch(item.name[len(path.name) :])
        if match is not None:
            found.append((match[1], int(match[2] or 0), item))
    return [item for _, _, item in sorted(found, reverse=True)]


# -- our entries ----------------------------------------------------------------------


def _handler(host: Host, binding: Binding, command: str) -> dict[str, Any]:
    handler: dict[str, Any] = {}
    if host.name == "gemini":
        handler["name"] = f"prime-memory-{binding.event}"
    if host.name != "cursor":
        handler["type"] = "command"
    handler["command"] = command
    handler["timeout"] = binding.timeout
    if binding.background:
        handler["async"] = True
    if host.layout == "flat" and binding.matcher is not None:
        handler["matcher"] = binding.matcher
    return handler


def entry(host: Host, binding: Binding, executable: str) -> dict[str, Any]:
    """The item install adds to the list of ``binding``'s host event."""
    handler = _handler(host, binding, hook_command(executable, host.name, binding.event))
    if host.layout == "flat":
        return handler
    group: dict[str, Any] = {}
    if binding.matcher is not None:
        group["matcher"] = binding.matcher
    group["hooks"] = [handler]
    return group


def _handler_is_ours(item: Any, host: str, executable: str | None) -> str | None:
    if not isinstance(item, dict):
        return None
    return is_ours(item.get("command"), host, executable)


def _ours(host: Host, hooks: dict[str, Any], executable: str | None) -> list[tuple[str, ...]]:
    """Each of our handlers as (host event, its group's matcher, its JSON), in file order."""
    found: list[tuple[str, ...]] = []
    for event, entries in hooks.items():
        for item in entries:
            handlers = item.get("hooks") if isinstance(item, dict) else None
            if host.layout == "grouped" and isinstance(handlers, list):
                matcher = json.dumps(item.get("matcher"))
                found += [
                    (event, matcher, json.dumps(h, sort_keys=True))
                    for h in handlers
                    if _handler_is_ours(h, host.name, executable)
                ]
            elif _handler_is_ours(item, host.name, executable):
                found.append((event, json.dumps(item, sort_keys=True)))
    return found


def _events_in(host: Host, hooks: dict[str, Any], executable: str | None) -> set[str]:
    events: set[str] = set()
    for entries in hooks.values():
        for item in entries:
            handlers = item.get("hooks") if isinstance(item, dict) else None
            candidates = handlers if isinstance(handlers, list) else [item]
            for handler in candidates:
                event = _handler_is_ours(handler, host.name, executable)
                if event is not None:
                    events.add(event)
    return events


def _without_ours(host: Host, doc: dict[str, Any], executable: str | None) -> dict[str, Any]:
    """A copy of ``doc`` without our entries, and without the lists and groups they emptied."""
    doc = copy.deepcopy(doc)
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return doc
    for event in list(hooks):
        kept: list[Any] = []
        removed = False
        for item in hooks[event]:
            handlers = item.get("hooks") if isinstance(item, dict) else None
            if host.layout == "grouped" and isinstance(handlers, list):
                left = [h for h in handlers if not _handler_is_ours(h, host.name, executable)]
                if len(left) != len(handlers):
                    removed = True
                    if left:
                        kept.append({**item, "hooks": left})
                    continue
            elif _handler_is_ours(item, host.name, executable):
                removed = True
                continue
            kept.append(item)
        if removed and not kept:
            del hooks[event]
        else:
            hooks[event] = kept
    return doc


def _prune_hooks(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Drop a "hooks" object that removing our entries left empty."""
    if after.get("hooks") == {} and before.get("hooks") != {}:
        after = {k: v for k, v in after.items() if k != "hooks"}
    return after


def _normal(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` without empty event lists and an empty "hooks": what a backup is matched on."""
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return doc
    kept = {event: entries for event, entries in hooks.items() if entries != []}
    rest = {k: v for k, v in doc.items() if k != "hooks"}
    return {**rest, "hooks": kept} if kept else rest


def _same(host: Host, old: dict[str, Any], left: dict[str, Any]) -> bool:
    """Whether ``left`` is what ``old`` held, but for what install adds besides our entries."""
    if _normal(old) == _normal(left):
        return True
    added_version = (
        host.skeleton_version is not None
        and "version" not in old
        and left.get("version") == host.skeleton_version
    )
    return added_version and _normal(old) == _normal(
        {k: v for k, v in left.items() if k != "version"}
    )


def _with_ours(host: Host, doc: dict[str, Any], executable: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    if host.skeleton_version is not None and "version" not in doc:
        doc = {"version": host.skeleton_version, **doc}
    hooks = doc.setdefault("hooks", {})
    for binding in host.bindings:
        hooks.setdefault(binding.host_event, []).append(entry(host, binding, executable))
    return doc


def _skeleton(host: Host) -> dict[str, Any]:
    return {} if host.skeleton_version is None else {"version": host.skeleton_version}


def _host(name: str) -> Host:
    try:
        return HOSTS[name]
    except KeyError:
        raise InvalidInput(f"unknown host {name!r}; hosts: {', '.join(HOSTS)}") from None


# -- the verbs ------------------------------------------------------------------------


def install(
    host: str,
    *,
    where: Where,
    home: Path,
    project: Path,
    command_exe: str,
    dry_run: bool,
    now: Clock = datetime.now,
) -> Change:
    """Add our hook entries for ``host`` to its user or project settings file.

    Entries of ours already there (from this executable or any other named
    prime-memory) are replaced; when they already are what would be written,
    nothing changes and no backup is made.

    Raises:
        InvalidInput: the host is unknown, or the file cannot be read or is
            not a JSON object with the host's hooks shape; nothing was written.
    """
    spec = _host(host)
    path = spec.path(where, home=home, project=project)
    before, doc, style = _read(path)
    hooks = doc.get("hooks") or {}
    desired = _with_ours(
        spec, _prune_hooks(doc, _without_ours(spec, doc, command_exe)), command_exe
    )
    if before is not None and _ours(spec, hooks, command_exe) == _ours(
        spec, desired["hooks"], command_exe
    ):
        return Change(host, where, path, before, before, None)
    after = _dump(desired, style)
    backup = None
    if not dry_run:
        if before is not None:
            backup = _backup_path(path, now())
            _write(backup, before)
        _write(path, after)
    return Change(host, where, path, before, after, backup)


def uninstall(
    host: str,
    *,
    where: Where,
    home: Path,
    project: Path,
    command_exe: str,
    dry_run: bool,
) -> Change:
    """Remove our hook entries for ``host`` from its user or project settings file.

    Only our entries go, with the event lists and the groups they leave empty.
    When what is left equals what a backup of the file holds, the backup's
    bytes are written back; a file that install created and that holds
    nothing else is deleted.

    Raises:
        InvalidInput: the host is unknown, or the file cannot be read or is
            not a JSON object with the host's hooks shape; nothing was written.
    """
    spec = _host(host)
    path = spec.path(where, home=home, project=project)
    before, doc, style = _read(path)
    if before is None or not _ours(spec, doc.get("hooks") or {}, command_exe):
        return Change(host, where, path, before, before, None)
    left = _prune_hooks(doc, _without_ours(spec, doc, command_exe))
    backups = _backups(path)
    after: bytes | None = None
    for backup in backups:
        try:
            data = backup.read_bytes()
            old, _ = _parse(backup, data)
        except (OSError, InvalidInput):
            continue
        if _same(spec, old, left):
            after = data
            break
    else:
        after = None if left == _skeleton(spec) and not backups else _dump(left, style)
    if not dry_run:
        _write(path, after)
    return Change(host, where, path, before, after, None)


def status(*, home: Path, project: Path) -> list[Installed]:
    """Our entries in every host's user and project settings files.

    A file that is missing, unreadable or not valid JSON is left out.
    """
    found: list[Installed] = []
    seen: set[Path] = set()
    for spec in HOSTS.values():
        for where in ("user", "project"):
            path = spec.path(where, home=home, project=project)
            if path in seen:
                continue
            seen.add(path)
            try:
                before, doc, _ = _read(path)
            except InvalidInput:
                continue
            if before is None:
                continue
            have = _events_in(spec, doc.get("hooks") or {}, None)
            if have:
                events = tuple(e for e in EVENTS if e in have)
                missing = tuple(e for e in spec.events() if e not in have)
                found.append(Installed(spec.name, where, path, events, missing))
    return found
