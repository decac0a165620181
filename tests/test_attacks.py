"""Attacks by a hostile team member, and by a hostile folder to import (docs/security.md).

Each test here failed before its protection was built: a store's location
reaching MCP clients, an existence oracle for another scope's records, stats
that count what a token may not see, reads that write, imports that follow
links out of their folder, and scope names that only look like others.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import unicodedata
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent

from prime_memory_folding import MemoryEngine
from prime_memory_folding.cli import cli
from prime_memory_folding.core.scopes import normalise_scope
from prime_memory_folding.engine import tokens
from prime_memory_folding.errors import EmbeddingError, InvalidInput, NotFound, StoreError
from prime_memory_folding.mcp.privacy import Location, client_error
from prime_memory_folding.mcp.server import build_server
from prime_memory_folding.mcp.transport import REQUEST, RequestIdentity
from prime_memory_folding.storage import TokenRow
from prime_memory_folding.transfer.importers import read_markdown
from tests import pg_helpers
from tests.backends import dump, emptied, examples, is_postgres
from tests.test_mcp_http import INITIALIZE, HttpServer
from tests.test_mcp_tokens import Client as HttpClient

# -- look-alike scope names ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_name", "offending"),
    [
        ("project:\u0430", "U+0430"),  # Cyrillic a, alone: reads as project:a
        ("project:\u0430pi", "U+0430"),  # Cyrillic a among Latin letters
        ("project:github.com/\u0430\u0441me/api", "U+0441"),
        ("team:\u03b1lpha", "U+03B1"),  # Greek alpha
        ("user:\u0441\u043e\u0440\u0435", "U+0440"),  # "cope" in Cyrillic look-alikes
    ],
)
def test_a_scope_in_look_alike_letters_is_refused_naming_them(
    given_name: str, offending: str
) -> None:
    with pytest.raises(InvalidInput, match=re.escape(offending)):
        normalise_scope(given_name)


@pytest.mark.parametrize(
    ("given_name", "expected"),
    [
        ("\uff50\uff52\uff4f\uff4a\uff45\uff43\uff54:\uff41", "project:a"),  # fullwidth
        ("project:\ufb01les", "project:files"),  # the fi ligature
        ("project:\u65e5\u672c", "project:\u65e5\u672c"),
        ("project:github.com/acme/\u65e5\u672c\u8a9e\u30c9\u30ad\u30e5\u30e1\u30f3\u30c8", None),
        ("team:\ud55c\uad6d", None),
        ("project:\u043f\u0440\u043e\u0435\u043a\u0442", None),  # Cyrillic, not only look-alikes
        ("project:/home/\u0438\u0432\u0430\u043d/notes", None),  # folders in two scripts
        ("project:github.com/acme/api", None),
        ("user:alice", None),
        ("team:platform", None),
    ],
)
def test_valid_names_keep_working_and_compatibility_forms_are_one_name(
    given_name: str, expected: str | None
) -> None:
    assert normalise_scope(given_name) == (expected or given_name)


@given(st.text(min_size=1, max_size=12))
def test_a_scope_name_normalises_to_a_fixed_point(name: str) -> None:
    try:
        once = normalise_scope(f"team:{name}")
    except InvalidInput:
        return
    assert normalise_scope(once) == once
    assert unicodedata.normalize("NFKC", once) == once


# -- a hostile folder to import -------------------------------------------------------------


def _hostile_folder(tmp_path: Path) -> Path:
    """Notes beside a private key, links out of and around the folder, and tools' folders."""
    secret = tmp_path / "home" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY----- KEYBYTES\n")
    (tmp_path / "home" / "diary").mkdir()
    (tmp_path / "home" / "diary" / "today.md").write_text("## Private\nDIARYTEXT\n")
    notes = tmp_path / "notes"
    (notes / "guides").mkdir(parents=True)
    (notes / "readme.md").write_text("## Setup\nRun make.\n")
    (notes / "guides" / "deploy.md").write_text("## Deploy\nShip on Fridays.\n")
    (notes / "key.md").symlink_to(secret)  # a link to a file outside
    (notes / "diary").symlink_to(tmp_path / "home" / "diary")  # a link to a folder outside
    (notes / "escape.md").symlink_to(Path("..") / "home" / "diary" / "today.md")
    (notes / "guides" / "loop").symlink_to(notes)  # a loop back to the top
    (notes / "same.md").symlink_to(notes / "guides" / "deploy.md")  # inside: read once
    (notes / "broken.md").symlink_to(notes / "missing.md")
    for tool in (".git", ".venv", "venv", "node_modules", "site-packages", "__pycache__"):
        (notes / tool).mkdir()
        (notes / tool / "TOOLTEXT.md").write_text(f"## {tool}\nTOOLTEXT in {tool}\n")
    for output in ("dist", "build"):
        (notes / "guides" / output).mkdir()
        (notes / "guides" / output / "x.md").write_text("## Built\nTOOLTEXT built\n")
    env = notes / "env"
    env.mkdir()
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (env / "README.md").write_text("## Env\nTOOLTEXT venv\n")
    (notes / ".gitignore").write_text(
        "# private notes\nsecret.md\nprivate/\n*.draft.md\n!keep.draft.md\n/top-only.md\n"
        "guides/**/tmp.md\n"
    )
    (notes / "secret.md").write_text("## Secret\nIGNOREDTEXT top\n")
    (notes / "private").mkdir()
    (notes / "private" / "a.md").write_text("## A\nIGNOREDTEXT private\n")
    (notes / "idea.draft.md").write_text("## Idea\nIGNOREDTEXT draft\n")
    (notes / "keep.draft.md").write_text("## Kept\nA draft that is kept.\n")
    (notes / "top-only.md").write_text("## Top\nIGNOREDTEXT anchored\n")
    (notes / "guides" / "top-only.md").write_text("## Not top\nAnchored patterns stay put.\n")
    (notes / "guides" / "a" / "b").mkdir(parents=True)
    (notes / "guides" / "a" / "b" / "tmp.md").write_text("## Tmp\nIGNOREDTEXT deep\n")
    (notes / "guides" / ".gitignore").write_text("local.md\n")
    (notes / "guides" / "local.md").write_text("## Local\nIGNOREDTEXT nested\n")
    (notes / "peek.md").symlink_to(notes / "private" / "a.md")  # inside, into an ignored folder
    (notes / "tools").symlink_to(notes / "node_modules")  # inside, into a tools' folder
    return notes


