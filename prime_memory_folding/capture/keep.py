"""What of a session is worth keeping, and the memories it becomes.

A hook captures a user's prompt, a tool's result and the agent's answer; this
module decides, with the standard library only, what of them to spool and
then to store:

- a prompt, unless it is trivial ("ok", "continue", "yes", a slash command,
  or fewer than :data:`MIN_PROMPT_WORDS` words that say something). A prompt
  that states a rule for the project is kept as one (:func:`rule_kind`): a
  decision ("we decided", "we chose", "we will use") or a convention
  ("from now on", "going forward", "always", "never", "remember that");
- the agent's final answer of each turn, unless it says next to nothing;
- a failed command with the tail of its error, and the fix that followed: the
  files edited until the same command passed;
- the files edited, as ``file:PATH`` tags on the turn's answer, and as
  whole-file citations (``cites``, relative to the root of the git repository
  the hook ran in) that recall checks against the working tree; the drain
  keeps only those the engine accepts (:mod:`.drain`).

Everything else a tool does (reads, searches, listings, passing commands) is
chatter and is dropped at capture. What is already stored word for word is
left out by the drain (:mod:`.drain`).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePath
from typing import Any

from ..core.lexicon import STOPWORDS, WORD
from ..core.scopes import git_root
from .spool import Captured

__all__ = [
    "MIN_PROMPT_WORDS",
    "memories",
    "tool_capture",
    "worth_keeping",
]

#: A prompt needs this many words beyond stop words and assent to be kept.
MIN_PROMPT_WORDS = 2
#: An answer needs this many words that say something to be kept.
MIN_ANSWER_WORDS = 5
#: The longest text a capture keeps; a longer one keeps its head and its tail.
MAX_CAPTURE_CHARS = 8_000
#: A failed command keeps this many last lines of its error.
ERROR_TAIL_LINES = 15
ERROR_TAIL_CHARS = 1_500
#: The most files one memory names as tags.
MAX_FILE_TAGS = 20
#: The most files one memory cites: the engine's limit (``core.citations.MAX_CITES``).
MAX_FILE_CITES = 32

#: Words of assent and filler: a prompt made only of them asks nothing new.
FILLER = frozenset(
    """ok okay k kk yes y yeah yep yup no nope sure continue go ahead on proceed please pls
    thanks thank thx ty great good nice cool perfect awesome fine lgtm done next again retry
    right correct exactly agreed approve approved keep going carry do it that this sounds
    works work looks let s lets""".split()  # noqa: SIM905
)

#: Tools that change files, by the names the hosts give them (lower case).
EDIT_TOOLS = frozenset(
    """edit write multiedit notebookedit apply_patch write_file replace edit_file
    create_file str_replace_editor str_replace_based_edit_tool search_replace
    afterfileedit""".split()  # noqa: SIM905
)
#: Tools that run a shell command.
SHELL_TOOLS = frozenset(
    """bash shell run_shell_command run_terminal_cmd terminal exec_command local_shell
    runterminalcommand run_in_terminal""".split()  # noqa: SIM905
)
_PATH_KEYS = ("file_path", "path", "notebook_path", "filePath", "target_file", "filename")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.MULTILINE)
_EXIT_KEYS = ("exit_code", "exitCode", "returncode", "return_code", "status_code")


def _words(text: str) -> list[str]:
    return [w for w in (m.group().lower() for m in WORD.finditer(text)) if w not in STOPWORDS]


_DECISION = re.compile(
    r"\b(?:we(?:'ve| have)? decided|we chose|we(?:'ll| will) (?:use|go with)|let'?s go with"
    r"|the decision is)\b",
    re.IGNORECASE,
)
_CONVENTION = re.compile(
    r"(?:^|[.!?]\s+)(?:from now on|going forward|always|never|remember that|make sure to"
    r"|do not ever|don'?t ever)\b",
    re.IGNORECASE,
)


def rule_kind(prompt: str) -> str | None:
    """``"decision"`` or ``"convention"`` when a prompt states one, else None.

    A decision is said in so many words anywhere in the prompt; a convention
    is a sentence that starts with "from now on", "going forward", "always",
    "never", "remember that" or the like.
    """
    if _DECISION.search(prompt):
        return "decision"
    if _CONVENTION.search(prompt.strip()):
        return "convention"
    return None


def worth_keeping(kind: str, text: str) -> bool:
    """Whether a prompt or an answer says enough to be kept."""
    stripped = text.strip()
    if not stripped:
        return False
    if kind == "prompt":
        if stripped.startswith("/") and " " not in stripped:
            return False  # a slash command
        saying = [w for w in _words(stripped) if w not in FILLER]
        return len(saying) >= MIN_PROMPT_WORDS
    return len(_words(stripped)) >= MIN_ANSWER_WORDS


def clip(text: str, limit: int = MAX_CAPTURE_CHARS) -> str:
    """``text``, or its head and tail with a mark between when it is longer than ``limit``."""
    if len(text) <= limit:
        return text
    half = (limit - 7) // 2
    return f"{text[:half]}\n[…]\n{text[-half:]}"


def _tail(text: str) -> str:
    lines = text.strip().splitlines()[-ERROR_TAIL_LINES:]
    tail = "\n".join(lines)
    return tail[-ERROR_TAIL_CHARS:]


def _relative(path: str, cwd: str | None) -> str:
    if cwd:
        try:
            return PurePath(path).relative_to(cwd).as_posix()
        except ValueError:
            pass
    return PurePath(path).as_posix()


def _edited(tool_input: Any, cwd: str | None) -> list[str]:
    if not isinstance(tool_input, dict):
        return []
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return [_relative(value.strip(), cwd)]
    patch = next((v for v in tool_input.values() if isinstance(v, str) and "*** " in v), "")
    return [_relative(found.strip(), cwd) for found in _PATCH_FILE.findall(patch)]


def _command(tool_input: Any) -> str | None:
    if isinstance(tool_input, str):
        return tool_input.strip() or None
    if not isinstance(tool_input, dict):
        return None
    value = tool_input.get("command", tool_input.get("cmd"))
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        return shlex.join(value)
    return value.strip() or None if isinstance(value, str) else None


def _failure(response: Any) -> str | None:
    """The error text of a tool that failed, or None when it did not fail."""
    if isinstance(response, str):
        head = response.lstrip()[:40].lower()
        return response if head.startswith(("error", "exit code")) else None
    if not isinstance(response, dict):
        return None
    error = response.get("error")
    if isinstance(error, str) and error.strip():
        return error
    code = next((response[k] for k in _EXIT_KEYS if isinstance(response.get(k), int)), 0)
    failed = code != 0 or response.get("is_error") is True or response.get("interrupted") is True
    if not failed:
        return None
    parts = [response.get(k) for k in ("stderr", "stdout", "output", "content")]
    text = "\n".join(p for p in parts if isinstance(p, str) and p.strip())
    return text or f"exit code {code}"


def tool_capture(
    tool_name: str | None, tool_input: Any, response: Any, cwd: str | None
) -> dict[str, Any] | None:
    """What to spool of one tool call, or None when it is chatter.

    An edit gives ``{"edited": [paths]}``, with ``"cwd"`` when the hook's
    working folder exists (the paths are relative to it); a shell command gives
    ``{"command": ..., "failed": bool}`` with ``"error"`` (the tail) when it
    failed; a failed command of another tool gives its name and error.
    """
    name = (tool_name or "").lower()
    error = _failure(response)
    if name in EDIT_TOOLS or (not name and _edited(tool_input, cwd)):
        edited = _edited(tool_input, cwd)
        if not edited or error is not None:
            return None
        return {"edited": edited, "cwd": cwd} if cwd and os.path.isdir(cwd) else {"edited": edited}
    if name in SHELL_TOOLS:
        command = _command(tool_input)
        if command is None:
            return None
        if error is None:
            return {"command": command, "failed": False}
        return {"command": command, "failed": True, "error": _tail(error)}
    if error is not None and name:
        return {"command": tool_name, "failed": True, "error": _tail(error)}
    return None


def _file_tags(files: Iterable[str]) -> list[str]:
    return [f"file:{path}" for path in dict.fromkeys(files)][:MAX_FILE_TAGS]


#: A file a turn edited: the hook's working folder (None if unknown) and the path as kept.
Edit = tuple[str | None, str]


def _file_cites(edits: Iterable[Edit]) -> dict[str, Any]:
    """``cites`` and ``repo`` for the files edited, or nothing when none is in a repository.

    Each file becomes a whole-file citation relative to the root of the git
    repository of the hook's working folder; one memory cites one repository
    (the first edit's), so files of another, and paths that leave it, are
    passed over. Whether each file exists and is one the engine would accept
    is for the drain to check, when it stores.
    """
    root: Path | None = None
    cited: dict[str, None] = {}
    for cwd, path in edits:
        if not cwd:
            continue
        here = git_root(cwd)
        if here is None or (root is not None and here != root):
            continue
        root = here
        full = Path(cwd, path)  # an absolute path stays itself
        try:
            relative = Path(os.path.realpath(full.parent), full.name).relative_to(root)
        except (OSError, ValueError):
            continue  # outside the repository
        if relative.parts and relative.parts[0] != ".git":
            cited[relative.as_posix()] = None
    if root is None or not cited:
        return {}
    return {"cites": [{"path": path} for path in cited][:MAX_FILE_CITES], "repo": str(root)}


def _failure_text(command: str, error: str, fix: Sequence[str] | None) -> str:
    text = f"Command failed: `{command}`\nError:\n{error}"
    if fix is None:
        return text
    edits = f"edited {', '.join(fix)}; " if fix else ""
    return f"{text}\nFix: {edits}then `{command}` passed."


def _item(captured: Captured, content: str, **labels: Any) -> dict[str, Any]:
    return {
        "content": content,
        "scope": captured.scope,
        "session": captured.session,
        "metadata": {"source": "hook", "host": captured.host, "captured_at": captured.at},
        **labels,
    }


def memories(captures: Sequence[Captured]) -> list[dict[str, Any]]:
    """The memories one drain's captures become, in the order they happened.

    Items are ``store_many`` mappings. A failed command waits for the same
    command to pass later in its session; the files edited in between are its
    fix. One that never passes is kept as it is, as something left unfinished.
    """
    out: list[tuple[float, dict[str, Any]]] = []
    by_session: dict[str, list[Captured]] = {}
    for captured in captures:
        by_session.setdefault(captured.session, []).append(captured)
    for session in by_session.values():
        out.extend(_session_memories(session))
    return [item for _, item in sorted(out, key=lambda pair: pair[0])]


def _session_memories(captures: Sequence[Captured]) -> list[tuple[float, dict[str, Any]]]:
    out: list[tuple[float, dict[str, Any]]] = []
    edits: list[Edit] = []  # files edited in this turn
    open_failures: dict[str, tuple[Captured, str, list[Edit]]] = {}
    for captured in captures:
        body = captured.body
        if captured.kind == "prompt" and isinstance(body.get("prompt"), str):
            rule = rule_kind(body["prompt"])
            labels: dict[str, Any] = (
                {"domain": "session", "subdomain": "prompt", "importance": 0.3}
                if rule is None
                else {"domain": rule, "subdomain": "stated", "importance": 0.7}
            )
            out.append((captured.at, _item(captured, body["prompt"], **labels)))
        elif captured.kind == "answer" and isinstance(body.get("text"), str):
            out.append(
                (
                    captured.at,
                    _item(
                        captured,
                        body["text"],
                        domain="session",
                        subdomain="answer",
                        importance=0.4,
                        tags=_file_tags(path for _, path in edits),
                        **_file_cites(edits),
                    ),
                )
            )
            edits = []
        elif captured.kind == "tool":
            edited = body.get("edited")
            if isinstance(edited, list):
                cwd = body.get("cwd")
                where = cwd if isinstance(cwd, str) else None
                paths = [(where, str(path)) for path in edited]
                edits.extend(paths)
                for _, _, since in open_failures.values():
                    since.extend(paths)
                continue
            command = body.get("command")
            if not isinstance(command, str):
                continue
            if body.get("failed"):
                open_failures[command] = (captured, str(body.get("error", "")), [])
            elif command in open_failures:
                failed, error, fix = open_failures.pop(command)
                fixed = [path for _, path in fix]
                text = _failure_text(command, error, list(dict.fromkeys(fixed)))
                out.append(
                    (
                        failed.at,
                        _item(
                            failed,
                            text,
                            domain="pitfall",
                            subdomain="command",
                            importance=0.6,
                            tags=_file_tags(fixed),
                            **_file_cites(fix),
                        ),
                    )
                )
    for failed, error, _ in open_failures.values():
        text = _failure_text(str(failed.body.get("command")), error, None)
        out.append(
            (failed.at, _item(failed, text, domain="session", subdomain="failure", importance=0.3))
        )
    return out
