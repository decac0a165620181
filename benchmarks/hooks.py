"""Hooks: how long a hook process takes, and which prompt threshold the dev data supports.

Two parts, both run by default (``--part latency|threshold|both``).

**Latency** (``--part latency``). ``prime-memory hook prompt`` and ``prime-memory
hook session-start`` (host ``claude-code``) are timed as whole processes, from
their start to their exit, with the host's JSON on standard input, through the
installed console script beside this Python (so the real entry point,
``prime_memory_folding/console.py``, is measured). The store is an SQLite file,
``memory.db`` in a temporary data folder (``PRIME_MEMORY_HOME``), holding
``--sizes`` records (default 10,000 then 100,000: the second size adds to the
first store). Its memories are ``text_query.py``'s English-like sentences plus
three made-up rare words each (names, codes), stored with ``store_many`` in
batches with the default embedder (the one users have), in sessions of 20,
about a quarter in the durable domains (decision, convention, preference,
pitfall), all in the project scope of a temporary git repository with an
origin remote, which is the ``cwd`` of every hook call (``PRIME_MEMORY_SCOPE``
unset). In the same run, taking turns with the hooks, the floor is timed: ``python
-c "import json, sqlite3, sys; json.load(sys.stdin)"`` with the same
interpreter and input. The spool (``hooks/spool.db``) is deleted before every
run, outside the timing, so a session start never finds captures to drain and
no drain runs while a hook is timed. Each process's peak resident memory is
read from its own resource usage (``wait4``).

Before timing, it checks that ``hook prompt`` injects a planted memory for a
prompt of its distinctive words and nothing for an unrelated prompt, and that
the session's opening block is not empty and fits its token budget. After the
timing, the store must hold as many records as before and the hooks' log must
be empty (a hook logs only its failures). Targets: hook p50 within 150 ms of the
floor's at 10,000 records, within 300 ms at 100,000.

**The prompt threshold** (``--part threshold``). The prompt hook injects a
memory only when its relevance (the share of the prompt's word weight it
holds, ``capture.inject.scored``) reaches ``inject.THRESHOLD``. For thresholds
0.20 to 0.90 by 0.05, on the three dev workloads, prompts go through
``inject.relevant`` (default budget, nothing seen yet) against SQLite stores
built with ``store_many`` (no embedder: the hook reads words only):

- decisions: a store per repository of its ADRs' decisions (domain
  ``decision``); positives are its ADRs' problem statements (a hit: the ADR's
  own decision injected); negatives are other repositories' problem
  statements against it;
- LoCoMo: a store per conversation of its turns; positives are its questions
  (a hit: an evidence turn injected); negatives are other conversations'
  questions;
- LongMemEval: a store per question of its haystack's user turns; the
  positive is the question (a hit: a turn of an answer session injected); the
  negative is the next question's text.

Any injection for a negative is a false injection. For each workload and
threshold it prints the injection rate on positives, the hit rate and the
false-injection rate. Then the threshold is chosen with held-out folds: each
repository, conversation or group of questions in turn is left out, and on
the rest (every other workload whole) the lowest threshold whose
false-injection rate is at most 10 % on every workload is chosen; the held-out
unit's hits and false injections at that choice, pooled, are reported per
workload, beside the choice on all the data. The loaders are the recall
benchmarks' own (``decisions_recall``, ``locomo_recall``,
``longmemeval_recall``). It checks that every store holds the records given
and that every positive's right memories are in its store.

A failed check exits with status 1 and reports no figures; a missed target
does not change the exit status.

Run from the repository root::

    python3 benchmarks/hooks.py
    python3 benchmarks/hooks.py --part threshold --negatives 50
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _harness as harness
import decisions_recall
import locomo_recall
import longmemeval_recall
from text_query import RARE_WORDS, sentences

from prime_memory_folding import MemoryEngine
from prime_memory_folding.capture import inject
from prime_memory_folding.core import scopes as scope_rules
from prime_memory_folding.engine.budget import count_tokens
from prime_memory_folding.recall.embeddings import load_embedder
from prime_memory_folding.storage.sqlite_peek import Peek

HOST = "claude-code"
EVENTS = ("prompt", "session-start")
FLOOR = "floor"
FLOOR_CODE = "import json, sqlite3, sys; json.load(sys.stdin)"
#: The most a hook's p50 may exceed the floor's, by store size.
TARGET_MARGIN_S = {10_000: 0.150, 100_000: 0.300}
SESSION_SIZE = 20
#: Rare words added to each memory, drawn from ``text_query.RARE_WORDS`` made-up ones.
RARE_PER_RECORD = 3
DURABLE = ("decision", "convention", "preference", "pitfall")
OTHER_DOMAINS = ("note", "code", "incident", "reference")
PLANTED = (
    "Deploys to the quokka cluster go through the zephyrine gateway, "
    "with a blue-green cutover and a smoke test before traffic moves."
)
PLANTED_PROMPT = "how do releases reach the quokka cluster through zephyrine?"
UNRELATED_PROMPT = "what is the capital of Mongolia, roughly?"
REMOTE = "https://github.com/bench-org/hooks-bench.git"
SCRUBBED_ENV = ("PRIME_MEMORY_SCOPE", "PRIME_MEMORY_HOOK_FOREGROUND", "PRIME_MEMORY_STORE")

THRESHOLDS = tuple(round(0.20 + 0.05 * i, 2) for i in range(15))
MAX_FALSE_RATE = 0.10
WORKLOADS = ("decisions", "locomo", "longmemeval")
LONGMEMEVAL_GROUPS = 5
SEED = 7


# -- part 1: latency ----------------------------------------------------------------------


@dataclass
class Run:
    """One process: its wall time, what it printed, its exit status."""

    seconds: float
    out: str
    status: int


def console_script() -> Path:
    return Path(sys.executable).parent / "prime-memory"


#: Runs a command with this stdin and prints its peak resident memory (KiB): a small
#: launcher, since Linux keeps a forked child's peak across ``exec`` (a child of this
#: process would start from this one's size).
PEAK_LAUNCHER = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def run_process(command: Sequence[str], data: bytes, env: dict[str, str], cwd: Path) -> Run:
    """``command`` with ``data`` on stdin, timed from start to exit."""
    started = time.perf_counter()
    done = subprocess.run(
        list(command), input=data, capture_output=True, env=env, cwd=cwd, check=False
    )
    seconds = time.perf_counter() - started
    return Run(seconds, done.stdout.decode("utf-8", "replace"), done.returncode)


def peak_kib(command: Sequence[str], data: bytes, env: dict[str, str], cwd: Path) -> int:
    """The peak resident memory of one run of ``command``, through :data:`PEAK_LAUNCHER`."""
    done = subprocess.run(
        [sys.executable, "-c", PEAK_LAUNCHER, *command],
        input=data,
        capture_output=True,
        env=env,
        cwd=cwd,
        check=True,
    )
    return int(done.stdout.split()[-1])


class Bench:
    """A data folder, a store in it, a project repository, and the hooks run against them."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.home.mkdir()
        self.repo = root / "project"
        self.repo.mkdir()
        git = ["git", "-C", str(self.repo)]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "remote", "add", "origin", REMOTE], check=True)
        self.scope = scope_rules.resolve(project=self.repo, env={}).current
        self.store = self.home / "memory.db"
        self.env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
        self.env["PRIME_MEMORY_HOME"] = str(self.home)
        self.turn = 0

    def payload(self, event: str, prompt: str = "") -> bytes:
        self.turn += 1
        body: dict[str, Any] = {
            "session_id": f"bench-{self.turn}",
            "cwd": str(self.repo),
            "hook_event_name": "UserPromptSubmit" if event == "prompt" else "SessionStart",
            "transcript_path": str(self.home / "transcript.jsonl"),
        }
        if event == "prompt":
            body["prompt"] = prompt
        else:
            body["source"] = "startup"
        return json.dumps(body).encode()

    def clear_spool(self) -> None:
        shutil.rmtree(self.home / "hooks", ignore_errors=True)

    def command(self, name: str) -> list[str]:
        if name == FLOOR:
            return [sys.executable, "-c", FLOOR_CODE]
        return [str(console_script()), "hook", name, "--host", HOST]

    def hook(self, event: str, prompt: str = "") -> Run:
        self.clear_spool()  # outside the timing
        data = self.payload(event, prompt)
        return run_process(self.command(event), data, self.env, self.repo)

    def floor(self, prompt: str) -> Run:
        data = self.payload("prompt", prompt)
        return run_process(self.command(FLOOR), data, self.env, self.repo)

    def peak_mib(self, name: str, prompt: str) -> float:
        """One untimed run's peak resident memory, in MiB."""
        self.clear_spool()
        data = self.payload("prompt" if name == FLOOR else name, prompt)
        kib = peak_kib(self.command(name), data, self.env, self.repo)
        self.clear_spool()
        return kib / 1024


