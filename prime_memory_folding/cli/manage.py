"""Commands that browse and manage many records: list, history, retag, forget and purge."""

from __future__ import annotations

from typing import Any

import click

from ..engine.survey import MAX_PAGE, ORDERS
from ..errors import NotFound
from ..storage.archive import REASONS
from ._common import (
    clock_of,
    confirm_or_refuse,
    console,
    count_of,
    echo_json,
    examples,
    gate_options,
    gates_given,
    open_engine,
    parse_when,
    project_option,
    read_filters,
    read_scopes,
    scope_option,
    short_time,
    store_option,
    vectors_option,
)

#: How many records a confirmation lists before it says "... and N more".
SHOWN = 20
READ_SCOPE_HELP = (
    "Read only this scope (repeat for several; '*' for all). Default: the current "
    "project's scope, the user's and global."
)
ALL_SCOPES_HELP = "Read every scope (the same as --scope '*')."
#: The orders ``list`` offers: the engine's, less ``given`` (it needs ids to keep the order of).
LIST_ORDERS = tuple(order for order in ORDERS if order != "given")


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _record_lines(engine: Any, ids: list[str]) -> list[str]:
    """The first records of ``ids``, one line each, and how many more there are."""
    lines = []
    for rid in ids[:SHOWN]:
        rec = engine.get(rid)
        content = _short(rec.content, 70)
        lines.append(f"  {rid}  {rec.scope}  {rec.domain}/{rec.subdomain}  {content}")
    if len(ids) > SHOWN:
        lines.append(f"  ... and {len(ids) - SHOWN:,} more")
    return lines


