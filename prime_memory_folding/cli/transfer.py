"""Commands that move memories in and out: export and import."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..errors import EmbeddingError
from ._common import (
    chosen_store,
    confirm_or_refuse,
    count_of,
    echo_json,
    examples,
    gate_options,
    is_url,
    one_scope,
    open_engine,
    phases,
    progress,
    project_option,
    read_filters,
    read_scopes,
    scope_option,
    stdin_is_terminal,
    store_option,
    store_path,
)

__all__ = ["copy_command", "export", "import_"]

FORMATS = ("auto", "pack", "json-store", "markdown", "knowledge-graph", "mem0", "claude-mem")
#: Formats of the files coding agents keep (transfer/agent_files.py).
AGENT_FORMATS = ("agents-md", "claude-auto-memory", "basic-memory")
#: A folder import that would add more memories than this asks first.
ASK_ABOVE = 300


@click.command()
@click.argument("output", type=click.Path(dir_okay=False, allow_dash=True), default="-")
@gate_options(
    domain="Only this domain.",
    subdomain="Only this subdomain.",
    tags="Only records with every one of these.",
    any_tags="Only records with one of these.",
    since="Only records updated at or after: 2024-05-01, Unix seconds, 7d.",
    until="Only records updated before this time.",
)
@click.option(
    "--vectors/--no-vectors",
    default=True,
    help="Keep each record's vector (the default; --vectors is accepted and changes nothing). "
    "--no-vectors makes a smaller pack, whose records an import embeds again.",
)
@click.option("--all-scopes", is_flag=True, help="Every scope (the default for export).")
@scope_option("Only this scope (repeat for several). Default: every scope.")
@store_option
@click.pass_context
@examples(
    "prime-memory export memories.jsonl",
    "prime-memory export decisions.jsonl -d decision --since 30d",
    "prime-memory export - | gzip > backup.jsonl.gz",
    "prime-memory export small.jsonl --no-vectors",
    "prime-memory export api.jsonl --scope project:github.com/acme/api",
)
def export(
    ctx: click.Context,
    output: str,
    vectors: bool,
    all_scopes: bool,
) -> None:
    """Write memories to a pack: JSON Lines, a header then one record per line.

    OUTPUT defaults to standard output. Import the pack into any store with
    `prime-memory import`; ids, addresses, timestamps and scopes are kept.
    Without --scope every scope is exported, and records keep their
    vectors, so a pack of the whole store is a whole backup: imported, it
    ranks as the store did.
    """
    from ..transfer.packs import export_pack

    gates = read_filters(ctx, read_scopes(ctx, all_scopes))
    with open_engine(ctx) as engine, progress("exporting") as advance:
        if output == "-":
            report = export_pack(
                engine, sys.stdout, filters=gates, vectors=vectors, progress=advance
            )
            sys.stdout.flush()
            return
        target = Path(output)
        try:
            handle = target.open("w", encoding="utf-8", newline="\n")
        except OSError as exc:
            raise click.ClickException(f"cannot write {target}: {exc.strerror}") from None
        with handle:
            report = export_pack(engine, handle, filters=gates, vectors=vectors, progress=advance)
    with_vectors = " with vectors" if report.vectors else " without vectors"
    click.echo(f"exported {report.records} records{with_vectors} to {target}", err=True)


def detect_format(path: Path) -> str:
    """Guess an input's format from its name, what it is and its first line."""
    import json

    from ..transfer.agent_files import AGENT_FILES, AUTO_MEMORY_INDEX

    if path.name in AGENT_FILES:
        return "agents-md"
    if path.name == AUTO_MEMORY_INDEX:
        return "claude-auto-memory"
    if path.is_dir():
        return "markdown"
    if not path.exists():
        raise click.ClickException(f"{path} does not exist; check the path")
    from ..transfer.tool_exports import sniff_format

    sniffed = sniff_format(path)
    if sniffed is not None:
        return sniffed
    try:
        with path.open(encoding="utf-8") as handle:
            first = handle.readline(1_000_000)
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read {path}: {exc}") from None
    try:
        head = json.loads(first)
    except json.JSONDecodeError:
        head = None
    if isinstance(head, dict) and head.get("format") == "prime-memory-pack":
        return "pack"
    if isinstance(head, dict) and head.get("type") in {"entity", "relation"}:
        return "knowledge-graph"
    if '"prime-memory-folding-store-v1"' in first or first.strip() in {"{", ""}:
        return "json-store"
    raise click.ClickException(
        f"cannot tell the format of {path}; give --format "
        f"({', '.join(FORMATS[1:] + AGENT_FORMATS)})"
    )