def context_of(out: str) -> str:
    """The ``additionalContext`` a hook printed, "" for none."""
    if not out.strip():
        return ""
    return str(json.loads(out)["hookSpecificOutput"]["additionalContext"])


def latency_items(start: int, count: int, seed: int, scope: str) -> list[dict[str, Any]]:
    """Memories ``start`` to ``start + count``: sentences, rare words, domains, sessions."""
    texts = sentences(count, seed + start, 8, 20)
    rng = random.Random(seed * 1_000_003 + start)
    items = []
    for i, text in enumerate(texts, start):
        rare = " ".join(f"n{rng.randrange(RARE_WORDS):05d}x" for _ in range(RARE_PER_RECORD))
        durable = rng.random() < 0.25
        items.append(
            {
                "content": f"{text} {rare}",
                "domain": rng.choice(DURABLE if durable else OTHER_DOMAINS),
                "importance": round(rng.random(), 3),
                "session": f"s{i // SESSION_SIZE}",
                "scope": scope,
            }
        )
    return items


def timed_prompts(count: int, seed: int) -> list[str]:
    """Prompts of a few common words and two rare ones, as a developer's request."""
    rng = random.Random(seed + 11)
    words = sentences(count, seed + 12, 4, 10)
    return [
        f"{text} {' '.join(f'n{rng.randrange(RARE_WORDS):05d}x' for _ in range(2))}?"
        for text in words
    ]


