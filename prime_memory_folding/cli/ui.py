"""``prime-memory ui``: the inspector in a browser."""

from __future__ import annotations

import sys

import click

from ..net.announce import INSPECTOR_PORT, CannotListen
from ._common import examples, open_engine, store_option

__all__ = ["ui"]


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to bind.")
@click.option(
    "--port",
    type=click.IntRange(0, 65_535),
    default=INSPECTOR_PORT,
    show_default=True,
    help="The port to bind; 0 picks a free one.",
)
@click.option("--no-browser", is_flag=True, help="Print the address only; open no browser.")
@click.option(
    "--token",
    metavar="SECRET",
    default=None,
    help="The secret the address carries (default: a fresh random one). Required, and at "
    "least 16 characters, when --host is not a loopback address.",
)
@store_option
@click.pass_context
@examples(
    "prime-memory ui",
    "prime-memory ui --store ./memory.db --port 9000 --no-browser",
)
def ui(ctx: click.Context, host: str, port: int, no_browser: bool, token: str | None) -> None:
    """Browse, search, curate and fold memories in the browser (the inspector).

    Prints an address that carries a fresh random token and opens it in a
    browser; the inspector answers only requests that carry that token.
    """
    from ..web.security import new_token
    from ..web.server import bind_problem, serve

    problem = bind_problem(host, token)
    if problem:
        raise click.UsageError(problem)
    with open_engine(ctx) as engine:
        try:
            serve(
                engine,
                host=host,
                port=port,
                token=token or new_token(),
                open_browser=not no_browser,
                out=sys.stdout,
                warn=lambda line: click.echo(line, err=True),
            )
        except CannotListen as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from None
