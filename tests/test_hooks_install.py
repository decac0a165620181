"""Installing hooks into each host's settings file: merged, backed up, and undone byte for byte."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding.capture.hosts import EVENTS, HOSTS, hook_command, is_ours
from prime_memory_folding.capture.install import Change, entry, install, status, uninstall
from prime_memory_folding.cli import cli
from prime_memory_folding.errors import InvalidInput
from tests.cli_helpers import one_line_error

ROOT = Path(__file__).resolve().parent.parent
EXE = "/opt/tools/bin/prime-memory"
HOST_NAMES = sorted(HOSTS)
WHERES = ("user", "project")


def _places(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir(exist_ok=True)
    project.mkdir(exist_ok=True)
    return home, project


def _install(host: str, home: Path, project: Path, where: str = "user", **kw: Any) -> Change:
    args: dict[str, Any] = {"command_exe": EXE, "dry_run": False, **kw}
    return install(host, where=where, home=home, project=project, **args)  # type: ignore[arg-type]


def _uninstall(host: str, home: Path, project: Path, where: str = "user", **kw: Any) -> Change:
    args: dict[str, Any] = {"command_exe": EXE, "dry_run": False, **kw}
    return uninstall(host, where=where, home=home, project=project, **args)  # type: ignore[arg-type]


def _path(host: str, home: Path, project: Path, where: str = "user") -> Path:
    return HOSTS[host].path(where, home=home, project=project)


def _users_hook(host: str, command: str = "say done") -> dict[str, Any]:
    """A hook of the user's own, in the host's shape."""
    if HOSTS[host].layout == "flat":
        return {"command": command}
    return {"hooks": [{"type": "command", "command": command}]}


def _users_settings(host: str) -> dict[str, Any]:
    """Settings with the user's own hooks, on the events we use and on another."""
    spec = HOSTS[host]
    first, last = spec.bindings[0].host_event, spec.bindings[-1].host_event
    doc: dict[str, Any] = {"model": "big", "permissions": {"allow": ["Bash(ls:*)"]}}
    if spec.skeleton_version is not None:
        doc = {"version": spec.skeleton_version, **doc}
    doc["hooks"] = {
        first: [_users_hook(host, "echo 'hello wörld'")],
        "SomethingElse": [_users_hook(host, "./other.sh")],
        last: [_users_hook(host), _users_hook(host, "prime-memory-lookalike hook stop")],
    }
    doc["theme"] = "dark"
    return doc


def _indent(n: int | str) -> Callable[[dict[str, Any]], bytes]:
    return lambda doc: (json.dumps(doc, indent=n, ensure_ascii=False) + "\n").encode()


STYLES: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "two-spaces": _indent(2),
    "four-spaces": _indent(4),
    "tabs": _indent("\t"),
    "flush-left": _indent(0),
    "compact": lambda doc: json.dumps(doc, separators=(",", ":")).encode(),
    "one-line-spaced": lambda doc: (json.dumps(doc) + "\n").encode(),
    "crlf": lambda doc: (json.dumps(doc, indent=2) + "\n").replace("\n", "\r\n").encode(),
    "no-final-newline": lambda doc: json.dumps(doc, indent=2).encode(),
    "ascii-escapes": lambda doc: (json.dumps(doc, indent=2, ensure_ascii=True) + "\n").encode(),
    "bom": lambda doc: ("\ufeff" + json.dumps(doc, indent=2) + "\n").encode(),
    "hand-written": lambda doc: (
        (
            "{\n   "
            + ",\n      ".join(f"{json.dumps(k)} :  {json.dumps(v)}" for k, v in doc.items())
        ).encode()
        + b"\n}\n\n"
    ),
}


@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("where", WHERES)
@pytest.mark.parametrize("host", HOST_NAMES)
def test_install_then_uninstall_gives_back_the_users_file_byte_for_byte(
    tmp_path: Path, host: str, where: str, style: str
) -> None:
    home, project = _places(tmp_path)
    path = _path(host, home, project, where)
    path.parent.mkdir(parents=True)
    original = STYLES[style](_users_settings(host))
    path.write_bytes(original)

    added = _install(host, home, project, where)
    assert added.changed and added.backup is not None
    assert added.backup.read_bytes() == original
    merged = json.loads(path.read_bytes().decode("utf-8-sig"))
    for key, value in _users_settings(host).items():
        if key != "hooks":
            assert merged[key] == value
    for event, entries in _users_settings(host)["hooks"].items():
        assert merged["hooks"][event][: len(entries)] == entries

    removed = _uninstall(host, home, project, where)
    assert removed.changed
    assert path.read_bytes() == original