def _read_agent_files(kind: str, source: Path, domain: str, advance: Any) -> Any:
    """Read one of the AGENT_FORMATS."""
    from ..transfer import agent_files

    if kind == "agents-md":
        return agent_files.read_agents_md(source, progress=advance)
    if kind == "claude-auto-memory":
        return agent_files.read_claude_auto_memory(source, progress=advance)
    return agent_files.read_basic_memory(source, domain=domain, progress=advance)


def _report(report: Any) -> None:
    say = click.echo
    verb = "would add" if report.dry_run else "added"
    bad = ""
    if report.skipped:
        bad = f", {count_of(len(report.skipped), 'bad ' + report.unit)} skipped"
    present = f" ({report.already_present:,} already present)" if report.already_present else ""
    say(
        f"read {count_of(report.lines, report.unit)} from {report.source}: "
        f"{count_of(report.read, 'memory', 'memories')}{bad}; {verb} {report.added:,}{present}"
    )
    for domain, count in report.added_per_domain.items():
        say(f"  {domain}: {count}")
    if report.added_per_scope:
        say("  per scope: " + ", ".join(f"{s} {n:,}" for s, n in report.added_per_scope.items()))
    if report.not_selected:
        say(f"  {count_of(report.not_selected, 'memory', 'memories')} in other scopes left out")
    for change in report.relabelled:
        say(
            f"  {change.kind} {change.label!r} has prime {change.store_prime} here "
            f"(was {change.source_prime})"
        )
    if report.readdressed:
        say(f"  {len(report.readdressed)} records got a new address:")
        for old, new in report.readdressed[:10]:
            say(f"    {old} -> {new}")
        if len(report.readdressed) > 10:
            say(f"    ... and {len(report.readdressed) - 10} more")
    if report.skipped:
        say(f"  skipped {count_of(len(report.skipped), 'bad ' + report.unit)}:")
        for line in report.skipped[:10]:
            say(f"    {line}")
        if len(report.skipped) > 10:
            say(f"    ... and {len(report.skipped) - 10:,} more")
    if report.left_out:
        say(f"  not read: {count_of(len(report.left_out), 'file or folder', 'files and folders')}")
        for item in report.left_out[:20]:
            say(f"    {item}")
        if len(report.left_out) > 20:
            say(f"    ... and {len(report.left_out) - 20:,} more (--json lists them all)")
    if report.dry_run:
        say("dry run: nothing was written")