def latency_checks(bench: Bench) -> list[str]:
    problems = []
    planted = context_of(bench.hook("prompt", PLANTED_PROMPT).out)
    if "zephyrine gateway" not in planted:
        problems.append(f"the planted memory was not injected for its prompt: {planted!r}")
    unrelated = context_of(bench.hook("prompt", UNRELATED_PROMPT).out)
    if unrelated:
        problems.append(f"an unrelated prompt injected: {unrelated!r}")
    opening = context_of(bench.hook("session-start").out)
    tokens = count_tokens(opening)
    if not opening or opening == inject.EMPTY_LINE:
        problems.append("the opening block is empty")
    elif tokens > inject.OPENING_BUDGET:
        problems.append(f"the opening block holds {tokens} tokens > {inject.OPENING_BUDGET}")
    return problems


def part_latency(args: argparse.Namespace, log: harness.Log) -> tuple[dict[str, Any], list[str]]:
    sizes = sorted(int(s) for s in args.sizes.split(","))
    script = console_script()
    if not script.is_file():
        return {}, [f"no console script at {script}: install the package (pip install -e .)"]
    embedder = load_embedder(args.embedder)
    out: dict[str, Any] = {"embedder": embedder.name, "runs": args.runs, "sizes": {}}
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        bench = Bench(Path(folder))
        out["scope"] = bench.scope
        prompts = timed_prompts(args.runs, args.seed)
        held = 0
        turn = itertools.count()
        for size in sizes:
            with MemoryEngine(bench.store, scope=bench.scope, embedder=embedder) as engine:
                if not held:
                    if not args.inject_mismatch:
                        engine.store(PLANTED, domain="decision", importance=0.9)
                    engine.store("warm up the embedder")
                    held = engine.stats().records
                t0 = time.perf_counter()
                for start in range(held, size, 10_000):
                    count = min(10_000, size - start)
                    engine.store_many(latency_items(start, count, args.seed, bench.scope))
                    log(f"  stored {start + count:,} of {size:,}")
                held = max(held, size)
                log(f"  {size:,} records stored in {time.perf_counter() - t0:.1f} s")
            with Peek(bench.store) as peek:
                records = peek.count()
            found = latency_checks(bench)
            if found:
                problems += [f"at {size:,} records: {p}" for p in found]
                return out, problems
            calls: dict[str, Callable[[], Run]] = {
                "prompt": lambda: bench.hook("prompt", prompts[next(turn) % len(prompts)]),
                "session-start": lambda: bench.hook("session-start"),
                FLOOR: lambda: bench.floor(prompts[0]),
            }
            for name in calls:  # one untimed run each: the page cache
                calls[name]()
            runs = harness.in_turns(calls, args.runs)
            with Peek(bench.store) as peek:
                after = peek.count()
            if after != records:
                problems.append(f"at {size:,}: the store went from {records} to {after}")
            hook_log = bench.home / "hooks.log"
            if hook_log.exists():
                lines = hook_log.read_text().splitlines()
                problems.append(f"at {size:,}: hooks.log has {len(lines)} line(s): {lines[:2]}")
            bad = [r.status for rs in runs.values() for r in rs if r.status != 0]
            if bad:
                problems.append(f"at {size:,}: {len(bad)} process(es) exited non-zero")
            injected = sum(bool(r.out.strip()) for r in runs["prompt"])
            row: dict[str, Any] = {"records": records, "prompts_injecting": injected}
            for name, rs in runs.items():
                secs = [r.seconds for r in rs]
                row[name] = {
                    "p50_s": statistics.median(secs),
                    "p95_s": harness.percentile(secs, 0.95),
                    "peak_rss_mib": bench.peak_mib(name, prompts[0]),
                }
            out["sizes"][str(size)] = row
    return out, problems


