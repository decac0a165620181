"""Decision recall: does ``query(text=...)`` find a project's decision from the problem behind it?

The data are Architecture Decision Records (ADRs) of public repositories (the
decisions data set's README describes them). Each ADR gives memories, stored
as an agent stores notes, each on its own (no session): its decision first,
then each of its distractors (sentences of its Consequences). The query is the
opening of the ADR's Context; the gold answer is its decision. Repositories and
their ADRs are stored in the order listed, with the engine's injected clock
moving 30-120 s between an ADR's memories and hours to days between ADRs
(seeded, so runs repeat); queries are asked a week after the last store, with
``limit=10``. A memory whose text a repository already holds reinforces it, as
a store does: the repository then holds one memory fewer.

Two layouts, both reported: one store per repository, and one shared store
holding every repository, each in its own scope (``project:<repo>``), queried
within that scope. Systems, in the same run: ``hybrid`` (the engine's
defaults: the bundled embedder), ``keyword`` (embedding off), ``parts off``
(the hybrid with every ranking part beyond the fusion of BM25 and cosine off)
and ``BM25`` (rank_bm25's BM25Okapi over lower-cased word tokens of each
repository's memories). Metrics: R@1 and R@5 of the gold decision (percent)
and MRR@10, averaged over queries, overall and per repository.

Before reporting, it checks that every store holds exactly the memories given,
that BM25 ranks each memory first for its own text, and that switching a
store's settings (``engine.ranking = ...``) ranks as a store built with them.

``--loo`` tunes the hybrid leaving one repository out: for each repository,
the setting of :data:`LOO_GRID` with the best MRR@10 on the other repositories
scores it; R@1, R@5 and MRR@10 are pooled over every held-out query. It uses
the one-store-per-repository layout, each store built once.

The data is read from where it lies (default: ``../shared/datasets/decisions/
decisions-dev.json`` next to the repository) and never copied. Run::

    python3 benchmarks/decisions_recall.py [--data PATH] [--loo] [--seed N] [--json OUT]

The last line printed is the default hybrid's R@5 and MRR@10 per repository
(one store per repository).
"""

from __future__ import annotations

import itertools
import json
import random
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import _harness as harness
from _shared import REPO_ROOT, Clock

from prime_memory_folding import MemoryEngine
from prime_memory_folding.core.scopes import normalise_scope
from prime_memory_folding.core.words import WORD
from prime_memory_folding.recall.ranking import RankingSettings

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "datasets" / "decisions" / "decisions-dev.json"
#: Hits asked for per query; MRR is cut there.
DEPTH = 10
KS = (1, 5)
#: The seed of the clock's steps.
SEED = 20261204
#: When the first memory is stored (Unix seconds).
START = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc).timestamp()
#: Seconds between two memories of one ADR, and between two ADRs (bounds of a uniform draw).
WITHIN_ADR_S = (30.0, 120.0)
BETWEEN_ADRS_S = (2 * 3600.0, 4 * 86_400.0)
#: Queries are asked this long after the last store.
ASKED_AFTER_S = 7 * 86_400.0
#: The layouts, by the key the JSON uses, and how they are shown.
LAYOUTS = {"per_repo": "one store per repository", "shared": "one store, a scope per repository"}
#: The engine's systems: name -> (embedder, ranking settings; None: the engine's defaults).
ENGINE_SYSTEMS: dict[str, tuple[str, RankingSettings | None]] = {
    "hybrid": ("builtin", None),
    "keyword": ("none", None),
    "parts off": ("builtin", RankingSettings().parts_off()),
}
SYSTEMS = (*ENGINE_SYSTEMS, "BM25")
#: The settings ``--loo`` chooses from, as changes to the defaults (which are among them).
#: (The rules that read sessions cannot change a ranking here: notes have none.)
LOO_GRID: tuple[dict[str, float], ...] = tuple(
    {"cosine_weight": c, "long_query_shift": shift, "lend_weight": lend, "query_idf": idf}
    for c, shift, lend, idf in itertools.product((0.5, 0.6, 0.7), (0, 0.2), (0, 0.2), (0, 0.5))
)


# -- the data ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Adr:
    adr_id: str
    decision: str
    distractors: tuple[str, ...]
    query: str

    def memories(self) -> tuple[str, ...]:
        """What the ADR gives to store, in order: its decision, then its distractors."""
        return (self.decision, *self.distractors)


