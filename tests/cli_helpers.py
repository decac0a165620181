"""What the command-line tests share: a runner on the test's store, and the one-line error check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from prime_memory_folding.cli import cli


@pytest.fixture
def run(store_path: Path, clock: Any) -> Any:
    """``run(*args, store=True, input=None)``: the CLI on the test's store and clock.

    With ``store`` the store is the test's own file, which the first command
    that adds memories creates (``--create``); without, the default one.
    """
    runner = CliRunner()

    def invoke(*args: str, store: bool = True, input: str | None = None) -> Result:
        argv = (["--create", "--store", str(store_path)] if store else []) + list(args)
        return runner.invoke(cli, argv, obj={"clock": clock}, input=input)

    return invoke


def one_line_error(result: Result, *fragments: str) -> None:
    """The command failed with one line on stderr, holding every fragment, and no traceback."""
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
