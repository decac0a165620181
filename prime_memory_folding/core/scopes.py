"""Scopes: which project, user or shared pool a memory belongs to.

Every record belongs to exactly one scope. A scope name is ``global``, or a
kind and a name joined by a colon: ``user:alice``, ``project:github.com/acme/api``,
``team:platform``. Kinds are listed in :data:`SCOPE_KINDS`; adding one there is
all it takes for the rest of the engine to accept it.

The *current* scope is where writes go by default. The server (or a program
that embeds the engine) resolves it once, at start-up, from where it runs, in
this order (the first that applies wins):

1. an explicit argument (``MemoryEngine(scope=...)``, ``--scope``);
2. ``PRIME_MEMORY_SCOPE``;
3. the project directory given as ``--project DIR``;
4. ``CLAUDE_PROJECT_DIR``, which Claude Code sets for the servers it starts;
5. the git repository that holds the working directory (not one at the home
   directory itself, which is a dotfiles repository, not a project);
6. the client's MCP roots, where the client offers them (a fallback only);
7. ``global``, when there is no project.

A project's id is its git ``origin`` URL, normalised by :func:`normalise_remote`
so that every clone of one repository, on any machine, shares one scope. A
repository without an ``origin`` (and a project directory outside git) is
named by its absolute path.

By default a read sees the current scope, the user scope ``user:<OS user>``
and ``global``.
"""

from __future__ import annotations

import getpass
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import InvalidInput

__all__ = [
    "ALL",
    "GLOBAL",
    "MAX_SCOPE_CHARS",
    "SCOPE_ENV",
    "SCOPE_KINDS",
    "ScopeResolution",
    "git_root",
    "named_project",
    "normalise_remote",
    "normalise_scope",
    "normalise_scopes",
    "origin_url",
    "project_scope",
    "resolve",
    "user_scope",
]

#: The scope every reader sees, and where records stored before scopes existed live.
GLOBAL = "global"
#: In a read's ``scopes``: every scope.
ALL = "*"
#: The longest scope name accepted.
MAX_SCOPE_CHARS = 512
#: The environment variable that sets the current scope.
SCOPE_ENV = "PRIME_MEMORY_SCOPE"
#: Claude Code sets this for the MCP servers it starts.
CLAUDE_PROJECT_ENV = "CLAUDE_PROJECT_DIR"

#: Scope kinds and what each is for. ``global`` takes no name; the others must have one.
SCOPE_KINDS: Mapping[str, str] = {
    GLOBAL: "shared by every project and user of the store",
    "user": "one person's preferences and facts, in every project",
    "project": "one project: a git repository (by its origin URL) or a folder",
    "team": "a team's shared memory",
}

_KIND = re.compile(r"[a-z][a-z0-9_-]*")
_WHITESPACE = re.compile(r"\s+")


def _bad(value: str, why: str) -> InvalidInput:
    kinds = ", ".join(sorted(SCOPE_KINDS))
    return InvalidInput(
        f"scope {value[:80]!r} is malformed: {why}; write 'global' or kind:name "
        f"(kinds: {kinds}), e.g. project:github.com/acme/api or user:alice"
    )


#: Scripts that one name may mix: Unicode's "highly restrictive" level (UTS #39),
#: under which Japanese, Chinese and Korean text mixes Han with kana, Bopomofo or
#: Hangul, and Latin with any of those. Any other mix is refused.
_SCRIPT_MIXES = (
    frozenset({"Latin", "Han", "Hiragana", "Katakana"}),
    frozenset({"Latin", "Han", "Bopomofo"}),
    frozenset({"Latin", "Han", "Hangul"}),
)
#: Scripts as the first word of a letter's Unicode name, where that word is not the script.
_SCRIPT_WORDS = {"CJK": "Han", "IDEOGRAPHIC": "Han", "KATAKANA-HIRAGANA": "", "MODIFIER": ""}
#: Lower-case Cyrillic, Greek and Armenian letters that look like Latin ones. A
#: name written only in these reads as a Latin name that it is not.
_LATIN_LOOKALIKES = frozenset("асеһіјӏорԛѕԝхуԁүαικνορυχϲϳհոսօզ")


def _script(ch: str) -> str:
    """The script of a letter, from its Unicode name; "" for anything but a letter."""
    if not unicodedata.category(ch).startswith("L"):
        return ""
    word = unicodedata.name(ch, "").partition(" ")[0]
    return _SCRIPT_WORDS.get(word, word.title())


def _shown(chars: Iterable[str]) -> str:
    return ", ".join(f"{ch!r} (U+{ord(ch):04X} {unicodedata.name(ch, '?')})" for ch in chars)


