"""The harness the benchmark scripts run on: options, timing, checks and output.

A script holds its method (its data, the systems it compares, what it checks
and what it prints); this module holds what they all do alike:

- options and progress: :func:`parser` makes an argument parser with the
  options every script takes, ``--json OUT`` and ``--quiet`` (and, on request,
  the hidden ``--inject-mismatch`` with which the smoke tests prove that a
  check fails); :class:`Log` prints progress on stderr unless ``--quiet``;
- the machine: :func:`conditions` reads the load average and times a fixed
  pure-Python loop, whose time shows whether the host ran at the same speed
  during two runs; :func:`conditions_line` says both;
- timing: :func:`timed` times one call, :func:`timed_calls` a run of them;
  side by side, :func:`alternate` times several systems on the same
  questions, rotating which goes first for every question and round, with the
  garbage collector paused; :func:`in_turns` runs calls that measure
  themselves (process start-ups, say) in rotating turns; :func:`medians`,
  :func:`median_of_medians`, :func:`pooled_medians`, :func:`ratios` and
  :func:`percentile` summarise what they measured;
- checks: :func:`disagreements` lists the answers that differ from the
  expected ones, and :func:`check` prints a check's outcome before any timing
  is reported; :func:`conclude` ends a script whose result is a check;
- output: :func:`fmt_ms`, :func:`fmt_ms_ratio`, :func:`times` and
  :func:`verdict` format figures; a :data:`Table` (header and rows) prints as
  text in a script (:func:`text_table`) and as Markdown in ``run_all.py``'s
  report (:func:`markdown_table`), several sizes' as one (:func:`stacked`);
  :func:`write_json` writes the results;
- other scripts: :func:`run_script` runs one with ``--json`` and returns what
  it wrote, or why it failed.
"""

from __future__ import annotations

import argparse
import gc
import json as json_
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from _shared import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"
#: What a script prints instead of timings when the systems it compares disagree.
NO_TIMINGS = "no timings reported: the systems compared disagree"

Q = TypeVar("Q")
T = TypeVar("T")
Samples = dict[str, list[list[float]]]
#: A table as its header and rows of cells, to print as text or Markdown.
Table = tuple[list[str], list[list[str]]]


# -- options and progress -------------------------------------------------------------


def parser(
    doc: str, *, inject: bool = False, json: bool = True, **numbers: float | tuple[float, str]
) -> argparse.ArgumentParser:
    """An argument parser described by ``doc``'s first paragraph, with ``--json`` and ``--quiet``.

    Each keyword adds a number option of its default's type: ``rounds=5`` adds
    ``--rounds`` (an int, 5 unless given), ``rounds=(5, "timed rounds")`` adds
    its help too. ``inject`` adds the hidden ``--inject-mismatch`` flag: the
    script then makes one system answer wrongly, so that a test can see its
    check fail. ``json`` False leaves ``--json`` out, for a script that writes
    its results elsewhere.
    """
    made = argparse.ArgumentParser(description=" ".join(doc.split("\n\n")[0].split()))
    for name, spec in numbers.items():
        default, text = spec if isinstance(spec, tuple) else (spec, None)
        flag = "--" + name.replace("_", "-")
        made.add_argument(flag, type=type(default), default=default, help=text)
    if json:
        made.add_argument("--json", type=Path, help="also write the results to this JSON file")
    made.add_argument("--quiet", action="store_true", help="no progress on stderr")
    if inject:
        made.add_argument("--inject-mismatch", action="store_true", help=argparse.SUPPRESS)
    return made


