"""Commands about scopes: whoami, scopes and rescope."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from ._common import (
    chosen_store,
    confirm_or_refuse,
    console,
    count_of,
    echo_json,
    examples,
    gate_options,
    gates_given,
    is_url,
    one_scope,
    open_engine,
    project_option,
    read_filters,
    resolution,
    scope_option,
    shown_store,
    store_option,
)

#: How many records a dry run or a confirmation lists before it says "... and N more".
SHOWN = 20


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the resolution as JSON.")
@scope_option("Resolve with this scope given explicitly.")
@project_option
@store_option
@click.pass_context
@examples(
    "prime-memory whoami",
    "prime-memory whoami --project ~/code/api --json",
    "PRIME_MEMORY_SCOPE=user:alice prime-memory whoami",
)
def whoami(ctx: click.Context, as_json: bool) -> None:
    """Show the current scope, how it was found, and the scopes a query sees.

    The current scope is where memories are stored unless a command names
    another. It is resolved in this order, the first that applies winning:
    --scope, $PRIME_MEMORY_SCOPE, --project DIR, $CLAUDE_PROJECT_DIR, the git
    repository of the working directory, and global. A query sees the current
    scope, your user scope and global. No store is needed.
    """
    one_scope(ctx, "the current scope")
    found = resolution(ctx)
    if as_json:
        echo_json(found.as_dict())
        return
    store = chosen_store(ctx)
    where = (
        "" if store == ":memory:" or is_url(store) or Path(store).exists() else " (not created yet)"
    )
    click.echo(f"current scope  {found.current}")
    click.echo(f"  found by     {found.source}: {found.reason}")
    click.echo(f"user scope     {found.user}")
    click.echo(f"a query sees   {', '.join(found.visible)}")
    click.echo(f"store          {shown_store(store)}{where}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the scopes as JSON.")
@scope_option("Mark this scope as the current one (default: resolved; see whoami).")
@project_option
@store_option
@click.pass_context
@examples("prime-memory scopes", "prime-memory --store ./team.db scopes --json")
def scopes(ctx: click.Context, as_json: bool) -> None:
    """List every scope in the store with its record count.

    The current scope and the others a query sees by default are marked, and
    listed even while they hold no records.
    """
    from .records import scope_table

    one_scope(ctx, "the current scope")
    with open_engine(ctx) as engine:
        found = engine.whoami()
        counts = engine.stats().scopes
    if as_json:
        names = sorted({*counts, *found.visible})
        echo_json(
            {
                **found.as_dict(),
                "scopes": [
                    {
                        "scope": name,
                        "records": counts.get(name, 0),
                        "current": name == found.current,
                        "visible": name in found.visible,
                    }
                    for name in names
                ],
            }
        )
        return
    out = console()
    out.print(f"current scope: {found.current} - {found.reason}", markup=False, soft_wrap=True)
    out.print(scope_table(counts, found.current, found.visible))


@click.command()
@click.argument("record_ids", metavar="[ID]...", nargs=-1)
@click.option("--to", "target", metavar="SCOPE", required=True, help="The scope to move to.")
@click.option(
    "--from",
    "sources",
    metavar="SCOPE",
    multiple=True,
    help="Move the records of this scope (repeat for several; '*' for all), narrowed by "
    "the label options.",
)
@gate_options(
    domain="With --from: only this domain.",
    subdomain="With --from: only this subdomain.",
    tags="With --from: records with every tag.",
    any_tags="With --from: one of these tags.",
    exclude_tags="With --from: none of these.",
)
@click.option("--dry-run", is_flag=True, help="Show what would move, and move nothing.")
@click.option("-y", "--yes", is_flag=True, help="Move by filter without asking.")
@click.option("--json", "as_json", is_flag=True, help="Print what moved as JSON.")
@store_option
@click.pass_context
@examples(
    "prime-memory rescope 0000000b0000000200c0ffee12345678 --to global",
    "prime-memory rescope --from project:github.com/acme/old --to project:github.com/acme/api",
    "prime-memory rescope --from global -d preference --to user:alice --dry-run",
)
def rescope(
    ctx: click.Context,
    record_ids: tuple[str, ...],
    target: str,
    sources: tuple[str, ...],
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Move memories to another scope; their ids never change.

    Name the records by ID, or select them with --from SCOPE and the label
    options. A move by filter shows how many records it would move and asks
    first; --yes skips the question, and without a terminal to ask on it
    refuses unless --yes is given. All or nothing: when one record cannot
    move (a missing id, or the same memory already in the target scope),
    nothing moves.
    """
    from ..core.address import parse_record_id
    from ..core.scopes import normalise_scope, normalise_scopes

    filters = gates_given(ctx)
    if record_ids and (sources or filters):
        raise click.UsageError("give record ids, or --from with label options, not both")
    if not record_ids and not sources:
        what = "label options need --from SCOPE" if filters else "nothing to move"
        raise click.UsageError(f"{what}; give record ids, or --from SCOPE to move by filter")
    to = normalise_scope(target)
    # A malformed --from stops here; None means every scope.
    named = normalise_scopes(sources) if sources else ()
    ids = list(dict.fromkeys(parse_record_id(rid) for rid in record_ids))
    with open_engine(ctx) as engine:
        if record_ids:
            records = [engine.get(rid) for rid in ids]  # a missing id stops here
            moving = [rec.record_id for rec in records if rec.scope != to]
        else:
            gates = read_filters(ctx, sources)
            there = set(engine.match_ids(filters=replace(gates, scopes=[to])))
            matched = engine.match_ids(filters=gates)
            moving = [rid for rid in matched if rid not in there]
            ids = matched
        already = len(ids) - len(moving)
        if not moving:
            _say_nothing(as_json, to, already, dry_run)
            return
        source = "the records given" if record_ids else ", ".join(named) if named else "every scope"
        if dry_run:
            _show_plan(engine, moving, to, source, already, as_json)
            return
        if not record_ids and not yes:
            _confirm(engine, moving, to, source)
        moved = engine.rescope(moving, to)
    if as_json:
        echo_json(
            {
                "to": to,
                "moved": len(moved),
                "already_there": already,
                "dry_run": False,
                "ids": [rec.record_id for rec in moved],
            }
        )
        return
    note = f" ({already:,} already there)" if already else ""
    click.echo(f"moved {count_of(len(moved), 'record')} to {to}{note}")


