"""Text recall at scale: ``store_many`` with embedding, hybrid text queries, memory.

It generates N English-like memories from a seed (sentences of 8 to 20 words
drawn with Zipf-like weights from a fixed vocabulary, so a few words are on a
large share of the records, as in real notes) in 10 domains, stores them with
``store_many`` in batches of 10,000 with an embedder (``--embedder``, else
``PRIME_MEMORY_EMBEDDER``, else the bundled static model, 256 dimensions), then
asks Q text queries of 3 to 8 words, with no gate and with a domain gate. A
query's time covers embedding the question, the FTS5 BM25 search, cosine over
the gated rows and fusion. Consecutive memories are stored in sessions of
``--session-size`` (default 20; 0: none), as a host capturing conversations
would store them, so that session context has neighbours to read. It also
times the embedder alone on up to 20,000 of the same texts (target: 5,000
texts a second or more) and prints the bytes of vector each memory stores;
``--compare-reach N`` times every query also with context from N neighbours
on each side (``context_reach``), the two taking turns going first.
``--compare-before`` times every query also as the engine ranked before the
time prior, the query weights, questions, lexical feedback and the context
pool: the same engine with those parts off in its ranking settings
(``time_weight``, ``query_idf``, ``ask_penalty``, ``lend_weight`` and
``context_pool`` 0, set through ``engine.ranking``), taking turns, and checks
that the queries that name no time get the same hits with and without the
time prior (the vocabulary holds "yesterday", "friday" and other time words,
so some name one). ``--time-phrase "last week"`` appends those words to every query,
so that each names a time. The vocabulary is small, so every word is in
hundreds of records; ``--rare-words K`` adds K words to each memory, drawn
from 20,000 made-up ones, as names and identifiers are in real notes (rare
words are what lexical feedback lends).

It measures embedding, so it refuses to run without an embedder
(``PRIME_MEMORY_EMBEDDER=none``), and it prints the embedder it used. Before
timing, it checks that every record was stored with a vector in the
embedder's space, and that every query, in each setting timed, returns its
full 10 hits (with the domain gate, all from that domain). Otherwise it exits
with status 1 and reports no rates.

Run from the repository root::

    python3 benchmarks/text_query.py --records 100000
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as harness
from _shared import DOMAINS, later_parts_off, memory_kib, store_in_batches

from prime_memory_folding import Hit, MemoryEngine, RankingSettings
from prime_memory_folding.core.when import time_window
from prime_memory_folding.recall.embeddings import EMBEDDER_ENV, Embedder, load_embedder

TARGET_RECORDS = 100_000
TARGET_P50_S = 0.015
TARGET_STORE_RATE = 1_000.0
TARGET_RSS_MB = 400.0
TARGET_EMBED_RATE = 5_000.0
#: Made-up words ``--rare-words`` draws from: each is in a few records of 100,000.
RARE_WORDS = 20_000
#: Texts embedded alone, before the stores, to time the embedder by itself.
EMBED_SAMPLE = 20_000
LIMIT = 10
GATED_DOMAIN = DOMAINS[3]
EXIT_MISMATCH = 1
#: Memories per session, stored one after another (``--session-size``).
SESSION_SIZE = 20
#: The engine's default ranking.
DEFAULT = RankingSettings()
#: The ranking before the time prior and the parts after it (``--compare-before``).
BEFORE = later_parts_off(DEFAULT).but(time_weight=0.0)
#: The default ranking without the time prior alone.
WITHOUT_TIME_PRIOR = DEFAULT.but(time_weight=0.0)

_VOCABULARY_TEXT = """
time person year way day thing man world life hand part child eye woman place work week
case point government company number group problem fact meeting project deadline release
server database query index vector memory cache budget client contract invoice design
review test build deploy bug feature customer team manager report plan idea question
answer email call doctor school family friend house car city river mountain garden dog
cat book music movie game dinner breakfast coffee tea trip flight hotel beach weekend
birthday party gift painting photo camera phone laptop keyboard screen password account
bank payment salary tax insurance health exercise running yoga swim bike walk park
morning evening night today tomorrow yesterday monday friday summer winter spring autumn
paris london tokyo berlin sydney toronto madrid rome lisbon oslo caroline melanie john
sarah alex maria james emma lucas sophie daniel nina adoption support group career art
concert festival museum library lecture course exam thesis paper research experiment
result analysis model training data pipeline schedule agenda note reminder decision
policy risk incident outage latency throughput migration backup restore security audit
"""
_VOCABULARY = tuple(_VOCABULARY_TEXT.split())
_VERBS_TEXT = """
went saw made took said found gave told asked started finished moved bought fixed
"""
_VERBS = tuple(_VERBS_TEXT.split())
_GLUE_TEXT = """
the a to of and in on for with at from about after before
"""
_GLUE = tuple(_GLUE_TEXT.split())


def sentences(count: int, seed: int, low: int, high: int) -> list[str]:
    rng = random.Random(seed)
    weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(_VOCABULARY))))
    out = []
    for i in range(count):
        words = []
        for _ in range(rng.randint(low, high)):
            pick = rng.random()
            if pick < 0.25:
                words.append(rng.choice(_GLUE))
            elif pick < 0.35:
                words.append(rng.choice(_VERBS))
            else:
                words.append(rng.choices(_VOCABULARY, cum_weights=weights)[0])
        out.append(" ".join(words) + (f" #{i}" if high > 8 else ""))
    return out


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB: ``VmHWM`` where Linux has it, since
    ``ru_maxrss`` keeps the peak of the process that forked this one (as when
    ``run_all.py`` runs this script)."""
    peak = memory_kib()["peak_rss_kib"]
    return (peak or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 1024


def embed_rate(embedder: Embedder, texts: list[str]) -> float:
    """Texts a second the embedder alone takes, in batches of 1,024."""
    embedder.embed(texts[:100])  # the first call warms the tokenizer
    started = time.perf_counter()
    for start in range(0, len(texts), 1024):
        embedder.embed(texts[start : start + 1024])
    return len(texts) / (time.perf_counter() - started)


def check_store(engine: MemoryEngine, embedder: Embedder, expected: int) -> list[str]:
    """What differs from what this script stored; empty when all is well."""
    problems = []
    stats = engine.stats()
    stored = stats.records - 1  # less the warm-up record
    if stored != expected:
        problems.append(f"stored {stored:,} records, expected {expected:,}")
    index = engine._index  # a benchmark may look inside
    with_vector = int(index.has_vector(index.alive_rows()).sum())
    if with_vector != stats.records:
        problems.append(f"{with_vector:,} of {stats.records:,} records have a vector")
    if stats.embedding_space != embedder.name:
        problems.append(f"embedding space {stats.embedding_space!r}, not {embedder.name!r}")
    return problems


def ask(
    engine: MemoryEngine,
    question: str,
    *,
    domain: str | None,
    setting: RankingSettings,
) -> list[Hit]:
    """One text query, ranked by ``setting`` (``engine.ranking``)."""
    engine.ranking = setting
    return engine.query(text=question, limit=LIMIT, domain=domain)


def ids(hits: list[Hit]) -> list[str]:
    return [h.record.record_id for h in hits]


def check_hits(name: str, question: str, hits: list[Hit], wanted: int, domain: str | None) -> str:
    """What is wrong with one query's hits, or ''."""
    if len(hits) != wanted:
        return f"{name}: {question!r} found {len(hits)} hits, expected {wanted}"
    outside = sum(domain is not None and h.record.domain != domain for h in hits)
    return f"{name}: {question!r} found {outside} hits outside the gate" if outside else ""


def failed(args: argparse.Namespace, embedder: Embedder, problems: list[str]) -> int:
    print(f"text recall, {args.records:,} records, embedder {embedder.name}")
    harness.check(
        problems,
        "",
        failed="check: FAILED",
        then="no rates reported: the store or the queries are not what was asked for",
        most=10,
    )
    return EXIT_MISMATCH


def main(argv: list[str] | None = None) -> int:
    # --inject-mismatch: one record fewer stored than counted
    parser = harness.parser(__doc__, inject=True, records=TARGET_RECORDS, queries=200, seed=1)
    parser.add_argument(
        "--embedder",
        help=f"the embedder to measure (default: {EMBEDDER_ENV}, else builtin); not 'none'",
    )
    parser.add_argument(
        "--compare-reach",
        type=int,
        metavar="N",
        help="also time each query with context from N neighbours a side, taking turns",
    )
    parser.add_argument(
        "--time-phrase",
        metavar="WORDS",
        help="append these words (such as 'last week') to every query",
    )
    parser.add_argument(
        "--rare-words",
        type=int,
        default=0,
        metavar="K",
        help=f"add K words to each memory, drawn from {RARE_WORDS:,} made-up ones (names, codes)",
    )
    parser.add_argument(
        "--session-size",
        type=int,
        default=SESSION_SIZE,
        metavar="N",
        help=f"store consecutive memories in sessions of N (default {SESSION_SIZE}; 0: none)",
    )
    parser.add_argument(
        "--compare-before",
        action="store_true",
        help="also time each query ranked as before the last five parts of ranking, taking turns",
    )
    args = parser.parse_args(argv)
    harness.at_least(parser, args, records=LIMIT, queries=1)
    if args.session_size < 0:
        parser.error("--session-size must be 0 or more")
    spec = (args.embedder or os.environ.get(EMBEDDER_ENV, "")).strip() or "builtin"
    if spec.lower() == "none":
        setting = "--embedder" if args.embedder else EMBEDDER_ENV
        parser.error(
            f"{setting} is 'none', so nothing would be embedded: this benchmark measures "
            f"storing with embedding and hybrid text queries; give an embedder, such as "
            f"--embedder builtin"
        )
    embedder = load_embedder(spec)

    texts = sentences(args.records, args.seed, 8, 20)
    if args.rare_words:
        names = random.Random(args.seed + 3)
        texts = [
            " ".join(
                [text, *(f"n{names.randrange(RARE_WORDS):05d}x" for _ in range(args.rare_words))]
            )
            for text in texts
        ]
    rng = random.Random(args.seed + 1)
    items: list[dict[str, Any]] = [{"content": t, "domain": rng.choice(DOMAINS)} for t in texts]
    if args.session_size:
        for i, item in enumerate(items):
            item["session"] = f"s{i // args.session_size}"
    questions = sentences(args.queries, args.seed + 2, 3, 8)
    if args.time_phrase:
        questions = [f"{q} {args.time_phrase}" for q in questions]
    results: dict[str, Any] = {
        "records": args.records,
        "queries": args.queries,
        "embedder": embedder.name,
        "session_size": args.session_size,
    }
    sample = texts[:EMBED_SAMPLE]
    results["embed_rate"] = embed_rate(embedder, sample)
    results["vector_bytes"] = 4 * embedder.dim
    with (
        tempfile.TemporaryDirectory() as folder,
        MemoryEngine(Path(folder) / "t.db", embedder=embedder) as engine,
    ):
        engine.store("warm up the embedder")  # loading the model is not storing
        stored = items[1:] if args.inject_mismatch else items
        store_s = harness.timed(
            store_in_batches, engine, stored, label="store_many", show=not args.quiet
        )[0]
        results["store_rate"] = args.records / store_s

        problems = check_store(engine, embedder, len(items))
        if problems:
            return failed(args, embedder, problems)
        in_domain = sum(item["domain"] == GATED_DOMAIN for item in items)
        gates: tuple[tuple[str, str | None, int], ...] = (
            ("no gate", None, min(LIMIT, len(items) + 1)),
            ("domain gate", GATED_DOMAIN, min(LIMIT, in_domain)),
        )
        settings: dict[str, RankingSettings] = {"default": DEFAULT}
        if args.compare_reach is not None:
            settings["compared"] = DEFAULT.but(context_reach=args.compare_reach)
        if args.compare_before:
            settings["before"] = BEFORE
        timeless = [time_window(q, time.time()) is None for q in questions]
        results["queries_naming_a_time"] = len(questions) - sum(timeless)
        for name, domain, wanted in gates:
            for q in questions[:10]:
                engine.query(text=q, domain=domain)
            calls = {
                label: functools.partial(ask, engine, domain=domain, setting=setting)
                for label, setting in settings.items()
            }
            answers = {label: [call(q) for q in questions] for label, call in calls.items()}
            problems = [
                problem
                for found in answers.values()
                for q, hits in zip(questions, found)
                if (problem := check_hits(name, q, hits, wanted, domain))
            ]
            if "before" in answers:
                untimed = functools.partial(ask, engine, domain=domain, setting=WITHOUT_TIME_PRIOR)
                problems += [
                    f"{name}: {q!r} names no time, yet ranked otherwise without the time prior"
                    for q, no_time, now in zip(questions, timeless, answers["default"])
                    if no_time and ids(now) != ids(untimed(q))
                ]
            if problems:
                return failed(args, embedder, problems)
            # The settings take turns going first.
            samples = harness.alternate(calls, questions)
            times = [t for per_q in samples["default"] for t in per_q]
            results[name] = {
                "p50_s": statistics.median(times),
                "p95_s": harness.percentile(times, 0.95),
            }
            pooled = harness.pooled_medians(samples)
            if "compared" in samples:
                results[name]["p50_s_reach_compared"] = pooled["compared"]
            if "before" in samples:
                results[name]["p50_s_before"] = pooled["before"]
    rss_mb = peak_rss_mb()
    results["max_rss_mb"] = rss_mb

    scale = args.records == TARGET_RECORDS
    print(f"text recall, {args.records:,} records, {args.queries} queries")
    print(
        f"check: OK - {args.records:,} records stored, each with a vector; every query found "
        f"its {LIMIT} hits (with the domain gate, all in {GATED_DOMAIN})"
    )
    if args.compare_before:
        timed = results["queries_naming_a_time"]
        print(
            f"check: OK - the {args.queries - timed} queries that name no time got the same "
            f"hits without the time prior; {timed} name one"
            if timed < args.queries
            else "check: every query names a time, so the hits may differ from before"
        )
    print(
        f"store_many with embedding ({embedder.name}): {results['store_rate']:,.0f} records/s "
        f"(target >= {TARGET_STORE_RATE:,.0f}/s)"
    )
    print(
        f"embedding alone, {len(sample):,} texts: {results['embed_rate']:,.0f} texts/s "
        f"(target >= {TARGET_EMBED_RATE:,.0f}/s); vector storage per memory: "
        f"{results['vector_bytes']:,} bytes"
    )
    for name in ("no gate", "domain gate"):
        row = results[name]
        p50, p95 = harness.fmt_ms(row["p50_s"]), harness.fmt_ms(row["p95_s"])
        print(f"text query, {name}: p50 {p50}, p95 {p95}")
        if "p50_s_reach_compared" in row:
            compared = row["p50_s_reach_compared"]
            print(
                f"  the same queries with context from {args.compare_reach} neighbour(s) a side "
                f"(the default: {DEFAULT.context_reach}): p50 {harness.fmt_ms(compared)}; "
                f"default / that = {row['p50_s'] / compared:.2f}x"
            )
        if "p50_s_before" in row:
            before = row["p50_s_before"]
            print(
                "  the same queries ranked as before the time prior, query weights, questions, "
                "feedback and the context pool: "
                f"p50 {harness.fmt_ms(before)}; "
                f"now / before = {row['p50_s'] / before:.2f}x (target <= 1.20x)"
            )
    print(f"peak resident memory: {rss_mb:,.0f} MB (target <= {TARGET_RSS_MB:.0f} MB)")
    note = "" if scale else f" (targets are set at {TARGET_RECORDS:,} records)"
    for ok, target in (
        (results["no gate"]["p50_s"] <= TARGET_P50_S, f"text query p50 <= 15 ms{note}"),
        (results["store_rate"] >= TARGET_STORE_RATE, f"store_many >= 1,000/s{note}"),
        (rss_mb <= TARGET_RSS_MB, f"resident memory <= 400 MB{note}"),
        (results["embed_rate"] >= TARGET_EMBED_RATE, "embedding alone >= 5,000 texts/s"),
    ):
        print(f"{harness.verdict(ok)} {target}")
    harness.write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