def _check_script(text: str, name: str) -> None:
    """Refuse a name with a part that mixes scripts, or that only looks Latin.

    ``project:api`` with a Cyrillic a (U+0430) would otherwise be a scope apart from
    the ``project:api`` it reads as. Each part of a path (between ``/``)
    is checked on its own, so that a folder path may hold folders named in
    different scripts. Single-script names in any script (``project:日本``)
    and parts mixing Latin, Han and kana, Bopomofo or Hangul stay allowed.

    Raises:
        InvalidInput: the name, with the characters that do not belong.
    """
    for part in re.split(r"[/\\]", name):
        letters = {ch: _script(ch) for ch in dict.fromkeys(part)}
        scripts = {script for script in letters.values() if script}
        if len(scripts) > 1 and not any(scripts <= allowed for allowed in _SCRIPT_MIXES):
            counts = {s: sum(1 for ch in part if letters[ch] == s) for s in sorted(scripts)}
            main = "Latin" if "Latin" in scripts else max(counts, key=lambda s: counts[s])
            odd = [ch for ch, script in letters.items() if script and script != main]
            others = " and ".join(s for s in counts if s != main)
            raise InvalidInput(
                f"scope {text[:80]!r} mixes {main} letters with {others} ones in {part[:80]!r}: "
                f"{_shown(odd[:5])}; write each name in one script"
            )
        if (
            scripts
            and scripts != {"Latin"}
            and all(ch in _LATIN_LOOKALIKES for ch, script in letters.items() if script)
        ):
            odd = [ch for ch, script in letters.items() if script]
            raise InvalidInput(
                f"scope {text[:80]!r} spells {part[:80]!r} in {scripts.pop()} letters that look "
                f"like Latin ones: {_shown(odd[:5])}; write it in Latin letters"
            )


def normalise_scope(value: object) -> str:
    """A scope name NFKC-normalised, trimmed, lower-cased and checked.

    Whitespace inside the name becomes ``_``, as in labels. NFKC makes
    compatibility forms one name (a fullwidth ``project:a`` is the
    ASCII one); a name that mixes scripts, or that is written only in
    Cyrillic, Greek or Armenian letters that look like Latin ones, is refused
    (:func:`_check_script`).

    Raises:
        InvalidInput: not a string, empty, an unknown kind, a missing name,
            control characters, mixed scripts, or longer than :data:`MAX_SCOPE_CHARS`.
    """
    if not isinstance(value, str):
        raise InvalidInput(f"scope must be a string, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise InvalidInput("scope is empty; write 'global' or kind:name, e.g. user:alice")
    if len(text) > MAX_SCOPE_CHARS:
        raise _bad(text, f"it has {len(text)} characters, over the limit of {MAX_SCOPE_CHARS}")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn") for ch in text):
        raise _bad(text, "it contains control or invisible characters")
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text).strip()
        if len(text) > MAX_SCOPE_CHARS:
            raise _bad(text, f"it has {len(text)} characters, over the limit of {MAX_SCOPE_CHARS}")
        if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn") for ch in text):
            raise _bad(text, "it contains control or invisible characters")
    kind, colon, name = text.partition(":")
    kind = kind.strip().lower()
    name = _WHITESPACE.sub("_", name.strip().lower())
    if not colon:
        if kind == GLOBAL:
            return GLOBAL
        if kind == ALL:
            raise _bad(text, "'*' selects every scope in a read, and names none to write to")
        raise _bad(text, "it has no kind")
    if not _KIND.fullmatch(kind) or kind not in SCOPE_KINDS:
        raise _bad(text, f"{kind!r} is not a scope kind")
    if kind == GLOBAL:
        if name:
            raise _bad(text, "'global' takes no name")
        return GLOBAL
    if not name:
        raise _bad(text, f"a {kind} scope needs a name after the colon")
    if not name.isascii():
        name = unicodedata.normalize("NFKC", name)  # lower-casing may leave a form NFKC changes
        _check_script(text, name)
    return f"{kind}:{name}"


def normalise_scopes(values: Iterable[str] | str) -> tuple[str, ...] | None:
    """A read's scopes, normalised and de-duplicated; None means every scope (``"*"``).

    Raises:
        InvalidInput: a bare string instead of a list, or a malformed scope.
    """
    if isinstance(values, str):
        raise InvalidInput("scopes must be a list of scope names, not one string; wrap it: [scope]")
    try:
        items = list(values)
    except TypeError:
        raise InvalidInput(
            f"scopes must be a list of scope names, got {type(values).__name__}"
        ) from None
    if any(isinstance(item, str) and item.strip() == ALL for item in items):
        return None
    return tuple(dict.fromkeys(normalise_scope(item) for item in items))