@pytest.mark.parametrize(
    "style", ["two-spaces", "four-spaces", "tabs", "flush-left", "crlf", "compact"]
)
@pytest.mark.parametrize("host", HOST_NAMES)
def test_the_file_keeps_its_style_when_no_backup_is_left(
    tmp_path: Path, host: str, style: str
) -> None:
    home, project = _places(tmp_path)
    path = _path(host, home, project)
    path.parent.mkdir(parents=True)
    original = STYLES[style](_users_settings(host))
    path.write_bytes(original)
    added = _install(host, home, project)
    assert added.backup is not None
    added.backup.unlink()
    _uninstall(host, home, project)
    assert path.read_bytes() == original


@pytest.mark.parametrize("host", HOST_NAMES)
def test_a_second_install_changes_nothing_and_makes_no_backup(tmp_path: Path, host: str) -> None:
    home, project = _places(tmp_path)
    path = _path(host, home, project)
    path.parent.mkdir(parents=True)
    path.write_bytes(STYLES["two-spaces"](_users_settings(host)))
    first = _install(host, home, project)
    after_first = path.read_bytes()
    second = _install(host, home, project)
    assert first.changed and not second.changed and second.backup is None
    assert path.read_bytes() == after_first
    assert len(list(path.parent.glob(path.name + ".*.bak"))) == 1


@pytest.mark.parametrize("host", HOST_NAMES)
def test_install_creates_the_file_and_its_folders_and_uninstall_removes_it(
    tmp_path: Path, host: str
) -> None:
    home, project = _places(tmp_path)
    path = _path(host, home, project, "project")
    change = _install(host, home, project, "project")
    assert change.before is None and change.backup is None and path.exists()
    doc = json.loads(path.read_text())
    spec = HOSTS[host]
    assert set(doc["hooks"]) == {b.host_event for b in spec.bindings}
    if spec.skeleton_version is not None:
        assert doc["version"] == spec.skeleton_version
    assert _uninstall(host, home, project, "project").after is None
    assert not path.exists()
    assert list(path.parent.iterdir()) == []


@pytest.mark.parametrize("host", HOST_NAMES)
def test_each_binding_gets_one_entry_running_our_hook_command(tmp_path: Path, host: str) -> None:
    home, project = _places(tmp_path)
    _install(host, home, project)
    hooks = json.loads(_path(host, home, project).read_text())["hooks"]
    spec = HOSTS[host]
    for binding in spec.bindings:
        (item,) = hooks[binding.host_event]
        handler = item if spec.layout == "flat" else item["hooks"][0]
        assert handler["command"] == hook_command(EXE, host, binding.event)
        assert handler["timeout"] == binding.timeout
        assert handler.get("async", False) is binding.background
        matcher = item.get("matcher")
        assert matcher == binding.matcher


def test_claude_code_captures_in_the_background_and_recalls_in_the_foreground() -> None:
    spec = HOSTS["claude-code"]
    background = {b.host_event for b in spec.bindings if b.background}
    assert background == {"PostToolUse", "PostToolUseFailure", "Stop", "PreCompact"}
    assert not any(
        b.background for h in HOSTS.values() if h.name != "claude-code" for b in h.bindings
    )


@pytest.mark.parametrize("host", ["claude-code", "codex", "gemini"])
def test_a_hook_the_user_put_in_our_group_stays_and_install_stays_idempotent(
    tmp_path: Path, host: str
) -> None:
    home, project = _places(tmp_path)
    path = _path(host, home, project)
    _install(host, home, project)
    doc = json.loads(path.read_text())
    event = HOSTS[host].bindings[0].host_event
    doc["hooks"][event][0]["hooks"].append({"type": "command", "command": "mine.sh"})
    path.write_text(json.dumps(doc, indent=2) + "\n")
    assert not _install(host, home, project).changed
    _uninstall(host, home, project)
    left = json.loads(path.read_text())
    assert left["hooks"] == {
        event: [
            {
                **(
                    {"matcher": HOSTS[host].bindings[0].matcher}
                    if HOSTS[host].bindings[0].matcher
                    else {}
                ),
                "hooks": [{"type": "command", "command": "mine.sh"}],
            }
        ]
    }


