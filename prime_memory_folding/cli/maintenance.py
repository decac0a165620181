"""Commands that maintain a store: fold, unfold, restore, check, doctor."""

from __future__ import annotations

from typing import Any

import click

from ._common import (
    cited_place,
    console,
    count_of,
    echo_json,
    examples,
    human_bytes,
    open_engine,
    phases,
    progress,
    read_scopes,
    scope_option,
    short_time,
    store_option,
    vectors_option,
)

_LIST_PREVIEW = 10


def _one_line(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters (an ellipsis marks a cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 0)] + "\u2026"


def show_fold(report: Any, *, ids: bool = True, contents: dict[str, str] | None = None) -> None:
    """Print a fold report: counts, sizes and times readably, ids as a short preview.

    With ``contents`` (record id to text), each group's members are shown with
    their text, one line each, cut to the terminal's width.
    """
    out = console()
    out.print(f"[bold]{'fold (dry run: nothing changed)' if report.dry_run else 'fold'}[/bold]")
    out.print(
        f"  records  {report.records_before:,} -> {report.records_after:,}  "
        f"(decayed {report.decayed:,}, pruned {report.pruned:,}, "
        f"folded {report.folded:,} into {report.created:,})",
        markup=False,
    )
    out.print(
        f"  store    {human_bytes(report.bytes_before)} -> {human_bytes(report.bytes_after)}",
        markup=False,
    )
    out.print(f"  as of    {short_time(report.now)}, took {report.duration_s:.2f} s", markup=False)
    if report.stale:
        verb = "would be archived" if report.dry_run else "archived"
        out.print(
            f"  stale    {count_of(report.stale, 'memory about code', 'memories about code')} "
            f"{verb}: unused and unverified, and cited code changed",
            markup=False,
        )
    if not ids:
        return
    for rid in report.stale_ids[:_LIST_PREVIEW]:
        out.print(f"    {rid}  {report.stale_details.get(rid, '')}", markup=False)
    if report.stale > min(len(report.stale_ids), _LIST_PREVIEW):
        out.print(
            f"    ... and {report.stale - min(len(report.stale_ids), _LIST_PREVIEW):,} more",
            markup=False,
        )
    if report.pruned_ids:
        shown = report.pruned_ids[:_LIST_PREVIEW]
        out.print(f"  {'would prune' if report.dry_run else 'pruned'}:", markup=False)
        for rid in shown:
            out.print(f"    {rid}", markup=False)
        if report.pruned > len(shown):
            out.print(f"    ... and {report.pruned - len(shown):,} more", markup=False)
    if report.folded_from:
        out.print(f"  {'would fold' if report.dry_run else 'folded'}:", markup=False)
        for n, (into, members) in enumerate(report.folded_from.items()):
            if n == _LIST_PREVIEW:
                out.print(f"    ... and {report.created - n:,} more", markup=False)
                break
            if contents is None:
                out.print(
                    f"    {into} <- {count_of(len(members), 'record')}: {', '.join(members)}",
                    markup=False,
                )
                continue
            out.print(f"    {into} <- {count_of(len(members), 'record')}:", markup=False)
            for rid in members[:_LIST_PREVIEW]:
                room = out.width - len(rid) - 8
                out.print(f"      {rid}  {_one_line(contents.get(rid, ''), room)}", markup=False)
            if len(members) > _LIST_PREVIEW:
                out.print(f"      ... and {len(members) - _LIST_PREVIEW:,} more", markup=False)