def margin_target(size: int) -> float:
    return TARGET_MARGIN_S.get(size, TARGET_MARGIN_S[100_000 if size > 10_000 else 10_000])


def latency_table(out: dict[str, Any]) -> harness.Table:
    rows = []
    for size, row in out["sizes"].items():
        floor = row[FLOOR]["p50_s"]
        for name in (*EVENTS, FLOOR):
            cell = row[name]
            margin = cell["p50_s"] - floor
            target = margin_target(int(size))
            rows.append(
                [
                    f"{int(size):,}",
                    name,
                    harness.fmt_ms(cell["p50_s"]),
                    harness.fmt_ms(cell["p95_s"]),
                    f"{cell['peak_rss_mib']:.0f} MiB",
                    "" if name == FLOOR else f"+{margin * 1e3:.0f} ms",
                    "" if name == FLOOR else f"{target * 1e3:.0f} ms",
                    "" if name == FLOOR else harness.verdict(margin <= target),
                ]
            )
    header = ["records", "process", "p50", "p95", "peak RSS", "p50 - floor", "target", ""]
    return header, rows


# -- part 2: the prompt threshold ---------------------------------------------------------


@dataclass
class Trial:
    """One prompt against one store: at each threshold, whether it injected and hit."""

    workload: str
    unit: str
    positive: bool
    injected: list[bool] = field(default_factory=list)
    hit: list[bool] = field(default_factory=list)