@pytest.mark.parametrize("host", HOST_NAMES)
def test_install_replaces_the_entries_of_a_moved_executable(tmp_path: Path, host: str) -> None:
    home, project = _places(tmp_path)
    _install(host, home, project, command_exe="/old/place/prime-memory")
    _install(host, home, project, command_exe="/new place/prime-memory")
    text = _path(host, home, project).read_text()
    assert "/old/place" not in text
    assert text.count("'/new place/prime-memory' hook ") == len(HOSTS[host].bindings)


@pytest.mark.parametrize("host", HOST_NAMES)
def test_uninstall_finds_entries_of_any_prime_memory_executable(tmp_path: Path, host: str) -> None:
    home, project = _places(tmp_path)
    _install(host, home, project, command_exe="/gone/bin/prime-memory")
    change = _uninstall(host, home, project, command_exe="/elsewhere/other-name")
    assert change.changed and change.after is None


@pytest.mark.parametrize("host", HOST_NAMES)
def test_uninstall_without_our_entries_changes_nothing(tmp_path: Path, host: str) -> None:
    home, project = _places(tmp_path)
    path = _path(host, home, project)
    path.parent.mkdir(parents=True)
    path.write_bytes(STYLES["tabs"](_users_settings(host)))
    assert not _uninstall(host, home, project).changed
    assert not _uninstall(host, home, project, "project").changed


@pytest.mark.parametrize("host", HOST_NAMES)
def test_uninstall_keeps_what_the_user_changed_after_install(tmp_path: Path, host: str) -> None:
    home, project = _places(tmp_path)
    path = _path(host, home, project)
    path.parent.mkdir(parents=True)
    path.write_bytes(STYLES["four-spaces"](_users_settings(host)))
    _install(host, home, project)
    doc = json.loads(path.read_text())
    doc["added-later"] = True
    path.write_text(json.dumps(doc, indent=4) + "\n")
    _uninstall(host, home, project)
    assert (
        path.read_text()
        == json.dumps({**_users_settings(host), "added-later": True}, indent=4) + "\n"
    )


@pytest.mark.parametrize("host", HOST_NAMES)
def test_a_dry_run_writes_nothing_and_gives_a_diff(tmp_path: Path, host: str) -> None:
    home, project = _places(tmp_path)
    path = _path(host, home, project)
    new = _install(host, home, project, dry_run=True)
    assert not path.exists() and new.backup is None
    assert new.diff().startswith("--- /dev/null\n+++ ")
    path.parent.mkdir(parents=True)
    original = STYLES["two-spaces"](_users_settings(host))
    path.write_bytes(original)
    change = _install(host, home, project, dry_run=True)
    assert path.read_bytes() == original and list(path.parent.glob("*.bak")) == []
    diff = change.diff()
    assert diff.startswith(f"--- {path}\n+++ {path}\n")
    assert f"+{' ' * 0}" in diff and "hook prompt --host " + host in diff
    _install(host, home, project)
    installed = path.read_bytes()
    assert _uninstall(host, home, project, dry_run=True).diff().count("\n-") > 0
    assert path.read_bytes() == installed