@click.command()
@click.option("--dry-run", is_flag=True, help="Report what would change, and change nothing.")
@click.option(
    "--full",
    is_flag=True,
    help="Read and screen every record, not only those new or changed since the last fold.",
)
@click.option(
    "--keep-apart",
    "keep_apart",
    multiple=True,
    metavar="ID",
    help="Leave the group that would fold this memory unmerged, this time (repeat for several).",
)
@click.option(
    "--merge-again",
    "merge_again",
    multiple=True,
    metavar="ID",
    help="Let memories an unfold brought back merge again: forget the groups kept apart "
    "that hold this one (repeat for several).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@store_option
@click.pass_context
@examples(
    "prime-memory fold --dry-run",
    "prime-memory fold",
    "prime-memory fold --keep-apart 0000000b0000000200c0ffee12345678",
    "prime-memory fold --full",
)
def fold(
    ctx: click.Context,
    dry_run: bool,
    full: bool,
    keep_apart: tuple[str, ...],
    merge_again: tuple[str, ...],
    as_json: bool,
) -> None:
    """Decay, prune and merge memories; folded records go to the archive, never lost.

    A fold screens the memories new or changed since the last one; --full
    screens them all. On a terminal a progress bar names each step (reading,
    decaying and pruning, finding candidates, checking candidates, writing).
    A dry run shows each group it would merge with its memories' text.

    Memories an unfold brought back are never merged with each other again
    (each may still merge with others) until --merge-again names one of them.
    """
    contents: dict[str, str] | None = None
    with open_engine(ctx) as engine, phases("folding") as report_step:
        report = engine.fold(
            dry_run=dry_run,
            progress=report_step,
            full=full,
            keep_apart=list(keep_apart),
            merge_again=list(merge_again),
        )
        if dry_run and not as_json:
            shown = list(report.folded_from.values())[:_LIST_PREVIEW]
            contents = {
                rid: engine.get(rid).content for members in shown for rid in members[:_LIST_PREVIEW]
            }
    if as_json:
        echo_json(report)
    else:
        show_fold(report, contents=contents)


@click.command()
@click.option(
    "--embedder",
    "spec",
    default=None,
    help="The embedder to move to: builtin, model2vec:PATH, sentence-transformers:NAME, "
    "openai:URL#MODEL. Default: PRIME_MEMORY_EMBEDDER, else builtin.",
)
@store_option
@click.pass_context
@examples("prime-memory reembed", "prime-memory reembed --embedder model2vec:/models/my-model")
def reembed(ctx: click.Context, spec: str | None) -> None:
    """Embed every memory again with another model, in one transaction (all or nothing)."""
    import os

    target = spec or os.environ.get("PRIME_MEMORY_EMBEDDER") or "builtin"
    with open_engine(ctx, embedder="none") as engine, progress("re-embedding") as advance:
        count = engine.reembed(target, progress=advance)
        space = engine.stats().embedding_space
    click.echo(f"re-embedded {count} memories; embedding space is now {space}")


@click.command()
@click.argument("record_id")
@click.option("--json", "as_json", is_flag=True, help="Print the records brought back as JSON.")
@vectors_option
@store_option
@click.pass_context
@examples("prime-memory unfold 0000000b0000000200c0ffee12345678")
def unfold(ctx: click.Context, record_id: str, as_json: bool, vectors: bool) -> None:
    """Bring back the records that were folded into the merged record RECORD_ID."""
    from .records import show_record

    with open_engine(ctx) as engine:
        records = engine.unfold(record_id)
    if as_json:
        echo_json(records, vectors=vectors)
        return
    console().print(
        f"unfolded {record_id}: {count_of(len(records), 'record')} back",
        markup=False,
    )
    for rec in records:
        show_record(rec, "restored")


@click.command()
@click.argument("record_id")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@vectors_option
@store_option
@click.pass_context
@examples("prime-memory restore 0000000b0000000200c0ffee12345678")
def restore(ctx: click.Context, record_id: str, as_json: bool, vectors: bool) -> None:
    """Bring a pruned or folded record back from the archive."""
    from .records import show_record

    with open_engine(ctx) as engine:
        rec = engine.restore(record_id)
    if as_json:
        echo_json(rec, vectors=vectors)
    else:
        show_record(rec, "restored")


@click.command()
@click.option(
    "--processes",
    type=click.IntRange(0, 64),
    default=4,
    show_default=True,
    help="Writer processes in the self-test (0 skips it).",
)
@click.option(
    "--writes",
    type=click.IntRange(1, 10_000),
    default=25,
    show_default=True,
    help="Records each writer stores.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@store_option
@click.pass_context
@examples("prime-memory doctor", "prime-memory doctor --processes 8 --writes 100")
def doctor(ctx: click.Context, processes: int, writes: int, as_json: bool) -> None:
    """Check the store: it opens, is intact, is migrated, uses WAL, and survives concurrent writers.

    The write self-test runs on a temporary copy; the store itself is never written.
    On a PostgreSQL database the checks that apply run in a read-only session,
    and the others say why they do not apply. Exits with status 1 when a check fails.
    """
    from ..engine.doctor import check_store
    from ._common import chosen_store

    path = chosen_store(ctx)
    out = console()

    def show(check: Any) -> None:
        if not as_json:
            mark = "[green]ok[/green]  " if check.ok else "[red]FAIL[/red]"
            out.print(f"{mark} {check.name:<18} ", end="")
            out.print(check.detail, markup=False)

    checks = check_store(path, processes=processes, writes=writes, on_check=show)
    if as_json:
        echo_json(checks)
    if not all(check.ok for check in checks):
        ctx.exit(1)


#: The citation states ``check`` lists, per memory.
_FINDINGS = ("stale", "moved")
_READ_SCOPE_HELP = (
    "Check only this scope (repeat for several; '*' for all). Default: the current "
    "project's scope, the user's and global."
)


def _citation_text(state: Any) -> str:
    where = cited_place(state)
    return f"{where} {state.state}: {state.detail}" if state.detail else f"{where} {state.state}"


@click.command()
@click.option("--all-scopes", is_flag=True, help="Check every scope (the same as --scope '*').")
@click.option(
    "--strict",
    is_flag=True,
    help="Exit with status 1 when any citation is stale (for CI); moved ones pass.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@scope_option(_READ_SCOPE_HELP)
@store_option
@click.pass_context
@examples(
    "prime-memory check",
    "prime-memory check --scope '*' --json",
    "prime-memory check --strict",
)
def check(ctx: click.Context, all_scopes: bool, strict: bool, as_json: bool) -> None:
    """Check every memory that cites code against the working tree now.

    Prints how many citations are verified, moved, stale or unchecked (the
    repository is not on this machine), then one line per memory with a
    stale or moved citation: its id, its text cut short, and those
    citations (path, state, what was found). A memory whose citations all
    match is noted as verified now, which keeps a fold from expiring it.
    Stale memories are only reported; nothing is archived or deleted.

    The exit status is 0 whatever was found, unless --strict is given: then
    it is 1 when any citation is stale. On a terminal a progress bar counts
    the memories checked.
    """
    scopes = read_scopes(ctx, all_scopes)
    contents: dict[str, str] = {}
    with open_engine(ctx) as engine, progress("checking citations") as advance:
        report = engine.check_citations(scopes=scopes, progress=advance)
        for rid, _ in report.findings:
            contents[rid] = engine.get(rid).content
    if as_json:
        echo_json(
            {
                "checked_at": report.checked_at,
                "memories": report.memories,
                "citations": report.citations,
                "verified": report.verified,
                "moved": report.moved,
                "stale": report.stale,
                "unchecked": report.unchecked,
                "verified_memories": report.verified_memories,
                "stale_memories": report.stale_memories,
                "findings": [
                    {"id": rid, "content": contents.get(rid, ""), "citations": states}
                    for rid, states in report.findings
                ],
            }
        )
    else:
        _show_check(report, contents)
    if strict and report.stale:
        ctx.exit(1)


def _show_check(report: Any, contents: dict[str, str]) -> None:
    """The summary, then one line per memory with a stale or moved citation."""
    out = console()
    out.print(
        f"checked {count_of(report.memories, 'memory', 'memories')} citing code, "
        f"{count_of(report.citations, 'citation')}: {report.verified:,} verified, "
        f"{report.moved:,} moved, {report.stale:,} stale, {report.unchecked:,} unchecked",
        markup=False,
        soft_wrap=True,
    )
    if report.memories == 0:
        return
    if not report.findings:
        out.print("every citation matches the code", markup=False)
        return
    for rid, states in report.findings:
        shown = "; ".join(_citation_text(s) for s in states if s.state in _FINDINGS)
        # One line per memory, however long, so that it can be searched.
        line = f"{rid}  {_one_line(contents.get(rid, ''), 40)}  {shown}"
        out.print(line, markup=False, soft_wrap=True)
