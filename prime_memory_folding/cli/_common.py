"""What every command shares: the store option, opening the engine, output and errors."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..core import when
from ..core.filters import Filters
from ..core.records import Record
from ..errors import InvalidInput, PrimeMemoryError

if TYPE_CHECKING:
    from ..core.scopes import ScopeResolution
    from ..engine.facade import MemoryEngine

F = TypeVar("F", bound=Callable[..., Any])

# A PostgreSQL store that cannot be reached fails the command with one line of
# its own; the connection pool's retry warnings would only repeat it.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())

STORE_HELP = (
    "The store: a file, or a PostgreSQL database as postgresql://USER@HOST:PORT/DB "
    "(default: $PRIME_MEMORY_STORE, else $PRIME_MEMORY_HOME/memory.db, else the per-user "
    "data folder)."
)
SCOPE_HELP = (
    "A scope: global, user:NAME or project:ID. Where store and import write; the only "
    "scopes query and export read (repeat for several). Default: resolved from "
    "$PRIME_MEMORY_SCOPE, --project, the git repository here, ... (see whoami)."
)
PROJECT_HELP = "The project folder that names the current scope (its git origin, else its path)."


#: Click 8.2+ raises this for a group run without arguments; older versions print help.
_NO_ARGS: type[click.UsageError] | None = getattr(click.exceptions, "NoArgsIsHelpError", None)


class Group(click.Group):
    """A group whose errors are one line on standard error, never a usage block or traceback.

    Engine errors and usage errors say what was wrong in one line; anything
    unexpected says its type and message, with the traceback only when
    ``PRIME_MEMORY_DEBUG`` is set.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(
                args,
                prog_name,
                complete_var,
                False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
        try:
            result = super().main(
                args,
                prog_name,
                complete_var,
                False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
        except click.UsageError as exc:
            if _NO_ARGS is not None and isinstance(exc, _NO_ARGS):
                exc.show()  # the help itself, for a bare `prime-memory`
                sys.exit(exc.exit_code)
            command = exc.ctx.command_path if exc.ctx is not None else (prog_name or "prime-memory")
            message = " ".join(exc.format_message().split())
            click.echo(f"Error: {message} (see {command} --help)", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        # --help, --version and ctx.exit(n) come back as their exit status.
        sys.exit(result if isinstance(result, int) and not isinstance(result, bool) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PrimeMemoryError as exc:
            raise click.ClickException(str(exc)) from None
        except BrokenPipeError:
            # `prime-memory export | head` closed the pipe: nothing left to say.
            raise SystemExit(0) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort, EOFError):
            raise
        except Exception as exc:
            if os.environ.get("PRIME_MEMORY_DEBUG"):
                raise
            message = " ".join(str(exc).split()) or "(no message)"
            raise click.ClickException(
                f"{type(exc).__name__}: {message} (set PRIME_MEMORY_DEBUG=1 for the traceback)"
            ) from None


def cited_place(state: Any) -> str:
    """Where a checked citation's code is now: ``src/a.py:72-97``, or the path alone."""
    return state.path if state.lines is None else f"{state.path}:{state.lines}"


def _remember_store(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta["prime_memory.store"] = value


def store_option(fn: F, help_text: str = STORE_HELP) -> F:
    """Accept ``--store`` after the command name too (``prime-memory query --store x``)."""
    return click.option(
        "--store",
        "store",
        metavar="PATH|URL",
        envvar=None,
        expose_value=False,
        is_eager=True,
        callback=_remember_store,
        help=help_text,
    )(fn)


def _remember_scopes(
    ctx: click.Context, _param: click.Parameter, value: Sequence[str] | str | None
) -> None:
    if value is None:
        return
    values = [value] if isinstance(value, str) else list(value)
    if values:
        ctx.meta.setdefault("prime_memory.scopes", []).extend(values)


def _remember_project(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta["prime_memory.project"] = value


def scope_option(help_text: str = SCOPE_HELP) -> Callable[[F], F]:
    """``--scope``, accepted before or after the command name like ``--store``.

    Every ``--scope`` given, wherever it stands, is gathered in one list
    (:func:`given_scopes`); each command says what it means for it, and
    those that take one refuse several (:func:`one_scope`).
    """

    def attach(fn: F) -> F:
        return click.option(
            "--scope",
            "scope",
            metavar="SCOPE",
            multiple=True,
            expose_value=False,
            is_eager=True,
            callback=_remember_scopes,
            help=help_text,
        )(fn)

    return attach


def project_option(fn: F) -> F:
    """``--project DIR``: the folder that names the current scope, before or after the command."""
    return click.option(
        "--project",
        "project",
        metavar="DIR",
        expose_value=False,
        is_eager=True,
        callback=_remember_project,
        help=PROJECT_HELP,
    )(fn)


#: The options that gate a read, by the Filters field each fills: its flags, and how
#: click reads it.
_GATES: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "domain": (("-d", "--domain"), {}),
    "subdomain": (("-s", "--subdomain"), {}),
    "tags": (("-t", "--tag"), {"multiple": True}),
    "any_tags": (("--any-tag",), {"multiple": True}),
    "exclude_tags": (("--exclude-tag",), {"multiple": True}),
    "min_strength": (("--min-strength",), {"type": float, "default": 0.0, "show_default": True}),
    "since": (("--since",), {}),
    "until": (("--until",), {}),
}
_GATES_KEY = "prime_memory.gates"


def _remember_gate(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    if param.name is not None:
        ctx.meta.setdefault(_GATES_KEY, {})[param.name] = value


def gate_options(**help_texts: str) -> Callable[[F], F]:
    """The options that gate a read, one for each keyword, with that keyword's help text.

    Each keyword names a :class:`~prime_memory_folding.core.filters.Filters`
    field (``domain``, ``subdomain``, ``tags``, ``any_tags``, ``exclude_tags``,
    ``min_strength``, ``since``, ``until``), and the options come in that order.
    Their values reach the command through :func:`read_filters` and
    :func:`gates_given`, not as parameters.

    Raises:
        TypeError: a keyword names no gate.
    """
    unknown = sorted(help_texts.keys() - _GATES.keys())
    if unknown:
        raise TypeError(f"no gate option for {', '.join(unknown)}; gates: {', '.join(_GATES)}")

    def attach(fn: F) -> F:
        for name in reversed([name for name in _GATES if name in help_texts]):
            flags, settings = _GATES[name]
            fn = click.option(
                *flags,
                name,
                expose_value=False,
                callback=_remember_gate,
                help=help_texts[name],
                **settings,
            )(fn)
        return fn

    return attach


def gates_given(ctx: click.Context) -> bool:
    """Whether any gate option (:func:`gate_options`) was given."""
    return any(ctx.meta.get(_GATES_KEY, {}).values())


def read_filters(ctx: click.Context, scopes: Sequence[str] | None) -> Filters:
    """One read's gates: the gate options given (:func:`gate_options`) and ``scopes``.

    ``--since`` and ``--until`` are read against the command's clock, so an age
    such as ``7d`` counts back from when the command runs.

    Raises:
        click.ClickException: ``--since`` or ``--until`` is not a time; the
            message names the option.
        InvalidInput: another gate is bad; the message names it.
    """
    gates = dict(ctx.meta.get(_GATES_KEY, {}))
    now = clock_of(ctx)()
    for name in ("since", "until"):
        gates[name] = parse_when(gates.get(name), now, f"--{name}")
    return Filters(**gates, scopes=scopes)


def given_scopes(ctx: click.Context) -> tuple[str, ...]:
    """Every ``--scope`` given, before and after the command name, in order."""
    return tuple(ctx.meta.get("prime_memory.scopes", ()))


def given_project(ctx: click.Context) -> str | None:
    value = ctx.meta.get("prime_memory.project")
    return None if value is None else str(value)


def one_scope(ctx: click.Context, what: str) -> str | None:
    """The one ``--scope`` a command takes, normalised, or None.

    Raises:
        click.UsageError: several were given.
        InvalidInput: it is malformed (``*`` included: it names no one scope).
    """
    from ..core.scopes import normalise_scope

    given = given_scopes(ctx)
    if len(given) > 1:
        raise click.UsageError(f"give one --scope ({what}); got {len(given)}: {', '.join(given)}")
    return normalise_scope(given[0]) if given else None


def resolution(ctx: click.Context) -> ScopeResolution:
    """The current scope for this command: one ``--scope``, else the documented order.

    Several ``--scope`` (a read of several scopes) or ``*`` leave the current
    scope to the rest of the order.

    Raises:
        InvalidInput: a malformed scope, or a ``--project`` that is not a folder.
    """
    from ..core import scopes

    given = given_scopes(ctx)
    explicit = given[0] if len(given) == 1 and given[0].strip() != scopes.ALL else None
    return scopes.resolve(explicit, project=given_project(ctx))


def read_scopes(ctx: click.Context, all_scopes: bool) -> list[str] | None:
    """What a read sees: the ``--scope`` list, ``["*"]`` for ``--all-scopes``, else None.

    Raises:
        click.UsageError: both ``--scope`` and ``--all-scopes``.
    """
    given = given_scopes(ctx)
    if all_scopes and given:
        raise click.UsageError("give --scope or --all-scopes, not both")
    if all_scopes:
        return ["*"]
    return list(given) if given else None


def store_path(ctx: click.Context) -> str | None:
    """The store the user chose with ``--store``, or None for the default."""
    value = ctx.meta.get("prime_memory.store")
    return None if value is None else str(value)


def is_url(store: str) -> bool:
    """Whether a store location names a PostgreSQL database rather than a file."""
    from ..storage import is_postgres_url

    return is_postgres_url(store)


def chosen_store(ctx: click.Context) -> str:
    """The store a command works on: ``--store``, else ``$PRIME_MEMORY_STORE``, else the file.

    A file path comes back with ``~`` expanded; a ``postgresql://`` URL as given.
    """
    from ..engine.facade import default_store

    path = store_path(ctx)
    if path is None:
        path = default_store()
    if is_url(path) or path == ":memory:":
        return path
    return str(Path(path).expanduser())


def shown_store(store: str) -> str:
    """A store location as output shows it: a URL without its password."""
    from ..storage.copy import describe

    return describe(store)


def without_password(url: str) -> str:
    """A PostgreSQL URL with its passwords left out (libpq then reads ~/.pgpass or PGPASSWORD).

    Both forms go: ``user:pw@host`` and the ``password`` (and ``sslpassword``) parameters.
    """
    from urllib.parse import unquote, urlsplit, urlunsplit

    from ..storage.pg_connect import SECRET_PARAMETERS

    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{host}" if user else host
    query = "&".join(
        item
        for item in parts.query.split("&")
        if unquote(item.partition("=")[0]).strip().lower() not in SECRET_PARAMETERS
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def store_file(ctx: click.Context, what: str) -> Path:
    """The chosen store as a file, for commands that only make sense for one.

    Raises:
        click.ClickException: the store is a PostgreSQL database.
    """
    store = chosen_store(ctx)
    if is_url(store):
        raise click.ClickException(
            f"{what} works on a store file; {shown_store(store)} is a PostgreSQL database"
        )
    return Path(store)


#: Set to 1 to let commands create a missing store outside the default location.
CREATE_ENV = "PRIME_MEMORY_CREATE"
CREATE_HELP = (
    "Let a command that adds memories (store, import, token add) create a missing store "
    "file at --store or $PRIME_MEMORY_STORE; without it only the default location is "
    "created (also: PRIME_MEMORY_CREATE=1)."
)


def _remember_create(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.meta["prime_memory.create"] = True


def create_option(fn: F) -> F:
    """``--create``: a command that adds memories may create a missing store file anywhere."""
    return click.option(
        "--create",
        "create",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_remember_create,
        help=CREATE_HELP,
    )(fn)


def creation_asked(ctx: click.Context) -> bool:
    """Whether ``--create`` was given or ``PRIME_MEMORY_CREATE`` is set to 1 (or true, yes)."""
    if ctx.meta.get("prime_memory.create"):
        return True
    return os.environ.get(CREATE_ENV, "").strip().lower() in {"1", "true", "yes"}


def is_default_location(target: str) -> bool:
    """Whether a store file is the default one: ``memory.db`` in the data folder."""
    from ..core.places import default_store_path

    def plain(path: Path) -> Path:
        return Path(os.path.abspath(path.expanduser()))

    return plain(Path(target)) == plain(default_store_path())


def missing_store(target: str, *, adds: bool, asked: bool) -> str | None:
    """Why a command may not open the store file ``target``, in one line; None if it may.

    A file that exists opens. A missing one is created only by a command that
    ``adds`` memories, and only at the default location or when creation was
    ``asked`` for (``--create``, ``PRIME_MEMORY_CREATE=1``): a mistyped path
    then fails instead of leaving an empty store, and its folders, behind.
    """
    if Path(target).exists():
        return None
    if adds and (asked or is_default_location(target)):
        return None
    if adds:
        return (
            f"no store at {target}; to create one there, add --create "
            "(prime-memory --create --store PATH ...) or set PRIME_MEMORY_CREATE=1, "
            "else check --store / PRIME_MEMORY_STORE"
        )
    how = "prime-memory store" if is_default_location(target) else "prime-memory store and --create"
    return (
        f"no store at {target} (create one with {how}, "
        "or check --store / PRIME_MEMORY_STORE / PRIME_MEMORY_HOME)"
    )


@contextlib.contextmanager
def open_engine(
    ctx: click.Context, embedder: str | None = None, *, create: bool = False
) -> Iterator[MemoryEngine]:
    """Open the chosen store in the current scope; tests may inject ``clock`` through ``obj``.

    The scope is resolved (and a malformed one refused) before the store is
    opened, so a bad ``--scope`` leaves no store behind.

    Only commands that add memories ``create`` a missing store file, and
    only at the default location or with ``--create`` (or
    ``PRIME_MEMORY_CREATE=1``); otherwise the command stops with one line, so
    a mistyped ``--store`` does not leave an empty store behind
    (:func:`missing_store`). A PostgreSQL database is never created: it must
    exist, and its tables are made on first use.
    """
    from ..engine.facade import MemoryEngine

    target = chosen_store(ctx)
    if not is_url(target) and target != ":memory:":
        problem = missing_store(target, adds=create, asked=creation_asked(ctx))
        if problem is not None:
            raise click.ClickException(problem)
    scope = resolution(ctx)
    obj = ctx.find_root().obj or {}
    with MemoryEngine(target, scope=scope, clock=obj.get("clock"), embedder=embedder) as engine:
        yield engine


def clock_of(ctx: click.Context) -> Callable[[], float]:
    obj = ctx.find_root().obj or {}
    clock: Callable[[], float] = obj.get("clock") or time.time
    return clock


def examples(*lines: str) -> Callable[[F], F]:
    """Append an Examples block to a command's help."""

    def attach(fn: F) -> F:
        doc = inspect.cleandoc(fn.__doc__ or "")
        block = "\n".join(f"    {line}" for line in lines)
        fn.__doc__ = f"{doc}\n\n\b\nExamples:\n{block}\n"
        return fn

    return attach


def jsonable(value: Any, *, vectors: bool = True) -> Any:
    """Dataclasses, sequences and big integers as JSON-friendly values.

    With ``vectors`` False, records leave out their ``vector``.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: jsonable(getattr(value, f.name), vectors=vectors)
            for f in dataclasses.fields(value)
            if vectors or f.name != "vector" or not isinstance(value, Record)
        }
    if isinstance(value, dict):
        return {str(k): jsonable(v, vectors=vectors) for k, v in value.items()}
    if isinstance(value, (set, frozenset)) or (
        isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray))
    ):
        return [jsonable(v, vectors=vectors) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**53:
        return str(value)
    if hasattr(value, "value") and hasattr(value, "name") and not isinstance(value, type):
        return jsonable(value.value, vectors=vectors)
    return value


def echo_json(value: Any, *, vectors: bool = True) -> None:
    """Print ``value`` as indented JSON; ``vectors`` False leaves records' vectors out."""
    click.echo(json.dumps(jsonable(value, vectors=vectors), indent=2, ensure_ascii=False))


def vectors_option(fn: F) -> F:
    """``--vectors``: put records' vectors in the JSON output (they are left out by default)."""
    return click.option(
        "--vectors",
        "vectors",
        is_flag=True,
        help="With --json, include each record's vector (left out by default).",
    )(fn)


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


@contextlib.contextmanager
def _bar(label: str) -> Iterator[tuple[Any, Any] | None]:
    """A transient rich progress bar on a terminal (stderr), else None."""
    err = console(stderr=True)
    if not err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err,
        transient=True,
    ) as bar:
        yield bar, bar.add_task(label, total=None)


@contextlib.contextmanager
def progress(label: str) -> Iterator[Callable[[int, int | None], None] | None]:
    """A progress bar on a terminal (stderr); None, and silence, when piped."""
    with _bar(label) as shown:
        if shown is None:
            yield None
            return
        bar, task = shown

        def advance(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


@contextlib.contextmanager
def phases(label: str) -> Iterator[Callable[[str, int, int], None] | None]:
    """A progress bar over named steps, ``report(step, done, total)``; None when piped."""
    with _bar(label) as shown:
        if shown is None:
            yield None
            return
        bar, task = shown

        def report(step: str, done: int, total: int) -> None:
            bar.update(task, description=f"{label}: {step}", completed=done, total=total)

        yield report


def parse_when(value: str | None, now: float, option: str) -> float | None:
    """A time option, as :func:`~prime_memory_folding.core.when.parse_when` reads it;
    None if absent."""
    if value is None:
        return None
    try:
        return when.parse_when(value, now, option)
    except InvalidInput as exc:
        raise click.ClickException(str(exc)) from None


def parse_metadata(value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        loaded = json.loads(value)
    except json.JSONDecodeError as exc:
        raise click.ClickException(f"--metadata is not valid JSON ({exc.msg})") from None
    if not isinstance(loaded, dict):
        raise click.ClickException("--metadata must be a JSON object, e.g. '{\"ticket\": 42}'")
    return loaded


def count_of(number: int, noun: str, plural: str | None = None) -> str:
    """``1 record``, ``3 records``; ``plural`` for nouns that do not just add an s."""
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {plural or noun + 's'}"


def short_time(stamp: float) -> str:
    """A local date and time to the minute; the raw seconds when no calendar holds them."""
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))
    except (OverflowError, OSError, ValueError):
        return f"{stamp:g} (Unix seconds, out of range)"


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def stdin_is_terminal() -> bool:
    """Whether someone can answer a question on standard input."""
    return sys.stdin.isatty()


def confirm_or_refuse(plan: str, listing: list[str], nothing: str, hint: str) -> None:
    """Ask before ``plan`` (e.g. ``forget 3 records``); refuse when no one can answer.

    Args:
        plan: what would happen, starting with a verb.
        listing: lines that show what it would touch, printed before the question.
        nothing: what is said when the answer is no, e.g. ``nothing was forgotten``.
        hint: what to do instead without a terminal, e.g. ``add --yes``.

    Raises:
        click.ClickException: standard input is not a terminal.
        click.exceptions.Exit: the answer was no (status 1).
    """
    if not stdin_is_terminal():
        raise click.ClickException(
            f"this would {plan}; standard input is not a terminal to confirm on, so "
            f"{nothing}: {hint}"
        )
    for line in listing:
        click.echo(line, err=True)
    if not click.confirm(f"{plan[0].upper()}{plan[1:]}?", default=False, err=True):
        click.echo(nothing, err=True)
        raise click.exceptions.Exit(1)