def _say_nothing(as_json: bool, to: str, already: int, dry_run: bool) -> None:
    if as_json:
        report = {"to": to, "moved": 0, "already_there": already, "dry_run": dry_run, "ids": []}
        echo_json({**report, "would_move": 0} if dry_run else report)
    elif already:
        click.echo(f"nothing to move: {count_of(already, 'record')} already in {to}")
    else:
        click.echo(f"no records match; nothing to move to {to}", err=True)


def _listing(engine: Any, moving: list[str]) -> list[str]:
    lines = []
    for rid in moving[:SHOWN]:
        rec = engine.get(rid)
        content = rec.content if len(rec.content) <= 70 else rec.content[:69] + "…"
        lines.append(f"  {rid}  {rec.scope}  {rec.domain}/{rec.subdomain}  {content}")
    if len(moving) > SHOWN:
        lines.append(f"  ... and {len(moving) - SHOWN:,} more")
    return lines


def _show_plan(
    engine: Any, moving: list[str], to: str, source: str, already: int, as_json: bool
) -> None:
    if as_json:
        echo_json(
            {
                "to": to,
                "moved": 0,
                "already_there": already,
                "dry_run": True,
                "ids": moving,
                "would_move": len(moving),
            }
        )
        return
    click.echo(f"would move {count_of(len(moving), 'record')} from {source} to {to}:")
    for line in _listing(engine, moving):
        click.echo(line)
    click.echo("dry run: nothing was moved")


def _confirm(engine: Any, moving: list[str], to: str, source: str) -> None:
    """Ask before a move by filter; refuse when no one can answer (:func:`confirm_or_refuse`)."""
    confirm_or_refuse(
        f"move {count_of(len(moving), 'record')} from {source} to {to}",
        _listing(engine, moving),
        "nothing was moved",
        "check with --dry-run, then add --yes",
    )
