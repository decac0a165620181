"""The MCP tools, through the SDK's in-memory client."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, TextContent
from pydantic import BaseModel, Field

from prime_memory_folding import MemoryEngine
from prime_memory_folding.core.address import pack
from prime_memory_folding.mcp.models import (
    ForgetOutput,
    ReinforceOutput,
    UpdateOutput,
    compact_schema,
)
from prime_memory_folding.mcp.server import (
    EncodeOutput,
    FoldOutput,
    QueryOutput,
    StatsOutput,
    StoreOutput,
    build_server,
)
from prime_memory_folding.storage.migrations import latest_version
from tests.conftest import FakeClock

pytestmark = pytest.mark.anyio

TOOLS = [
    "prime_memory_encode",
    "prime_memory_store",
    "prime_memory_query",
    "prime_memory_fold",
    "prime_memory_stats",
    "prime_memory_forget",
    "prime_memory_update",
    "prime_memory_reinforce",
]


@pytest.fixture
async def client(engine: MemoryEngine) -> AsyncIterator[Client]:
    async with Client(build_server(engine), mode="legacy") as connected:
        yield connected


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def call_error(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    assert result.structured_content is None
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


async def test_lists_the_five_tools(client: Client) -> None:
    listed = await client.list_tools()
    assert [tool.name for tool in listed.tools] == TOOLS


@pytest.mark.parametrize(
    ("tool", "read_only", "destructive"),
    [
        ("prime_memory_encode", True, False),
        ("prime_memory_store", False, False),
        ("prime_memory_query", True, False),
        ("prime_memory_fold", False, True),
        ("prime_memory_stats", True, False),
        ("prime_memory_reinforce", False, False),
    ],
)
async def test_tool_annotations_are_honest(
    client: Client, tool: str, read_only: bool, destructive: bool
) -> None:
    listed = {t.name: t for t in (await client.list_tools()).tools}
    hints = listed[tool].annotations
    assert hints is not None
    assert hints.read_only_hint is read_only
    assert hints.destructive_hint is destructive
    assert hints.open_world_hint is False
    assert hints.title


@pytest.mark.parametrize(
    ("tool", "arguments", "model"),
    [
        ("prime_memory_encode", {"domain": "decision"}, EncodeOutput),
        ("prime_memory_store", {"content": "x"}, StoreOutput),
        ("prime_memory_query", {}, QueryOutput),
        ("prime_memory_fold", {}, FoldOutput),
        ("prime_memory_stats", {}, StatsOutput),
        ("prime_memory_forget", {"domain": "nothing-here"}, ForgetOutput),
        ("prime_memory_update", {"record_id": "", "tags": ["t"]}, UpdateOutput),
        ("prime_memory_reinforce", {"record_ids": [""]}, ReinforceOutput),
    ],
)
async def test_every_tool_returns_its_model_and_has_a_short_description(
    client: Client, tool: str, arguments: dict[str, Any], model: type[BaseModel]
) -> None:
    if tool == "prime_memory_update":
        stored = await call(client, "prime_memory_store", content="to correct")
        arguments = {**arguments, "record_id": stored["record"]["record_id"]}
    if tool == "prime_memory_reinforce":
        stored = await call(client, "prime_memory_store", content="to use")
        arguments = {"record_ids": [stored["record"]["record_id"]]}
    out = await call(client, tool, **arguments)
    assert model.model_validate(out).model_dump(mode="json") == out
    listed = {t.name: t for t in (await client.list_tools()).tools}
    # No output schema is advertised: it would cost every session more than the
    # whole list does now; structuredContent still follows the model.
    assert listed[tool].output_schema is None
    description = listed[tool].description or ""
    assert 40 < len(description) < 400
    assert description.count(".") <= 3


async def test_listed_input_schemas_keep_every_argument_and_drop_only_noise(
    engine: MemoryEngine,
) -> None:
    server = build_server(engine)
    full = {tool.name: tool.input_schema for tool in await MCPServer.list_tools(server)}
    listed = {tool.name: tool.input_schema for tool in await server.list_tools()}
    assert set(listed) == set(TOOLS)
    for name, schema in listed.items():
        original = full[name]
        assert schema["type"] == "object"
        assert list(schema["properties"]) == list(original["properties"]), name
        assert schema.get("required") == original.get("required"), name
        assert "title" not in schema and '"title"' not in json.dumps(schema), name
        for argument, spec in schema["properties"].items():
            before = original["properties"][argument]
            assert "anyOf" not in spec, (name, argument)
            if before.get("default") is not None:
                assert spec["default"] == before["default"], (name, argument)
            if "description" in before:
                assert spec["description"] == before["description"], (name, argument)


def test_compact_schema_keeps_names_and_constraints_and_drops_titles() -> None:
    class Inner(BaseModel):
        title: str  # a property may be called title

    class Arguments(BaseModel):
        title: str | None = Field(None, description="A name.", max_length=5)
        inner: Inner | None = None
        count: int | None = 3  # null is not its default: it stays a choice
        extra: dict[str, Any] | None = None

    schema = compact_schema(Arguments.model_json_schema())
    assert schema == {
        "$defs": {
            "Inner": {
                "properties": {"title": {"type": "string"}},
                "required": ["title"],
                "type": "object",
            }
        },
        "properties": {
            "title": {"description": "A name.", "maxLength": 5, "type": "string"},
            "inner": {"$ref": "#/$defs/Inner"},
            "count": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 3},
            "extra": {"type": "object"},
        },
        "type": "object",
    }


async def test_encode_gives_the_address_as_strings_and_its_lanes(client: Client) -> None:
    out = await call(client, "prime_memory_encode", domain="decision", tags=["architecture"])
    address = int(out["address"])
    assert address > 2**53
    assert out["address_hex"] == f"{address:032x}"
    assert address == pack(
        out["domain_prime"], out["subdomain_prime"], out["concept_bucket"], out["instance_id"]
    )
    assert out["instance_id"] == 0


async def test_encode_stores_nothing(client: Client) -> None:
    encoded = await call(client, "prime_memory_encode", domain="decision", tags=["new-tag"])
    assert encoded["provisional"] is True  # the new tag's prime is not claimed yet
    assert (await call(client, "prime_memory_stats"))["records"] == 0


async def test_encode_matches_the_address_a_store_gets(client: Client) -> None:
    stored = await call(client, "prime_memory_store", content="x", domain="decision", tags=["db"])
    encoded = await call(client, "prime_memory_encode", domain="decision", tags=["db"])
    assert encoded["domain_prime"] == int(stored["record"]["address"]) >> 96
    assert encoded["provisional"] is False


async def test_store_tells_new_from_reinforced(client: Client) -> None:
    first = await call(client, "prime_memory_store", content="Use WAL mode", tags=["sqlite"])
    again = await call(client, "prime_memory_store", content="Use WAL mode", tags=["sqlite"])
    assert first["created"] is True
    assert again["created"] is False
    assert again["record"]["record_id"] == first["record"]["record_id"]
    assert again["record"]["access_count"] == first["record"]["access_count"] + 1


async def test_store_returns_the_record_without_its_vector(client: Client) -> None:
    out = await call(
        client,
        "prime_memory_store",
        content="vectors stay on the server",
        domain="decision",
        subdomain="storage",
        tags=["Vectors"],
        importance=0.9,
        vector=[0.1, 0.2, 0.3],
        metadata={"source": "design.md"},
    )
    record = out["record"]
    assert record["domain"] == "decision"
    assert record["subdomain"] == "storage"
    assert record["tags"] == ["vectors"]
    assert record["importance"] == 0.9
    assert record["metadata"] == {"source": "design.md"}
    assert record["vector_dims"] == 3
    assert "vector" not in record
    assert isinstance(record["address"], str)


async def test_structured_content_is_also_sent_as_text(client: Client) -> None:
    result = await client.call_tool("prime_memory_stats", {})
    [content] = result.content
    assert isinstance(content, TextContent)
    assert StatsOutput.model_validate_json(content.text).model_dump() == result.structured_content


async def test_query_returns_compact_hits_without_vectors(client: Client) -> None:
    await call(client, "prime_memory_store", content="a", tags=["x", "y"], vector=[1.0, 0.0])
    await call(client, "prime_memory_store", content="b", tags=["x"], vector=[0.0, 1.0])
    out = await call(client, "prime_memory_query", tags=["x"])
    assert out["count"] == 2
    hit = out["hits"][0]
    assert set(hit) == {
        "record_id",
        "content",
        "scope",
        "session",
        "domain",
        "subdomain",
        "tags",
        "score",
        "score_parts",
        "strength",
        "created_at",
        "updated_at",
        "vector",
    }
    assert all(h["vector"] is None for h in out["hits"])


async def test_query_includes_vectors_only_when_asked(client: Client) -> None:
    await call(client, "prime_memory_store", content="a", vector=[1.0, 0.0])
    out = await call(client, "prime_memory_query", vector=[1.0, 0.0], include_vectors=True)
    assert out["hits"][0]["vector"] == [1.0, 0.0]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"tags": ["x", "y"]}, ["both"]),
        ({"any_tags": ["y", "z"]}, ["both", "z only"]),
        ({"tags": ["x"], "exclude_tags": ["y"]}, ["x only"]),
        ({"domain": "decision"}, ["z only"]),
        ({"tags": ["unknown"]}, []),
    ],
)
async def test_query_gates_by_domain_and_exact_tags(
    client: Client, arguments: dict[str, Any], expected: list[str]
) -> None:
    await call(client, "prime_memory_store", content="both", tags=["x", "y"])
    await call(client, "prime_memory_store", content="x only", tags=["x"])
    await call(client, "prime_memory_store", content="z only", domain="decision", tags=["z"])
    out = await call(client, "prime_memory_query", **arguments)
    assert sorted(hit["content"] for hit in out["hits"]) == sorted(expected)


async def test_query_limit_caps_the_hits(client: Client) -> None:
    for n in range(5):
        await call(client, "prime_memory_store", content=f"note {n}")
    assert (await call(client, "prime_memory_query", limit=2))["count"] == 2


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("prime_memory_store", {"content": "x", "importance": "lots"}, "importance"),
        ("prime_memory_store", {"content": "x", "importance": 3}, "importance"),
        ("prime_memory_store", {"content": "x", "tags": "not-a-list"}, "tags"),
        ("prime_memory_store", {}, "content"),
        ("prime_memory_query", {"limit": "ten"}, "limit"),
        ("prime_memory_query", {"vector": ["a"]}, "vector"),
        ("prime_memory_encode", {"domain": ""}, "domain"),
        ("prime_memory_fold", {"dry_run": "maybe"}, "dry_run"),
    ],
)
async def test_wrong_arguments_are_tool_errors_naming_the_field(
    client: Client, tool: str, arguments: dict[str, Any], field: str
) -> None:
    message = await call_error(client, tool, **arguments)
    assert message.startswith(f"Invalid arguments for {tool}: {field}")
    assert "Fix them and call again" in message


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"content": "   "}, "InvalidInput: content is empty"),
        ({"content": "a\x00b"}, "InvalidInput: content contains a NUL character"),
        ({"content": "x", "tags": ["   "]}, "is empty once trimmed"),
    ],
)
async def test_engine_errors_are_tool_errors_saying_what_to_fix(
    client: Client, arguments: dict[str, Any], expected: str
) -> None:
    message = await call_error(client, "prime_memory_store", **arguments)
    assert expected in message


async def test_a_vector_of_the_wrong_length_is_a_tool_error(client: Client) -> None:
    await call(client, "prime_memory_store", content="a", vector=[1.0, 0.0])
    message = await call_error(client, "prime_memory_store", content="b", vector=[1.0, 0.0, 0.0])
    assert "DimensionMismatch" in message


async def test_unknown_tool_is_a_protocol_error(client: Client) -> None:
    with pytest.raises(MCPError) as caught:
        await client.call_tool("prime_memory_forget_everything", {})
    assert caught.value.error.code == INVALID_PARAMS
    assert "Unknown tool: prime_memory_forget_everything" in caught.value.error.message


async def test_fold_is_a_dry_run_by_default(client: Client) -> None:
    await call(client, "prime_memory_store", content="a")
    out = await call(client, "prime_memory_fold")
    assert out["dry_run"] is True
    assert out["records_before"] == 1
    assert (await call(client, "prime_memory_stats"))["records"] == 1


async def test_fold_reports_what_it_did(client: Client) -> None:
    await call(client, "prime_memory_store", content="a")
    out = await call(client, "prime_memory_fold", dry_run=False)
    assert out["dry_run"] is False
    assert (
        out["records_after"]
        == out["records_before"] - out["pruned"] - out["folded"] + out["created"]
    )


@pytest.mark.parametrize("dry_run", [True, False])
async def test_fold_reports_each_step_to_a_client_that_asks(client: Client, dry_run: bool) -> None:
    await call(client, "prime_memory_store", content="a")
    heard: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    result = await client.call_tool(
        "prime_memory_fold", {"dry_run": dry_run}, progress_callback=on_progress
    )
    assert result.is_error is False
    assert [progress for progress, _, _ in heard] == [0, 1, 2, 3, 4, 5]
    assert {total for _, total, _ in heard} == {5}
    assert heard[0][2] == "reading records" and heard[-1][2] == "done"


async def test_stats_counts_domains_and_tags(client: Client, engine: MemoryEngine) -> None:
    await call(client, "prime_memory_store", content="a", domain="decision", tags=["db", "api"])
    await call(client, "prime_memory_store", content="b", domain="decision", tags=["db"])
    out = await call(client, "prime_memory_stats")
    assert out["records"] == 2
    assert out["domains"] == {"decision": 2}
    assert out["tags"] == {"api": 1, "db": 2}
    assert "db" in out["registries"]["tag"]
    assert "path" not in out and str(engine.path) not in json.dumps(out)  # docs/security.md
    assert out["store_bytes"] > 0


async def test_stats_report_the_schema_version_and_the_archive(
    client: Client, engine: MemoryEngine, clock: FakeClock
) -> None:
    out = await call(client, "prime_memory_stats")
    assert out["schema_version"] == latest_version() > 0
    assert (out["archived"], out["archived_by_reason"]) == (0, {})
    await call(client, "prime_memory_store", content="soon forgotten", importance=0.1)
    await call(client, "prime_memory_store", content="kept", importance=0.9)
    clock.advance(400 * 86_400.0)
    assert (await call(client, "prime_memory_fold", dry_run=False))["pruned"] == 1
    out = await call(client, "prime_memory_stats")
    assert (out["records"], out["archived"], out["archived_by_reason"]) == (1, 1, {"pruned": 1})


async def test_stats_resource_matches_the_tool(client: Client) -> None:
    await call(client, "prime_memory_store", content="a")
    result = await client.read_resource("memory://stats")
    [content] = result.contents
    assert content.mime_type == "application/json"
    assert StatsOutput.model_validate_json(content.text).records == 1  # type: ignore[union-attr]


async def test_record_resource_reads_one_memory(client: Client) -> None:
    stored = await call(client, "prime_memory_store", content="remember me")
    record_id = stored["record"]["record_id"]
    result = await client.read_resource(f"memory://record/{record_id}")
    [content] = result.contents
    assert '"remember me"' in content.text  # type: ignore[union-attr]
    templates = await client.list_resource_templates()
    assert [t.uri_template for t in templates.resource_templates] == ["memory://record/{record_id}"]


async def test_record_resource_for_an_unknown_id_is_an_error(client: Client) -> None:
    with pytest.raises(MCPError):
        await client.read_resource(f"memory://record/{'0' * 32}")


async def test_recall_prompt_names_the_topic(client: Client) -> None:
    [prompt] = (await client.list_prompts()).prompts
    assert prompt.description
    result = await client.get_prompt(prompt.name, {"topic": "the storage engine"})
    assert "the storage engine" in result.messages[0].content.text  # type: ignore[union-attr]


async def test_a_lazy_engine_opens_on_the_first_tool_call(store_path: Any) -> None:
    opened: list[MemoryEngine] = []

    def open_engine() -> MemoryEngine:
        opened.append(MemoryEngine(store_path))
        return opened[-1]

    server = build_server(open_engine)
    try:
        async with Client(server) as client:
            await client.list_tools()
            assert opened == []
            await call(client, "prime_memory_store", content="a")
            await call(client, "prime_memory_stats")
            assert len(opened) == 1
    finally:
        for engine in opened:
            engine.close()


async def test_a_lazy_engine_opens_in_the_background_after_the_handshake(
    store_path: Any,
) -> None:
    opened = threading.Event()
    engines: list[MemoryEngine] = []

    def open_engine() -> MemoryEngine:
        engines.append(MemoryEngine(store_path))
        opened.set()
        return engines[-1]

    try:
        async with Client(build_server(open_engine), mode="legacy"):
            assert await anyio.to_thread.run_sync(opened.wait, 30)
    finally:
        for engine in engines:
            engine.close()


async def test_quick_calls_wait_off_the_event_loop_while_a_fold_holds_the_engine(
    engine: MemoryEngine, client: Client
) -> None:
    # A fold holds the engine's lock while it reports progress through the event
    # loop; a store arriving then must wait in a worker thread, not on the loop.
    loop_thread = threading.get_ident()
    fold_running = anyio.Event()
    store_arrived = threading.Event()
    store_threads: list[int] = []
    real_fold, real_store = engine.fold, engine.store_result

    def holding_fold(**kwargs: Any) -> Any:
        with engine._lock:
            kwargs["progress"]("holding the engine", 0, 1)
            # Were the store on the loop, it would now block the loop on this lock.
            assert store_arrived.wait(timeout=60), "the store never reached the engine"
        return real_fold(dry_run=kwargs["dry_run"])

    def noting_store(*args: Any, **kwargs: Any) -> Any:
        store_threads.append(threading.get_ident())
        store_arrived.set()
        return real_store(*args, **kwargs)

    engine.fold = holding_fold  # type: ignore[method-assign]
    engine.store_result = noting_store  # type: ignore[method-assign]

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        fold_running.set()

    async def fold() -> None:
        await client.call_tool("prime_memory_fold", {}, progress_callback=on_progress)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(fold)
            await fold_running.wait()
            stored = await call(client, "prime_memory_store", content="during a fold")
    assert stored["created"] is True
    assert store_threads and loop_thread not in store_threads
    # Afterwards, quick calls run on the loop again.
    await call(client, "prime_memory_store", content="after the fold")
    assert store_threads[-1] == loop_thread


async def test_stats_report_the_engines_scope_when_the_server_resolved_none(
    client: Client, engine: MemoryEngine
) -> None:
    await call(client, "prime_memory_store", content="mine", scope="user:someone")
    out = await call(client, "prime_memory_stats")
    who = engine.whoami()
    assert (out["current_scope"], out["user_scope"]) == (who.current, who.user)
    assert out["visible_scopes"] == list(who.visible) and out["scope_reason"] == who.reason
    assert out["scopes"] == {"user:someone": 1}
    result = await client.read_resource("memory://scope")
    [content] = result.contents
    assert json.loads(content.text)["current"] == who.current  # type: ignore[union-attr]


async def test_forget_by_id_archives_and_restore_brings_it_back(
    client: Client, engine: MemoryEngine
) -> None:
    stored = await call(client, "prime_memory_store", content="we deploy on fridays")
    rid = stored["record"]["record_id"]
    out = await call(client, "prime_memory_forget", record_id=rid)
    assert out == {"forgotten": 1, "record_ids": [rid]}
    assert engine.stats().archived_by_reason == {"forgotten": 1}
    assert engine.restore(rid).content == "we deploy on fridays"
    missing = await client.call_tool("prime_memory_forget", {"record_id": "f" * 32})
    assert missing.is_error and "no record" in missing.content[0].text  # type: ignore[union-attr]


async def test_forget_by_filter_needs_the_count_past_a_few(
    client: Client, engine: MemoryEngine
) -> None:
    for n in range(5):
        await call(client, "prime_memory_store", content=f"stale note {n}", tags=["stale"])
    await call(client, "prime_memory_store", content="fresh note", tags=["fresh"])
    first = await client.call_tool("prime_memory_forget", {"tags": ["stale"]})
    assert first.is_error and "confirm_count=5" in first.content[0].text  # type: ignore[union-attr]
    wrong = await client.call_tool("prime_memory_forget", {"tags": ["stale"], "confirm_count": 4})
    assert wrong.is_error
    assert engine.stats().records == 6  # nothing was forgotten
    out = await call(client, "prime_memory_forget", tags=["stale"], confirm_count=5)
    assert out["forgotten"] == 5
    assert [r for r in engine.match_ids()] == engine.match_ids(tags=["fresh"])
    few = await call(client, "prime_memory_forget", tags=["fresh"])  # a few need no count
    assert few["forgotten"] == 1


@pytest.mark.parametrize(
    "arguments",
    [{}, {"record_id": "a" * 32, "tags": ["x"]}, {"confirm_count": -1, "tags": ["x"]}],
)
async def test_forget_refuses_neither_both_or_a_bad_count(
    client: Client, engine: MemoryEngine, arguments: dict[str, Any]
) -> None:
    await call(client, "prime_memory_store", content="keep", tags=["x"])
    result = await client.call_tool("prime_memory_forget", arguments)
    assert result.is_error
    assert engine.stats().records == 1


async def test_update_corrects_in_place_and_keeps_the_old_version(
    client: Client, engine: MemoryEngine, clock: FakeClock
) -> None:
    stored = await call(client, "prime_memory_store", content="we use postgres 14", tags=["db"])
    rid = stored["record"]["record_id"]
    clock.advance(60)
    out = await call(
        client, "prime_memory_update", record_id=rid, content="we use postgres 15", importance=0.9
    )
    assert out["record"]["record_id"] == rid and out["versions"] == 1
    assert out["record"]["content"] == "we use postgres 15"
    [old] = engine.history(rid)
    assert (old.record.content, old.record.importance) == ("we use postgres 14", 0.5)
    assert old.replaced_at == clock.now
    moved = await call(client, "prime_memory_update", record_id=rid, scope="project:x")
    assert moved["record"]["scope"] == "project:x" and moved["versions"] == 2
    same = await call(client, "prime_memory_update", record_id=rid, scope="project:x")
    assert same["versions"] == 2  # nothing changed, so no new version
    hits = await call(client, "prime_memory_query", tags=["db"], scopes=["*"])
    assert [hit["record_id"] for hit in hits["hits"]] == [rid]  # history is not live


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"record_id": "f" * 32, "content": "x"}, "no record"),
        ({"content": "   "}, "empty"),
        ({}, "nothing to change"),
        ({"importance": 2}, "importance"),
        ({"scope": "planet:x"}, "not a scope kind"),
    ],
)
async def test_a_bad_update_is_a_tool_error_and_changes_nothing(
    client: Client, engine: MemoryEngine, arguments: dict[str, Any], says: str
) -> None:
    stored = await call(client, "prime_memory_store", content="keep this", tags=["x"])
    rid = stored["record"]["record_id"]
    result = await client.call_tool("prime_memory_update", {"record_id": rid, **arguments})
    assert result.is_error and says in result.content[0].text  # type: ignore[union-attr]
    assert engine.get(rid).content == "keep this" and engine.history(rid) == []


@pytest.mark.parametrize("max_tokens", [300, 600, 1_500])
async def test_a_query_answer_never_exceeds_its_token_budget(
    client: Client, engine: MemoryEngine, max_tokens: int
) -> None:
    from prime_memory_folding.engine.budget import count_tokens

    engine.store_many(
        [{"content": f"note {n}: " + "a fairly long sentence " * (n * 7), "tags": ["t"]}
         for n in range(12)]
    )  # fmt: skip
    result = await client.call_tool("prime_memory_query", {"tags": ["t"], "max_tokens": max_tokens})
    assert not result.is_error
    answer = result.structured_content
    assert answer is not None and answer["count"] >= 1
    [text] = result.content
    assert count_tokens(text.text) == answer["tokens_used"] <= max_tokens  # type: ignore[union-attr]
    assert answer["count"] + answer["left_out"] == 10  # the default limit


async def test_the_default_budget_holds_and_a_bad_one_is_refused(
    client: Client, engine: MemoryEngine
) -> None:
    engine.store_many([{"content": "word " * 2_000, "tags": ["t"]} for _ in range(3)])
    answer = await call(client, "prime_memory_query", tags=["t"])
    assert answer["tokens_used"] <= 1_500 and answer["count"] == 1
    assert answer["hits"][0]["content"].endswith("cut to fit the token budget]")
    for bad in (299, 0, -1, 10**9):
        result = await client.call_tool("prime_memory_query", {"max_tokens": bad})
        assert result.is_error


async def test_a_fold_can_be_asked_to_screen_everything(
    client: Client, engine: MemoryEngine
) -> None:
    await call(client, "prime_memory_store", content="a first note")
    first = await call(client, "prime_memory_fold", dry_run=False)
    assert first["records_before"] == 1
    await call(client, "prime_memory_store", content="a second note")
    assert engine.fold(dry_run=True).incremental
    full = await call(client, "prime_memory_fold", dry_run=True, full=True)
    assert full["records_before"] == 2
    assert not engine.fold(dry_run=True, full=True).incremental