def named_project(value: str) -> str:
    """The scope a client names as its project: a scope name, else a git remote URL or path.

    ``project:github.com/acme/api`` and ``global`` are taken as scope names (any
    value whose part before the first colon is a scope kind); anything else,
    such as ``git@github.com:Acme/api.git`` or ``/home/me/api``, is read as a
    git remote URL or a path and normalised by :func:`normalise_remote`.

    Raises:
        InvalidInput: the value is empty or malformed.
    """
    text = value.strip()
    kind = text.partition(":")[0].strip().lower()
    if kind in SCOPE_KINDS:
        return normalise_scope(text)
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn") for ch in text):
        raise _bad(text, "it contains control or invisible characters")
    return normalise_scope(f"project:{normalise_remote(text)}")


# -- project ids -------------------------------------------------------------------------

_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>.*)$")


def normalise_remote(url: str, base: str | os.PathLike[str] | None = None) -> str:
    """A git remote URL as a project id: ``host/path``, lower case, no ``.git``.

    ``git@github.com:Acme/api.git``, ``ssh://git@github.com:22/acme/api`` and
    ``https://user:token@github.com/acme/api/`` all give ``github.com/acme/api``:
    the user, any credentials, the port, the scheme and a trailing ``.git``
    or ``/`` are dropped. A local remote (a path, or ``file://``) gives its
    absolute path, relative paths taken from ``base``.

    Raises:
        InvalidInput: the URL is empty.
    """
    text = url.strip()
    if not text:
        raise InvalidInput("the git remote URL is empty")
    host = ""
    path = ""
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme.lower() == "file":
            path = unquote(parts.path)
        else:
            host = (parts.hostname or "").lower()
            path = unquote(parts.path)
    else:
        scp = _SCP.match(text)
        # "C:\repo" or "./x:y" are paths, not host:path.
        if scp and len(scp["host"]) > 1 and not text.startswith((".", "/", "~")):
            host, path = scp["host"].lower(), scp["path"]
        else:
            path = text
    if not host:
        local = Path(path).expanduser()
        if not local.is_absolute() and base is not None:
            local = Path(base) / local
        path = os.path.normpath(str(local))
        return _strip_git(path.lower())
    path = "/".join(part for part in path.replace("\\", "/").split("/") if part)
    path = path.lstrip("~")
    return _strip_git(f"{host}/{path}".lower())


def _strip_git(text: str) -> str:
    text = text.rstrip("/")
    if text.endswith(".git"):
        text = text[:-4].rstrip("/")
    return text


def git_root(start: str | os.PathLike[str]) -> Path | None:
    """The top folder of the git work tree that holds ``start``, if any."""
    try:
        here = Path(start).expanduser().resolve()
    except OSError:
        return None
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return None


def _git_dir(root: Path) -> Path | None:
    marker = root / ".git"
    if marker.is_dir():
        return marker
    try:
        text = marker.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text[len("gitdir:") :].strip())
    return gitdir if gitdir.is_absolute() else (root / gitdir).resolve()


def origin_url(root: str | os.PathLike[str]) -> str | None:
    """The ``origin`` remote's URL of the repository at ``root``, read from its config.

    Worktrees and submodules (a ``.git`` file) are followed to the config that
    holds their remotes. None when there is no such remote.
    """
    gitdir = _git_dir(Path(root))
    if gitdir is None:
        return None
    common = gitdir
    commondir = gitdir / "commondir"
    if commondir.is_file():
        try:
            pointer = commondir.read_text(encoding="utf-8").strip()
        except OSError:
            pointer = ""
        if pointer:
            common = (gitdir / pointer).resolve()
    try:
        lines = (common / "config").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    section = ""
    found = None
    for raw in lines:
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            head = line[1 : line.find("]")] if "]" in line else line[1:]
            kind, _, sub = head.partition(" ")
            section = f"{kind.strip().lower()} {sub.strip().strip(chr(34))}"
            continue
        if section == "remote origin":
            key, _, value = line.partition("=")
            if key.strip().lower() == "url":
                found = value.strip().strip('"')  # the last one wins, as in git
    return found or None


def project_scope(folder: str | os.PathLike[str]) -> tuple[str, str]:
    """The project scope of a folder and how it was named.

    Returns ``(scope, how)``. The git repository holding ``folder`` names it by
    its ``origin`` URL, else by the repository's path; a folder outside git by
    its own absolute path.
    """
    path = Path(folder).expanduser()
    root = git_root(path)
    if root is not None:
        url = origin_url(root)
        if url:
            try:
                return normalise_scope(f"project:{normalise_remote(url, root)}"), (
                    f"git origin {_redact(url)} of {root}"
                )
            except InvalidInput:
                pass
        return normalise_scope(f"project:{root}"), f"git repository {root} (no origin remote)"
    resolved = path.resolve()
    return normalise_scope(f"project:{resolved}"), f"folder {resolved} (not in a git repository)"


