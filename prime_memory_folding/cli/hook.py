"""``prime-memory hook EVENT``: what a host's hook entry runs (see docs/hooks.md).

The console script sends ``prime-memory hook ...`` to the hook runner before
this module loads (:mod:`prime_memory_folding.console`); this command is the
same runner reached through the command line, for ``--store`` and ``--help``.
"""

from __future__ import annotations

import os

import click

from ..capture.hosts import EVENTS, HOSTS
from ..capture.runtime import command_line
from ._common import examples, store_option, store_path

__all__ = ["hook"]


@click.command(
    name="hook",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
)
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED, metavar="EVENT [--host HOST]")
@store_option
@click.pass_context
@examples(
    'echo \'{"session_id": "s1", "cwd": "."}\' | prime-memory hook session-start',
    'echo \'{"session_id": "s1", "prompt": "how do we deploy?"}\' | prime-memory hook prompt',
)
def hook(ctx: click.Context, arguments: tuple[str, ...]) -> None:
    """Answer one hook call: read the host's JSON on standard input.

    \b
    EVENT is one of: {events}.
    --host HOST is one of: {hosts} (default claude-code).
    --budget TOKENS caps the context printed (session-start 1000, prompt 400).

    It always exits 0 and never writes to standard error: a problem goes to
    hooks.log in the data folder. `prime-memory hooks install HOST` writes
    the entries that call it.
    """
    store = store_path(ctx)
    if store is not None:
        os.environ["PRIME_MEMORY_STORE"] = store
    ctx.exit(command_line(list(arguments)))


hook.help = (
    (hook.help or "").replace("{events}", ", ".join(EVENTS)).replace("{hosts}", ", ".join(HOSTS))
)
