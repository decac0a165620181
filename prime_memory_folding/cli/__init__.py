"""The ``prime-memory`` command line: a thin adapter from commands to engine calls.

Every command takes ``--store PATH|URL`` (before or after its name: a file or a
``postgresql://`` URL) and honours ``PRIME_MEMORY_STORE`` and ``PRIME_MEMORY_HOME``;
``--scope`` and ``--project`` choose the current scope the same way. Engine
errors become one line on standard error and a non-zero exit status, never a
traceback.
"""

from __future__ import annotations

from typing import Any

import click

from .. import __version__
from ._common import (
    STORE_HELP,
    Group,
    _remember_store,
    create_option,
    examples,
    project_option,
    scope_option,
)
from .hook import hook
from .hooks import hooks
from .maintenance import check, doctor, fold, reembed, restore, unfold
from .manage import forget, history, list_, purge, retag
from .records import encode, get, query, stats, store, update
from .scoping import rescope, scopes, whoami
from .setup import demo, ide_config, serve
from .tokens import token
from .transfer import copy_command, export, import_
from .ui import ui

__all__ = ["cli", "main"]


@click.group(
    name="prime-memory", cls=Group, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.option(
    "--store",
    metavar="PATH|URL",
    expose_value=False,
    is_eager=True,
    callback=_remember_store,
    help=STORE_HELP,
)
@create_option
@scope_option()
@project_option
@click.version_option(__version__, prog_name="prime-memory")
@examples(
    "prime-memory demo",
    'prime-memory store "We use SQLite in WAL mode" -d decision -t architecture',
    "prime-memory query -d decision -t architecture",
    "prime-memory ide-config claude-code",
    "prime-memory whoami",
)
def cli() -> None:
    """Prime Memory Folding: a local-first memory store for AI agents and IDEs.

    Memories live in one SQLite file ($PRIME_MEMORY_HOME/memory.db, or the
    per-user data folder); pick another, or a postgresql:// database, with
    --store or $PRIME_MEMORY_STORE (a missing file there is created only with
    --create). Each memory belongs to a scope (global, user:NAME, project:ID);
    the current one follows the git project you are in (see prime-memory whoami).
    """


for command in (
    store,
    query,
    get,
    forget,
    list_,
    history,
    retag,
    purge,
    update,
    encode,
    stats,
    whoami,
    scopes,
    rescope,
    fold,
    unfold,
    restore,
    reembed,
    check,
    doctor,
    export,
    import_,
    serve,
    ide_config,
    token,
    demo,
    ui,
    copy_command,
    hooks,
    hook,
):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> Any:
    """The console script's entry point."""
    return cli.main(args=argv, prog_name="prime-memory")
