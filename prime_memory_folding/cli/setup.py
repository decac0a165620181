"""Commands that connect the store to the outside: serve, ide-config, demo."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from ..errors import PrimeMemoryError
from ..net.announce import MCP_HTTP_PORT
from ._common import (
    F,
    chosen_store,
    console,
    creation_asked,
    examples,
    given_project,
    is_url,
    one_scope,
    project_option,
    scope_option,
    shown_store,
    store_option,
    store_path,
    without_password,
)

SERVER_NAME = "prime-memory"
CLIENTS = ("claude-code", "cursor", "vscode", "jetbrains", "claude-desktop")


def _load_server_module() -> Any:
    import importlib

    try:
        return importlib.import_module("prime_memory_folding.mcp.server")
    except ModuleNotFoundError as exc:
        if exc.name == "prime_memory_folding.mcp.server":
            raise click.ClickException(
                "the MCP server is not part of this install of prime-memory-folding; upgrade it"
            ) from None
        if exc.name and exc.name.split(".")[0] == "mcp":
            raise click.ClickException(
                "the MCP server needs the MCP SDK; install it with: pip install mcp"
            ) from None
        raise


@click.command()
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for IDEs and agent hosts; http for streamable HTTP.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option(
    "--port", type=int, default=MCP_HTTP_PORT, show_default=True, help="HTTP port; 0 picks one."
)
@click.option(
    "--token", help="Bearer token HTTP requests must carry (default: $PRIME_MEMORY_TOKEN)."
)
@click.option(
    "--require-token",
    is_flag=True,
    help="Refuse to start an HTTP server that would serve without a token.",
)
@scope_option("The server's current scope (default: resolved where it runs; see whoami).")
@project_option
@store_option
@click.pass_context
@examples(
    "prime-memory serve",
    "prime-memory serve --transport http --port 8765",
    "prime-memory --store ./team.db serve",
    "prime-memory serve --project ~/code/api",
)
def serve(
    ctx: click.Context,
    transport: str,
    host: str,
    port: int,
    token: str | None,
    require_token: bool,
) -> None:
    """Run the MCP server on this store, so IDEs and agents can use it as tools.

    The server resolves its current scope once, at start-up, as
    prime-memory whoami shows; --scope or --project fix it.
    """
    argv = ["--transport", "stdio" if transport == "stdio" else "streamable-http"]
    argv += [f"--{option}={value}" for option, value in pinned_scope(ctx)]
    module = _load_server_module()
    path = store_path(ctx)
    if path is not None:
        argv.append(f"--store={path}")
    if creation_asked(ctx):
        argv.append("--create")
    if transport == "http":
        argv += [f"--host={host}", f"--port={port}"]
        if token is not None:
            argv.append(f"--token={token}")
        if require_token:
            argv.append("--require-token")
    ctx.exit(int(module.main(argv) or 0))


def pinned_scope(ctx: click.Context) -> list[tuple[str, str]]:
    """The ``--scope`` and ``--project`` the user gave, checked: (option, value) pairs.

    Raises:
        InvalidInput: a malformed scope.
        click.ClickException: the project is not a folder.
    """
    scope = one_scope(ctx, "the server's current scope")
    project = given_project(ctx)
    pinned: list[tuple[str, str]] = []
    if scope is not None:
        pinned.append(("scope", scope))
    if project is not None and "${" in project:
        # A client's variable, for the server to expand or fall through from.
        pinned.append(("project", project))
    elif project is not None:
        folder = Path(project).expanduser()
        if not folder.is_dir():
            raise click.ClickException(
                f"--project {project} is not a folder; give the project's folder"
            )
        pinned.append(("project", str(folder.resolve())))
    return pinned


def server_command(
    ctx: click.Context, scope_args: list[str] | None = None
) -> tuple[str, list[str]]:
    """The absolute command that starts this install's MCP server, with its arguments.

    ``scope_args`` come before ``--store``.
    """
    script_name = "prime-memory-mcp.exe" if os.name == "nt" else "prime-memory-mcp"
    script = Path(sys.executable).parent / script_name
    if script.is_file():
        command, args = str(script), []
    else:
        command, args = sys.executable, ["-m", "prime_memory_folding.mcp.server"]
    chosen = store_path(ctx)
    if chosen is None and (
        os.environ.get("PRIME_MEMORY_STORE", "").strip() or os.environ.get("PRIME_MEMORY_HOME")
    ):
        chosen = chosen_store(ctx)
    args += scope_args or []
    if chosen is not None and is_url(chosen):
        kept = without_password(chosen)
        if kept != chosen:
            click.echo(
                "The snippet leaves the database password out; keep it in ~/.pgpass or "
                "PGPASSWORD where the server runs.",
                err=True,
            )
        args += ["--store", kept]
    elif chosen is not None:
        pinned = Path(chosen).expanduser().resolve()
        if str(chosen) != ":memory:" and not pinned.exists():
            # The server creates a pinned store only when told to; one that exists needs nothing.
            args.append("--create")
        args += ["--store", str(pinned)]
    return command, args


_WHERE = {
    "cursor": "Add to ~/.cursor/mcp.json (every project) or .cursor/mcp.json (this project):",
    "vscode": "Add to .vscode/mcp.json in your workspace:",
    "jetbrains": (
        "In Settings > Tools > AI Assistant > Model Context Protocol (MCP), "
        "add a server 'As JSON' with:"
    ),
    "claude-desktop": (
        "Add to claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/; "
        "Windows: %APPDATA%\\Claude\\), then restart Claude Desktop:"
    ),
    "claude-code": "Run:",
}

#: The folder variable a client fills in with the open workspace, for ``--project``.
_WORKSPACE = {"vscode": "${workspaceFolder}", "cursor": "${workspaceFolder}"}

#: How the server finds each client's project, said once the snippet is printed.
_SCOPE_NOTE = {
    "claude-code": (
        "Scopes: Claude Code starts the server in the project and sets CLAUDE_PROJECT_DIR, "
        "so each project gets its own scope with nothing to add."
    ),
    "vscode": (
        "Scopes: VS Code fills in ${workspaceFolder}, so --project gives each workspace "
        "its own scope."
    ),
    "cursor": (
        "Scopes: Cursor starts servers of a global ~/.cursor/mcp.json in your home folder, "
        "not in the project; it fills in ${workspaceFolder}, so --project gives each "
        "workspace its own scope."
    ),
    "jetbrains": (
        "Scopes: JetBrains IDEs have no workspace variable for MCP arguments. Without "
        "--project the scope follows the folder the IDE starts the server in (global outside "
        "a git repository); for a project's own scope, add the server to that project with "
        "prime-memory ide-config jetbrains --project DIR."
    ),
    "claude-desktop": (
        "Scopes: Claude Desktop has no projects, so memories go to global and queries see "
        "global and your user scope. Pin one with prime-memory ide-config claude-desktop "
        "--scope user:NAME (personal) or --project DIR."
    ),
}


def client_scope_args(ctx: click.Context, client: str) -> tuple[list[str], str]:
    """The server arguments that make scope resolution work for ``client``, and why.

    A ``--scope`` or ``--project`` the user gave is pinned as it is; otherwise
    a client that starts servers outside the project gets ``--project`` with
    its workspace variable.
    """
    pinned = [part for option, value in pinned_scope(ctx) for part in (f"--{option}", value)]
    if pinned:
        what = " ".join(pinned)
        return pinned, f"Scopes: the snippet pins {what} for every session of {client}."
    workspace = _WORKSPACE.get(client)
    args = [] if workspace is None else ["--project", workspace]
    return args, _SCOPE_NOTE[client]


def ide_snippet(client: str, command: str, args: list[str]) -> str:
    """The configuration text for ``client``."""
    if client == "claude-code":
        import shlex

        return " ".join(
            shlex.quote(part)
            for part in ["claude", "mcp", "add", SERVER_NAME, "--", command, *args]
        )
    entry: dict[str, Any] = {"command": command, "args": args}
    if client == "vscode":
        document = {"servers": {SERVER_NAME: {"type": "stdio", **entry}}}
    else:
        document = {"mcpServers": {SERVER_NAME: entry}}
    return json.dumps(document, indent=2)


#: The HTTP header in which a client names its project (mcp_transport.PROJECT_HEADER).
PROJECT_HEADER = "X-Prime-Memory-Project"
#: The environment variable that holds the token, unless --token-env names another.
TOKEN_ENV = "PRIME_MEMORY_TOKEN"
#: How each client refers to an environment variable inside its configuration.
_ENV_REFERENCE = {
    "claude-code": "${%s}",
    "cursor": "${env:%s}",
    "vscode": "${env:%s}",
}
#: The stdio bridge for clients that start only local servers.
_BRIDGE = ["-y", "mcp-remote"]


def http_project(ctx: click.Context) -> str | None:
    """The project an HTTP snippet names in its header: --scope, --project, else the one here.

    None when none applies (the server then takes the token's default scope).
    """
    from ..core.scopes import project_scope
    from ._common import resolution

    scope = one_scope(ctx, "the project the snippet names")
    if scope is not None:
        return scope
    project = given_project(ctx)
    if project is not None:
        folder = Path(project).expanduser()
        if not folder.is_dir():
            raise click.ClickException(
                f"--project {project} is not a folder; give the project's folder"
            )
        return project_scope(folder)[0]
    found = resolution(ctx)
    return None if found.source == "default" else found.current


def http_snippet(client: str, url: str, token_env: str, project: str | None) -> tuple[str, str]:
    """The HTTP configuration text for ``client``, and how it carries the token."""
    if client in _ENV_REFERENCE:
        reference = _ENV_REFERENCE[client] % token_env
        headers = {"Authorization": f"Bearer {reference}"}
        if project is not None:
            headers[PROJECT_HEADER] = project
        how = (
            f"Token: {client} reads it from the environment variable {token_env} "
            f"({reference}); set it to the token prime-memory token add printed."
        )
        if client == "claude-code":
            import shlex

            words = ["claude", "mcp", "add", "--transport", "http", SERVER_NAME, url]
            for name, value in headers.items():
                words += ["--header", f"{name}: {value}"]
            return " ".join(shlex.quote(word) for word in words), how
        entry: dict[str, Any] = {"url": url, "headers": headers}
        if client == "vscode":
            return json.dumps({"servers": {SERVER_NAME: {"type": "http", **entry}}}, indent=2), how
        return json.dumps({"mcpServers": {SERVER_NAME: entry}}, indent=2), how
    # JetBrains IDEs and Claude Desktop start local servers: the mcp-remote bridge
    # forwards to the URL. Its header arguments avoid spaces, which some hosts split.
    header_env = f"{token_env}_HEADER"
    args = [*_BRIDGE, url, "--header", f"Authorization:${{{header_env}}}"]
    if project is not None:
        args += ["--header", f"{PROJECT_HEADER}:{project}"]
    bridge = {"command": "npx", "args": args, "env": {header_env: "Bearer <token>"}}
    how = (
        f"Token: {client} starts the mcp-remote bridge (Node 18+), which sends the header; "
        f"replace <token> in env.{header_env} with the token prime-memory token add printed, "
        "keeping 'Bearer ' before it."
    )
    return json.dumps({"mcpServers": {SERVER_NAME: bridge}}, indent=2), how


@click.command(name="ide-config")
@click.argument("client", type=click.Choice(CLIENTS))
@click.option(
    "--url",
    metavar="URL",
    help="Connect to this HTTP server (e.g. http://memory.lan:8765/mcp) instead of starting "
    "a local one; the snippet sends the Authorization and X-Prime-Memory-Project headers.",
)
@click.option(
    "--token-env",
    metavar="NAME",
    default=TOKEN_ENV,
    show_default=True,
    help="With --url: the environment variable that holds the bearer token.",
)
@scope_option("Pin this scope in the snippet, for every project.")
@project_option
@store_option
@click.pass_context
@examples(
    "prime-memory ide-config claude-code",
    "prime-memory ide-config vscode > .vscode/mcp.json",
    "prime-memory --store ~/work/team.db ide-config cursor",
    "prime-memory ide-config jetbrains --project ~/code/api",
    "prime-memory ide-config claude-desktop --scope user:alice",
    "prime-memory ide-config cursor --url http://memory.lan:8765/mcp --token-env MEMORY_TOKEN",
)
def ide_config(ctx: click.Context, client: str, url: str | None, token_env: str) -> None:
    """Print the snippet that connects CLIENT to this install's MCP server.

    The snippet carries what the server needs to find the current project:
    nothing for Claude Code, which starts it in the project; --project
    ${workspaceFolder} for VS Code and Cursor. JetBrains IDEs and Claude
    Desktop have no such variable: pin --project DIR or --scope SCOPE.

    With --url, the snippet connects to a shared HTTP server instead: it
    sends the token from the environment variable --token-env names, and
    names the project (--scope, --project, else the git project here) in
    the X-Prime-Memory-Project header.

    The snippet goes to standard output, and where to put it and how the
    scope is found to standard error, so it can be redirected into a file
    as it is.
    """
    if url is not None:
        if not url.startswith(("http://", "https://")):
            raise click.UsageError(f"--url {url!r} is not an http:// or https:// URL")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token_env):
            raise click.UsageError(f"--token-env {token_env!r} is not an environment variable name")
        project = http_project(ctx)
        text, how = http_snippet(client, url, token_env, project)
        click.echo(_WHERE[client], err=True)
        click.echo(text)
        click.echo(how, err=True)
        click.echo(
            f"Scopes: the header names {project}."
            if project is not None
            else "Scopes: no project header; the server uses the token's default scope.",
            err=True,
        )
        return
    scope_args, note = client_scope_args(ctx, client)
    command, args = server_command(ctx, scope_args)
    click.echo(_WHERE[client], err=True)
    click.echo(ide_snippet(client, command, args))
    click.echo(note, err=True)


# -- demo ---------------------------------------------------------------------------


def demo_memories() -> list[dict[str, Any]]:
    """The bundled example memories."""
    from importlib import resources

    text = (resources.files("prime_memory_folding") / "data" / "demo_memories.json").read_text(
        encoding="utf-8"
    )
    memories: list[dict[str, Any]] = json.loads(text)["memories"]
    return memories


def _demo_store_option(fn: F) -> F:
    return store_option(fn, "Create the demo store at this new path and keep it.")


@click.command()
@click.option(
    "--keep",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the demo store as memory.db in this new folder.",
)
@_demo_store_option
@click.pass_context
@examples(
    "prime-memory demo",
    "prime-memory demo --keep ./demo-store",
    "prime-memory demo --store ./demo.db && prime-memory --store ./demo.db stats",
)
def demo(ctx: click.Context, keep: Path | None) -> None:
    """Show the engine at work on a throw-away store of example IDE memories.

    Without --store or --keep the demo store is temporary and deleted at the
    end. With --store PATH (or --keep DIR) the demo store is created at that
    new path and kept, to explore afterwards; the demo never writes into an
    existing store, so your own memories are never touched. It uses the
    built-in embedder, works offline and takes a few seconds.
    """
    from ..engine.facade import MemoryEngine
    from ._common import clock_of

    chosen = store_path(ctx)
    if chosen is not None and keep is not None:
        raise click.UsageError("give --store or --keep, not both")
    if chosen is not None and is_url(chosen):
        raise click.ClickException(
            f"the demo creates a new store file; {shown_store(chosen)} is a PostgreSQL "
            "database. Give a new file path, or leave out --store for a throw-away store"
        )
    kept = Path(chosen).expanduser() if chosen is not None else None
    if keep is not None:
        kept = keep / "memory.db"
    if kept is not None and kept.exists():
        raise click.ClickException(
            f"{kept} already exists; the demo only creates a new store. "
            "Give a new path, or leave out --store and --keep for a throw-away one"
        )
    start = clock_of(ctx)()
    moment = [start]
    out = console()
    with tempfile.TemporaryDirectory(prefix="prime-memory-demo-") as scratch:
        path = kept if kept is not None else Path(scratch) / "memory.db"
        with MemoryEngine(path, clock=lambda: moment[0], embedder="builtin") as engine:
            _demo(engine, moment, start, out)
        if kept is not None:
            out.print(f"\nThe demo store is kept at {path}", markup=False)


def store_demo(engine: Any, memories: list[dict[str, Any]], set_clock: Any, start: float) -> None:
    """Store the demo's memories, each ``age_days`` before ``start`` by the engine's
    clock (``set_clock(at)`` sets it), then set the clock back to ``start``."""
    for item in memories:
        set_clock(start - float(item.get("age_days", 0)) * 86_400)
        engine.store(
            item["content"],
            domain=item["domain"],
            subdomain=item.get("subdomain", "general"),
            tags=item.get("tags", ()),
            importance=item.get("importance", 0.5),
        )
    set_clock(start)


def _demo(engine: Any, moment: list[float], start: float, out: Any) -> None:
    from rich.rule import Rule

    from .records import _record_table

    memories = demo_memories()
    store_demo(engine, memories, lambda at: moment.__setitem__(0, at), start)
    summary = engine.stats()
    out.print(Rule("1. store"))
    out.print(f"Stored {summary.records} memories an IDE agent kept about a project:")
    out.print("  " + ", ".join(f"{d} {n}" for d, n in summary.domains.items()), markup=False)
    out.print(
        f"Each got a 128-bit address built from primes, e.g. domain 'decision' = prime "
        f"{summary.registries['domain']['decision']}, tag 'architecture' = prime "
        f"{summary.registries['tag']['architecture']}."
    )
    out.print(Rule("2. query by labels"))
    out.print("$ prime-memory query -d decision -t architecture", markup=False)
    hits = engine.query(domain="decision", tags=["architecture"], limit=5)
    out.print(_record_table([h.record for h in hits], compact=True))
    out.print("$ prime-memory query --any-tag bug --any-tag open --exclude-tag done", markup=False)
    hits = engine.query(any_tags=["bug", "open"], exclude_tags=["done"], limit=5)
    out.print(_record_table([h.record for h in hits], compact=True))
    out.print(Rule("3. query by text"))
    out.print('$ prime-memory query "how do I run the tests"', markup=False)
    try:
        hits = engine.query(text="how do I run the tests", limit=3)
    except PrimeMemoryError as exc:
        out.print(f"(skipped: {exc})", markup=False)
    else:
        out.print(_record_table([h.record for h in hits], compact=True))
    out.print(Rule("4. fold"))
    from .maintenance import show_fold

    contents = {h.record.record_id: h.record.content for h in engine.query(limit=1000)}
    out.print("$ prime-memory fold --dry-run", markup=False)
    preview = engine.fold(dry_run=True)
    show_fold(preview, ids=False)
    for rid in preview.pruned_ids[:8]:
        out.print(f"  would prune: {contents.get(rid, rid)}", markup=False)
    for members in list(preview.folded_from.values())[:4]:
        out.print("  would fold together:", markup=False)
        for rid in members:
            out.print(f"    {contents.get(rid, rid)}", markup=False)
    out.print("$ prime-memory fold", markup=False)
    report = engine.fold(dry_run=False)
    after = engine.stats()
    out.print(
        f"{after.records} memories remain: {report.folded} were folded into "
        f"{report.created} and {report.pruned} pruned; all {after.archived} wait in the "
        "archive (prime-memory unfold / restore bring them back).",
        markup=False,
    )
    out.print(Rule())
    out.print(
        'Next: prime-memory store "..." -d decision -t architecture; '
        "prime-memory ide-config claude-code",
        markup=False,
    )