BAD_FILES = {
    "not JSON": (b'{"hooks": {', "is not valid JSON"),
    "an array": (b"[1, 2]", "not an object"),
    "hooks a list": (b'{"hooks": []}', '"hooks" is a list'),
    "an event a string": (b'{"hooks": {"Stop": "echo"}}', "not a list"),
    "comments": (b'{\n  // mine\n  "model": "x",\n}\n', "comments"),
    "not UTF-8": (b'{"a": "\xff"}', "UTF-8"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
@pytest.mark.parametrize("host", HOST_NAMES)
def test_a_file_it_cannot_read_is_refused_and_left_alone(
    tmp_path: Path, host: str, case: str
) -> None:
    home, project = _places(tmp_path)
    path = _path(host, home, project)
    path.parent.mkdir(parents=True)
    data, fragment = BAD_FILES[case]
    path.write_bytes(data)
    for verb in (_install, _uninstall):
        with pytest.raises(InvalidInput) as caught:
            verb(host, home, project)
        assert str(path) in str(caught.value) and fragment in str(caught.value)
        assert "\n" not in str(caught.value)
    assert list(path.parent.iterdir()) == [path] and path.read_bytes() == data


def test_backups_of_the_same_second_do_not_overwrite_each_other(tmp_path: Path) -> None:
    home, project = _places(tmp_path)
    path = _path("claude-code", home, project)
    path.parent.mkdir(parents=True)
    path.write_text('{"a": 1}\n')

    def now() -> datetime:
        return datetime(2026, 1, 2, 3, 4, 5)

    first = _install("claude-code", home, project, now=now)
    _uninstall("claude-code", home, project)
    second = _install("claude-code", home, project, now=now)
    assert first.backup is not None and second.backup is not None
    assert first.backup.name == "settings.json.20260102-030405.bak"
    assert second.backup.name == "settings.json.20260102-030405-1.bak"


def test_status_lists_each_file_with_our_events(tmp_path: Path) -> None:
    home, project = _places(tmp_path)
    assert status(home=home, project=project) == []
    _install("claude-code", home, project)
    _install("cursor", home, project, "project")
    codex = _path("codex", home, project)
    codex.parent.mkdir(parents=True)
    codex.write_text("not json")
    found = status(home=home, project=project)
    assert [(i.host, i.where, i.path) for i in found] == [
        ("claude-code", "user", _path("claude-code", home, project)),
        ("cursor", "project", _path("cursor", home, project, "project")),
    ]
    assert found[0].events == EVENTS and found[0].missing == ()
    doc = json.loads(_path("cursor", home, project, "project").read_text())
    del doc["hooks"]["preCompact"]
    _path("cursor", home, project, "project").write_text(json.dumps(doc))
    assert status(home=home, project=project)[1].missing == ("compact",)


def test_a_command_is_ours_only_with_our_host_and_a_prime_memory_executable() -> None:
    command = hook_command("/a b/prime-memory", "codex", "tool")
    assert command == "'/a b/prime-memory' hook tool --host codex"
    assert is_ours(command, "codex") == "tool"
    assert is_ours(command, "cursor") is None
    assert is_ours("prime-memory hook stop --host gemini", "gemini") == "stop"
    assert is_ours("C:\\Tools\\prime-memory.exe hook stop --host gemini", "gemini") == "stop"
    assert is_ours("/x/pm hook stop --host gemini", "gemini") is None
    assert is_ours("/x/pm hook stop --host gemini", "gemini", "/x/pm") == "stop"
    assert is_ours("echo prime-memory hook stop --host gemini", "gemini") is None
    assert is_ours("prime-memory hook nothing --host gemini", "gemini") is None
    assert is_ours(None, "gemini") is None


def test_the_plugin_runs_the_hooks_install_writes(tmp_path: Path) -> None:
    plugin = ROOT / "plugins" / "prime-memory"
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]
    home, project = _places(tmp_path)
    _install("claude-code", home, project, command_exe="prime-memory")
    assert hooks == json.loads(_path("claude-code", home, project).read_text())["hooks"]
    spec = HOSTS["claude-code"]
    assert hooks == {
        event: [entry(spec, b, "prime-memory") for b in spec.bindings if b.host_event == event]
        for event in hooks
    }
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "prime-memory"
    servers = json.loads((plugin / ".mcp.json").read_text())["mcpServers"]
    assert servers["prime-memory"]["command"] == "prime-memory-mcp"
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    (listed,) = market["plugins"]
    assert listed["name"] == "prime-memory" and (ROOT / listed["source"]).resolve() == plugin


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    host=st.sampled_from(HOST_NAMES),
    extra=st.dictionaries(
        st.text(min_size=1, max_size=6).filter(lambda k: k != "hooks"), _json, max_size=4
    ),
    users=st.lists(st.sampled_from(["a.sh", "b.sh", "prime-memory hook stop"]), max_size=3),
    odd=st.lists(_json, max_size=2),
    on_ours=st.booleans(),
    style=st.sampled_from(sorted(STYLES)),
)
def test_any_users_file_comes_back_byte_for_byte(
    host: str, extra: dict[str, Any], users: list[str], odd: list[Any], on_ours: bool, style: str
) -> None:
    spec = HOSTS[host]
    event = spec.bindings[0].host_event if on_ours else "Unrelated"
    doc = {**extra, "hooks": {event: [_users_hook(host, c) for c in users] + odd}}
    with tempfile.TemporaryDirectory() as folder:
        home, project = _places(Path(folder))
        path = _path(host, home, project)
        path.parent.mkdir(parents=True)
        original = STYLES[style](doc)
        path.write_bytes(original)
        _install(host, home, project)
        assert not _install(host, home, project).changed
        _uninstall(host, home, project)
        assert path.read_bytes() == original


