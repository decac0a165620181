"""Commands over single records and queries: store, query, get, update, encode, stats."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click

from ..core.address import parse_record_id
from ..core.primes import Kind, normalise_label
from ..engine.budget import Hits
from ..errors import InvalidInput, NotAvailable
from ._common import (
    cited_place,
    clock_of,
    console,
    echo_json,
    examples,
    gate_options,
    given_project,
    human_bytes,
    jsonable,
    one_scope,
    open_engine,
    parse_metadata,
    parse_when,
    project_option,
    read_filters,
    read_scopes,
    scope_option,
    short_time,
    store_option,
    vectors_option,
)

TAG_HELP = "A tag (repeat for several)."
READ_SCOPE_HELP = (
    "Read only this scope (repeat for several; '*' for all). Default: the current "
    "project's scope, the user's and global."
)
ALL_SCOPES_HELP = "Read every scope (the same as --scope '*')."


#: ``PATH:LINES``: what follows the last colon is a line or a range (checked by the engine).
_CITED_LINES = re.compile(r"(?P<path>.*):(?P<lines>[0-9][0-9\s-]*)")


def parse_cite(spec: str) -> dict[str, str]:
    """One ``--cite``: ``PATH`` (the whole file), ``PATH:70-95`` (lines) or ``PATH#symbol``.

    Only the form is read here; the engine checks the path, the lines and the
    symbol against the repository before anything is stored.

    Raises:
        click.UsageError: the value names no file.
    """
    text = spec.strip()
    path, symbol, lines = text, None, None
    if "#" in text:
        path, _, symbol = text.rpartition("#")
    else:
        found = _CITED_LINES.fullmatch(text)
        if found is not None:
            path, lines = found["path"], found["lines"].strip()
    if not path.strip():
        raise click.UsageError(
            f"--cite {spec!r} names no file; give PATH, PATH:70-95 or PATH#symbol, "
            "relative to the repository's root"
        )
    cite = {"path": path.strip()}
    if symbol is not None:
        cite["symbol"] = symbol.strip()
    if lines is not None:
        cite["lines"] = lines
    return cite


def citation_line(state: Any) -> str:
    """One citation of a hit as it reads now: ``moved src/a.py:72-97: the lines moved``."""
    return f"{state.state} {cited_place(state)}" + (f": {state.detail}" if state.detail else "")


def _with_citations(content: str, states: Sequence[Any]) -> str:
    """A hit's content with a line for each citation under it, for people to read."""
    if not states:
        return content
    return "\n".join([content, *(f"cites {citation_line(state)}" for state in states)])


def _record_table(
    records: list[Any], scores: list[float] | None = None, *, compact: bool = False
) -> Any:
    """A table of records; ``compact`` leaves out the id and the numbers."""
    from rich.table import Table
    from rich.text import Text

    table = Table(show_lines=False, pad_edge=False)
    if not compact:
        table.add_column("id", no_wrap=True, style="cyan")
        table.add_column("scope", overflow="fold", min_width=12)
    table.add_column("domain/subdomain", no_wrap=True)
    table.add_column("tags")
    if not compact:
        table.add_column("strength", justify="right", no_wrap=True)
    if scores is not None and not compact:
        table.add_column("score", justify="right", no_wrap=True)
    table.add_column("content", overflow="fold", min_width=20)
    for n, rec in enumerate(records):
        content = rec.content if len(rec.content) <= 200 else rec.content[:199] + "…"
        row = [] if compact else [rec.record_id, rec.scope]
        row += [f"{rec.domain}/{rec.subdomain}", ", ".join(rec.tags)]
        if not compact:
            row.append(f"{rec.strength:.2f}")
            if scores is not None:
                row.append(f"{scores[n]:.3f}")
        row.append(content)
        table.add_row(*(Text(cell) for cell in row))
    return table


#: The widest the label columns of a query's table grow; longer labels wrap.
_LABEL_WIDTHS = {"scope": 32, "domain/subdomain": 24, "tags": 24}
#: Narrower than this, a query's content column would be hard to read: the hits
#: are shown as blocks instead.
_CONTENT_MIN_WIDTH = 40


