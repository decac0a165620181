"""``prime-memory hooks``: install, uninstall and list the hooks in each host's settings."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..capture.hosts import HOSTS
from ..capture.install import Change, Where, install, status, uninstall
from ..core.scopes import git_root
from ._common import F, echo_json, examples, given_project, store_option

__all__ = ["hooks"]

_STORE_HELP = (
    "Not written into the hooks: they use the store the hook command finds when it runs "
    "($PRIME_MEMORY_STORE, else $PRIME_MEMORY_HOME/memory.db, else the per-user data folder)."
)

#: What a user has to do after installing, per host, beyond the file itself.
_NEXT: dict[str, str] = {
    "claude-code": "Claude Code runs them once you trust the workspace; /hooks lists them.",
    "codex": "Codex runs a new hook only once you trust it: review it with /hooks.",
    "cursor": "Restart Cursor to load them.",
    "gemini": "Gemini CLI warns before it runs a new project hook the first time.",
    "vscode": "VS Code agent hooks are a preview: enable them in the chat settings if needed.",
}


def _store_option(fn: F) -> F:
    return store_option(fn, _STORE_HELP)


def executable(given: str | None) -> str:
    """The absolute path of the prime-memory command the hooks are to run.

    ``given`` when set; else the running script, when it is prime-memory; else
    prime-memory on the PATH.

    Raises:
        click.UsageError: no prime-memory command can be found.
    """
    if given:
        return given
    running = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if running is not None and running.name in ("prime-memory", "prime-memory.exe"):
        return os.path.abspath(running)
    found = shutil.which("prime-memory")
    if found:
        return os.path.abspath(found)
    raise click.UsageError("cannot find the prime-memory command; name it with --command EXE")


def _project_root(ctx: click.Context, given: str | None) -> Path:
    """The project folder: --project DIR, else the global --project, else the git root here."""
    folder = given or given_project(ctx)
    if folder:
        return Path(folder).expanduser().resolve()
    here = Path.cwd()
    return git_root(here) or here


def _where_options(fn: F) -> F:
    fn = click.option(
        "--command",
        "command_exe",
        metavar="EXE",
        help="The prime-memory executable the hooks run (default: this one, by absolute path).",
    )(fn)
    fn = click.option(
        "--dry-run", is_flag=True, help="Print the change as a unified diff; write nothing."
    )(fn)
    fn = click.option(
        "--project",
        "project_dir",
        is_flag=False,
        flag_value="",
        default=None,
        metavar="[DIR]",
        help="The project's settings file, in DIR or else the git root here (or here).",
    )(fn)
    fn = click.option(
        "--user", "user", is_flag=True, help="The user's settings file, for all projects (default)."
    )(fn)
    return fn


def _run(
    verb: Callable[..., Change],
    ctx: click.Context,
    host: str,
    user: bool,
    project_dir: str | None,
    dry_run: bool,
    command_exe: str | None,
) -> Change:
    if user and project_dir is not None:
        raise click.UsageError("--user and --project name different files; give one")
    where: Where = "project" if project_dir is not None else "user"
    change = verb(
        host,
        where=where,
        home=Path.home(),
        project=_project_root(ctx, project_dir or None),
        command_exe=executable(command_exe),
        dry_run=dry_run,
    )
    if dry_run:
        click.echo(change.diff(), nl=False)
    return change


@click.group(name="hooks")
@_store_option
@examples(
    "prime-memory hooks install claude-code",
    "prime-memory hooks install cursor --project --dry-run",
    "prime-memory hooks uninstall codex",
    "prime-memory hooks status",
)
def hooks() -> None:
    """Install the hooks that let an agent host recall and capture memories.

    A host's hooks run `prime-memory hook EVENT --host HOST` at session start,
    on each prompt, after edits and commands, at the end of a turn, before
    compaction and at session end. HOST: claude-code, codex, cursor, gemini
    or vscode. Install merges them into the host's settings file, keeping
    everything there and a timestamped backup; uninstall takes out exactly
    what install added. See docs/hooks.md.
    """


@hooks.command(name="install")
@click.argument("host", type=click.Choice(list(HOSTS)))
@_where_options
@_store_option
@click.pass_context
@examples(
    "prime-memory hooks install claude-code",
    "prime-memory hooks install gemini --project",
    "prime-memory hooks install cursor --project ~/code/api --dry-run",
    "prime-memory hooks install codex --command ~/.local/bin/prime-memory",
)
def install_command(
    ctx: click.Context,
    host: str,
    user: bool,
    project_dir: str | None,
    dry_run: bool,
    command_exe: str | None,
) -> None:
    """Add prime-memory's hooks to HOST's settings file.

    Merges into the file: every key and hook already there stays. The file
    is backed up first (NAME.YYYYmmdd-HHMMSS.bak next to it) and replaced in
    one step. Installing again changes nothing.
    """
    change = _run(install, ctx, host, user, project_dir, dry_run, command_exe)
    if dry_run:
        if not change.changed:
            click.echo(f"{change.path}: already installed; nothing to change", err=True)
        return
    if not change.changed:
        click.echo(f"{change.path}: already installed; nothing changed")
        return
    events = ", ".join(HOSTS[host].events())
    click.echo(f"installed {host} hooks ({events}) in {change.path}")
    if change.backup is not None:
        click.echo(f"backup: {change.backup}", err=True)
    click.echo(_NEXT[host], err=True)


@hooks.command(name="uninstall")
@click.argument("host", type=click.Choice(list(HOSTS)))
@_where_options
@_store_option
@click.pass_context
@examples(
    "prime-memory hooks uninstall claude-code",
    "prime-memory hooks uninstall cursor --project --dry-run",
)
def uninstall_command(
    ctx: click.Context,
    host: str,
    user: bool,
    project_dir: str | None,
    dry_run: bool,
    command_exe: str | None,
) -> None:
    """Take prime-memory's hooks out of HOST's settings file.

    Only our entries go (from this executable or any named prime-memory),
    with the lists they leave empty; when the rest equals a backup install
    made, the file gets that backup's bytes back.
    """
    change = _run(uninstall, ctx, host, user, project_dir, dry_run, command_exe)
    if dry_run:
        if not change.changed:
            click.echo(f"{change.path}: no prime-memory hooks; nothing to change", err=True)
        return
    if not change.changed:
        click.echo(f"{change.path}: no prime-memory hooks; nothing changed")
    elif change.after is None:
        click.echo(f"uninstalled {host} hooks; removed {change.path}, which held nothing else")
    else:
        click.echo(f"uninstalled {host} hooks from {change.path}")


@hooks.command(name="status")
@click.option("--json", "as_json", is_flag=True, help="Print what is installed as JSON.")
@click.option(
    "--project",
    "project_dir",
    metavar="DIR",
    help="The project whose settings files to read (default: the git root here, or here).",
)
@_store_option
@click.pass_context
@examples("prime-memory hooks status", "prime-memory hooks status --project ~/code/api --json")
def status_command(ctx: click.Context, as_json: bool, project_dir: str | None) -> None:
    """List the host settings files that hold prime-memory's hooks, user and project."""
    found = status(home=Path.home(), project=_project_root(ctx, project_dir))
    if as_json:
        rows: list[dict[str, Any]] = [
            {
                "host": item.host,
                "where": item.where,
                "path": str(item.path),
                "events": list(item.events),
                "missing": list(item.missing),
            }
            for item in found
        ]
        echo_json(rows)
        return
    if not found:
        click.echo("no prime-memory hooks installed (see prime-memory hooks install --help)")
        return
    for item in found:
        line = f"{item.host}\t{item.where}\t{item.path}\t{', '.join(item.events)}"
        if item.missing:
            line += f"\t(missing: {', '.join(item.missing)}; install again)"
        click.echo(line)
