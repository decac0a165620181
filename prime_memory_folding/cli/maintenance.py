"""Commands that maintain a store: fold, unfold, restore, doctor."""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from ._common import (
    console,
    echo_json,
    examples,
    jsonable,
    needs,
    open_engine,
    progress,
    store_option,
    working,
)

_NO_FOLDING = "folding"
_LIST_PREVIEW = 10


def _summary_value(value: Any) -> str:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        parts = []
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if isinstance(item, (list, tuple)) and len(item) > 3:
                item = f"[{len(item)} items]"
            elif isinstance(item, float):
                item = f"{item:.3g}"
            parts.append(f"{field.name}={item}")
        return ", ".join(parts)
    return str(jsonable(value))


def show_report(title: str, report: Any) -> None:
    """Print a dataclass report readably: scalars as lines, lists counted with a preview."""
    out = console()
    out.print(f"[bold]{title}[/bold]")
    if not (dataclasses.is_dataclass(report) and not isinstance(report, type)):
        out.print(str(jsonable(report)), markup=False)
        return
    for field in dataclasses.fields(report):
        value = getattr(report, field.name)
        label = field.name.replace("_", " ")
        if isinstance(value, (list, tuple)):
            out.print(f"  {label}: {len(value)}", markup=False)
            for item in value[:_LIST_PREVIEW]:
                out.print(f"    - {_summary_value(item)}", markup=False)
            if len(value) > _LIST_PREVIEW:
                out.print(f"    ... and {len(value) - _LIST_PREVIEW} more", markup=False)
        elif isinstance(value, dict):
            shown = ", ".join(f"{k} {_summary_value(v)}" for k, v in value.items()) or "-"
            out.print(f"  {label}: {shown}", markup=False)
        elif isinstance(value, float):
            out.print(f"  {label}: {value:.4g}", markup=False)
        else:
            out.print(f"  {label}: {_summary_value(value)}", markup=False)


@click.command()
@click.option("--dry-run", is_flag=True, help="Report what would change, and change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@store_option
@click.pass_context
@examples("prime-memory fold --dry-run", "prime-memory fold")
def fold(ctx: click.Context, dry_run: bool, as_json: bool) -> None:
    """Decay, prune and merge memories; folded records go to the archive, never lost."""
    with open_engine(ctx) as engine, working("folding..."):
        run = needs(engine, "fold", _NO_FOLDING)
        report = run(dry_run=dry_run)
    if as_json:
        echo_json(report)
    else:
        show_report("fold (dry run: nothing changed)" if dry_run else "fold", report)


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
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@store_option
@click.pass_context
@examples("prime-memory unfold 0000000b0000000200c0ffee12345678")
def unfold(ctx: click.Context, record_id: str, as_json: bool) -> None:
    """Bring back the records that were folded into the merged record RECORD_ID."""
    with open_engine(ctx) as engine:
        result = needs(engine, "unfold", _NO_FOLDING)(record_id)
    if as_json:
        echo_json(result)
    else:
        show_report(f"unfolded {record_id}", result)


@click.command()
@click.argument("record_id")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@store_option
@click.pass_context
@examples("prime-memory restore 0000000b0000000200c0ffee12345678")
def restore(ctx: click.Context, record_id: str, as_json: bool) -> None:
    """Bring a pruned or folded record back from the archive."""
    with open_engine(ctx) as engine:
        result = needs(engine, "restore", _NO_FOLDING)(record_id)
    if as_json:
        echo_json(result)
    else:
        show_report(f"restored {record_id}", result)


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
    Exits with status 1 when a check fails.
    """
    from ..doctor import check_store
    from ..engine import default_store_path
    from ._common import store_path

    path = store_path(ctx) or str(default_store_path())
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
