"""What every command shares: the store option, opening the engine, output and errors."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..errors import InvalidInput, PrimeMemoryError
from ..packs import parse_timestamp

if TYPE_CHECKING:
    from ..engine import MemoryEngine

F = TypeVar("F", bound=Callable[..., Any])

STORE_HELP = (
    "The store file (default: $PRIME_MEMORY_HOME/memory.db, else the per-user data folder)."
)


class Group(click.Group):
    """A group that turns engine errors into one-line messages, never tracebacks."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PrimeMemoryError as exc:
            raise click.ClickException(str(exc)) from None
        except BrokenPipeError:
            # `prime-memory export | head` closed the pipe: nothing left to say.
            raise SystemExit(0) from None


def _remember_store(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta["prime_memory.store"] = value


def store_option(fn: F) -> F:
    """Accept ``--store`` after the command name too (``prime-memory query --store x``)."""
    return click.option(
        "--store",
        "store",
        metavar="PATH",
        envvar=None,
        expose_value=False,
        is_eager=True,
        callback=_remember_store,
        help=STORE_HELP,
    )(fn)


def store_path(ctx: click.Context) -> str | None:
    """The store the user chose, or None for the default."""
    value = ctx.meta.get("prime_memory.store")
    return None if value is None else str(value)


@contextlib.contextmanager
def open_engine(ctx: click.Context, embedder: str | None = None) -> Iterator[MemoryEngine]:
    """Open the chosen store; tests may inject ``clock`` through ``obj``."""
    from ..engine import MemoryEngine

    obj = ctx.find_root().obj or {}
    with MemoryEngine(store_path(ctx), clock=obj.get("clock"), embedder=embedder) as engine:
        yield engine


@contextlib.contextmanager
def working(label: str) -> Iterator[None]:
    """A spinner on a terminal (stderr) for work that cannot count its steps."""
    err = console(stderr=True)
    if not err.is_terminal:
        yield
        return
    with err.status(label):
        yield


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


def jsonable(value: Any) -> Any:
    """Dataclasses, tuples and big integers as JSON-friendly values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**53:
        return str(value)
    if hasattr(value, "value") and hasattr(value, "name") and not isinstance(value, type):
        return jsonable(value.value)
    return value


def echo_json(value: Any) -> None:
    click.echo(json.dumps(jsonable(value), indent=2, ensure_ascii=False))


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


@contextlib.contextmanager
def progress(label: str) -> Iterator[Callable[[int, int | None], None] | None]:
    """A rich progress bar on a terminal (stderr); None, and silence, when piped."""
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
        task = bar.add_task(label, total=None)

        def advance(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_when(value: str | None, now: float, option: str) -> float | None:
    """A time option: Unix seconds, an ISO 8601 date or date-time, or an age like ``7d``."""
    if value is None:
        return None
    match = _RELATIVE.match(value.strip().lower())
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        return parse_timestamp(float(value) if _is_number(value) else value, option)
    except InvalidInput:
        raise click.ClickException(
            f"{option} {value!r} is not a time; give an ISO date (2024-05-01), Unix seconds, "
            "or an age such as 7d, 12h or 30m"
        ) from None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


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


def short_time(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def env_store_home() -> str | None:
    return os.environ.get("PRIME_MEMORY_HOME") or None


def needs(engine: Any, feature: str, what: str) -> Callable[..., Any]:
    """The engine's method ``feature``, or a one-line error that it is not in this install."""
    method = getattr(engine, feature, None)
    if method is None:
        raise click.ClickException(
            f"{what} is not available in this version of prime-memory-folding"
        )
    return functools.partial(method)
