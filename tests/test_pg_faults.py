"""Faults on a PostgreSQL store: killed servers, ended sessions, a database that goes away.

What must hold, and how the store behaves:

- **kill -9.** Servers killed while they write lose nothing they acknowledged;
  a write in flight is all there or not there at all; the store opens again
  and its tables stay consistent.
- **Idle connections ended** (``pg_terminate_backend``, or a database that
  restarted between calls): the pool checks each connection as it lends it,
  drops the dead ones and opens new ones, so the next call succeeds; nobody
  sees an error.
- **A connection lost inside a call**: the call fails with a clear
  :class:`~prime_memory_folding.errors.StoreError` ("lost the connection to
  PostgreSQL at HOST:PORT ... nothing of this call was written"), or an
  ``isError`` tool result saying the same; PostgreSQL rolled its transaction
  back. Lost as the write commits, the error says it may or may not have
  been saved, since the client cannot know. The next call runs on a new
  connection and succeeds.
- **A database that does not answer**: each call fails within the URL's
  ``connect_timeout`` (a relay that can be cut stands in for the server
  here), and calls succeed again once it answers, without a restart.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from benchmarks.http_load import HttpClient
from prime_memory_folding import MemoryEngine
from prime_memory_folding.errors import StoreError
from prime_memory_folding.storage.postgres import PostgresStorage, connection_lost
from tests.pg_consistency import problems, read_state
from tests.test_mcp_http import TIMEOUT, TOKEN, HttpServer

#: Connections in an engine's pool at most.
POOL_SIZE = 4
#: Calls allowed after the database is back before one must have succeeded.
ATTEMPTS = 5
LOST = "lost the connection to PostgreSQL"


def terminate(url: str, pid: int | None = None, application: str | None = None) -> int:
    """End the database's sessions but this one; how many ended.

    Only ``pid``, or only the sessions of ``application`` (their
    ``application_name``), when given. ``pg_terminate_backend`` waits (up to
    10 s) until each session is gone, so that the next call meets dead
    connections, not dying ones.
    """
    with psycopg.connect(url, autocommit=True, application_name="") as admin:
        row = admin.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) "
            "FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
            "AND (%(pid)s::int IS NULL OR pid = %(pid)s::int) "
            "AND (%(app)s::text IS NULL OR application_name = %(app)s::text)",
            {"pid": pid, "app": application},
        ).fetchone()
    assert row is not None
    return int(row[0])


def named(url: str) -> tuple[str, str]:
    """``url`` with an application name of its own, and that name."""
    name = f"faults-{secrets.token_hex(4)}"
    return f"{url}{'&' if urlsplit(url).query else '?'}application_name={name}", name


def server_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PRIME_MEMORY_TOKEN"}


# -- an engine in this process ---------------------------------------------------


def fill_pool(memory: MemoryEngine, size: int) -> None:
    """Have the engine's pool open ``size`` connections: as many transactions at once."""
    together = threading.Barrier(size)

    def hold() -> None:
        with memory.storage.transaction():  # type: ignore[attr-defined]
            together.wait(TIMEOUT)

    threads = [threading.Thread(target=hold) for _ in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert not together.broken


def test_ended_idle_connections_are_replaced_without_an_error(pg_url: str) -> None:
    url, name = named(pg_url)
    with MemoryEngine(url) as memory:
        before = memory.store("stored before the sessions ended", tags=["faults"])
        fill_pool(memory, POOL_SIZE)
        # Every pooled connection is dead now; the first call finds that out
        # for all of them at once, and runs on a new one.
        assert terminate(pg_url, application=name) == POOL_SIZE
        after = memory.store("stored after the sessions ended", tags=["faults"])
        hits = memory.query(tags=["faults"])
        assert {hit.record.record_id for hit in hits} == {
            before.record_id,
            after.record_id,
        }
    assert problems(pg_url) == []


def test_a_connection_lost_inside_a_write_fails_it_and_rolls_it_back(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MemoryEngine(pg_url) as memory:
        kept = memory.store("acknowledged before the loss", tags=["faults"])
        storage: Any = memory.storage
        find = storage.find_dedupe

        def find_then_lose(keys: Any) -> Any:
            # Inside the write's transaction, after its new labels got primes.
            found = find(keys)
            pid = storage.run("SELECT pg_backend_pid()").fetchone()[0]
            assert terminate(pg_url, pid) == 1
            return found

        monkeypatch.setattr(storage, "find_dedupe", find_then_lose)
        with pytest.raises(StoreError, match=LOST) as caught:
            memory.store("caught in the loss", domain="outage", tags=["faults", "lost-label"])
        message = str(caught.value)
        assert "nothing of this call was written" in message
        assert urlsplit(pg_url).netloc.split("@")[-1] in message
        monkeypatch.undo()

        state = read_state(pg_url)
        assert "caught in the loss" not in state.contents.values()
        assert "outage" not in state.registries["domain"]  # its prime was rolled back too
        assert "lost-label" not in state.registries["tag"]
        assert "outage" not in memory.stats().registries["domain"]

        again = memory.store("caught in the loss", domain="outage", tags=["faults", "lost-label"])
        assert memory.get(kept.record_id).content == "acknowledged before the loss"
        assert memory.get(again.record_id).domain == "outage"
    state = read_state(pg_url)
    assert sorted(state.contents.values()) == ["acknowledged before the loss", "caught in the loss"]
    assert problems(pg_url) == []


def test_a_connection_lost_as_a_write_commits_says_it_may_have_been_saved(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MemoryEngine(pg_url) as memory:
        storage: Any = memory.storage
        insert = storage.insert

        def insert_then_lose(rows: Any) -> None:
            # The write's last statement ran; the session ends before its commit.
            insert(rows)
            pid = storage.run("SELECT pg_backend_pid()").fetchone()[0]
            assert terminate(pg_url, pid) == 1

        monkeypatch.setattr(storage, "insert", insert_then_lose)
        with pytest.raises(StoreError, match=LOST) as caught:
            memory.store("lost as it committed", tags=["faults"])
        # The client cannot tell whether the commit reached the database.
        assert "may or may not have been saved" in str(caught.value)
        monkeypatch.undo()
        # Here it did not (the session ended first), and a retry stores it once.
        assert "lost as it committed" not in read_state(pg_url).contents.values()
        memory.store("lost as it committed", tags=["faults"])
    assert list(read_state(pg_url).contents.values()) == ["lost as it committed"]
    assert problems(pg_url) == []


def test_a_server_that_does_not_answer_fails_at_once_naming_it_without_the_password() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(StoreError) as caught:
        MemoryEngine(f"postgresql://someone:hunter2@127.0.0.1:{port}/memory")
    message = str(caught.value)
    assert f"someone:***@127.0.0.1:{port}/memory" in message
    assert "hunter2" not in message
    assert "Connection refused" in message


def test_a_closed_store_says_so(pg_url: str) -> None:
    storage = PostgresStorage(pg_url)
    storage.close()
    with pytest.raises(StoreError, match="is closed; open it again"):
        storage.count()


@pytest.mark.parametrize(
    ("error", "lost"),
    [
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (psycopg.InterfaceError("the connection is closed"), True),
        (psycopg.errors.AdminShutdown("terminating connection"), True),
        (psycopg.errors.CannotConnectNow("the database system is starting up"), True),
        (psycopg.errors.ConnectionFailure("connection failure"), True),
        (psycopg.errors.DeadlockDetected("deadlock detected"), False),
        (psycopg.errors.QueryCanceled("statement timeout"), False),
        (psycopg.errors.UniqueViolation("duplicate key"), False),
    ],
)
def test_which_errors_mean_a_lost_connection(error: Exception, lost: bool) -> None:
    assert connection_lost(error) is lost


# -- a database that goes away and comes back --------------------------------------


class Relay:
    """A TCP relay to the PostgreSQL server that can be cut and mended.

    Cut, it closes every relayed connection and each new one at once, as a
    server that went away would; mended, it relays again.
    """

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.up = True
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            if not self.up:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.open += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.up = False
        with self.lock:
            dropped, self.open = self.open, []
        for sock in dropped:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def mend(self) -> None:
        self.up = True

    def close(self) -> None:
        self.cut()
        self.listener.close()


@pytest.fixture
def relay(pg_url: str) -> Iterator[Relay]:
    parts = urlsplit(pg_url)
    through = Relay(parts.hostname or "127.0.0.1", parts.port or 5432)
    yield through
    through.close()


def via(url: str, relay: Relay, connect_timeout: int) -> str:
    parts = urlsplit(url)
    login = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    query = f"{parts.query}&connect_timeout={connect_timeout}".lstrip("&")
    return urlunsplit((parts.scheme, f"{login}127.0.0.1:{relay.port}", parts.path, query, ""))


def test_calls_fail_while_the_database_is_gone_and_succeed_once_it_is_back(
    pg_url: str, relay: Relay
) -> None:
    url = via(pg_url, relay, connect_timeout=1)
    with MemoryEngine(url) as memory:
        acknowledged = [memory.store(f"before the outage {n}", tags=["faults"]) for n in range(5)]
        relay.cut()
        for call in (
            lambda: memory.store("during the outage", tags=["faults"]),
            lambda: memory.query(tags=["faults"]),
            lambda: memory.query(text="outage"),
        ):
            with pytest.raises(StoreError, match=f"PostgreSQL at .*127.0.0.1:{relay.port}"):
                call()
        relay.mend()
        failures: list[str] = []
        for _ in range(ATTEMPTS):
            try:
                after = memory.store("after the outage", tags=["faults"])
                break
            except StoreError as exc:  # the pool may still be reconnecting
                failures.append(str(exc))
        else:
            pytest.fail(f"no call succeeded after the database came back: {failures}")
        hits = {hit.record.record_id for hit in memory.query(tags=["faults"], limit=20)}
        assert hits == {record.record_id for record in [*acknowledged, after]}
    assert "during the outage" not in read_state(pg_url).contents.values()
    assert problems(pg_url) == []


# -- servers ---------------------------------------------------------------------------


def store_call(client: HttpClient, content: str, **labels: Any) -> str:
    result = client.call("prime_memory_store", {"content": content, **labels})
    return str(result["record"]["record_id"])


def test_an_http_server_survives_its_sessions_ending_mid_run(pg_url: str) -> None:
    server = HttpServer(pg_url, "--token", TOKEN, env=server_env())
    try:
        client = HttpClient(server.port, TOKEN)
        acknowledged = {
            store_call(client, f"first run {n}", tags=["faults"]): f"first run {n}"
            for n in range(10)
        }
        # Idle: the next call runs on a new connection.
        assert terminate(pg_url) >= 1
        acknowledged[store_call(client, "after idle sessions ended")] = "after idle sessions ended"

        # Inside a call: hold the records table so the server's write waits in
        # its transaction, end that session, and let go.
        outcome: list[BaseException | str] = []
        with psycopg.connect(pg_url) as holder:
            holder.execute("LOCK TABLE records IN EXCLUSIVE MODE")
            writer = threading.Thread(
                target=lambda: outcome.append(
                    _attempt(client, "caught in the loss", domain="outage", tags=["lost-label"])
                )
            )
            writer.start()
            pid = _waiting_writer(pg_url, deadline=TIMEOUT)
            assert terminate(pg_url, pid) == 1
            holder.rollback()
        writer.join(TIMEOUT)
        assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError), outcome
        # The client hears what happened, not where the store is (docs/security.md).
        said = str(outcome[0])
        assert "lost the connection to the store" in said and pg_url not in said
        assert "nothing of this call was written" in said

        again = store_call(client, "caught in the loss", domain="outage", tags=["lost-label"])
        acknowledged[again] = "caught in the loss"
        hits = client.call("prime_memory_query", {"tags": ["faults"], "limit": 50})
        assert len(hits["hits"]) + hits["left_out"] == 10  # what the token budget left out
        client.conn.close()
    finally:
        server.stop()
    state = read_state(pg_url)
    assert state.contents == acknowledged
    assert problems(pg_url) == []


def _attempt(client: HttpClient, content: str, **labels: Any) -> BaseException | str:
    try:
        return store_call(client, content, **labels)
    except Exception as exc:  # the outcome is what the test looks at
        return exc


def _waiting_writer(url: str, deadline: float) -> int:
    """The session whose insert waits for the held table lock (polled up to ``deadline`` s)."""
    ends = time.monotonic() + deadline
    with psycopg.connect(url, autocommit=True) as watcher:
        while time.monotonic() < ends:
            row = watcher.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO records%%'"
            ).fetchone()
            if row is not None:
                return int(row[0])
    raise AssertionError("the server's write never waited for the lock")


@dataclass
class Writer:
    """One client writing until its server dies: what it saw acknowledged."""

    server: HttpServer
    name: str
    acknowledged: dict[str, str] = field(default_factory=dict)
    attempted: list[str] = field(default_factory=list)
    ended_by: BaseException | None = None

    def run(self, progress: threading.Condition) -> None:
        client: HttpClient | None = None
        try:
            client = HttpClient(self.server.port, TOKEN)
            n = 0
            while True:
                content = f"{self.name} write {n}"
                self.attempted.append(content)
                record_id = store_call(client, content, tags=["kill", self.name])
                with progress:
                    self.acknowledged[record_id] = content
                    progress.notify_all()
                n += 1
        except Exception as exc:  # the server was killed: the end of this writer
            self.ended_by = exc
            with progress:
                progress.notify_all()
        finally:
            if client is not None:
                client.conn.close()


def test_servers_killed_mid_write_lose_no_acknowledged_write(pg_url: str) -> None:
    servers = [HttpServer(pg_url, "--token", TOKEN, env=server_env()) for _ in range(2)]
    writers = [Writer(server, f"s{s}c{c}") for s, server in enumerate(servers) for c in range(2)]
    progress = threading.Condition()
    threads = [threading.Thread(target=w.run, args=(progress,)) for w in writers]
    try:
        for thread in threads:
            thread.start()
        with progress:
            # Every writer has written, and all are still writing, when the servers die.
            assert progress.wait_for(
                lambda: (
                    all(len(w.acknowledged) >= 25 for w in writers)
                    or any(w.ended_by for w in writers)
                ),
                timeout=4 * TIMEOUT,
            )
        assert not any(w.ended_by for w in writers), [w.ended_by for w in writers]
        for server in servers:
            server.proc.kill()
        for thread in threads:
            thread.join(TIMEOUT)
    finally:
        for server in servers:
            server.stop()
    assert all(w.ended_by is not None for w in writers)

    state = read_state(pg_url)
    for writer in writers:
        for record_id, content in writer.acknowledged.items():
            assert state.contents.get(record_id) == content
    # Beyond the acknowledged, at most each writer's write in flight, whole.
    attempted = {content for w in writers for content in w.attempted}
    acknowledged = {content for w in writers for content in w.acknowledged.values()}
    landed = set(state.contents.values())
    assert landed <= attempted
    assert len(landed - acknowledged) <= len(writers)
    assert problems(pg_url) == []

    # The store opens again, and nothing the dead servers held (locks,
    # transactions) stops a new writer, the in-flight memories included.
    with MemoryEngine(pg_url) as memory:
        for writer in writers:
            memory.store(writer.attempted[-1], tags=["kill", writer.name])
        assert memory.stats().records == len(landed | {w.attempted[-1] for w in writers})
    assert problems(pg_url) == []