def test_a_markdown_import_stays_inside_its_folder_and_leaves_out_tools_and_ignored(
    tmp_path: Path,
) -> None:
    notes = _hostile_folder(tmp_path)
    read = read_markdown(notes)
    contents = "\n".join(record.content for record in read.records)
    for text in ("Run make.", "Ship on Fridays.", "A draft that is kept.", "Anchored patterns"):
        assert text in contents
    for leaked in ("KEYBYTES", "DIARYTEXT", "TOOLTEXT", "IGNOREDTEXT"):
        assert leaked not in contents
    assert contents.count("Ship on Fridays.") == 1  # the link to it, and the loop, add nothing
    left = {item.path: item.reason for item in read.left_out}
    assert left["key.md"] == left["diary"] == left["escape.md"] == "a link to outside the folder"
    assert left["broken.md"] == "a broken or looping link"
    assert left["same.md"] == "a link to a note read already"
    assert left["guides/loop"] == "a link to a folder read already"
    for name, reason in (
        (".git", "version control"),
        (".venv", "a virtual environment"),
        ("venv", "a virtual environment"),
        ("env", "a virtual environment"),
        ("node_modules", "dependencies"),
        ("site-packages", "dependencies"),
        ("__pycache__", "build output"),
        ("guides/dist", "build output"),
        ("guides/build", "build output"),
        ("secret.md", "ignored by .gitignore"),
        ("private", "ignored by .gitignore"),
        ("idea.draft.md", "ignored by .gitignore"),
        ("top-only.md", "ignored by .gitignore"),
        ("guides/a/b/tmp.md", "ignored by .gitignore"),
        ("guides/local.md", "ignored by .gitignore"),
    ):
        assert left[name] == reason, name
    assert left["peek.md"] == "a link into private, ignored by .gitignore"
    assert left["tools"] == "a link into node_modules, dependencies"