def _hit_table(
    records: list[Any], scores: list[float], width: int, contents: list[str] | None = None
) -> Any | None:
    """The hits as a table at most ``width`` columns wide, or None if none fits.

    Every column gets a fixed width, so nothing is cut at the right edge: the
    id and the numbers their own, the labels what they need up to
    :data:`_LABEL_WIDTHS`, and the content, whole and wrapped, the rest. None
    when that leaves the content fewer than :data:`_CONTENT_MIN_WIDTH` columns.
    ``contents`` stands for each record's content (its citations added) when given.
    """
    from rich.table import Table
    from rich.text import Text

    if contents is None:
        contents = [rec.content for rec in records]
    rows = [
        [
            rec.record_id,
            rec.scope,
            f"{rec.domain}/{rec.subdomain}",
            ", ".join(rec.tags),
            f"{rec.strength:.2f}",
            f"{score:.3f}",
            content,
        ]
        for rec, score, content in zip(records, scores, contents, strict=True)
    ]
    names = ["id", "scope", "domain/subdomain", "tags", "strength", "score", "content"]
    widths = [max(len(name), *(len(row[n]) for row in rows)) for n, name in enumerate(names)]
    widths = [min(w, _LABEL_WIDTHS.get(name, w)) for w, name in zip(widths, names, strict=True)]
    # Seven columns: eight borders and one space of padding beside each inner border.
    room = width - sum(widths[:-1]) - 8 - 2 * (len(names) - 1)
    if room < _CONTENT_MIN_WIDTH:
        return None
    longest_line = max(len(line) for row in rows for line in [*row[-1].splitlines(), ""])
    widths[-1] = min(room, max(longest_line, len("content")))
    table = Table(show_lines=False, pad_edge=False)
    for name, column_width in zip(names, widths, strict=True):
        table.add_column(
            name,
            width=column_width,
            style="cyan" if name == "id" else None,
            justify="right" if name in ("strength", "score") else "left",
            overflow="fold",
        )
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    return table


def _record_blocks(
    records: list[Any], scores: list[float], contents: list[str] | None = None
) -> Any:
    """Each record as a block for a narrow terminal: a heading line, then its content.

    The id leads its own line, so that nothing beside it squeezes the content,
    which wraps whole under it, indented.
    """
    from rich.console import Group
    from rich.padding import Padding
    from rich.text import Text

    if contents is None:
        contents = [rec.content for rec in records]
    parts: list[Any] = []
    for n, (rec, score, content) in enumerate(zip(records, scores, contents, strict=True)):
        if n:
            parts.append(Text(""))
        heading = Text(rec.record_id, style="cyan")
        heading.append(f"  score {score:.3f}  strength {rec.strength:.2f}")
        parts.append(heading)
        tags = ", ".join(rec.tags) or "-"
        for line in (f"{rec.domain}/{rec.subdomain}  scope {rec.scope}", f"tags {tags}"):
            parts.append(
                Padding(Text(line, style="dim", overflow="fold"), (0, 0, 0, 2), expand=False)
            )
        parts.append(Padding(Text(content, overflow="fold"), (0, 0, 0, 2), expand=False))
    return Group(*parts)


def _escaped(field: str) -> str:
    """A field for one tab-separated line: backslash, tab, newline and return escaped."""
    return (
        field.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    )


def record_line(rec: Any, score: float) -> str:
    r"""One hit as one tab-separated line: id, score, scope, domain/subdomain, tags, content.

    Tags are comma-joined; every field has its backslashes, tabs, newlines and
    carriage returns escaped (``\\``, ``\t``, ``\n``, ``\r``), so a hit is
    always exactly one line of six fields.
    """
    fields = [
        rec.record_id,
        f"{score:.3f}",
        rec.scope,
        f"{rec.domain}/{rec.subdomain}",
        ",".join(rec.tags),
        rec.content,
    ]
    return "\t".join(_escaped(field) for field in fields)


def show_hits(
    records: list[Any], scores: list[float], citations: Sequence[Sequence[Any]] | None = None
) -> None:
    """Print a query's hits in the layout that suits where the output goes.

    A terminal (as rich detects it, ``TTY_COMPATIBLE`` and ``FORCE_COLOR``
    included) or a width given in ``COLUMNS`` gets a table where one fits
    (:func:`_hit_table`) and a block per hit where it does not. Anything else,
    a pipe or a file, gets :func:`record_line` lines, one per hit.

    ``citations`` holds each hit's citation states (:attr:`Hit.citations`):
    the table and the blocks show them under the content, one line each
    (:func:`citation_line`); the tab-separated lines keep their six fields.
    """
    out = console()
    if not out.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        for rec, score in zip(records, scores, strict=True):
            click.echo(record_line(rec, score))
        return
    states = citations if citations is not None else [() for _ in records]
    contents = [
        _with_citations(rec.content, cited) for rec, cited in zip(records, states, strict=True)
    ]
    table = _hit_table(records, scores, out.width, contents)
    out.print(_record_blocks(records, scores, contents) if table is None else table)