def file_store(path: Path, scope: str, items: list[dict[str, Any]]) -> list[str]:
    """A new SQLite store of ``items`` (no embedder); the record ids, in order."""
    with MemoryEngine(path, scope=scope, embedder="none") as engine:
        return [r.record_id for r in engine.store_many(items)]


def sweep(peek: Peek, prompt: str, scope: str, gold: set[str], trial: Trial) -> Trial:
    for threshold in THRESHOLDS:
        block = inject.relevant(
            peek, prompt, scopes=[scope], session=None, seen=set(), threshold=threshold
        )
        trial.injected.append(bool(block.record_ids))
        trial.hit.append(bool(gold & set(block.record_ids)))
    return trial


def negatives_for(others: list[str], count: int, rng: random.Random) -> list[str]:
    return rng.sample(others, min(count, len(others)))


def distinct(items: list[dict[str, Any]]) -> int:
    """How many records ``items`` make: a content given twice reinforces the first."""
    return len({item["content"] for item in items})


def check_store(path: Path, given: int, name: str) -> list[str]:
    with Peek(path) as peek:
        held = peek.count()
    return [] if held == given else [f"{name}: the store holds {held} records, {given} given"]


def run_decisions(
    args: argparse.Namespace, folder: Path, log: harness.Log
) -> tuple[list[Trial], list[str]]:
    repos = decisions_recall.load(args.decisions_data)[: args.decisions_repos or None]
    trials: list[Trial] = []
    problems: list[str] = []
    rng = random.Random(args.seed)
    for n, repo in enumerate(repos):
        decisions = list(dict.fromkeys(adr.decision for adr in repo.adrs))
        items = [{"content": text, "domain": "decision"} for text in decisions]
        if args.inject_mismatch and n == 0:
            items = items[1:]
        path = folder / f"decisions-{n}.db"
        ids = dict(zip((i["content"] for i in items), file_store(path, repo.scope, items)))
        problems += check_store(path, len(decisions), f"decisions {repo.name}")
        others = [a.query for r in repos if r.name != repo.name for a in r.adrs]
        with Peek(path) as peek:
            for adr in repo.adrs:
                gold = {ids[adr.decision]} if adr.decision in ids else set()
                if not gold:
                    problems.append(f"decisions {repo.name} {adr.adr_id}: its decision is missing")
                trials.append(
                    sweep(peek, adr.query, repo.scope, gold, Trial("decisions", repo.name, True))
                )
            for query in negatives_for(others, args.negatives, rng):
                trials.append(
                    sweep(peek, query, repo.scope, set(), Trial("decisions", repo.name, False))
                )
        log(f"  decisions: {repo.name} done")
    return trials, problems


def run_locomo(
    args: argparse.Namespace, folder: Path, log: harness.Log
) -> tuple[list[Trial], list[str]]:
    convs = locomo_recall.load(args.locomo_data)[: args.locomo_conversations or None]
    trials: list[Trial] = []
    problems: list[str] = []
    rng = random.Random(args.seed + 1)
    scope = "project:locomo"
    for n, conv in enumerate(convs):
        items = [
            {"content": text, "session": locomo_recall.session_name(conv, number)}
            for (_, text, _), number in zip(conv.turns, conv.session_of)
        ]
        path = folder / f"locomo-{n}.db"
        ids = file_store(path, scope, items)
        problems += check_store(path, distinct(items), f"locomo {conv.sample_id}")
        dia_of: dict[str, set[str]] = {}
        for rid, (dia, _, _) in zip(ids, conv.turns):
            dia_of.setdefault(dia, set()).add(rid)
        questions = conv.questions[: args.locomo_questions or None]
        others = [
            q.text
            for c in convs
            if c.sample_id != conv.sample_id
            for q in c.questions[: args.locomo_questions or None]
        ]
        with Peek(path) as peek:
            for q in questions:
                gold = {rid for dia in q.gold for rid in dia_of.get(dia, ())}
                if not gold:
                    problems.append(f"locomo {conv.sample_id}: {q.text!r} has no stored evidence")
                trials.append(
                    sweep(peek, q.text, scope, gold, Trial("locomo", conv.sample_id, True))
                )
            for text in negatives_for(others, args.negatives, rng):
                trials.append(
                    sweep(peek, text, scope, set(), Trial("locomo", conv.sample_id, False))
                )
        log(f"  locomo: {conv.sample_id} done")
    return trials, problems


