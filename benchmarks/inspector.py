"""The inspector's server time per page at scale, beside the engine calls each page makes.

It stores N records (English-like sentences from ``text_query.py``, labels from
``_shared.generate``; no embedder, so text queries rank lexically), then asks
the inspector's app, in process through Starlette's test client, for:

- the memories page without a text query (``engine.browse``, 25 rows, and
  ``engine.stats`` for the list of scopes);
- the memories page with a text query (``engine.query(text=...)``, then
  ``engine.browse`` over its hits, and ``stats``);
- one memory's page (``get``, ``decay``, ``archive_entries``, ``stats``).

Each page is checked first to list the same records as its engine calls, then
the page and its engine calls are timed in turns in the same run; the table
shows the p50 of each and what the page adds (templates, routing, security).
The target is p50 <= 100 ms per page at 100,000 records.

Run from the repository root::

    python3 benchmarks/inspector.py --records 100000
    python3 benchmarks/inspector.py --records 300 --rounds 3   # tiny
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _harness as harness
from _shared import generate, store_in_batches
from text_query import _VOCABULARY, sentences

from prime_memory_folding import MemoryEngine
from prime_memory_folding.web import Secrets, create_app
from prime_memory_folding.web.app import TEXT_LIMIT

TARGET_P50_S = 0.100
PAGE_SIZE = 25


def build(path: Path, count: int, seed: int, quiet: bool) -> None:
    labels = generate(count, seed)
    contents = sentences(count, seed, 8, 20)
    items = [{**label.as_item(), "content": text} for label, text in zip(labels, contents)]
    with MemoryEngine(path, embedder="none", scope="global") as engine:
        store_in_batches(engine, items, show=not quiet and count >= 10_000)


def listed(page: str) -> list[str]:
    body = page[page.index("<tbody>") :]
    return re.findall(r'name="ids" value="([0-9a-f]{32})"', body)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from starlette.testclient import TestClient

    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "memory.db"
        build_s = harness.timed(build, path, args.records, args.seed, args.quiet)[0]
        engine = MemoryEngine(path, embedder="none", scope="global")
        keys = Secrets(token="benchmark-token-0123456789", cookie="pmi")
        client = TestClient(create_app(engine, keys, ["testserver"]))
        client.cookies.set("pmi", keys.token)
        every = ["*"]
        queries = [" ".join(rng.sample(_VOCABULARY[:60], 2)) for _ in range(args.rounds)]
        ids = engine.match_ids(scopes=every)
        picks = [rng.choice(ids) for _ in range(args.rounds)]

        def plain_engine(_: int) -> list[str]:
            page = engine.browse(scopes=every, order="salience", limit=PAGE_SIZE)
            engine.stats()  # the scope list
            return [h.record.record_id for h in page.hits]

        def text_engine(i: int) -> list[str]:
            hits = engine.query(text=queries[i], limit=TEXT_LIMIT, scopes=every)
            among = [h.record.record_id for h in hits]
            page = engine.browse(scopes=every, among=among, order="given", limit=PAGE_SIZE)
            engine.stats()
            return [h.record.record_id for h in page.hits]

        def memory_engine(i: int) -> list[str]:
            record = engine.get(picks[i])
            engine.decay(picks[i])
            engine.archive_entries(record_id=picks[i], reason="folded", limit=200)
            engine.stats()
            return [record.record_id]

        def page(url: Callable[[int], str]) -> Callable[[int], str]:
            def fetch(i: int) -> str:
                answer = client.get(url(i))
                if answer.status_code != 200:
                    raise SystemExit(f"{url(i)} answered {answer.status_code}")
                return answer.text

            return fetch

        cases: dict[str, tuple[Callable[[int], str], Callable[[int], list[str]], str]] = {
            "memories page": (page(lambda i: "/memories"), plain_engine, "browse + stats"),
            "memories page, text query": (
                page(lambda i: "/memories?q=" + queries[i].replace(" ", "+")),
                text_engine,
                "query(text) + browse + stats",
            ),
            "a memory's page": (
                page(lambda i: f"/memories/{picks[i]}"),
                memory_engine,
                "get + decay + archive + stats",
            ),
        }
        problems = []
        for name, (fetch, call, _) in cases.items():
            for i in range(min(3, args.rounds)):
                html = fetch(i)
                want = call(i)
                if args.inject_mismatch:
                    want = want[1:] + want[:1] if len(want) > 1 else ["0" * 32]
                got = listed(html) if name.startswith("memories") else [picks[i]]
                if name.startswith("a memory") and picks[i] not in html:
                    got = []
                if got != want:
                    problems.append(f"{name}: the page lists {got[:3]}, the engine {want[:3]}")
        # Each page and its engine calls take turns, request by request.
        p50s = {
            name: harness.pooled_medians(
                harness.alternate({"page": fetch, "engine": call}, range(args.rounds))
            )
            for name, (fetch, call, _) in cases.items()
            if not problems
        }
        client.close()
        engine.close()
    return {
        "records": args.records,
        "rounds": args.rounds,
        "build_seconds": build_s,
        "agreement": not problems,
        "problems": problems,
        "engine_calls": {name: case[2] for name, case in cases.items()},
        "p50_seconds": p50s,
    }


def table(result: dict[str, Any]) -> harness.Table:
    """Each page's p50, its engine calls' p50, what the page adds, and its verdict."""
    rows = [
        [name, result["engine_calls"][name]]
        + [harness.fmt_ms(t) for t in (p50["page"], p50["engine"], p50["page"] - p50["engine"])]
        + [harness.verdict(p50["page"] <= TARGET_P50_S)]
        for name, p50 in result["p50_seconds"].items()
    ]
    return ["page", "engine calls", "page p50", "engine p50", "page adds", "target"], rows


def report(result: dict[str, Any]) -> bool:
    """Print the check and, if it passed, the table; whether every page met its target."""
    print(f"inspector pages at {result['records']:,} records, {result['rounds']} rounds each")
    ok_line = "agreement: OK - every page lists the records its engine calls return"
    if not harness.check(result["problems"], ok_line):
        return False
    print()
    print(harness.text_table(*table(result), left=2))
    print()
    print(f"target: p50 <= {TARGET_P50_S * 1000:.0f} ms per page at 100,000 records")
    return all(sides["page"] <= TARGET_P50_S for sides in result["p50_seconds"].values())


def main(argv: list[str] | None = None) -> int:
    # --inject-mismatch: the engine's answers altered
    parser = harness.parser(
        __doc__, inject=True, records=100_000, rounds=(30, "requests per page"), seed=7
    )
    args = parser.parse_args(argv)
    harness.at_least(parser, args, records=1, rounds=1)
    result = run(args)
    ok = report(result)
    harness.write_json(args.json, result)
    if not result["agreement"]:
        return 1
    return 0 if ok or args.records < 100_000 else 1


if __name__ == "__main__":
    sys.exit(main())
