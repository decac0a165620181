"""The size of the MCP server's ``tools/list`` answer, which every session pays for.

    python3 benchmarks/tools_list.py
    python3 benchmarks/tools_list.py --json tools_list.json

An agent host sends the tool list to the model at the start of every session,
so each word of it costs every session. This script starts the real stdio
server (``python3 -m prime_memory_folding.mcp.server``) on a fresh store,
completes the handshake (protocol 2025-11-25), asks ``tools/list`` and
measures the reply line exactly as it arrived: its bytes, its tokens by the
package's own offline estimate (``prime_memory_folding.engine.budget.count_tokens``,
the count behind token budgets) and by OpenAI's o200k_base encoder
(``bpe-openai``, in the bench extra; without it the estimate is judged alone
and the script says so). It also counts each tool's parts: its description,
input schema, output schema and annotations.

Check: the reply lists every tool the server registers, each with an input
schema; if not, the script exits with status 1 and prints no size.
Target: under 2,000 tokens by each counter (PASS or MISS; a MISS does not
change the exit status).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _harness as harness
from _shared import SERVER, LineClient

from prime_memory_folding.engine.budget import count_tokens

TARGET_TOKENS = 2_000
PARTS = ("description", "inputSchema", "outputSchema", "annotations")


def o200k() -> Callable[[str], int] | None:
    """o200k_base's token count, or None without ``bpe-openai``."""
    try:
        import bpe_openai  # type: ignore[import-not-found]
    except ImportError:
        return None
    encoding = bpe_openai.get_encoding("o200k_base")
    return lambda text: len(encoding.encode(text))


def registered_tools() -> set[str]:
    """The tools the server registers, asked in process."""
    from prime_memory_folding.mcp.server import build_server

    return set(build_server(lambda: None).tool_names)  # type: ignore[arg-type,return-value]


def list_tools(store: Path) -> str:
    """The ``tools/list`` reply line of a real stdio server, as it arrived."""
    env = dict(os.environ, PRIME_MEMORY_EMBEDDER="none")
    client = LineClient([*SERVER, "--store", str(store), "--scope", "global"], env, timeout=60)
    try:
        line, _ = client.exchange("tools/list", {})
    finally:
        client.close()
    return line.decode("utf-8").rstrip("\r\n")


def measure(line: str, reference: Callable[[str], int] | None) -> dict[str, Any]:
    """Bytes and tokens of the whole reply, and of each tool's parts."""

    def size(text: str) -> dict[str, int]:
        counted = {"bytes": len(text.encode("utf-8")), "estimate": count_tokens(text)}
        if reference is not None:
            counted["o200k_base"] = reference(text)
        return counted

    tools: dict[str, Any] = {}
    for tool in json.loads(line)["result"]["tools"]:
        tools[tool["name"]] = {
            part: size(json.dumps(tool[part], separators=(",", ":"), ensure_ascii=False))
            for part in PARTS
            if part in tool
        }
    return {"total": size(line), "tools": tools}


def check(line: str, expected: set[str]) -> list[str]:
    """What is wrong with the reply: a tool missing or extra, or one without an input schema."""
    tools = json.loads(line).get("result", {}).get("tools", [])
    listed = {tool.get("name") for tool in tools}
    problems = [f"{name} is not listed" for name in sorted(expected - listed)]
    problems += [f"{name} is listed but not registered" for name in sorted(listed - expected)]
    problems += [
        f"{tool.get('name')} has no input schema" for tool in tools if "inputSchema" not in tool
    ]
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    args = harness.parser(__doc__).parse_args(argv)
    reference = o200k()
    with tempfile.TemporaryDirectory(prefix="pmf-tools-list-") as tmp:
        line = list_tools(Path(tmp) / "memory.db")
    expected = registered_tools()
    ok = f"check: OK - all {len(expected)} tools listed, each with an input schema"
    if not harness.check(check(line, expected), ok, failed="check: FAILED", then=""):
        return 1
    report = measure(line, reference)
    counters = ["estimate"] + (["o200k_base"] if reference else [])
    report["target_tokens"] = TARGET_TOKENS
    report["pass"] = {name: report["total"][name] < TARGET_TOKENS for name in counters}
    if reference is None:
        print("bpe-openai is not installed: the estimate is judged alone (pip install '.[bench]')")
    rows = [
        [name, part, *(f"{counted[c]:,}" for c in [*counters, "bytes"])]
        for name, parts in report["tools"].items()
        for part, counted in parts.items()
    ]
    print()
    print(harness.text_table(["tool", "part", *counters, "bytes"], rows, left=2))
    total = report["total"]
    print(
        f"\ntools/list reply: {total['bytes']:,} bytes; "
        + "; ".join(f"{total[c]:,} tokens by {c}" for c in counters)
    )
    for name in counters:
        print(
            f"target < {TARGET_TOKENS:,} tokens by {name}: {harness.verdict(report['pass'][name])}"
        )
    harness.write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