def show_record(rec: Any, verb: str) -> None:
    out = console()
    out.print(f"[bold]{verb}[/bold] {rec.record_id}")
    out.print(f"  scope      {rec.scope}", markup=False)
    if rec.session is not None:
        out.print(f"  session    {rec.session}", markup=False)
    out.print(f"  domain     {rec.domain}/{rec.subdomain}")
    out.print(f"  tags       {', '.join(rec.tags) or '-'}")
    out.print(
        f"  importance {rec.importance:.2f}   strength {rec.strength:.2f}   "
        f"accessed {rec.access_count} times"
    )
    out.print(f"  created    {short_time(rec.created_at)}   updated {short_time(rec.updated_at)}")
    if rec.metadata:
        import json

        out.print(f"  metadata   {json.dumps(rec.metadata, ensure_ascii=False)}", markup=False)
    out.print(rec.content, markup=False)


def _say_normalised(kind: Kind, labels: Iterable[str]) -> None:
    """One line on standard error for each label that is stored otherwise than given."""
    for label in labels:
        try:
            stored = normalise_label(label, kind)
        except InvalidInput:
            continue  # the engine refuses it, with its own message
        if stored != label:
            click.echo(f"{kind.value} {label!r} is stored as {stored!r}", err=True)


@click.command()
@click.argument("content")
@click.option("-d", "--domain", default="memory", show_default=True, help="The domain.")
@click.option("-s", "--subdomain", default="general", show_default=True, help="The subdomain.")
@click.option("-t", "--tag", "tags", multiple=True, help=TAG_HELP)
@click.option("-i", "--importance", type=float, default=0.5, show_default=True, help="0 to 1.")
@click.option("--metadata", help="A JSON object to keep with the memory.")
@click.option("--instance-key", help="A stable key: storing the same key again updates it.")
@click.option(
    "--session",
    metavar="TEXT",
    help="The conversation the memory belongs to (its memories lend each other context).",
)
@click.option(
    "--cite",
    "cites",
    multiple=True,
    metavar="PATH[:LINES|#SYMBOL]",
    help="Code the memory is about, relative to the git repository's root: a file, "
    "PATH:70-95 or PATH#symbol (repeat; at most 32). Queries say whether it still matches.",
)
@click.option(
    "--cite-commit",
    metavar="REV",
    help="Take the cited code as it was in this commit (a hash, branch or tag), "
    "not from the working tree.",
)
@click.option(
    "--supersedes",
    metavar="ID",
    help="The id of an older memory this one replaces: it is closed (archived as "
    "superseded) and queries return this one; query --as-of still finds it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@vectors_option
@scope_option("Store into this scope (default: the current scope; see prime-memory whoami).")
@project_option
@store_option
@click.pass_context
@examples(
    'prime-memory store "We use SQLite in WAL mode" -d decision -t architecture',
    'echo "Deploys run on Fridays" | prime-memory store - -d workflow',
    'prime-memory store "I prefer tabs" -d preference --scope user:alice',
    'prime-memory store "The flaky test is test_sync" --session 2024-05-01-debugging',
    'prime-memory store "connect() retries 3 times" --cite src/db.py#connect --cite README.md',
    'prime-memory store "The pool has 16 slots" --supersedes 0000000b0000000200c0ffee12345678',
)
def store(
    ctx: click.Context,
    content: str,
    domain: str,
    subdomain: str,
    tags: tuple[str, ...],
    importance: float,
    metadata: str | None,
    instance_key: str | None,
    session: str | None,
    cites: tuple[str, ...],
    cite_commit: str | None,
    supersedes: str | None,
    as_json: bool,
    vectors: bool,
) -> None:
    """Store a memory (CONTENT, or - to read it from standard input).

    Storing the same memory again (same scope, labels and content)
    reinforces it instead of adding a copy. The memory goes to the current
    scope (prime-memory whoami) unless --scope names another.

    --cite points the memory at code in the git repository of the project
    (--project, else the working directory); a bad citation stores nothing.
    A memory that seems to restate an older one with another value says
    "possibly supersedes ID (change)": confirm with --supersedes ID.
    """
    one_scope(ctx, "the scope to store into")
    if cite_commit is not None and not cites:
        raise click.UsageError("--cite-commit names the commit of --cite; give --cite too")
    citations = [parse_cite(spec) for spec in cites]
    if cite_commit is not None:
        citations = [{**cite, "commit": cite_commit} for cite in citations]
    if content == "-":
        content = sys.stdin.read().strip()
    _say_normalised(Kind.DOMAIN, [domain])
    _say_normalised(Kind.SUBDOMAIN, [subdomain])
    _say_normalised(Kind.TAG, tags)
    with open_engine(ctx, create=True) as engine:
        result = engine.store_result(
            content,
            scope=engine.whoami().current,
            domain=domain,
            subdomain=subdomain,
            tags=tags,
            importance=importance,
            metadata=parse_metadata(metadata),
            instance_key=instance_key,
            session=session,
            cites=citations or None,
            repo=given_project(ctx) if citations else None,
            supersedes=supersedes,
        )
        hints = [] if supersedes else engine.possibly_supersedes(result.record.record_id)
    superseded = None if supersedes is None else parse_record_id(supersedes)
    if as_json:
        out: dict[str, Any] = {"created": result.created, "record": result.record}
        if superseded is not None:
            out["superseded"] = superseded
        if hints:
            out["possibly_supersedes"] = [
                {"id": hint.record.record_id, "change": hint.change} for hint in hints
            ]
        echo_json(out, vectors=vectors)
        return
    verb = "stored" if result.created else "reinforced"
    click.echo(f"{verb} {result.record.record_id}")
    if superseded is not None:
        click.echo(f"superseded {superseded} (archived; query --as-of finds it)")
    for hint in hints:
        click.echo(f"possibly supersedes {hint.record.record_id} ({hint.change})")


@click.command()
@click.argument("text", required=False)
@gate_options(
    domain="Only this domain.",
    subdomain="Only this subdomain.",
    tags="A tag every hit must have (repeat).",
    any_tags="Hits need at least one of these.",
    exclude_tags="Hits must have none of these.",
    min_strength="0 to 1.",
    since="Only memories stored or changed since: 2024-05-01, 7d, 2 weeks.",
    until="Only memories stored or changed before this time.",
)
@click.option("-n", "--limit", type=int, default=10, show_default=True, help="Most hits to show.")
@click.option(
    "--max-tokens",
    type=int,
    default=None,
    help="Fill at most this many tokens with hits, best first (an estimate that errs high).",
)
@click.option(
    "--as-of",
    metavar="TIME",
    help="What was valid then (2024-05-01, 7d, 2 weeks): memories superseded or "
    "updated since come back as they were.",
)
@click.option("--all-scopes", is_flag=True, help=ALL_SCOPES_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON, for scripts.")
@vectors_option
@scope_option(READ_SCOPE_HELP)
@project_option
@store_option
@click.pass_context
@examples(
    "prime-memory query -d decision -t architecture",
    'prime-memory query "how do we deploy" --limit 5',
    "prime-memory query --any-tag bug --any-tag regression --exclude-tag done --json",
    "prime-memory query -d decision --scope global --scope user:alice",
    "prime-memory query -t sqlite --all-scopes",
    'prime-memory query "pool size" --as-of 2024-05-01',
)
def query(
    ctx: click.Context,
    text: str | None,
    limit: int,
    max_tokens: int | None,
    as_of: str | None,
    all_scopes: bool,
    as_json: bool,
    vectors: bool,
) -> None:
    """Find memories, best first, by TEXT and/or labels.

    By default a query sees the current scope, the user's scope and global
    (prime-memory whoami); --scope reads exactly the scopes given, and
    --all-scopes every scope. A scope that holds nothing matches nothing.

    On a terminal the hits show as a table, or as one block each where a
    table would not fit; piped, as one tab-separated line each: id, score,
    scope, domain/subdomain, tags and content, newlines and tabs escaped.
    The table and --json say how the code a memory cites compares with the
    working tree now: verified, moved, stale or unchecked.
    """
    gates = read_filters(ctx, read_scopes(ctx, all_scopes))
    moment = parse_when(as_of, clock_of(ctx)(), "--as-of")
    with open_engine(ctx) as engine:
        try:
            hits = engine.query(
                text=text,
                filters=gates,
                limit=limit,
                max_tokens=max_tokens,
                reinforce=True,
                as_of=moment,
            )
        except NotAvailable as exc:
            raise click.ClickException(str(exc)) from None
    if as_json:
        shown: list[dict[str, Any]] = []
        for h in hits:
            hit: dict[str, Any] = {
                "score": h.score,
                "score_parts": h.score_parts,
                "record": h.record,
            }
            if h.citations:
                hit["citations"] = list(h.citations)
            shown.append(hit)
        echo_json(shown, vectors=vectors)
        return
    if not hits:
        click.echo("no memories match", err=True)
        return
    show_hits([h.record for h in hits], [h.score for h in hits], [h.citations for h in hits])
    if isinstance(hits, Hits) and hits.left_out:
        click.echo(
            f"{hits.left_out} more did not fit {hits.max_tokens:,} tokens "
            f"({hits.tokens_used:,} used)",
            err=True,
        )


@click.command()
@click.argument("record_id")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@click.option(
    "--history", is_flag=True, help="Also show the versions that updates replaced, oldest first."
)
@vectors_option
@store_option
@click.pass_context
@examples(
    "prime-memory get 0000000b0000000200c0ffee12345678",
    "prime-memory get 0000000b0000000200c0ffee12345678 --history",
)
def get(ctx: click.Context, record_id: str, as_json: bool, history: bool, vectors: bool) -> None:
    """Show one memory by its id, and with --history the versions it replaced."""
    with open_engine(ctx) as engine:
        rec = engine.get(record_id)
        versions = engine.history(record_id) if history else []
    if as_json:
        echo_json({"record": rec, "history": versions} if history else rec, vectors=vectors)
        return
    show_record(rec, "record")
    for version in versions:
        click.echo(f"  replaced {short_time(version.replaced_at)}: {version.record.content[:200]}")


@click.command()
@click.argument("record_id")
@click.option("-c", "--content", help="New content.")
@click.option("-t", "--tag", "tags", multiple=True, help="Replace the tags (repeat).")
@click.option("--clear-tags", is_flag=True, help="Remove every tag.")
@click.option("-i", "--importance", type=float, help="New importance, 0 to 1.")
@click.option("--strength", type=float, help="New strength, 0 to 1.")
@click.option("--metadata", help="A JSON object that replaces the metadata.")
@click.option("--json", "as_json", is_flag=True, help="Print the updated record as JSON.")
@vectors_option
@store_option
@click.pass_context
@examples(
    "prime-memory update 0000000b0000000200c0ffee12345678 -i 0.9",
    'prime-memory update 0000000b0000000200c0ffee12345678 -c "We moved to Postgres" -t db',
)
def update(
    ctx: click.Context,
    record_id: str,
    content: str | None,
    tags: tuple[str, ...],
    clear_tags: bool,
    importance: float | None,
    strength: float | None,
    metadata: str | None,
    as_json: bool,
    vectors: bool,
) -> None:
    """Change a memory's content, tags, importance, strength or metadata.

    The id stays the same; the domain and subdomain cannot change.
    """
    changes: dict[str, Any] = {}
    if content is not None:
        changes["content"] = content
    if tags or clear_tags:
        changes["tags"] = list(tags)
    if importance is not None:
        changes["importance"] = importance
    if strength is not None:
        changes["strength"] = strength
    if metadata is not None:
        changes["metadata"] = parse_metadata(metadata)
    if not changes:
        raise click.UsageError("nothing to change; give --content, --tag, --importance, ...")
    with open_engine(ctx) as engine:
        rec = engine.update(record_id, **changes)
    if as_json:
        echo_json(rec, vectors=vectors)
    else:
        click.echo(f"updated {rec.record_id}")


@click.command()
@click.option("-d", "--domain", default="memory", show_default=True, help="The domain.")
@click.option("-s", "--subdomain", default="general", show_default=True, help="The subdomain.")
@click.option("-t", "--tag", "tags", multiple=True, help=TAG_HELP)
@click.option("--instance-key", help="An instance key, for the instance lane.")
@click.option("--json", "as_json", is_flag=True, help="Print the address as JSON.")
@scope_option("The scope the memory would be in (default: the current scope).")
@project_option
@store_option
@click.pass_context
@examples(
    "prime-memory encode -d decision -s architecture -t sqlite",
    "prime-memory encode -d preference --scope user:alice",
)
def encode(
    ctx: click.Context,
    domain: str,
    subdomain: str,
    tags: tuple[str, ...],
    instance_key: str | None,
    as_json: bool,
) -> None:
    """Show the address that memories with these labels get, without storing anything.

    The scope enters the address's concept bucket, so the same labels get
    another address in another scope.
    """
    one_scope(ctx, "the scope the memory would be in")
    with open_engine(ctx) as engine:
        scope = engine.whoami().current
        enc = engine.encode(domain, subdomain, tags, instance_key, scope)
    if as_json:
        echo_json({"scope": scope, **jsonable(enc)})
        return
    out = console()
    out.print(f"scope            {scope}", markup=False)
    out.print(f"record id        {enc.record_id}")
    out.print(f"domain prime     {enc.domain_prime}")
    out.print(f"subdomain prime  {enc.subdomain_prime}")
    out.print(f"concept bucket   {enc.concept_bucket:#010x}")
    out.print(f"instance id      {enc.instance_id:#010x}")
    if enc.provisional:
        out.print("(provisional: a new label's prime is only fixed when it is first stored)")


_SHOWN_STATS = {
    "path",
    "without_vector",
    "records",
    "domains",
    "subdomains",
    "tags",
    "registries",
    "store_bytes",
    "embedding_space",
    "schema_version",
    "archived",
    "archived_by_reason",
    "scopes",
    "current_scope",
    "scope_reason",
    "visible_scopes",
}


def scope_table(counts: dict[str, int], current: str, visible: tuple[str, ...]) -> Any:
    """Records per scope, the current and the visible ones marked.

    The current and visible scopes are listed even when they hold nothing yet.
    """
    from rich.table import Table
    from rich.text import Text

    table = Table(pad_edge=False)
    table.add_column("scope", overflow="fold")
    table.add_column("records", justify="right")
    table.add_column("", no_wrap=True)
    names = sorted({*counts, *visible}, key=lambda s: (s not in visible, -counts.get(s, 0), s))
    for name in names:
        mark = "current" if name == current else "visible" if name in visible else ""
        table.add_row(Text(name), f"{counts.get(name, 0):,}", mark)
    return table


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@scope_option("Show this scope as the current one (default: resolved; see prime-memory whoami).")
@project_option
@store_option
@click.pass_context
@examples(
    "prime-memory stats",
    "prime-memory --store ./team.db stats --json",
    "prime-memory stats --project ~/code/api",
)
def stats(ctx: click.Context, as_json: bool) -> None:
    """Counts per scope, domain and tag, store size, embedding space and archive.

    Also shows the current scope, why it is the current one, and which
    scopes a query sees by default.
    """
    import dataclasses

    from ..recall.text_embedding import TextEmbedding

    one_scope(ctx, "the current scope")
    with open_engine(ctx) as engine:
        summary = engine.stats()
    if as_json:
        echo_json(summary)
        return
    from rich.table import Table

    out = console()
    out.print(f"[bold]{summary.path}[/bold]")
    out.print(
        f"{summary.records:,} records, {human_bytes(summary.store_bytes)}, "
        f"schema {summary.schema_version}, "
        f"embedding space {summary.embedding_space or 'none yet'}"
    )
    space = summary.embedding_space or ""
    if summary.without_vector and not space.startswith("custom:") and TextEmbedding(None).enabled:
        out.print(
            f"without a vector: {summary.without_vector:,} records; text queries rank them "
            "on words alone (prime-memory reembed embeds them)",
            markup=False,
        )
    if summary.archived:
        why = ", ".join(f"{reason} {n:,}" for reason, n in summary.archived_by_reason.items())
        out.print(
            f"archive: {summary.archived:,} records ({why}); unfold or restore brings them back"
        )
    else:
        out.print("archive: empty")
    out.print(
        f"current scope: {summary.current_scope} - {summary.scope_reason}",
        markup=False,
        soft_wrap=True,
    )
    out.print(f"a query sees: {', '.join(summary.visible_scopes)}", markup=False, soft_wrap=True)
    for field in dataclasses.fields(summary):
        if field.name not in _SHOWN_STATS:
            value = getattr(summary, field.name)
            if isinstance(value, dict):
                value = ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
            out.print(f"{field.name.replace('_', ' ')}: {value}", markup=False)
    out.print(scope_table(summary.scopes, summary.current_scope, summary.visible_scopes))
    for title, counts in (("domain", summary.domains), ("tag", summary.tags)):
        if not counts:
            continue
        table = Table(title=None, pad_edge=False)
        table.add_column(title)
        table.add_column("records", justify="right")
        table.add_column("prime", justify="right")
        primes = summary.registries.get(title, {})
        for label, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            table.add_row(label, str(count), str(primes.get(label, "")))
        out.print(table)