def test_a_fifo_named_like_a_note_neither_blocks_nor_is_read(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("## A\nfine\n")
    os.mkfifo(notes / "pipe.md")
    read = read_markdown(notes)
    assert [record.content for record in read.records] == ["## A\nfine"]


def test_the_import_summary_lists_what_was_not_read(run: Any, tmp_path: Path) -> None:
    notes = _hostile_folder(tmp_path)
    result = run("import", str(notes), "--format", "markdown")
    assert result.exit_code == 0, result.output
    assert "not read: " in result.output
    assert "key.md: a link to outside the folder" in result.output
    assert "node_modules: dependencies" in result.output
    as_json = run("import", str(notes), "--format", "markdown", "--json", "--dry-run")
    report = json.loads(as_json.output)
    assert {"path": "private", "reason": "ignored by .gitignore"} in report["left_out"]
    listed = run("query", "--scopes", "*", "--limit", "100", "--json")
    for leaked in ("KEYBYTES", "DIARYTEXT", "TOOLTEXT", "IGNOREDTEXT"):
        assert leaked not in listed.output


# -- stats that count only what a token sees ------------------------------------------------


def _two_projects(memory: MemoryEngine) -> dict[str, str]:
    """Records in project:a and project:b, one forgotten in each, and an update in b."""
    ids = {
        "a": memory.store(
            "alpha note", domain="work", tags=["shared", "a-tag"], scope="project:a"
        ).record_id,
        "b": memory.store(
            "SECRET-B-CONTENT",
            domain="secret-b-domain",
            tags=["shared", "secret-b-tag"],
            scope="project:b",
        ).record_id,
    }
    for scope in ("project:a", "project:b"):
        memory.forget(memory.store(f"gone from {scope}", scope=scope).record_id)
    memory.update(ids["b"], importance=0.9)
    return ids


def test_scoped_stats_count_only_those_scopes_and_their_labels(backend_store: str) -> None:
    with MemoryEngine(backend_store, embedder="none", scope="global") as memory:
        _two_projects(memory)
        mine = memory.stats(["project:a"])
        assert (mine.records, mine.scopes) == (1, {"project:a": 1})
        assert mine.domains == {"work": 1}
        assert mine.subdomains == {"general": 1}
        assert mine.tags == {"a-tag": 1, "shared": 1}
        assert set(mine.registries["tag"]) == {"a-tag", "shared"}
        assert set(mine.registries["domain"]) == {"work"}
        assert mine.archived_by_reason == {"forgotten": 1}
        whole = memory.stats()
        assert whole.records == 2 and whole.tags["secret-b-tag"] == 1
        assert whole.archived_by_reason == {"forgotten": 2, "replaced": 1}
        assert memory.stats(["*"]).tags == whole.tags
        assert memory.stats([]).records == 0


# -- the store's location, on the local command line ---------------------------------------

SECRET = "S3cretPw"


def _with_query(url: str, item: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{item}"


@pytest.mark.parametrize("form", ["userinfo", "parameter", "encoded name", "sslpassword"])
def test_the_command_line_masks_a_password_in_every_form(
    pg_url: str, form: str, tmp_path: Path
) -> None:
    if form == "userinfo":
        parts = urlsplit(pg_url)
        host = parts.netloc.rsplit("@", 1)[-1]
        netloc = f"{parts.username or 'postgres'}:{SECRET}@{host}"
        url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    elif form == "parameter":
        url = _with_query(pg_url, f"password={SECRET}")
    elif form == "encoded name":
        url = _with_query(pg_url, f"pass%77ord={SECRET}")
    else:
        url = _with_query(pg_url, f"sslpassword={SECRET}")
    runner = CliRunner()
    said = []
    for args in (
        ["store", "a note"],
        ["stats"],
        ["whoami"],
        ["scopes"],
        ["doctor"],
        ["query", "--text", "note"],
    ):
        result = runner.invoke(cli, ["--store", url, *args])
        said.append(result.output + (result.stderr if result.stderr_bytes else ""))
    assert "***" in "".join(said)
    assert SECRET not in "".join(said)


def test_a_malformed_url_is_refused_without_quoting_its_password() -> None:
    for url in (
        "postgresql://postgres@127.0.0.1:5432/db?password=S3%zzcret",
        "postgresql://postgres:S3%zzcret@127.0.0.1:5432/db",
    ):
        result = CliRunner().invoke(cli, ["--store", url, "stats"])
        assert result.exit_code != 0
        assert "S3%zzcret" not in result.output + result.stderr and "***" in result.stderr


# -- MCP, as token holders -------------------------------------------------------------------


@contextlib.asynccontextmanager
async def as_token(
    server: Any, row: TokenRow | None, project: str | None = None
) -> AsyncIterator[Client]:
    """An in-memory MCP session whose requests act as ``row`` (None: stdio, no token)."""
    held = REQUEST.set(None if row is None else RequestIdentity(row, project))
    try:
        async with Client(server, mode="legacy") as client:
            yield client
    finally:
        REQUEST.reset(held)


def _token(memory: MemoryEngine, name: str, scopes: list[str], read_only: bool = False) -> TokenRow:
    row = memory.verify_token(tokens.add(memory.storage, name, scopes, read_only=read_only))
    assert row is not None
    return row


def _said(result: Any) -> str:
    """Everything a tool result tells its client, as one text."""
    texts = [part.text for part in result.content if isinstance(part, TextContent)]
    return "\n".join([*texts, json.dumps(result.structured_content)])


def _error(result: Any, tool: str) -> str:
    """A tool error's message, without the SDK's "Error executing tool NAME: "."""
    assert result.is_error, result
    return _said(result).removeprefix(f"Error executing tool {tool}: ").removesuffix("\nnull")


def _counting_fetches(memory: MemoryEngine) -> list[int]:
    """A counter of the store's record look-ups, kept in its one item."""
    storage = memory.storage
    fetch = storage.fetch
    calls = [0]

    def counted(ids: Any) -> Any:
        calls[0] += 1
        return fetch(ids)

    storage.fetch = counted  # type: ignore[method-assign]
    return calls


def _missing_like(record_id: str, memory: MemoryEngine) -> str:
    """An id of the same shape that names no record."""
    for digit in "0123456789abcdef":
        candidate = record_id[:-1] + digit
        if candidate != record_id and candidate not in memory.storage.fetch([candidate]):
            return candidate
    raise AssertionError("no free id")


@pytest.mark.anyio
async def test_another_scopes_record_answers_exactly_as_a_missing_one(backend_store: str) -> None:
    with MemoryEngine(backend_store, embedder="none", scope="global") as memory:
        ids = _two_projects(memory)
        alice = _token(memory, "alice", ["project:a"])
        missing = _missing_like(ids["b"], memory)
        fetches = _counting_fetches(memory)
        async with as_token(build_server(memory), alice) as client:
            for tool, arguments in (
                ("prime_memory_update", {"content": "guessed"}),
                ("prime_memory_update", {"importance": 0.1}),
                ("prime_memory_forget", {}),
            ):
                answers = []
                for rid in (ids["b"], missing):
                    before = fetches[0]
                    result = await client.call_tool(tool, {"record_id": rid, **arguments})
                    answers.append((_error(result, tool).replace(rid, "<id>"), fetches[0] - before))
                assert answers[0] == answers[1] == ("NotFound: no record <id> in the store", 1)
            read = []
            for rid in (ids["b"], missing):
                with pytest.raises(MCPError) as raised:
                    await client.read_resource(f"memory://record/{rid}")
                read.append(str(raised.value).replace(rid, "<id>"))
            assert read[0] == read[1] and "NotFound: no record <id> in the store" in read[0]
            # encode names no id in a scope the token may not store into.
            encoded = await client.call_tool(
                "prime_memory_encode",
                {
                    "domain": "secret-b-domain",
                    "tags": ["shared", "secret-b-tag"],
                    "scope": "project:b",
                },
            )
            stored = await client.call_tool(
                "prime_memory_store", {"content": "x", "scope": "project:b"}
            )
            assert _error(encoded, "prime_memory_encode") == _error(stored, "prime_memory_store")
            assert ids["b"] not in _said(encoded)
        b = memory.get(ids["b"])
        assert (b.content, b.importance) == ("SECRET-B-CONTENT", 0.9)


@pytest.mark.anyio
async def test_a_scoped_tokens_stats_count_only_its_scopes(backend_store: str) -> None:
    with MemoryEngine(backend_store, embedder="none", scope="global") as memory:
        _two_projects(memory)
        alice = _token(memory, "alice", ["project:a"])
        admin = _token(memory, "admin", ["*"])
        server = build_server(memory)
        async with as_token(server, alice) as client:
            stats = (await client.call_tool("prime_memory_stats", {})).structured_content
            resource = await client.read_resource("memory://stats")
        assert stats is not None
        shown = json.dumps(stats) + str(resource)
        for hidden in ("secret-b", "project:b", "SECRET-B", "replaced"):
            assert hidden not in shown
        assert (stats["records"], stats["scopes"]) == (1, {"project:a": 1})
        assert stats["tags"] == {"a-tag": 1, "shared": 1}
        assert stats["domains"] == {"work": 1}
        assert set(stats["registries"]["tag"]) == {"a-tag", "shared"}
        assert stats["archived_by_reason"] == {"forgotten": 1}
        assert stats["store_bytes"] is None and "path" not in stats
        for row in (admin, None):  # an unscoped token, and stdio: the whole store
            async with as_token(server, row) as client:
                whole = (await client.call_tool("prime_memory_stats", {})).structured_content
            assert whole is not None
            assert whole["records"] == 2 and whole["tags"]["secret-b-tag"] == 1
            assert whole["archived_by_reason"] == {"forgotten": 2, "replaced": 1}
            assert whole["store_bytes"] > 0 and "path" not in whole


# -- reads that only read ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_reads_write_nothing_and_only_an_explicit_use_reinforces(backend_store: str) -> None:
    with MemoryEngine(backend_store, embedder="none", scope="global") as memory:
        ids = _two_projects(memory)
        reader = _token(memory, "reader", ["*"], read_only=True)
        alice = _token(memory, "alice", ["project:a"])
        admin = _token(memory, "admin", ["*"])
        server = build_server(memory)
        listed = {tool.name: tool for tool in (await _tools(server))}
        read_only = {name for name, tool in listed.items() if tool.annotations.read_only_hint}
        assert read_only == {"prime_memory_encode", "prime_memory_query", "prime_memory_stats"}
        memory.flush_recalls()
        before = dump(backend_store)
        for row in (reader, alice, admin, None):
            async with as_token(server, row) as client:
                for arguments in ({"scopes": ["*"]}, {"text": "note", "scopes": ["*"]}):
                    await client.call_tool("prime_memory_query", arguments)
                await client.call_tool("prime_memory_stats", {})
                await client.call_tool("prime_memory_encode", {"domain": "new-domain"})
                await client.read_resource("memory://stats")
                await client.read_resource("memory://scope")
                await client.read_resource(f"memory://record/{ids['a']}")
            if row is reader:  # a read-only token writes nothing, not even a reinforcement
                refused = await client_call(server, row, "prime_memory_reinforce", [ids["a"]])
                assert "read-only" in _error(refused, "prime_memory_reinforce")
        memory.flush_recalls()
        assert dump(backend_store) == before
        out = await client_call(server, alice, "prime_memory_reinforce", [ids["a"], ids["b"]])
        assert out.structured_content == {"reinforced": [ids["a"]], "unknown": [ids["b"]]}
        memory.flush_recalls()
        assert memory.get(ids["a"]).access_count == 1
        assert memory.get(ids["b"]).access_count == 0


async def _tools(server: Any) -> list[Any]:
    async with as_token(server, None) as client:
        return list((await client.list_tools()).tools)


async def client_call(server: Any, row: TokenRow | None, tool: str, ids: list[str]) -> Any:
    async with as_token(server, row) as client:
        return await client.call_tool(tool, {"record_ids": ids})


# -- the store's location, over MCP ------------------------------------------------------------


def _location_parts(store: str) -> list[str]:
    """What names the store: the whole of it, and on PostgreSQL each part of its URL."""
    if not is_postgres(store):
        return [store, str(Path(store).parent)]
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(store)
    schema = re.search(r"search_path%3D(\w+)", store)
    assert schema is not None
    return [store, given["host"], f":{given['port']}", given["user"], given["dbname"], SECRET,
            schema.group(1)]  # fmt: skip


def test_a_store_error_tells_the_client_what_to_do_and_not_where_the_store_is(
    pg_url: str,
) -> None:
    url = _with_query(pg_url, f"password={SECRET}")
    with MemoryEngine(url, embedder="none", scope="global") as memory:
        location = Location.of(memory)
        shown = memory.path
        parts = _location_parts(url)
        for error in (
            StoreError(f'lost the connection to PostgreSQL at {shown} (connection to server at '
                       f'"127.0.0.1", port 5432 failed: FATAL: database "{parts[4]}" does not '
                       "exist); nothing of this call was written"),
            StoreError(f"store {shown}: a write collided with another (user {parts[3]})"),
            StoreError(f"store {shown} is closed; open it again"),
            StoreError(f"store {shown}: something nobody foresaw at 10.1.2.3"),
            EmbeddingError(f"store {shown} holds vectors of the embedding space 'x'"),
            NotFound(f"no record 0123 in {url} ({parts[4]} on {parts[1]}:5432)"),
        ):  # fmt: skip
            said = str(client_error(error, location))
            assert said.startswith(type(error).__name__ + ": ")
            for part in [*parts, "10.1.2.3", "5432", shown]:
                assert part not in said, (part, said)
        assert "the store" in str(client_error(NotFound(f"no record 0123 in {shown}"), location))


def _rpc(client: HttpClient, method: str, params: dict[str, Any] | None = None) -> str:
    """One JSON-RPC request's whole answer, as the client receives it."""
    client.next_id += 1
    body = {"jsonrpc": "2.0", "id": client.next_id, "method": method, "params": params or {}}
    status, headers, text = client.post(json.dumps(body))
    return f"{status} {json.dumps(headers)} {text}"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_no_answer_a_client_can_get_names_the_store(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if backend == "sqlite":
        store = str(tmp_path / "secret-folder" / "memory.db")
        Path(store).parent.mkdir()
    else:
        store = _with_query(
            pg_helpers.new_schema(request.getfixturevalue("pg_database")), f"password={SECRET}"
        )
    with MemoryEngine(store, embedder="none", scope="global") as memory:
        ids = _two_projects(memory)
        secrets = {
            "admin": tokens.add(memory.storage, "admin", "*"),
            "alice": tokens.add(memory.storage, "alice", ["project:a"]),
            "reader": tokens.add(memory.storage, "reader", "*", read_only=True),
        }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRIME_MEMORY_", "PG"))}
    server = HttpServer(store, env=env)
    # The server's log is its operator's: it may say where the store is, never a password.
    assert SECRET not in server.said.decode(errors="replace")
    answers: list[str] = []
    try:
        for name, secret in secrets.items():
            client = HttpClient(server, secret)
            answers.append(" ".join(map(str, client.post(INITIALIZE))))
            client.open()
            for method, params in (
                ("tools/list", None),
                ("resources/list", None),
                ("resources/templates/list", None),
                ("prompts/list", None),
                ("prompts/get", {"name": "recall", "arguments": {"topic": "deploys"}}),
                ("prompts/get", {"name": "nope"}),
                ("tools/call", {"name": "prime_memory_nope", "arguments": {}}),
                ("resources/read", {"uri": "memory://stats"}),
                ("resources/read", {"uri": "memory://scope"}),
                *(
                    ("resources/read", {"uri": f"memory://record/{rid}"})
                    for rid in (ids["a"], ids["b"], "0" * 32, "not-an-id")
                ),
            ):
                answers.append(_rpc(client, method, params))
            for tool, arguments in (
                ("prime_memory_stats", {}),
                ("prime_memory_encode", {"domain": "decision"}),
                ("prime_memory_encode", {"domain": "decision", "scope": "planet:x"}),
                ("prime_memory_store", {"content": "from " + name}),
                ("prime_memory_store", {"content": " "}),
                ("prime_memory_store", {"content": "x", "scope": "project:\u0430"}),
                ("prime_memory_store", {"content": "x", "vector": [1.0, 2.0]}),
                ("prime_memory_query", {"text": "note", "scopes": ["*"]}),
                ("prime_memory_query", {"since": "not a time"}),
                ("prime_memory_query", {"vector": [1.0, 0.0, 0.5]}),
                ("prime_memory_update", {"record_id": ids["a"], "importance": 0.4}),
                ("prime_memory_update", {"record_id": ids["b"], "importance": 0.4}),
                ("prime_memory_update", {"record_id": "0" * 32, "tags": ["t"]}),
                ("prime_memory_update", {"record_id": "zz", "tags": ["t"]}),
                ("prime_memory_update", {"record_id": ids["a"], "scope": "project:b"}),
                ("prime_memory_forget", {"record_id": "0" * 32}),
                ("prime_memory_forget", {"tags": ["shared"], "scopes": ["*"], "confirm_count": 99}),
                ("prime_memory_reinforce", {"record_ids": [ids["a"], ids["b"], "0" * 32]}),
                ("prime_memory_reinforce", {"record_ids": ["zz"]}),
                ("prime_memory_fold", {"dry_run": True}),
            ):
                answers.append(" ".join(map(str, client.call(tool, **arguments))))
    finally:
        server.stop()
    heard = "\n".join(answers)
    assert "NotFound" in heard and "InvalidInput" in heard and "read-only" in heard
    for part in _location_parts(store):
        assert part not in heard, part


# -- a property: nothing outside a token's scopes, through any tool -------------------------

PROPERTY_SCOPES = ["project:a", "project:b", "team:x", "global", "user:u1", "user:u2"]
PROPERTY_PATTERNS = ["project:a", "project:b", "project:*", "team:*", "global", "*"]
DOMAINS = ["d-alpha", "d-beta", "d-gamma"]
TAGS = ["t-one", "t-two", "t-three", "t-four"]

records_strategy = st.lists(
    st.tuples(
        st.sampled_from(PROPERTY_SCOPES),
        st.sampled_from(DOMAINS),
        st.lists(st.sampled_from(TAGS), max_size=2, unique=True),
    ),
    min_size=1,
    max_size=6,
)
tokens_strategy = st.lists(
    st.tuples(
        st.lists(st.sampled_from(PROPERTY_PATTERNS), min_size=1, max_size=2, unique=True),
        st.booleans(),
    ),
    min_size=1,
    max_size=2,
)


def test_no_tool_or_resource_gives_away_a_record_outside_the_token(backend_store: str) -> None:
    @examples(backend_store, sqlite=25, postgres=3)
    @given(records=records_strategy, holders=tokens_strategy)
    def check(records: list[tuple[str, str, list[str]]], holders: list[Any]) -> None:
        store = emptied(backend_store)
        with MemoryEngine(store, embedder="none", scope="global") as memory:
            kept = [
                memory.store(f"note zq{i}mark", domain=domain, tags=tags, scope=scope)
                for i, (scope, domain, tags) in enumerate(records)
            ]
            rows = [
                _token(memory, f"u{n + 1}", patterns, read_only=read_only)
                for n, (patterns, read_only) in enumerate(holders)
            ]
            server = build_server(memory)
            for row in rows:
                anyio.run(_probe, server, memory, row, kept)

    check()


async def _probe(server: Any, memory: MemoryEngine, row: TokenRow, kept: list[Any]) -> None:
    """Every read and every id a token might try; what it hears must hold nothing hidden."""
    seen = [rec for rec in kept if tokens.allows(row, rec.scope)]
    hidden = [rec for rec in kept if not tokens.allows(row, rec.scope)]
    labels = {label for rec in seen for label in (rec.domain, *rec.tags)}
    async with as_token(server, row) as client:
        heard = []
        stats = await client.call_tool("prime_memory_stats", {})
        heard.append(_said(stats))
        for uri in ("memory://stats", "memory://scope"):
            heard.append(str(await client.read_resource(uri)))
        for arguments in (
            {"scopes": ["*"], "limit": 100},
            {"text": "note mark", "scopes": ["*"], "limit": 100},
            *({"tags": [tag], "scopes": ["*"]} for tag in TAGS),
            *({"domain": domain, "scopes": ["*"]} for domain in DOMAINS),
        ):
            heard.append(_said(await client.call_tool("prime_memory_query", arguments)))
        text = "\n".join(heard)
        for rec in hidden:
            assert rec.record_id not in text and f"zq{kept.index(rec)}mark" not in text
            if rec.scope not in {"global", tokens.default_scope(row), *(r.scope for r in seen)}:
                assert f'"{rec.scope}"' not in text, rec.scope  # e.g. another user's scope
        for label in {*DOMAINS, *TAGS} - labels:
            assert label not in text, label
        out = stats.structured_content
        assert out is not None and out["records"] == len(seen)
        assert out["scopes"] == dict(Counter(rec.scope for rec in seen))
        # Each hidden id answers as a missing one does, whatever the tool.
        for rec in hidden:
            missing = _missing_like(rec.record_id, memory)
            for tool, arguments in (
                ("prime_memory_update", {"importance": 0.3}),
                ("prime_memory_forget", {}),
                ("prime_memory_reinforce", None),
            ):
                answers = []
                for rid in (rec.record_id, missing):
                    given = {"record_ids": [rid]} if arguments is None else {"record_id": rid}
                    result = await client.call_tool(tool, {**given, **(arguments or {})})
                    answers.append(_said(result).replace(rid, "<id>"))
                assert answers[0] == answers[1], (tool, answers)
            read = []
            for rid in (rec.record_id, missing):
                try:
                    read.append(str(await client.read_resource(f"memory://record/{rid}")))
                except MCPError as exc:
                    read.append(str(exc).replace(rid, "<id>"))
            assert read[0] == read[1] and "zq" not in read[0]
    memory.flush_recalls()
    for rec in hidden:
        assert memory.get(rec.record_id) == rec  # nothing hidden was changed