@click.command(name="import")
@click.argument("source", type=click.Path(path_type=Path))
@click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(FORMATS + AGENT_FORMATS),
    default="auto",
    show_default=True,
    help="The input's format; auto tells them apart by their first line.",
)
@click.option("--dry-run", is_flag=True, help="Report what would be added, and write nothing.")
@click.option("--skip-bad", is_flag=True, help="Go on past malformed lines (they are reported).")
@click.option(
    "--no-vectors",
    is_flag=True,
    help="Drop the input's vectors (e.g. from another embedding space); the store's "
    "embedder embeds the records again.",
)
@click.option(
    "--yes",
    is_flag=True,
    help=f"Import a folder that adds more than {ASK_ABOVE} memories without asking first.",
)
@click.option(
    "-d",
    "--domain",
    default="memory",
    show_default=True,
    help="Markdown, knowledge graphs and mem0: the domain for notes at the top of the "
    "folder, or for every memory.",
)
@click.option(
    "--only-scope",
    "only_scopes",
    metavar="SCOPE",
    multiple=True,
    help="Only records of this scope (repeat for several); records that name none count as "
    "the current scope's.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@scope_option(
    "Put every record into this scope. Default: the scope each record names, else the "
    "current scope."
)
@project_option
@store_option
@click.pass_context
@examples(
    "prime-memory import memories.jsonl",
    "prime-memory import ~/notes --format markdown --scope user:alice",
    "prime-memory import backup.jsonl --only-scope global",
    "prime-memory import old-store.json --dry-run",
    "prime-memory import ~/notes --format markdown --yes",
    "prime-memory import ~/notes --format markdown",
    "prime-memory import memory.jsonl --format knowledge-graph --skip-bad",
    "prime-memory import . --format agents-md --dry-run",
    "prime-memory import ~/.claude/projects/-home-alice-api/memory/MEMORY.md",
    "prime-memory import ~/basic-memory --format basic-memory --scope user:alice",
    "prime-memory import mem0-memories.json --dry-run",
    "prime-memory import ~/.claude-mem/claude-mem.db --scope project:github.com/acme/api",
)
def import_(
    ctx: click.Context,
    source: Path,
    fmt: str,
    dry_run: bool,
    skip_bad: bool,
    no_vectors: bool,
    yes: bool,
    domain: str,
    only_scopes: tuple[str, ...],
    as_json: bool,
) -> None:
    """Import memories from a pack, a JSON store, a folder of Markdown notes or a knowledge graph.

    \b
    pack             JSON Lines from `prime-memory export`: ids, addresses and
                     timestamps are kept
    json-store       a prime-memory-folding-store-v1 JSON file
    markdown         a folder of .md notes: one memory per `##` section, tags
                     from front matter and #hashtags, domain from the folder
    knowledge-graph  the reference MCP memory server's memory.jsonl: one memory
                     per observation, tagged with the entity's name and type;
                     one per relation ("alice works_at acme")
    agents-md        CLAUDE.md and AGENTS.md files (one, or all under a folder):
                     one memory per rule, domain convention, subdomain the heading
    claude-auto-memory
                     Claude Code's auto memory folder (MEMORY.md and topic
                     files): one memory per entry, domain the topic file's name
    basic-memory     a basic-memory project folder: one memory per observation
                     and per relation, and one for each note's text
    mem0             mem0's memories as get_all returns them (a JSON list or
                     {"results": [...]}): tags from categories, ids in metadata
    claude-mem       claude-mem's SQLite database, read-only: one memory per
                     observation (its type as domain) and per session summary

    Importing the same input twice adds nothing. Without --skip-bad, one
    malformed line stops the import before anything is written. A pack keeps
    each record's scope; what names none (notes, graphs, older packs) goes to
    the current scope (prime-memory whoami), or to --scope.

    Records that come without a vector (or all, with --no-vectors) are
    embedded by the store's embedder afterwards, unless embedding is off. A
    folder that would add more than 300 memories asks first, showing how
    many; without a terminal it needs --yes.
    """
    from ..transfer import importers, packs, tool_exports

    target = one_scope(ctx, "the scope to import into")
    if only_scopes:
        from ..core.scopes import normalise_scopes

        normalise_scopes(only_scopes)  # a malformed one stops here, before anything is read
    kind = detect_format(source) if fmt == "auto" else fmt
    with progress(f"reading {source.name}") as advance:
        if kind == "markdown":
            read = importers.read_markdown(source, domain=domain, progress=advance)
        elif kind == "knowledge-graph":
            read = importers.read_knowledge_graph(source, domain=domain, progress=advance)
        elif kind == "mem0":
            read = tool_exports.read_mem0(source, domain=domain, progress=advance)
        elif kind == "claude-mem":
            read = tool_exports.read_claude_mem(source, progress=advance)
        elif kind in AGENT_FORMATS:
            read = _read_agent_files(kind, source, domain, advance)
        elif kind == "json-store":
            read = importers.read_json_store(source, progress=advance)
        else:
            read = packs.read_pack(source, progress=advance)
    selected = list(only_scopes) if only_scopes else None
    ask = source.is_dir() and not dry_run and not yes and len(read.records) > ASK_ABOVE
    store = chosen_store(ctx)
    if ask and not is_url(store) and not Path(store).exists():
        _confirm_size(len(read.records), source)
        ask = False
    failed: EmbeddingError | None = None
    embedded = 0
    with open_engine(ctx, create=True) as engine:
        if ask:
            planned = packs.write_source(
                engine, read, skip_bad=skip_bad, dry_run=True, vectors=False, scope=target,
                scopes=selected, embed=False,
            )  # fmt: skip
            if planned.added > ASK_ABOVE:
                _confirm_size(planned.added, source)
        with progress("importing") as advance:
            report = packs.write_source(
                engine,
                read,
                skip_bad=skip_bad,
                dry_run=dry_run,
                vectors=not no_vectors,
                progress=advance,
                scope=target,
                scopes=selected,
                embed=False,
            )
        if report.added and not report.dry_run:
            try:
                with progress("embedding") as advance:
                    embedded = packs.embed_missing(engine, progress=advance)
            except EmbeddingError as exc:
                failed = exc
    if as_json:
        echo_json(report)
    else:
        _report(report)
    if failed is not None:
        raise click.ClickException(
            f"the memories were imported without vectors, since embedding failed ({failed}); "
            "run prime-memory reembed once the embedder works"
        )
    if embedded:
        click.echo(
            f"embedded {count_of(embedded, 'memory', 'memories')} without a vector", err=True
        )