@dataclass(frozen=True)
class Repo:
    name: str
    adrs: tuple[Adr, ...]

    @property
    def scope(self) -> str:
        """The repository's scope in the shared store, as the engine writes it."""
        return normalise_scope(f"project:{self.name}")

    def memories(self) -> list[str]:
        """Every distinct memory text, in the order first stored."""
        return list(dict.fromkeys(text for adr in self.adrs for text in adr.memories()))


def load(path: Path) -> list[Repo]:
    """Every repository in a decisions-format file, its ADRs in the order listed."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [
        Repo(
            str(repo["repo"]),
            tuple(
                Adr(
                    str(a["id"]),
                    str(a["decision"]),
                    tuple(map(str, a["distractors"])),
                    str(a["query"]),
                )
                for a in repo["adrs"]
            ),
        )
        for repo in raw["repos"]
    ]


def schedule(repos: Sequence[Repo], seed: int = SEED) -> list[list[list[float]]]:
    """When each memory is stored: ``times[repo][adr][memory]``, one timeline for all.

    The repositories follow each other; within one, 30-120 s between an ADR's
    memories and hours to days between ADRs (and between repositories). Both
    layouts store at these times.
    """
    rng = random.Random(seed)
    now = START
    times: list[list[list[float]]] = []
    for repo in repos:
        per_adr = []
        for adr in repo.adrs:
            if per_adr or times:
                now += rng.uniform(*BETWEEN_ADRS_S)
            steps = []
            for i in range(len(adr.memories())):
                if i:
                    now += rng.uniform(*WITHIN_ADR_S)
                steps.append(now)
            per_adr.append(steps)
        times.append(per_adr)
    return times


# -- the stores -------------------------------------------------------------------------


@dataclass
class RepoStore:
    """One repository's memories in a store: the engine (shared in the shared layout),
    the scope its queries name (None: the store's default), and each ADR's gold record id."""

    repo: Repo
    engine: MemoryEngine
    scopes: list[str] | None
    gold: list[str] = field(default_factory=list)
    #: Distinct record ids the stores returned.
    stored: set[str] = field(default_factory=set)


def build(
    repos: Sequence[Repo],
    times: list[list[list[float]]],
    layout: str,
    embedder: str,
    ranking: RankingSettings | None = None,
    *,
    omit: int = 0,
) -> list[RepoStore]:
    """Every repository's memories stored in ``layout`` (``per_repo`` or ``shared``),
    in memory; the clock then stands a week after the last store.

    ``omit`` leaves out the first repository's last ``omit`` distractors (to see the check fail).
    """

    def engine(clock: Clock) -> MemoryEngine:
        return MemoryEngine(":memory:", clock=clock, embedder=embedder, ranking=ranking)

    shared_clock = Clock(START)
    shared = engine(shared_clock) if layout == "shared" else None
    stores = []
    for r, repo in enumerate(repos):
        clock = shared_clock if shared is not None else Clock(START)
        target = RepoStore(
            repo,
            shared if shared is not None else engine(clock),
            [repo.scope] if shared is not None else None,
        )
        items = [
            (clock_at, text, m == 0)
            for adr, at in zip(repo.adrs, times[r])
            for m, (text, clock_at) in enumerate(zip(adr.memories(), at))
        ]
        if r == 0 and omit:
            left_out = [i for i, item in enumerate(items) if not item[2]][-omit:]
            items = [item for i, item in enumerate(items) if i not in left_out]
        scope = repo.scope if shared is not None else None
        for at, text, is_decision in items:
            clock.now = at
            rec = target.engine.store(text, scope=scope)
            target.stored.add(rec.record_id)
            if is_decision:
                target.gold.append(rec.record_id)
        if shared is None:
            clock.now = times[r][-1][-1] + ASKED_AFTER_S
        stores.append(target)
    shared_clock.now = times[-1][-1][-1] + ASKED_AFTER_S
    return stores


def close(stores: Iterable[RepoStore]) -> None:
    for engine in {id(s.engine): s.engine for s in stores}.values():
        engine.close()


# -- scoring ----------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryScore:
    """One query's outcome: where the gold decision ranked among the hits (None: not in them)."""

    repo: str
    adr: str
    rank: int | None
    #: The hits, best first: record ids (BM25: memory numbers), at most ``DEPTH``.
    hits: tuple[str, ...] = ()

    @property
    def rr(self) -> float:
        """The reciprocal rank: 1 / rank within the first ``DEPTH`` hits, else 0."""
        return 1.0 / self.rank if self.rank is not None and self.rank <= DEPTH else 0.0

    def hit(self, k: int) -> float:
        """1 when the gold decision is among the first ``k`` hits, else 0."""
        return 1.0 if self.rank is not None and self.rank <= k else 0.0


def _rank(hits: Sequence[str], gold: str) -> int | None:
    return hits.index(gold) + 1 if gold in hits else None


def evaluate(
    stores: Sequence[RepoStore], settings: RankingSettings | None = None
) -> list[QueryScore]:
    """Every ADR's query asked of its repository's store, in order: one score per query.

    With ``settings``, every store ranks with them during the queries (``engine.ranking``
    is set, then put back); without, each ranks as it was built.
    """
    engines = {id(s.engine): s.engine for s in stores}
    saved = {k: e.ranking for k, e in engines.items()} if settings is not None else {}
    try:
        for engine in engines.values():
            if settings is not None:
                engine.ranking = settings
        scores = []
        for store in stores:
            for adr, gold in zip(store.repo.adrs, store.gold):
                found = store.engine.query(text=adr.query, limit=DEPTH, scopes=store.scopes)
                hits = tuple(hit.record.record_id for hit in found)
                scores.append(QueryScore(store.repo.name, adr.adr_id, _rank(hits, gold), hits))
        return scores
    finally:
        for key, value in saved.items():
            engines[key].ranking = value


def words(text: str) -> list[str]:
    """BM25's tokens: lower-cased word characters."""
    return WORD.findall(text.lower())


class Bm25:
    """rank_bm25's BM25Okapi over one repository's distinct memories."""

    def __init__(self, repo: Repo) -> None:
        from rank_bm25 import BM25Okapi

        self.repo = repo
        self.texts = repo.memories()
        self.model = BM25Okapi([words(text) for text in self.texts])

    def ranked(self, text: str) -> list[int]:
        """The memories that share a word with ``text``, by number, best first (ties in
        stored order), at most ``DEPTH``."""
        scores = self.model.get_scores(words(text))
        matched = [i for i in range(len(self.texts)) if scores[i] > 0]
        return sorted(matched, key=lambda i: -scores[i])[:DEPTH]

    def evaluate(self) -> list[QueryScore]:
        out = []
        for adr in self.repo.adrs:
            hits = tuple(str(i) for i in self.ranked(adr.query))
            gold = str(self.texts.index(adr.decision))
            out.append(QueryScore(self.repo.name, adr.adr_id, _rank(hits, gold), hits))
        return out


def summarise(scores: Sequence[QueryScore]) -> dict[str, float]:
    """R@1 and R@5 in percent and MRR@10, averaged over the queries, and their number."""
    n = len(scores)
    row: dict[str, float] = {
        f"R@{k}": 100 * sum(s.hit(k) for s in scores) / n if n else 0.0 for k in KS
    }
    row["MRR@10"] = sum(s.rr for s in scores) / n if n else 0.0
    row["n"] = n
    return row


def by_repo(scores: Sequence[QueryScore]) -> dict[str, list[QueryScore]]:
    grouped: dict[str, list[QueryScore]] = {}
    for score in scores:
        grouped.setdefault(score.repo, []).append(score)
    return grouped


def report(scores: Sequence[QueryScore]) -> dict[str, Any]:
    """The summary over every query, and per repository."""
    return {
        "overall": summarise(scores),
        "per_repo": {repo: summarise(rows) for repo, rows in by_repo(scores).items()},
    }


# -- checks -----------------------------------------------------------------------------


def store_problems(name: str, layout: str, stores: Sequence[RepoStore]) -> list[str]:
    """Where a store does not hold exactly the repository's distinct memories."""
    problems = []
    counts = {id(s.engine): s.engine.stats() for s in stores}
    total = 0
    for store in stores:
        wanted = len(store.repo.memories())
        total += wanted
        stats = counts[id(store.engine)]
        held = stats.records if store.scopes is None else stats.scopes.get(store.repo.scope, 0)
        if held != wanted or len(store.stored) != wanted:
            problems.append(
                f"{name} ({LAYOUTS[layout]}): {store.repo.name} holds {held} records "
                f"({len(store.stored)} stored) for {wanted} memories"
            )
    if layout == "shared" and stores:
        held = counts[id(stores[0].engine)].records
        if held != total:
            problems.append(f"{name} ({LAYOUTS[layout]}): the store holds {held} of {total}")
    return problems


def bm25_problems(models: Sequence[Bm25]) -> list[str]:
    """Where BM25 does not rank a memory first for its own text (or its corpus is short)."""
    problems = []
    for model in models:
        if len(model.model.doc_len) != len(model.repo.memories()):
            problems.append(f"BM25: {model.repo.name}'s corpus is {len(model.model.doc_len)} long")
        for i, text in enumerate(model.texts):
            top = (model.ranked(text) or [None])[0]
            if top != i:
                problems.append(f"BM25: {model.repo.name} memory {i} ranks {top} first: {text!r}")
    return problems


def switch_problems(built: Sequence[QueryScore], switched: Sequence[QueryScore]) -> list[str]:
    """Where a store switched to ``parts off`` ranks the gold otherwise than one built so."""
    return [
        f"parts off: {a.adr} ranks the decision {a.rank} when built so, {b.rank} when switched"
        for a, b in zip(built, switched)
        if a.rank != b.rank
    ] + ([] if len(built) == len(switched) else ["parts off: not every query was asked"])


# -- leave one repository out -----------------------------------------------------------


def _label(point: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in point.items())


def leave_one_out(stores: Sequence[RepoStore], log: harness.Log) -> dict[str, Any]:
    """For each repository, the grid point best on the others (MRR@10 over their queries)
    scores it; the held-out scores pooled, and what each fold chose."""
    cache: list[dict[str, list[QueryScore]]] = []
    for n, point in enumerate(LOO_GRID):
        cache.append(by_repo(evaluate(stores, RankingSettings().but(**point))))
        log(f"  --loo: setting {n + 1}/{len(LOO_GRID)}: {_label(point)}")

    def mrr(i: int, repos: Iterable[str]) -> float:
        rows = [s for repo in repos for s in cache[i][repo]]
        return sum(s.rr for s in rows) / len(rows) if rows else 0.0

    names = [s.repo.name for s in stores]
    held: list[QueryScore] = []
    folds = []
    for name in names:
        train = [other for other in names if other != name]
        best = max(range(len(LOO_GRID)), key=lambda i: mrr(i, train))
        held.extend(cache[best][name])
        folds.append(
            {
                "held_out": name,
                "chosen": LOO_GRID[best],
                "train_mrr": mrr(best, train),
                "test": summarise(cache[best][name]),
            }
        )
    everything = [{"setting": p, **summarise([s for r in c.values() for s in r])}
                  for p, c in zip(LOO_GRID, cache)]  # fmt: skip
    return {"held_out": summarise(held), "folds": folds, "grid": everything}


# -- output -----------------------------------------------------------------------------


def print_tables(results: dict[str, Any]) -> None:
    systems = results["systems"]
    header = ["system"] + [f"{key} {m}" for key in LAYOUTS for m in ("R@1", "R@5", "MRR")]
    rows = []
    for name in SYSTEMS:
        cells: list[str] = [name]
        for layout in LAYOUTS:
            row = systems[layout][name]["overall"]
            cells += [f"{row['R@1']:.1f}", f"{row['R@5']:.1f}", f"{row['MRR@10']:.3f}"]
        rows.append(cells)
    print(harness.text_table(header, rows))
    print(
        f"per_repo: {LAYOUTS['per_repo']}; shared: {LAYOUTS['shared']} "
        "(BM25 ranks each repository's memories alone in both)"
    )
    print()
    header = ["repository", "n"] + [f"{name} {m}" for name in SYSTEMS for m in ("R@5", "MRR")]
    rows = []
    for repo, first in systems["per_repo"]["hybrid"]["per_repo"].items():
        cells = [repo, str(int(first["n"]))]
        for name in SYSTEMS:
            row = systems["per_repo"][name]["per_repo"][repo]
            cells += [f"{row['R@5']:.1f}", f"{row['MRR@10']:.3f}"]
        rows.append(cells)
    print(f"per repository ({LAYOUTS['per_repo']}):")
    print(harness.text_table(header, rows))
    print()


def print_loo(loo: dict[str, Any], default: dict[str, float]) -> None:
    held = loo["held_out"]
    print(
        f"leave one repository out ({len(LOO_GRID)} settings; {LAYOUTS['per_repo']}): "
        f"held out R@1 {held['R@1']:.1f}, R@5 {held['R@5']:.1f}, MRR {held['MRR@10']:.3f} "
        f"(the defaults, in sample: R@1 {default['R@1']:.1f}, R@5 {default['R@5']:.1f}, "
        f"MRR {default['MRR@10']:.3f})"
    )
    best = max(loo["grid"], key=lambda row: row["MRR@10"])
    print(f"  best setting in sample: {_label(best['setting'])}: MRR {best['MRR@10']:.3f}")
    for fold in loo["folds"]:
        test = fold["test"]
        print(
            f"  held out {fold['held_out']:<30} chose {_label(fold['chosen'])}: "
            f"train MRR {fold['train_mrr']:.3f}, test R@5 {test['R@5']:.1f} "
            f"MRR {test['MRR@10']:.3f}"
        )
    print()


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    parser = harness.parser(__doc__, inject=True, seed=(SEED, "seed of the clock's steps"))
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="a decisions-format JSON file"
    )
    parser.add_argument("--loo", action="store_true", help="leave-one-repository-out tuning")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        parser.error(f"no decisions file at {args.data}; give one with --data")

    repos = load(args.data)
    times = schedule(repos, args.seed)
    queries = sum(len(r.adrs) for r in repos)
    given = sum(len(a.memories()) for r in repos for a in r.adrs)
    distinct = sum(len(r.memories()) for r in repos)
    print(
        f"{len(repos)} repositories, {queries} ADRs (queries), {given} memories "
        f"({distinct} distinct within their repository), seed {args.seed}"
    )
    log = harness.Log(args.quiet)

    results: dict[str, Any] = {
        "data": str(args.data),
        "repositories": len(repos),
        "queries": queries,
        "memories": given,
        "distinct_memories": distinct,
        "seed": args.seed,
        "grid": list(LOO_GRID),
        "systems": {layout: {} for layout in LAYOUTS},
    }
    problems: list[str] = []
    stores: dict[tuple[str, str], list[RepoStore]] = {}
    scores: dict[tuple[str, str], list[QueryScore]] = {}
    try:
        for layout in LAYOUTS:
            for name, (embedder, ranking) in ENGINE_SYSTEMS.items():
                t0 = time.perf_counter()
                omit = 1 if args.inject_mismatch and (layout, name) == ("per_repo", "hybrid") else 0
                built = build(repos, times, layout, embedder, ranking, omit=omit)
                stores[layout, name] = built
                problems += store_problems(name, layout, built)
                scores[layout, name] = evaluate(built)
                log(f"  {layout}: {name}: {time.perf_counter() - t0:.1f} s")
        models = [Bm25(repo) for repo in repos]
        problems += bm25_problems(models)
        bm25 = [s for model in models for s in model.evaluate()]
        for layout in LAYOUTS:
            scores[layout, "BM25"] = bm25
            # The parts-off ranking, reached by switching the hybrid's stores.
            switched = evaluate(stores[layout, "hybrid"], RankingSettings().parts_off())
            problems += switch_problems(scores[layout, "parts off"], switched)

        ok = harness.check(
            problems,
            "check: every store holds exactly the memories given; BM25 ranks each memory "
            "first for its own text; switching settings ranks as building with them",
            failed="check: FAILED",
            then="no figures reported: the systems did not rank the memories given",
        )
        results["check"] = {"ok": ok, "problems": problems}
        if not ok:
            harness.write_json(args.json, results)
            return 1

        for (layout, name), rows in scores.items():
            results["systems"][layout][name] = report(rows)
        print_tables(results)
        if args.loo:
            loo = leave_one_out(stores["per_repo", "hybrid"], log)
            results["leave_one_out"] = loo
            print_loo(loo, results["systems"]["per_repo"]["hybrid"]["overall"])
    finally:
        for built in stores.values():
            close(built)

    seconds = time.perf_counter() - started
    results["seconds"] = round(seconds, 1)
    harness.write_json(args.json, results)
    print(f"run time {seconds:.1f} s")
    per_repo = results["systems"]["per_repo"]["hybrid"]["per_repo"]
    print(
        "hybrid per repository (R@5 / MRR@10): "
        + ", ".join(
            f"{repo} {row['R@5']:.1f} / {row['MRR@10']:.3f}" for repo, row in per_repo.items()
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