# -- the command line ---------------------------------------------------------------


@pytest.fixture
def cli_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USERPROFILE", str(home))
    return home


def test_the_command_line_installs_lists_and_uninstalls(cli_home: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    settings_file = cli_home / ".claude" / "settings.json"
    result = runner.invoke(cli, ["hooks", "install", "claude-code", "--command", EXE])
    assert result.exit_code == 0, result.output
    assert f"in {settings_file}" in result.stdout
    assert EXE in settings_file.read_text()
    listed = runner.invoke(cli, ["hooks", "status", "--project", str(tmp_path), "--json"])
    assert json.loads(listed.stdout) == [
        {
            "host": "claude-code",
            "where": "user",
            "path": str(settings_file),
            "events": list(EVENTS),
            "missing": [],
        }
    ]
    again = runner.invoke(cli, ["hooks", "install", "claude-code", "--command", EXE])
    assert "already installed" in again.stdout
    gone = runner.invoke(cli, ["hooks", "uninstall", "claude-code", "--command", EXE])
    assert gone.exit_code == 0 and not settings_file.exists()
    assert "no prime-memory hooks installed" in runner.invoke(cli, ["hooks", "status"]).stdout


def test_the_command_line_installs_in_a_project_folder(cli_home: Path, tmp_path: Path) -> None:
    project = tmp_path / "api"
    project.mkdir()
    runner = CliRunner()
    args = ["hooks", "install", "cursor", "--project", str(project), "--command", EXE]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert (project / ".cursor" / "hooks.json").exists()
    before_global = runner.invoke(
        cli,
        ["--project", str(project), "hooks", "install", "gemini", "--project", "--command", EXE],
    )
    assert before_global.exit_code == 0, before_global.output
    assert (project / ".gemini" / "settings.json").exists()
    assert not (cli_home / ".cursor").exists() and not (cli_home / ".gemini").exists()


def test_the_command_line_dry_run_prints_the_diff_and_writes_nothing(cli_home: Path) -> None:
    result = CliRunner().invoke(cli, ["hooks", "install", "gemini", "--dry-run", "--command", EXE])
    assert result.exit_code == 0
    assert result.stdout.startswith("--- /dev/null\n")
    assert f"{EXE} hook prompt --host gemini" in result.stdout
    assert not (cli_home / ".gemini").exists()


def test_the_command_line_refuses_a_broken_file_in_one_line(cli_home: Path) -> None:
    path = cli_home / ".codex" / "hooks.json"
    path.parent.mkdir()
    path.write_text("{oops")
    result = CliRunner().invoke(cli, ["hooks", "install", "codex", "--command", EXE])
    one_line_error(result, str(path), "not valid JSON")
    assert path.read_text() == "{oops"


def test_the_command_line_refuses_user_and_project_together(cli_home: Path) -> None:
    result = CliRunner().invoke(cli, ["hooks", "install", "codex", "--user", "--project"])
    one_line_error(result, "--user and --project")


@pytest.mark.parametrize("name", ["install", "uninstall", "status"])
def test_every_hooks_command_has_help_and_examples(name: str) -> None:
    result = CliRunner().invoke(cli, ["hooks", name, "--help"])
    assert result.exit_code == 0
    assert "Examples:" in result.output and f"prime-memory hooks {name}" in result.output
