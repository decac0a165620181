"""``prime-memory hook EVENT --host HOST``: one hook call, from the host's JSON to its answer.

The host starts a process for each call and writes its JSON to standard
input (:func:`~.payloads.parse`). What each of our events does:

- ``session-start``: print the opening block (:func:`.inject.opening`).
- ``prompt``: spool the prompt, if worth keeping, and print the memories
  relevant to it (:func:`.inject.relevant`), if any clears the threshold.
- ``tool``: spool an edit or a shell command's outcome; drop the rest.
- ``stop``: spool the turn's final answer (from the input, else the
  transcript's tail), then start a drain (:mod:`.drain`).
- ``compact``, ``session-end``: start a drain.

Everything captured passes through :func:`~.redact.redact` before it is
written anywhere. A hook never harms its host: whatever goes wrong (garbage
on standard input, no store, a locked store, a bug) costs one line in
``hooks.log`` in the data folder, the process prints nothing and exits 0,
and nothing is ever written to standard error, which some hosts show the
user. No hook waits on the engine: reads go through
:class:`~prime_memory_folding.storage.sqlite_peek.Peek`, captures through the
spool, and the drain runs detached, or in the hook's own process when
``PRIME_MEMORY_HOOK_FOREGROUND=1``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from ..core import scopes as scope_rules
from ..core.places import default_store
from ..storage import is_postgres_url
from .hosts import EVENTS, HOSTS
from .keep import clip, tool_capture, worth_keeping
from .log import HookLog
from .payloads import HookInput, parse, render
from .redact import redact
from .spool import END, Spool, spool_path

__all__ = ["FOREGROUND_ENV", "HookLog", "command_line", "run", "spool_path"]

#: Set to 1 to drain in the hook's own process instead of a detached one.
FOREGROUND_ENV = "PRIME_MEMORY_HOOK_FOREGROUND"
#: Events after which a drain stores what the session captured.
DRAIN_EVENTS = frozenset(("stop", "compact", "session-end"))
#: Where an unknown session's captures go.
NO_SESSION = "unknown-session"


def _scope(hook: HookInput) -> scope_rules.ScopeResolution:
    folder = hook.cwd if hook.cwd and Path(hook.cwd).is_dir() else None
    return scope_rules.resolve(project=folder)


def _session(hook: HookInput) -> str:
    return hook.session_id or NO_SESSION


def _safe(value: Any) -> Any:
    """``value`` with every string in it redacted."""
    if isinstance(value, str):
        return redact(value).text
    if isinstance(value, list):
        return [_safe(item) for item in value]
    if isinstance(value, dict):
        return {key: _safe(item) for key, item in value.items()}
    return value


class _Call:
    """One hook call's context: its input, its scope, its store, its spool and its log."""

    def __init__(self, hook: HookInput, log: HookLog, clock: Callable[[], float]) -> None:
        self.hook = hook
        self.log = log
        self.clock = clock
        self.resolution = _scope(hook)
        self.store = default_store()
        self._spool: Spool | None = None

    @property
    def spool(self) -> Spool:
        """The spool, opened on first use and kept for the rest of the call."""
        if self._spool is None:
            self._spool = Spool(spool_path())
        return self._spool

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None

    def capture(self, kind: str, body: dict[str, Any]) -> None:
        self.spool.append(
            session=_session(self.hook),
            scope=self.resolution.current,
            host=self.hook.host,
            kind=kind,
            body=_safe(body),
            at=self.clock(),
        )

    def peekable(self) -> bool:
        if is_postgres_url(self.store):
            self.log.write(self.hook.event, "a PostgreSQL store is not read by hooks")
            return False
        return Path(self.store).is_file()


def _session_start(call: _Call, budget: int | None) -> str:
    from ..storage.sqlite_peek import Peek
    from .inject import EMPTY_LINE, OPENING_BUDGET, opening

    session, scope = call.hook.session_id, call.resolution.current
    spool = call.spool
    last = spool.last_session(scope, other_than=session)
    if session:
        spool.active(session, scope, call.hook.host, call.clock())
    if spool.pending():
        start_drain(call.log)  # what an earlier session left in the spool
    if not call.peekable():
        return EMPTY_LINE
    with Peek(call.store) as peek:
        block = opening(
            peek,
            scope=scope,
            user_scope=call.resolution.user,
            last_session=last,
            budget=budget or OPENING_BUDGET,
            now=call.clock(),
        )
    if session and block.record_ids:
        call.spool.inject(session, block.record_ids, call.clock())
    return block.text