def _confirm_size(count: int, source: Path) -> None:
    """Ask before a folder import adds ``count`` memories; refuse without a terminal."""
    confirm_or_refuse(
        f"add {count_of(count, 'memory', 'memories')} from {source}",
        [],
        "nothing was imported",
        "add --yes, or see what would be added with --dry-run",
    )


@click.command(name="copy")
@click.argument("source", metavar="SRC")
@click.argument("destination", metavar="DST")
@click.option(
    "--force",
    is_flag=True,
    help="Replace what DST holds (its records, archive, registries and settings) after "
    "asking; without it a DST that holds memories is refused.",
)
@click.option("--yes", is_flag=True, help="With --force: replace without asking.")
@click.pass_context
@examples(
    "prime-memory copy ~/.local/share/prime-memory-folding/memory.db "
    "postgresql://alice@db.lan:5432/memory",
    "prime-memory copy postgresql://alice@db.lan/memory backup.db",
    "prime-memory copy new.db old.db --force --yes",
)
def copy_command(ctx: click.Context, source: str, destination: str, force: bool, yes: bool) -> None:
    """Copy the whole store SRC to DST: an SQLite file or a postgresql:// URL each.

    Records keep their ids, times, vectors, strengths, access counts,
    metadata and scopes; the archive, the prime registries, the embedding
    space, the fold marks and, when both stores keep them, access tokens come
    along. A missing DST file is created; a PostgreSQL database must exist.
    DST is written in one transaction, so a copy that fails leaves it as it
    was. A DST that already holds memories is refused unless --force: then
    its contents are replaced (never merged), after a question that --yes
    answers; without a terminal --force needs --yes.
    """
    from ..storage.copy import DestinationNotEmpty, copy_store, describe

    if yes and not force:
        raise click.UsageError("--yes goes with --force")
    if store_path(ctx) is not None:
        raise click.UsageError("copy names both stores as SRC and DST; leave out --store")
    try:
        with phases("copying") as report:
            done = copy_store(source, destination, progress=report)
    except DestinationNotEmpty as exc:
        held = count_of(exc.held, "record or archive entry", "records and archive entries")
        if not force:
            raise click.ClickException(
                f"{exc.destination} already holds {held}; "
                "copy into a new store, or give --force to replace them (copy never merges)"
            ) from None
        if not yes:
            if not stdin_is_terminal():
                raise click.ClickException(
                    f"{exc.destination} holds {held}; "
                    "add --yes to replace them without a terminal to confirm on"
                ) from None
            click.confirm(
                f"Replace the {held} in {exc.destination} with {describe(source)}?",
                abort=True,
                err=True,
            )
        with phases("copying") as report:
            done = copy_store(source, destination, replace=True, progress=report)
    tokens = "" if done.tokens is None else f", {count_of(done.tokens, 'token')}"
    verb = "replaced the contents of" if done.replaced else "copied into"
    click.echo(
        f"{verb} {done.destination}: {count_of(done.records, 'record')}, "
        f"{count_of(done.archived, 'archive entry', 'archive entries')}, "
        f"{count_of(done.registry_labels, 'registry label')}, "
        f"{count_of(done.fold_marks, 'fold mark')}{tokens}",
        err=True,
    )
    if done.tokens_left:
        click.echo(
            f"{count_of(done.tokens_left, 'access token')} of {describe(source)} not copied: "
            f"{done.destination} keeps no tokens",
            err=True,
        )