def run_longmemeval(
    args: argparse.Namespace, folder: Path, log: harness.Log
) -> tuple[list[Trial], list[str]]:
    items_raw = json.loads(args.longmemeval_data.read_text(encoding="utf-8"))
    questions = longmemeval_recall.parse(items_raw)
    questions = [q for q in questions if q.gold_sessions][: args.longmemeval_questions or None]
    trials: list[Trial] = []
    problems: list[str] = []
    scope = "project:longmemeval"
    for n, question in enumerate(questions):
        unit = f"group {n % LONGMEMEVAL_GROUPS + 1}"
        kept = [
            (s.session_id, text) for s in question.sessions for _, text in s.turns if text.strip()
        ]
        items = [{"content": text, "session": sid} for sid, text in kept]
        path = folder / f"longmemeval-{n}.db"
        ids = file_store(path, scope, items)
        problems += check_store(path, distinct(items), f"longmemeval {question.question_id}")
        gold = {rid for rid, (sid, _) in zip(ids, kept) if sid in question.gold_sessions}
        if not gold:
            problems.append(f"longmemeval {question.question_id}: no answer-session turn stored")
        other = questions[(n + 1) % len(questions)].text
        with Peek(path) as peek:
            trials.append(sweep(peek, question.text, scope, gold, Trial("longmemeval", unit, True)))
            if len(questions) > 1:
                trials.append(sweep(peek, other, scope, set(), Trial("longmemeval", unit, False)))
        path.unlink()
        if n % 20 == 19:
            log(f"  longmemeval: {n + 1} of {len(questions)} questions")
    return trials, problems


def rates(trials: Sequence[Trial], at: int) -> dict[str, float | int]:
    """Injection, hit and false-injection rates of ``trials`` at threshold index ``at``."""
    pos = [t for t in trials if t.positive]
    neg = [t for t in trials if not t.positive]
    return {
        "positives": len(pos),
        "negatives": len(neg),
        "injection": sum(t.injected[at] for t in pos) / len(pos) if pos else 0.0,
        "hit": sum(t.hit[at] for t in pos) / len(pos) if pos else 0.0,
        "false_injection": sum(t.injected[at] for t in neg) / len(neg) if neg else 0.0,
    }


def choose(by_workload: dict[str, list[Trial]]) -> int | None:
    """The lowest threshold's index whose false-injection rate is within bounds everywhere."""
    for at in range(len(THRESHOLDS)):
        if all(
            rates(trials, at)["false_injection"] <= MAX_FALSE_RATE
            for trials in by_workload.values()
            if trials
        ):
            return at
    return None


def held_out(trials: list[Trial]) -> dict[str, Any]:
    """Each workload's units left out in turn: the choice on the rest, scored on the unit."""
    by_workload = {w: [t for t in trials if t.workload == w] for w in WORKLOADS}
    out: dict[str, Any] = {}
    for workload, mine in by_workload.items():
        if not mine:
            continue
        units = list(dict.fromkeys(t.unit for t in mine))
        scored: list[Trial] = []
        chosen: dict[str, float | None] = {}
        pos_hits = pos = neg_inj = neg = 0
        for unit in units:
            training = dict(by_workload)
            training[workload] = [t for t in mine if t.unit != unit]
            at = choose(training)
            chosen[unit] = None if at is None else THRESHOLDS[at]
            at = len(THRESHOLDS) - 1 if at is None else at
            left = [t for t in mine if t.unit == unit]
            scored += left
            pos += sum(t.positive for t in left)
            pos_hits += sum(t.hit[at] for t in left if t.positive)
            neg += sum(not t.positive for t in left)
            neg_inj += sum(t.injected[at] for t in left if not t.positive)
        out[workload] = {
            "units": len(units),
            "chosen": chosen,
            "hit": pos_hits / pos if pos else 0.0,
            "false_injection": neg_inj / neg if neg else 0.0,
            "positives": pos,
            "negatives": neg,
        }
    return out