def _redact(url: str) -> str:
    """A URL without its credentials, for messages."""
    return re.sub(r"//[^/@]*:[^/@]*@", "//", url)


def user_scope(name: str | None = None) -> str:
    """``user:<name>``: the given name, else the operating system's user name."""
    if name is None:
        try:
            name = getpass.getuser()
        except Exception:  # no user name in the environment or the password database
            name = f"uid{os.getuid()}" if hasattr(os, "getuid") else "local"
    return normalise_scope(f"user:{name}")


# -- resolution ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScopeResolution:
    """The current scope, what a read sees by default, and why.

    Attributes:
        current: where writes go unless a call names another scope.
        user: this user's scope.
        visible: what a read sees by default: current, user and global.
        source: which rule chose ``current``: ``argument``, ``env``,
            ``project``, ``claude_project_dir``, ``git``, ``roots`` or ``default``.
        reason: a sentence that says how ``current`` was found.
        folder: the project folder ``current`` was found from, when a folder
            was (``project``, ``claude_project_dir``, ``git``, ``roots``).
    """

    current: str
    user: str
    source: str
    reason: str
    visible: tuple[str, ...] = field(default=())
    folder: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.visible:
            visible = tuple(dict.fromkeys((self.current, self.user, GLOBAL)))
            object.__setattr__(self, "visible", visible)

    def as_dict(self) -> dict[str, object]:
        return {
            "current": self.current,
            "user": self.user,
            "visible": list(self.visible),
            "source": self.source,
            "reason": self.reason,
        }


def resolve(
    scope: str | None = None,
    *,
    project: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    user: str | None = None,
    roots: Iterable[str | os.PathLike[str]] = (),
) -> ScopeResolution:
    """Resolve the current scope in the documented order (see the module docstring).

    Args:
        scope: an explicit scope name; wins over everything else.
        project: a project folder (``--project DIR``).
        cwd: the working directory; the process's own when None.
        env: the environment; ``os.environ`` when None.
        user: the user name for the user scope; the OS user's when None.
        roots: local folders the client offered as MCP roots, in its order.

    Raises:
        InvalidInput: an explicit or environment scope is malformed, or the
            project folder does not exist.
    """
    environ = os.environ if env is None else env
    mine = user_scope(user)
    note = ""

    def done(
        current: str, source: str, reason: str, folder: str | os.PathLike[str] | None = None
    ) -> ScopeResolution:
        return ScopeResolution(
            current=current,
            user=mine,
            source=source,
            reason=reason + note,
            folder=None if folder is None else str(folder),
        )

    if scope is not None:
        return done(normalise_scope(scope), "argument", "given explicitly (--scope or scope=)")
    from_env = environ.get(SCOPE_ENV, "").strip()
    if from_env:
        try:
            current = normalise_scope(from_env)
        except InvalidInput as exc:
            raise InvalidInput(f"{SCOPE_ENV}: {exc}") from None
        return done(current, "env", f"from {SCOPE_ENV}")
    if project is not None and "${" in str(project):
        # The client passed its config's variable through unexpanded (a client
        # without ${workspaceFolder}): fall through to the next rule, not fail.
        note = f" (--project {str(project)!r} was not expanded by the client, so it was ignored)"
        project = None
    if project is not None:
        folder = Path(project).expanduser()
        if not folder.is_dir():
            raise InvalidInput(
                f"project folder {str(project)!r} does not exist or is not a folder; "
                "give the project's folder with --project"
            )
        current, how = project_scope(folder)
        return done(current, "project", f"from --project: {how}", folder)
    claude = environ.get(CLAUDE_PROJECT_ENV, "").strip()
    if claude and Path(claude).expanduser().is_dir():
        current, how = project_scope(claude)
        return done(
            current, "claude_project_dir", f"from {CLAUDE_PROJECT_ENV}: {how}", Path(claude)
        )
    here = Path(os.getcwd() if cwd is None else cwd)
    root = git_root(here)
    if root is not None and not _is_home(root):
        current, how = project_scope(root)
        return done(current, "git", f"from the working directory: {how}", root)
    for candidate in roots:
        folder = Path(candidate).expanduser()
        if folder.is_dir():
            current, how = project_scope(folder)
            return done(current, "roots", f"from the client's MCP roots: {how}", folder)
    return done(
        GLOBAL,
        "default",
        f"no project found (working directory {here} is not in a git repository)",
    )


def _is_home(folder: Path) -> bool:
    try:
        return folder == Path.home().resolve()
    except (OSError, RuntimeError):
        return False
