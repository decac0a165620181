"""``prime-memory ui``: the printed address, the token's life, and binding off loopback."""

from __future__ import annotations

import http.cookiejar
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from prime_memory_folding import MemoryEngine
from prime_memory_folding.cli import cli
from prime_memory_folding.web import server
from tests.inspector_process import InspectorProcess


def _opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )


def _status(opener: urllib.request.OpenerDirector, url: str) -> tuple[int, str]:
    try:
        with opener.open(url, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_printed_address_opens_the_inspector_and_the_token_is_never_logged(
    store_path: Path,
) -> None:
    with MemoryEngine(store_path) as engine:
        engine.store("visible through the inspector")
    inspector = InspectorProcess(store_path)
    try:
        assert inspector.url.startswith("http://127.0.0.1:")
        token = inspector.url.split("token=", 1)[1]
        assert len(token) >= 32
        browser = _opener()
        status, page = _status(browser, inspector.url)
        assert status == 200
        assert "Overview" in page
        status, page = _status(browser, inspector.base + "/memories")
        assert (status, "visible through the inspector" in page) == (200, True)
        stranger = _opener()
        assert _status(stranger, inspector.base + "/memories")[0] == 403
        assert _status(stranger, inspector.base + "/memories?token=guess")[0] == 403
    finally:
        printed = inspector.close()
    assert printed.count(token) == 1  # only the address printed at start-up
    assert f"Open: {inspector.url}" in printed


@pytest.mark.parametrize(
    "rounds", [pytest.param(1, id="once"), pytest.param(3, id="3-times", marks=pytest.mark.slow)]
)
def test_ctrl_c_as_soon_as_the_address_shows_stops_a_background_inspector(
    store_path: Path, rounds: int
) -> None:
    # A background job of a script starts with SIGINT ignored: the address
    # shows only once the server handles Ctrl-C itself, so one sent at once stops it.
    MemoryEngine(store_path).close()
    for _ in range(rounds):
        inspector = InspectorProcess(store_path, sigint_ignored=True)
        printed = inspector.close()
        assert inspector.proc.returncode == 0, printed  # it stopped by itself, not killed


def test_two_runs_get_different_tokens(store_path: Path) -> None:
    MemoryEngine(store_path).close()
    first = InspectorProcess(store_path)
    first.close()
    second = InspectorProcess(store_path)
    second.close()
    assert first.url.split("token=")[1] != second.url.split("token=")[1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "pass --token"),
        (["--host", "192.0.2.10", "--token", "short"], "at least 16 characters"),
    ],
)
def test_binding_off_loopback_needs_a_long_token(
    store_path: Path, args: list[str], message: str
) -> None:
    MemoryEngine(store_path).close()
    result = CliRunner().invoke(cli, ["--store", str(store_path), "ui", "--no-browser", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_binding_off_loopback_with_a_token_warns(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    MemoryEngine(store_path).close()
    served: list[object] = []

    async def stop_at_once(self: uvicorn.Server) -> None:
        served.append(self)

    # Bind loopback in the test whatever the host says; start, then stop at once.
    bind = server.listening_socket
    monkeypatch.setattr(server, "listening_socket", lambda host, port: bind("127.0.0.1", 0))
    monkeypatch.setattr(uvicorn.Server, "main_loop", stop_at_once)
    token = "a-long-enough-secret-token"
    result = CliRunner().invoke(
        cli,
        [
            "--store",
            str(store_path),
            "ui",
            "--host",
            "192.0.2.10",
            "--token",
            token,
            "--no-browser",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "warning: the inspector on 192.0.2.10 is reachable from other machines" in result.stderr
    assert "http://192.0.2.10:" in result.stdout
    assert f"/?token={token}" in result.stdout
    assert len(served) == 1


def test_a_missing_store_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.db"
    result = CliRunner().invoke(cli, ["--store", str(missing), "ui", "--no-browser"])
    assert result.exit_code != 0
    assert f"no store at {missing}" in result.output
    assert not missing.exists()


def test_allowed_hosts_cover_every_loopback_name() -> None:
    from prime_memory_folding.web import allowed_hosts

    assert set(allowed_hosts("127.0.0.1", 8765)) == {
        "127.0.0.1:8765",
        "localhost:8765",
        "[::1]:8765",
    }
    assert allowed_hosts("192.0.2.10", 80) == ("192.0.2.10:80",)