@click.command(name="list")
@gate_options(
    domain="Only this domain.",
    subdomain="Only this subdomain.",
    tags="A tag every record must have (repeat).",
    any_tags="Records need at least one of these.",
    exclude_tags="Records must have none of these.",
    min_strength="Only records at least this strong now, 0 to 1.",
    since="Only memories stored or changed since: 2024-05-01, 7d, 2 weeks.",
    until="Only memories stored or changed before this time.",
)
@click.option(
    "--order",
    type=click.Choice(LIST_ORDERS),
    default="salience",
    show_default=True,
    help="salience is importance x strength; newest and oldest go by the last change.",
)
@click.option(
    "-n", "--limit", type=click.IntRange(1, MAX_PAGE), default=20, show_default=True,
    help="Most records to show.",
)  # fmt: skip
@click.option(
    "--offset", type=click.IntRange(0), default=0, show_default=True, help="Records to skip first."
)
@click.option("--all-scopes", is_flag=True, help=ALL_SCOPES_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the page as JSON.")
@vectors_option
@scope_option(READ_SCOPE_HELP)
@project_option
@store_option
@click.pass_context
@examples(
    "prime-memory list",
    "prime-memory list -d decision --order newest",
    "prime-memory list --limit 20 --offset 20",
    "prime-memory list -t sqlite --all-scopes --json",
)
def list_(
    ctx: click.Context,
    order: str,
    limit: int,
    offset: int,
    all_scopes: bool,
    as_json: bool,
    vectors: bool,
) -> None:
    """Browse memories page by page, without a query: nothing is reinforced.

    The label options gate as in query; strength is decayed to now. Like a
    query it sees the current scope, the user scope and global by default.
    """
    gates = read_filters(ctx, read_scopes(ctx, all_scopes))
    with open_engine(ctx) as engine:
        page = engine.browse(filters=gates, order=order, offset=offset, limit=limit)
    if as_json:
        echo_json(
            {
                "total": page.total,
                "offset": offset,
                "limit": limit,
                "order": order,
                "records": [
                    {"strength_now": hit.score_parts["strength"], "record": hit.record}
                    for hit in page.hits
                ],
            },
            vectors=vectors,
        )
        return
    if not page.hits:
        where = f" past {offset:,}" if offset and page.total else ""
        click.echo(f"no memories{where} ({count_of(page.total, 'match', 'matches')})", err=True)
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(pad_edge=False)
    table.add_column("id", no_wrap=True, style="cyan")
    table.add_column("domain/subdomain", no_wrap=True)
    table.add_column("tags")
    table.add_column("strength", justify="right", no_wrap=True)
    table.add_column("content", overflow="fold", min_width=20)
    for hit in page.hits:
        rec = hit.record
        table.add_row(
            *(
                Text(cell)
                for cell in (
                    rec.record_id,
                    f"{rec.domain}/{rec.subdomain}",
                    ", ".join(rec.tags),
                    f"{hit.score_parts['strength']:.2f}",
                    _short(rec.content, 200),
                )
            )
        )
    console().print(table)
    last = offset + len(page.hits)
    more = f"; --offset {last} for the next page" if last < page.total else ""
    click.echo(f"{offset + 1:,}-{last:,} of {page.total:,}{more}", err=True)


@click.command()
@click.argument("record_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the versions as JSON.")
@vectors_option
@store_option
@click.pass_context
@examples(
    "prime-memory history 0000000b0000000200c0ffee12345678",
    "prime-memory history 0000000b0000000200c0ffee12345678 --json",
)
def history(ctx: click.Context, record_id: str, as_json: bool, vectors: bool) -> None:
    """Show the versions of a memory that updates replaced, oldest first.

    An update of content, tags, importance or scope keeps the version it
    replaced in the archive; purging the archive deletes them.
    """
    with open_engine(ctx) as engine:
        versions = engine.history(record_id)
        if not versions:
            try:
                engine.get(record_id)
            except NotFound:
                raise NotFound(
                    f"no record {record_id.strip().lower()} and no versions of it "
                    "(check the id with prime-memory list)"
                ) from None
    if as_json:
        echo_json(versions, vectors=vectors)
        return
    if not versions:
        click.echo(f"no earlier versions: {record_id} was never updated", err=True)
        return
    out = console()
    for version in versions:
        rec = version.record
        out.print(
            f"[bold]replaced {short_time(version.replaced_at)}[/bold]  "
            f"tags {', '.join(rec.tags) or '-'}  importance {rec.importance:.2f}"
        )
        out.print(f"  {_short(rec.content, 500)}", markup=False)


@click.command()
@click.argument("record_ids", metavar="ID...", nargs=-1, required=True)
@click.option("-a", "--add", "add", multiple=True, metavar="TAG", help="A tag to add (repeat).")
@click.option(
    "-r", "--remove", "remove", multiple=True, metavar="TAG", help="A tag to remove (repeat)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the changed records as JSON.")
@vectors_option
@store_option
@click.pass_context
@examples(
    "prime-memory retag 0000000b0000000200c0ffee12345678 --add sqlite",
    "prime-memory retag ID1 ID2 --add done --remove todo",
)
def retag(
    ctx: click.Context,
    record_ids: tuple[str, ...],
    add: tuple[str, ...],
    remove: tuple[str, ...],
    as_json: bool,
    vectors: bool,
) -> None:
    """Add and remove tags on memories; their ids never change.

    All or nothing: a missing id, a tag both added and removed, or a record
    that would become identical to another changes nothing.
    """
    if not add and not remove:
        raise click.UsageError("nothing to change; give --add TAG and/or --remove TAG")
    with open_engine(ctx) as engine:
        changed = engine.retag(record_ids, add=add, remove=remove)
    if as_json:
        echo_json({"changed": len(changed), "records": changed}, vectors=vectors)
        return
    given = len(set(rid.strip().lower() for rid in record_ids))
    same = given - len(changed)
    note = f" ({count_of(same, 'record')} already had those tags)" if same else ""
    click.echo(f"retagged {count_of(len(changed), 'record')}{note}")


@click.command()
@click.argument("record_id", metavar="[ID]", required=False)
@gate_options(
    domain="Forget by filter: this domain.",
    subdomain="Forget by filter: this subdomain.",
    tags="Forget by filter: records with every tag (repeat).",
    any_tags="Forget by filter: records with one of these tags.",
    exclude_tags="Forget by filter: records with none of these.",
    min_strength="Forget by filter: records at least this strong now.",
    since="Forget by filter: stored or changed since this time (2024-05-01, 7d).",
    until="Forget by filter: stored or changed before this time.",
)
@click.option("--all-scopes", is_flag=True, help="Forget by filter in every scope.")
@click.option("--dry-run", is_flag=True, help="Show what a forget by filter would take.")
@click.option("-y", "--yes", is_flag=True, help="Forget by filter without asking.")
@click.option("--json", "as_json", is_flag=True, help="Print what was forgotten as JSON.")
@vectors_option
@scope_option(
    "Forget by filter in this scope (repeat for several; '*' for all). Default: the "
    "scopes a query sees."
)
@project_option
@store_option
@click.pass_context
@examples(
    "prime-memory forget 0000000b0000000200c0ffee12345678",
    "prime-memory forget -d session --until 30d --dry-run",
    "prime-memory forget -t scratch --scope user:alice --yes",
)
def forget(
    ctx: click.Context,
    record_id: str | None,
    all_scopes: bool,
    dry_run: bool,
    yes: bool,
    as_json: bool,
    vectors: bool,
) -> None:
    """Forget a memory by its ID, or every memory the label options select.

    Forgotten memories move to the archive; restore brings each back, and
    purge deletes them for good. A forget by filter needs at least one label
    option; it reads the scopes a query sees (or --scope / --all-scopes),
    shows how many records it would take and asks first; --yes skips the
    question, and without a terminal to ask on it refuses unless --yes is
    given.
    """
    by_filter = gates_given(ctx)
    if record_id is not None:
        if by_filter or all_scopes or dry_run or yes:
            raise click.UsageError(
                "give an ID, or label options to forget by filter, not both "
                "(--all-scopes, --dry-run and --yes go with a forget by filter)"
            )
        with open_engine(ctx) as engine:
            rec = engine.forget(record_id)
        if as_json:
            echo_json(rec, vectors=vectors)
        else:
            click.echo(f"forgot {rec.record_id} (archived; prime-memory restore brings it back)")
        return
    if not by_filter:
        # A scope alone selects too much to forget by accident.
        raise click.UsageError(
            "nothing to forget; give an ID, or label options (--domain, --tag, --since, ...) "
            "to forget by filter"
        )
    gates = read_filters(ctx, read_scopes(ctx, all_scopes))
    with open_engine(ctx) as engine:
        ids = engine.match_ids(filters=gates)
        if not ids:
            if as_json:
                echo_json({"forgotten": 0, "dry_run": dry_run, "ids": []})
            else:
                click.echo("no memories match; nothing was forgotten", err=True)
            return
        plan = f"forget {count_of(len(ids), 'record')}"
        if dry_run:
            if as_json:
                echo_json({"forgotten": 0, "dry_run": True, "would_forget": len(ids), "ids": ids})
                return
            click.echo(f"would {plan}:")
            for line in _record_lines(engine, ids):
                click.echo(line)
            click.echo("dry run: nothing was forgotten")
            return
        if not yes:
            confirm_or_refuse(
                plan,
                _record_lines(engine, ids),
                "nothing was forgotten",
                "check with --dry-run, then add --yes",
            )
        forgotten = engine.archive(ids, detail="forgotten")
    if as_json:
        echo_json({"forgotten": forgotten, "dry_run": False, "ids": ids})
    else:
        click.echo(
            f"forgot {count_of(forgotten, 'record')} (archived; prime-memory restore ID "
            "brings each back)"
        )


def _purge_records(
    engine: Any, record_ids: tuple[str, ...], before: float | None, reason: str | None, yes: bool
) -> int:
    """Purge the archive entries of ``record_ids``, after the question unless ``yes``."""
    if not yes:
        confirm_or_refuse(
            f"purge every archived version of {count_of(len(record_ids), 'record')} for good "
            "(this cannot be undone)",
            list(record_ids),
            "nothing was purged",
            "add --yes",
        )
    purged = int(engine.purge_archive(before=before, reason=reason, record_ids=record_ids))
    if not purged:
        raise click.ClickException(
            "no archive entries of "
            + ", ".join(record_ids)
            + " match; nothing was purged (prime-memory history ID lists a record's versions)"
        )
    return purged


def _archived_count(engine: Any, before: float | None, reason: str | None) -> int:
    """How many archive entries a purge with these bounds would delete."""
    if before is None:
        return int(engine.archive_entries(reason=reason, limit=0).total)
    matched = offset = 0
    while True:
        listing = engine.archive_entries(reason=reason, limit=MAX_PAGE, offset=offset)
        matched += sum(1 for entry in listing.entries if entry.archived_at < before)
        offset += len(listing.entries)
        if not listing.entries or offset >= listing.total:
            return matched


@click.command()
@click.option(
    "--before",
    metavar="WHEN",
    help="Only entries archived before this time: 2024-05-01, 30d, 2 weeks.",
)
@click.option("--reason", type=click.Choice(REASONS), help="Only entries archived for this reason.")
@click.option("--all", "everything", is_flag=True, help="Purge every archive entry.")
@click.option("-y", "--yes", is_flag=True, help="Purge without asking.")
@click.option("--json", "as_json", is_flag=True, help="Print how many were purged as JSON.")
@click.argument("record_ids", nargs=-1, metavar="[ID]...")
@store_option
@click.pass_context
@examples(
    "prime-memory purge 0000000b000000133f6c2a41d1e0b7aa",
    "prime-memory purge --reason forgotten",
    "prime-memory purge --before 90d --yes",
    "prime-memory purge --all",
)
def purge(
    ctx: click.Context,
    before: str | None,
    reason: str | None,
    everything: bool,
    yes: bool,
    as_json: bool,
    record_ids: tuple[str, ...],
) -> None:
    """Delete archived memories for good. This cannot be undone.

    The archive holds what was forgotten, pruned or folded, and the versions
    updates replaced; restore and unfold bring them back until they are
    purged. Choose entries by record ID (every archived version of each),
    with --before and/or --reason, or --all; the archive is the whole
    store's, whatever the scope. To delete a secret stored by mistake:
    forget it, then purge its ID. Shows the count and asks first; --yes
    skips the question, and without a terminal it refuses unless --yes is
    given.
    """
    if everything and (before or reason or record_ids):
        raise click.UsageError("give --all, or IDs / --before / --reason, not both")
    if not (everything or before or reason or record_ids):
        raise click.UsageError("say what to purge: IDs, --before WHEN, --reason REASON, or --all")
    cutoff = parse_when(before, clock_of(ctx)(), "--before")
    with open_engine(ctx) as engine:
        if record_ids:
            purged = _purge_records(engine, record_ids, cutoff, reason, yes)
        else:
            matched = _archived_count(engine, cutoff, reason)
            if not matched:
                if as_json:
                    echo_json({"purged": 0})
                else:
                    click.echo("no archive entries match; nothing was purged", err=True)
                return
            if not yes:
                what = f"{reason} " if reason else ""
                when = f" archived before {short_time(cutoff)}" if cutoff is not None else ""
                confirm_or_refuse(
                    f"purge {count_of(matched, what + 'archive entry', what + 'archive entries')}"
                    f"{when} for good (this cannot be undone)",
                    [],
                    "nothing was purged",
                    "add --yes",
                )
            purged = engine.purge_archive(before=cutoff, reason=reason)
    if as_json:
        echo_json({"purged": purged})
    else:
        click.echo(f"purged {count_of(purged, 'archive entry', 'archive entries')} for good")
