"""How close the engine's offline token count comes to real BPE tokenizers.

The engine prices what a query returns with :func:`prime_memory_folding.engine.budget.count_tokens`,
an estimate that needs no vocabulary. This script counts the same texts with
it and with OpenAI's o200k_base and cl100k_base encoders (the ``bpe-openai``
package, which carries them; ``pip install -e '.[bench]'``), and prints the
estimate's total over each encoder's, the share of texts it counts low, and
how fast each counts. The texts are every LoCoMo dev turn (short chat turns)
and every LongMemEval dev user turn (long messages).

    python3 benchmarks/token_count.py \\
        --locomo ../shared/datasets/locomo/locomo10-dev.json \\
        --longmemeval ../shared/datasets/longmemeval/longmemeval-s-dev.json
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _harness as harness

from prime_memory_folding.engine.budget import count_tokens


def locomo_turns(path: Path) -> list[str]:
    texts = []
    for conversation in json.loads(path.read_text(encoding="utf-8")):
        for key, session in conversation["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                texts.extend(turn["text"] for turn in session if turn.get("text"))
    return texts


def longmemeval_turns(path: Path) -> list[str]:
    return [
        turn["content"]
        for question in json.loads(path.read_text(encoding="utf-8"))
        for session in question["sessions"]
        for turn in session["user_turns"]
        if turn.get("content")
    ]


def compare(texts: Sequence[str], references: dict[str, Callable[[str], int]]) -> dict[str, Any]:
    seconds, ours = harness.timed(list, map(count_tokens, texts))
    row: dict[str, Any] = {
        "texts": len(texts),
        "estimate_tokens": sum(ours),
        "estimate_texts_per_second": len(texts) / seconds,
    }
    for name, encode in references.items():
        their_seconds, theirs = harness.timed(list, map(encode, texts))
        if len(theirs) != len(ours):
            raise SystemExit(f"{name} counted {len(theirs)} texts, the estimate {len(ours)}")
        row[name] = {
            "tokens": sum(theirs),
            "estimate_over_reference": sum(ours) / max(sum(theirs), 1),
            "share_counted_low": sum(e < t for e, t in zip(ours, theirs)) / len(texts),
            "texts_per_second": len(texts) / their_seconds,
        }
    return row


def references() -> dict[str, Callable[[str], int]]:
    try:
        import bpe_openai  # type: ignore[import-not-found]
    except ImportError:
        return {}
    found = {}
    for name in ("o200k_base", "cl100k_base"):
        encoding = bpe_openai.get_encoding(name)
        found[name] = lambda text, e=encoding: len(e.encode(text))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--locomo", type=Path, required=True)
    parser.add_argument("--longmemeval", type=Path)
    args = parser.parse_args(argv)
    refs = references()
    if not refs:
        print(
            "bpe-openai is not installed: the estimate is timed alone (pip install -e '.[bench]')"
        )
    corpora = {"LoCoMo dev turns": locomo_turns(args.locomo)}
    if args.longmemeval:
        corpora["LongMemEval dev user turns"] = longmemeval_turns(args.longmemeval)
    report = {name: compare(texts, refs) for name, texts in corpora.items()}
    for name, row in report.items():
        print(f"{name}: {row['texts']:,} texts, estimate {row['estimate_tokens']:,} tokens, "
              f"{row['estimate_texts_per_second']:,.0f} texts/s")  # fmt: skip
        for ref in refs:
            r = row[ref]
            print(
                f"  over {ref}: {r['estimate_over_reference']:.3f}x its {r['tokens']:,} tokens; "
                f"counted low for {100 * r['share_counted_low']:.1f} % of texts; "
                f"{ref} counts {r['texts_per_second']:,.0f} texts/s"
            )
    harness.write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
