"""The ``prime-memory`` console script.

``prime-memory hook EVENT`` runs in front of every prompt an agent's host
sends, so it goes straight to the hook runner
(:mod:`prime_memory_folding.capture.runtime`) without loading the command
line's libraries; every other command goes to :mod:`prime_memory_folding.cli`.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["main"]


def main(argv: list[str] | None = None) -> Any:
    """Run ``prime-memory`` with ``argv`` (the process's arguments when None)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["hook"] and not {"-h", "--help"} & set(args):
        from .capture.runtime import command_line

        return command_line(args[1:])
    from .cli import main as cli_main

    return cli_main(args)