def _prompt(call: _Call, budget: int | None) -> str:
    from ..storage.sqlite_peek import Peek
    from .inject import PROMPT_BUDGET, relevant

    prompt = call.hook.prompt or ""
    if worth_keeping("prompt", prompt):
        call.capture("prompt", {"prompt": clip(prompt)})
    if not prompt.strip() or not call.peekable():
        return ""
    session = call.hook.session_id
    seen = call.spool.injected(session) if session else set()
    with Peek(call.store) as peek:
        block = relevant(
            peek,
            prompt,
            scopes=call.resolution.visible,
            session=session,
            seen=seen,
            budget=budget or PROMPT_BUDGET,
        )
    if session and block.record_ids:
        call.spool.inject(session, block.record_ids, call.clock())
    return block.text


def _tool(call: _Call) -> None:
    hook = call.hook
    tool_input = hook.tool_input
    if tool_input is None and isinstance(hook.raw.get("file_path"), str):
        tool_input = {"file_path": hook.raw["file_path"]}  # an edit event with no tool
    body = tool_capture(hook.tool_name, tool_input, hook.tool_response, hook.cwd)
    if body is not None:
        call.capture("tool", body)


def _end_of_turn(call: _Call) -> None:
    hook = call.hook
    if hook.event == "stop":
        answer = hook.last_message
        if answer is None and hook.transcript_path:
            from .transcript import last_answer

            answer = last_answer(hook.transcript_path)
        if answer and worth_keeping("answer", answer):
            call.capture("answer", {"text": clip(answer)})
    call.capture(END, {})
    start_drain(call.log)


def start_drain(log: HookLog) -> None:
    """Store what the spool holds: in a detached process, or here when asked to."""
    if os.environ.get(FOREGROUND_ENV) == "1":
        from .drain import main

        main(log)
        return
    subprocess.Popen(
        [sys.executable, "-m", "prime_memory_folding.capture.drain"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def run(
    event: str,
    host: str,
    data: bytes | str,
    *,
    out: IO[str],
    budget: int | None = None,
    clock: Callable[[], float] = time.time,
    log: HookLog | None = None,
) -> int:
    """Answer one hook call (see the module docstring); always returns 0."""
    log = log or HookLog(clock=clock)
    call: _Call | None = None
    try:
        hook = parse(host, event, data)
        call = _Call(hook, log, clock)
        text = ""
        if event == "session-start":
            text = _session_start(call, budget)
        elif event == "prompt":
            text = _prompt(call, budget)
        elif event == "tool":
            _tool(call)
        if event in DRAIN_EVENTS:
            _end_of_turn(call)
        answer = render(host, event, text)
        if answer:
            out.write(answer + "\n")
            out.flush()
    except BaseException as exc:  # the host must never pay for our failure
        log.failure(event, exc)
    finally:
        if call is not None:
            with contextlib.suppress(Exception):
                call.close()
    return 0


class _Arguments(argparse.ArgumentParser):
    """A parser that raises instead of printing to standard error and exiting."""

    def error(self, message: str) -> Any:
        raise ValueError(f"bad arguments: {message}")


def _parser() -> argparse.ArgumentParser:
    parser = _Arguments(prog="prime-memory hook", add_help=False)
    parser.add_argument("event", choices=EVENTS)
    parser.add_argument("--host", choices=sorted(HOSTS), default="claude-code")
    parser.add_argument("--budget", type=int, default=None)
    return parser


def command_line(argv: Sequence[str], stdin: IO[bytes] | None = None) -> int:
    """The hook's command line: ``EVENT [--host HOST] [--budget TOKENS]``; exits 0 always."""
    log = HookLog()
    try:
        args = _parser().parse_args(list(argv))
    except (ValueError, argparse.ArgumentError) as exc:
        log.failure("hook", exc)
        return 0
    try:
        data = (stdin or sys.stdin.buffer).read()
    except (OSError, ValueError) as exc:
        log.failure(args.event, exc)
        return 0
    return run(args.event, args.host, data, out=sys.stdout, budget=args.budget, log=log)
