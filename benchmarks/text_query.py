"""Text recall at scale: ``store_many`` with embedding, hybrid text queries, memory.

It generates N English-like memories from a seed (sentences of 8 to 20 words
drawn with Zipf-like weights from a fixed vocabulary, so a few words are on a
large share of the records, as in real notes) in 10 domains, stores them with
``store_many`` in batches of 10,000 with the default embedder (the bundled
static model, 256 dimensions), then asks Q text queries of 3 to 8 words, with
no gate and with a domain gate. A query's time covers embedding the question,
the FTS5 BM25 search, cosine over the gated rows and fusion. Before the stores
it times the embedder alone on up to 20,000 of the same texts (target: 5,000
texts a second or more) and prints the bytes of vector each memory stores.

Run from the repository root::

    python3 benchmarks/text_query.py --records 100000
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _shared import DOMAINS, Progress, batches, fmt_ms, verdict

from prime_memory_folding import MemoryEngine, recall
from prime_memory_folding.embeddings import load_embedder

TARGET_RECORDS = 100_000
TARGET_P50_S = 0.015
TARGET_STORE_RATE = 1_000.0
TARGET_RSS_MB = 400.0
TARGET_EMBED_RATE = 5_000.0
#: Texts embedded alone, before the stores, to time the embedder by itself.
EMBED_SAMPLE = 20_000

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


@contextlib.contextmanager
def context_reach(reach: int) -> Iterator[None]:
    """Text queries take context from ``reach`` neighbours on each side, for a while."""
    saved = recall.CONTEXT_REACH
    recall.CONTEXT_REACH = reach
    try:
        yield
    finally:
        recall.CONTEXT_REACH = saved


def timed_query(engine: MemoryEngine, text: str, gate: dict[str, str], reach: int | None) -> float:
    """Seconds for one text query (``reach``: context from that many neighbours a side)."""
    with contextlib.ExitStack() as stack:
        if reach is not None:
            stack.enter_context(context_reach(reach))
        started = time.perf_counter()
        engine.query(text=text, limit=10, **gate)
        return time.perf_counter() - started


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB.

    Linux's ``VmHWM`` starts afresh when a program is executed, while
    ``ru_maxrss`` keeps the peak of the process that forked this one (as when
    ``run_all.py`` runs this script), so prefer it where it exists.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=TARGET_RECORDS)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument(
        "--compare-reach",
        type=int,
        metavar="N",
        help="also time each query, right after it, with context from N neighbours a side",
    )
    args = parser.parse_args(argv)

    texts = sentences(args.records, args.seed, 8, 20)
    rng = random.Random(args.seed + 1)
    items = [{"content": t, "domain": rng.choice(DOMAINS)} for t in texts]
    questions = sentences(args.queries, args.seed + 2, 3, 8)
    results: dict[str, Any] = {"records": args.records, "queries": args.queries}
    embedder = load_embedder("builtin")
    sample = texts[:EMBED_SAMPLE]
    embedder.embed(sample[:100])  # the first call loads the tokenizer's caches
    started = time.perf_counter()
    for start in range(0, len(sample), 1024):
        embedder.embed(sample[start : start + 1024])
    results["embed_rate"] = len(sample) / (time.perf_counter() - started)
    results["vector_bytes"] = 4 * embedder.dim
    with tempfile.TemporaryDirectory() as folder, MemoryEngine(Path(folder) / "t.db") as engine:
        engine.store("warm up the embedder")  # loading the model is not storing
        progress = Progress("store_many", len(items), enabled=not args.quiet)
        started = time.perf_counter()
        done = 0
        for batch in batches(items, 10_000):
            engine.store_many(batch)
            done += len(batch)
            progress.update(done)
        store_s = time.perf_counter() - started
        results["store_rate"] = args.records / store_s

        for name, gate in (("no gate", {}), ("domain gate", {"domain": DOMAINS[3]})):
            for q in questions[:10]:
                engine.query(text=q, **gate)
            times = []
            other: list[float] = []
            for n, q in enumerate(questions):
                # With --compare-reach the two settings take turns going first.
                if args.compare_reach is not None and n % 2:
                    other.append(timed_query(engine, q, gate, args.compare_reach))
                times.append(timed_query(engine, q, gate, None))
                if args.compare_reach is not None and not n % 2:
                    other.append(timed_query(engine, q, gate, args.compare_reach))
            times.sort()
            results[name] = {
                "p50_s": statistics.median(times),
                "p95_s": times[int(0.95 * (len(times) - 1))],
            }
            if other:
                results[name]["p50_s_reach_compared"] = statistics.median(other)
    rss_mb = peak_rss_mb()
    results["max_rss_mb"] = rss_mb

    scale = args.records == TARGET_RECORDS
    print(f"text recall, {args.records:,} records, {args.queries} queries")
    print(
        f"store_many with embedding: {results['store_rate']:,.0f} records/s "
        f"(target >= {TARGET_STORE_RATE:,.0f}/s)"
    )
    print(
        f"embedding alone, {len(sample):,} texts: {results['embed_rate']:,.0f} texts/s "
        f"(target >= {TARGET_EMBED_RATE:,.0f}/s); vector storage per memory: "
        f"{results['vector_bytes']:,} bytes"
    )
    for name in ("no gate", "domain gate"):
        row = results[name]
        print(f"text query, {name}: p50 {fmt_ms(row['p50_s'])}, p95 {fmt_ms(row['p95_s'])}")
        if "p50_s_reach_compared" in row:
            compared = row["p50_s_reach_compared"]
            print(
                f"  the same queries with context from {args.compare_reach} neighbour(s) a side "
                f"(reach {recall.CONTEXT_REACH} is the default): p50 {fmt_ms(compared)}; "
                f"default / that = {row['p50_s'] / compared:.2f}x"
            )
    print(f"peak resident memory: {rss_mb:,.0f} MB (target <= {TARGET_RSS_MB:.0f} MB)")
    note = "" if scale else f" (targets are set at {TARGET_RECORDS:,} records)"
    p50 = results["no gate"]["p50_s"]
    print(f"{verdict(p50 <= TARGET_P50_S)} text query p50 <= 15 ms{note}")
    print(f"{verdict(results['store_rate'] >= TARGET_STORE_RATE)} store_many >= 1,000/s{note}")
    print(f"{verdict(rss_mb <= TARGET_RSS_MB)} resident memory <= 400 MB{note}")
    print(f"{verdict(results['embed_rate'] >= TARGET_EMBED_RATE)} embedding >= 5,000 texts/s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