def part_threshold(args: argparse.Namespace, log: harness.Log) -> tuple[dict[str, Any], list[str]]:
    for name in ("decisions_data", "locomo_data", "longmemeval_data"):
        if not getattr(args, name).is_file():
            return {}, [f"no file at {getattr(args, name)} (--{name.replace('_', '-')})"]
    trials: list[Trial] = []
    problems: list[str] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for run in (run_decisions, run_locomo, run_longmemeval):
            found, why = run(args, Path(folder), log)
            trials += found
            problems += why
    out: dict[str, Any] = {"thresholds": list(THRESHOLDS), "current": inject.THRESHOLD}
    if problems:
        return out, problems
    by_workload = {w: [t for t in trials if t.workload == w] for w in WORKLOADS}
    out["workloads"] = {
        w: [{"threshold": th, **rates(ts, at)} for at, th in enumerate(THRESHOLDS)]
        for w, ts in by_workload.items()
    }
    out["alone"] = {}
    for workload, ts in by_workload.items():
        lone = choose({workload: ts})
        out["alone"][workload] = None if lone is None else THRESHOLDS[lone]
    at = choose(by_workload)
    out["chosen_on_all"] = None if at is None else THRESHOLDS[at]
    out["held_out"] = held_out(trials)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out, []


def threshold_table(rows: list[dict[str, Any]], marks: dict[float, str]) -> harness.Table:
    header = ["threshold", "injected (pos)", "hit", "false injection (neg)", ""]
    body = [
        [
            f"{row['threshold']:.2f}",
            f"{100 * row['injection']:.1f} %",
            f"{100 * row['hit']:.1f} %",
            f"{100 * row['false_injection']:.1f} %",
            marks.get(row["threshold"], ""),
        ]
        for row in rows
    ]
    return header, body


def print_threshold(out: dict[str, Any]) -> None:
    current = inject.THRESHOLD
    chosen = out["chosen_on_all"]
    for workload, rows in out["workloads"].items():
        marks: dict[float, str] = {}
        marks[current] = "current"
        if chosen is not None:
            marks[chosen] = "chosen" if chosen != current else "current, chosen"
        first = rows[0]
        print(f"\n{workload}: {first['positives']} positive prompts, {first['negatives']} negative")
        print(harness.text_table(*threshold_table(rows, marks)))
    print(
        f"\nchoice: the lowest threshold with false injection <= {MAX_FALSE_RATE:.0%} "
        f"on every workload"
    )
    shown = "none" if chosen is None else f"{chosen:.2f}"
    print(f"  on all the data: {shown} (inject.THRESHOLD is {current:.2f})")
    for workload, lone in out["alone"].items():
        rows = out["workloads"][workload]
        if lone is None:
            least = min(rows, key=lambda r: (r["false_injection"], -r["hit"]))
            said = (
                f"none; least false injection {100 * least['false_injection']:.1f} % "
                f"(at {least['threshold']:.2f})"
            )
        else:
            said = f"{lone:.2f}"
        print(f"  {workload} alone: {said}")
    if chosen is None:
        print(
            f"  no threshold meets the bound on every workload: held-out folds fall back "
            f"to the highest, {THRESHOLDS[-1]:.2f}"
        )
    header = ["workload", "folds", "thresholds chosen", "held-out hit", "held-out false inj."]
    body = []
    for workload, row in out["held_out"].items():
        picks = sorted({v for v in row["chosen"].values() if v is not None})
        body.append(
            [
                workload,
                str(row["units"]),
                ", ".join(f"{v:.2f}" for v in picks) or "none",
                f"{100 * row['hit']:.1f} % of {row['positives']}",
                f"{100 * row['false_injection']:.1f} % of {row['negatives']}",
            ]
        )
    print(harness.text_table(header, body))
    if chosen is not None and chosen != current:
        print(
            f"NOTE: the chosen threshold {chosen:.2f} differs from inject.THRESHOLD {current:.2f}"
        )
    elif chosen == current:
        print(f"the chosen threshold is inject.THRESHOLD, {current:.2f}")


