"""Commands about access tokens: token add, token list and token revoke."""

from __future__ import annotations

import click

from ._common import (
    Group,
    clock_of,
    console,
    count_of,
    echo_json,
    examples,
    open_engine,
    short_time,
    store_option,
)


@click.group(name="token", cls=Group)
@store_option
@examples(
    "prime-memory token add alice --scopes 'project:*,global'",
    "prime-memory token add ci --scopes project:github.com/acme/api --read-only",
    "prime-memory token list",
    "prime-memory token revoke alice",
)
def token() -> None:
    """Manage per-user bearer tokens for the HTTP server.

    While the store holds a live token, every HTTP request must carry one
    (Authorization: Bearer <token>); the request then acts as the token's
    user, limited to its scopes. The store keeps only each token's hash.
    """


@token.command(name="add")
@click.argument("name")
@click.option(
    "--scopes",
    "patterns",
    metavar="PATTERNS",
    default="project:*,global",
    show_default=True,
    help="Comma-separated scope patterns the token may touch: '*', 'project:*', 'team:*', "
    "'user:*', or exact scopes such as global or project:github.com/acme/api. "
    "Its own user:NAME is always added.",
)
@click.option("--read-only", is_flag=True, help="The token may read, never write.")
@store_option
@click.pass_context
@examples(
    "prime-memory token add alice",
    "prime-memory token add bot --scopes 'team:platform,global' --read-only",
)
def add_token(ctx: click.Context, name: str, patterns: str, read_only: bool) -> None:
    """Make a token for the user NAME and print it, once.

    The token is printed to standard output and stored nowhere: only its
    SHA-256 stays in the store. Hand it to the user now; a lost token is
    revoked and replaced, never shown again.
    """
    from ..engine import tokens

    # Bad input stops here, before a store is created or opened.
    user = tokens.normalise_name(name)
    tokens.normalise_patterns(patterns)
    with open_engine(ctx, create=True) as engine:
        secret = tokens.add(engine.storage, user, patterns, read_only, now=clock_of(ctx)())
        row = tokens.verify(engine.storage, secret)
    assert row is not None
    click.echo(secret)
    mode = "read-only" if row.read_only else "read-write"
    click.echo(
        f"token for {row.name} ({mode}; scopes {', '.join(row.scopes)}). It is shown only "
        "now: clients send it as the header 'Authorization: Bearer <token>' "
        "(prime-memory ide-config CLIENT --url URL --token-env VAR).",
        err=True,
    )


@token.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the tokens as JSON.")
@store_option
@click.pass_context
@examples("prime-memory token list", "prime-memory token list --json")
def list_tokens(ctx: click.Context, as_json: bool) -> None:
    """List every token, revoked ones too: name, scopes, read-only, created, revoked.

    Neither a token nor its hash is ever shown.
    """
    from rich.table import Table

    with open_engine(ctx) as engine:
        rows = engine.storage.tokens()
    if as_json:
        echo_json(
            [
                {
                    "name": row.name,
                    "scopes": list(row.scopes),
                    "read_only": row.read_only,
                    "created_at": row.created_at,
                    "revoked_at": row.revoked_at,
                }
                for row in rows
            ]
        )
        return
    if not rows:
        click.echo("no tokens: HTTP needs none (add one with prime-memory token add NAME)")
        return
    table = Table(title=count_of(len(rows), "token"))
    for column in ("name", "scopes", "read-only", "created", "revoked"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row.name,
            ", ".join(row.scopes),
            "yes" if row.read_only else "no",
            short_time(row.created_at),
            "" if row.revoked_at is None else short_time(row.revoked_at),
        )
    console().print(table)


@token.command(name="revoke")
@click.argument("name")
@store_option
@click.pass_context
@examples("prime-memory token revoke alice")
def revoke_token(ctx: click.Context, name: str) -> None:
    """Revoke the live token of the user NAME; it stops working at the next request.

    Every server on this store checks tokens on each request, so the revoke
    holds at once, without a restart.
    """
    from ..engine import tokens

    with open_engine(ctx) as engine:
        row = tokens.revoke(engine.storage, name, now=clock_of(ctx)())
    click.echo(f"revoked the token of {row.name}")