def options(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The named options' values, to pass on as keywords: ``run(**options(args, "rounds"))``."""
    return {name: getattr(args, name) for name in names}


def at_least(parser: argparse.ArgumentParser, args: argparse.Namespace, **least: int) -> None:
    """Exit with a usage error unless every named option is at least its given value."""
    low = [
        f"--{name.replace('_', '-')} must be at least {value}"
        for name, value in least.items()
        if getattr(args, name) < value
    ]
    if low:
        parser.error("; ".join(low))


class Log:
    """Progress on stderr, none when ``quiet``; ``stamped``: the time since the start first."""

    def __init__(self, quiet: bool = False, *, stamped: bool = False) -> None:
        self.quiet = quiet
        self.stamped = stamped
        self.started = time.perf_counter()

    def __call__(self, message: str) -> None:
        if self.quiet:
            return
        if self.stamped:
            elapsed = time.perf_counter() - self.started
            message = f"[{int(elapsed // 60):02d}:{elapsed % 60:04.1f}] {message}"
        print(message, file=sys.stderr, flush=True)


# -- the machine ----------------------------------------------------------------------


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def cpu_reference_ms() -> float:
    """Milliseconds for a fixed pure-Python loop (best of 3): how fast the host runs now.

    Shared machines change speed with their neighbours; the same loop before and
    after a run shows whether a run's absolute times compare with another's.
    """
    best = math.inf
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        for i in range(2_000_000):
            total += i
        best = min(best, time.perf_counter() - started)
    return round(best * 1e3, 1)


def conditions() -> dict[str, Any]:
    """The load average and the fixed loop's time, to keep beside a run's timings."""
    return {"load": load_average(), "cpu_reference_ms": cpu_reference_ms()}


def conditions_line(found: Mapping[str, Any]) -> str:
    """``load average 0.50 0.40 0.30 (2 cores), fixed loop 95.1 ms``."""
    load = found.get("load")
    shown = " ".join(f"{x:.2f}" for x in load) if load else "unknown"
    return (
        f"load average {shown} ({os.cpu_count()} cores), fixed loop {found['cpu_reference_ms']} ms"
    )


# -- timing ---------------------------------------------------------------------------


def timed(call: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[float, T]:
    """``call(*args, **kwargs)``: the seconds it took, and what it returned."""
    started = time.perf_counter()
    found = call(*args, **kwargs)
    return time.perf_counter() - started, found


def timed_calls(
    call: Callable[[int], object],
    count: int,
    after: Callable[[list[float]], None] = lambda _: None,
) -> list[float]:
    """Seconds of each of ``count`` calls ``call(i)``, one after the other; ``after`` sees
    the times so far after each (to report progress, say)."""
    seconds: list[float] = []
    for i in range(count):
        started = time.perf_counter()
        call(i)
        seconds.append(time.perf_counter() - started)
        after(seconds)
    return seconds


def alternate(
    systems: Mapping[str, Callable[[Q], object]],
    questions: Sequence[Q],
    rounds: int = 1,
    *,
    best_of: int = 1,
    between: Sequence[Callable[[Q], object]] = (),
) -> Samples:
    """Seconds of every system's answer to every question, in every round.

    For each round and question the systems answer one after the other, in an
    order that rotates with both, so that none always goes first or right
    after the same other. The garbage collector is paused throughout. With
    ``best_of`` > 1 a sample is the fastest of that many back-to-back calls
    (the system's own data then fills the caches); with ``between``, one of
    those calls (in turn, untimed) runs before every sample, to leave the
    caches as it does.

    Returns ``samples[system][question]``: one time per round.
    """
    names = list(systems)
    samples: Samples = {name: [[] for _ in questions] for name in names}
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        passed = 0
        for rnd in range(rounds):
            for qi, question in enumerate(questions):
                shift = (rnd + qi) % len(names)
                for name in names[shift:] + names[:shift]:
                    if between:
                        between[passed % len(between)](question)
                        passed += 1
                    run = systems[name]
                    best = math.inf
                    for _ in range(best_of):
                        started = time.perf_counter()
                        run(question)
                        best = min(best, time.perf_counter() - started)
                    samples[name][qi].append(best)
    finally:
        if was_enabled:
            gc.enable()
    return samples


def in_turns(calls: Mapping[str, Callable[[], T]], turns: int) -> dict[str, list[T]]:
    """What each call returns, ``turns`` times, the calls taking turns to go first.

    For calls that measure themselves, such as starting a process and reading
    its first answer: a host that drifts in speed then slows every call alike.
    """
    names = list(calls)
    found: dict[str, list[T]] = {name: [] for name in names}
    for turn in range(turns):
        shift = turn % len(names)
        for name in names[shift:] + names[:shift]:
            found[name].append(calls[name]())
    return found


def medians(samples: Samples) -> dict[str, list[float]]:
    """Each system's median over rounds, per question."""
    return {name: [statistics.median(s) for s in per_q] for name, per_q in samples.items()}


def median_of_medians(samples: Samples) -> dict[str, float]:
    """Each system's median over questions of its per-question medians."""
    return {name: statistics.median(values) for name, values in medians(samples).items()}


def pooled_medians(samples: Samples) -> dict[str, float]:
    """Each system's median over every sample, all questions and rounds together."""
    return {name: statistics.median(t for per_q in s for t in per_q) for name, s in samples.items()}


def ratios(values: Mapping[str, float], base: str) -> dict[str, float]:
    """Every value over ``values[base]`` (infinite when that is 0)."""
    under = values[base]
    return {name: (v / under if under > 0 else math.inf) for name, v in values.items()}


def percentile(values: Sequence[float], q: float) -> float:
    """The value below which a share ``q`` of ``values`` lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- checks ---------------------------------------------------------------------------


def disagreements(
    questions: Sequence[Q],
    systems: Mapping[str, Callable[[Q], T]],
    expected: Callable[[Q], T],
    differs: Callable[[int, Q, T, T], str],
) -> list[str]:
    """Every answer that differs from the expected one, as ``NAME disagrees WHY``.

    ``differs(i, question, answer, expected)`` says why the answer to the i-th
    question is wrong, beginning with where (``on query 3 ...``), or returns ''
    when it is right. Nothing is timed here: a check runs before any timing.
    """
    problems = []
    for i, question in enumerate(questions):
        wanted = expected(question)
        for name, run in systems.items():
            why = differs(i, question, run(question), wanted)
            if why:
                problems.append(f"{name} disagrees {why}")
    return problems


def check(
    problems: Sequence[str],
    ok: str,
    *,
    failed: str = "agreement: FAILED",
    then: str = NO_TIMINGS,
    most: int = 20,
) -> bool:
    """Print a check's outcome; whether it passed.

    With no problems, prints ``ok``; otherwise ``failed`` with their number, the
    first ``most`` of them, and ``then``: what is not reported because of them.
    """
    if not problems:
        print(ok)
        return True
    print(f"{failed} - {len(problems)} problem(s):")
    for problem in problems[:most]:
        print(f"  {problem}")
    if len(problems) > most:
        print(f"  ... and {len(problems) - most} more")
    if then:
        print(then)
    return False


def conclude(report: dict[str, Any], json_path: Path | None, problems: Iterable[str] = ()) -> int:
    """End a script whose result is a check (``report["ok"]``): print it, write the JSON.

    Returns the exit status: 0 when the check passed, else 1.
    """
    shown = list(problems)
    for line in shown[:20]:
        print(f"  problem: {line}")
    if len(shown) > 20:
        print(f"  ... and {len(shown) - 20} more")
    print("check: OK" if report["ok"] else "check: FAILED")
    write_json(json_path, report)
    return 0 if report["ok"] else 1


# -- output ---------------------------------------------------------------------------


def fmt_ms(seconds: float | None) -> str:
    """A duration in milliseconds with three significant-ish digits; ``-`` for None."""
    if seconds is None:
        return "-"
    value = seconds * 1000
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    if value >= 1:
        return f"{value:.2f} ms"
    return f"{value:.3f} ms"


def fmt_ms_ratio(seconds: float, ratio: float | None = None, digits: int = 1) -> str:
    """``1.23 ms (4.5x)``: a duration and, when given, its ratio to another."""
    return fmt_ms(seconds) + ("" if ratio is None else f" ({ratio:.{digits}f}x)")


def times(value: float, base: float, digits: int = 2) -> str:
    """``value`` over ``base`` as ``1.23x``; ``-`` when ``base`` is not positive."""
    return f"{value / base:.{digits}f}x" if base > 0 else "-"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def text_table(
    header: Sequence[str], rows: Iterable[Sequence[object]], *, left: int = 1, indent: str = ""
) -> str:
    """A plain-text table: columns as wide as their widest cell, two spaces apart.

    The first ``left`` columns are aligned left, the others right; a rule goes
    under the header. An empty row is printed as an empty line.
    """
    body = [[str(cell) for cell in row] for row in rows]
    widths = [len(name) for name in header]
    for row in body:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        if not cells:
            return ""
        shown = [
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ]
        return (indent + "  ".join(shown)).rstrip()

    ruled = line(list(header))
    return "\n".join([ruled, indent + "-" * (len(ruled) - len(indent)), *map(line, body)])


def stacked(label: str, tables: Iterable[tuple[str, Table]]) -> Table:
    """Tables of the same columns as one, each row led by its table's name (column ``label``)."""
    columns: list[str] = []
    rows: list[list[str]] = []
    for name, (header, table_rows) in tables:
        columns = header
        rows += [[name, *row] for row in table_rows]
    return [label, *columns], rows


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _plain(value: Any) -> Any:
    """What JSON cannot hold as it is: numpy numbers as numbers, anything else as text."""
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def write_json(path: Path | None, data: Any) -> None:
    """``data`` as indented JSON into ``path``; nothing when ``path`` is None."""
    if path is not None:
        path.write_text(json_.dumps(data, indent=2, default=_plain) + "\n", encoding="utf-8")


# -- other scripts --------------------------------------------------------------------


def run_script(
    script: str,
    args: Sequence[str],
    out: Path,
    *,
    env: Mapping[str, str] | None = None,
    accept: Container[int] = (0,),
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """Run ``benchmarks/SCRIPT ARGS --json OUT --quiet``; what it wrote, and how it ended.

    When it exits with a status not in ``accept`` or writes no JSON, the mapping
    says so instead: ``failed`` (its exit status) and ``output`` (its last lines).
    """
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args, "--json", str(out), "--quiet"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=None if env is None else dict(env),
    )
    if done.returncode in accept and out.is_file():
        return dict(json_.loads(out.read_text())), done
    tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
    return {"failed": f"{script} exited with status {done.returncode}", "output": tail}, done