# -- main ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness.parser(
        __doc__,
        inject=True,
        runs=(30, "timed runs of each process at each size"),
        seed=SEED,
        negatives=(200, "negative prompts per store (decisions, LoCoMo)"),
        decisions_repos=(0, "only the first N repositories (0: all)"),
        locomo_conversations=(0, "only the first N conversations (0: all)"),
        locomo_questions=(0, "only the first N questions of each conversation (0: all)"),
        longmemeval_questions=(0, "only the first N questions (0: all)"),
    )
    parser.add_argument("--part", choices=("latency", "threshold", "both"), default="both")
    parser.add_argument(
        "--embedder",
        default="builtin",
        help="the latency store's embedder (default: builtin, the bundled model users get)",
    )
    parser.add_argument("--sizes", default="10000,100000", help="store sizes, comma-separated")
    parser.add_argument("--decisions-data", type=Path, default=decisions_recall.DEFAULT_DATA)
    parser.add_argument("--locomo-data", type=Path, default=locomo_recall.DEFAULT_DATA)
    parser.add_argument("--longmemeval-data", type=Path, default=longmemeval_recall.DEFAULT_DATA)
    args = parser.parse_args(argv)
    harness.at_least(parser, args, runs=1, negatives=0)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error("--sizes takes numbers, comma-separated")
    if min(sizes) < 10:
        parser.error("--sizes must be at least 10 each")
    log = harness.Log(args.quiet, stamped=True)
    report: dict[str, Any] = {"conditions": harness.conditions(), "ok": True}
    print(f"hooks benchmark, {harness.conditions_line(report['conditions'])}")
    problems: list[str] = []
    if args.part in ("latency", "both"):
        log("latency: building the store and timing the hooks")
        latency, found = part_latency(args, log)
        report["latency"] = latency
        ok = harness.check(
            found,
            "check: OK - the planted memory injected for its prompt, nothing for an unrelated "
            "one, the opening block within its budget; no record stored and no failure "
            "logged while timing",
            failed="check: FAILED (latency)",
        )
        problems += found
        if ok:
            print(
                f"\nhook processes ({HOST}), {args.runs} runs each, taking turns with the floor; "
                f"embedder of the store: {latency['embedder']}; scope {latency['scope']}"
            )
            print(harness.text_table(*latency_table(latency), left=2))
            for size, row in latency["sizes"].items():
                print(
                    f"  {int(size):,} records: {row['prompts_injecting']} of {args.runs} "
                    "timed prompts injected memories"
                )
    if args.part in ("threshold", "both"):
        log("threshold: building the stores and sweeping")
        threshold, found = part_threshold(args, log)
        report["threshold"] = threshold
        ok = harness.check(
            found,
            "\ncheck: OK - every store holds the records given; every positive's right "
            "memories are stored",
            failed="check: FAILED (threshold)",
            then="no rates reported: the stores are not what was given",
        )
        problems += found
        if ok:
            print_threshold(threshold)
    report["ok"] = not problems
    report["conditions_after"] = harness.conditions()
    print(harness.conditions_line(report["conditions_after"]) + " (after)")
    return harness.conclude(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
