from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import prime_memory_folding


def test_all_is_sorted_and_complete() -> None:
    import types

    names = prime_memory_folding.__all__
    assert names == sorted(names)
    for name in names:
        assert getattr(prime_memory_folding, name) is not None
    exported = {
        name
        for name, value in vars(prime_memory_folding).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and getattr(value, "__module__", "").startswith("prime_memory_folding")
    }
    assert exported <= set(names)


def test_every_error_derives_from_the_base() -> None:
    from prime_memory_folding import errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.PrimeMemoryError)


def test_importing_the_package_does_not_load_numpy() -> None:
    code = "import sys, prime_memory_folding; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


#: The package's layers, from the bottom up (docs/architecture.md draws them).
#: A module imports modules of its own package, and of the packages in layers
#: below its own; never of a package beside it or above it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("core",),
    ("storage",),
    ("recall", "fold"),
    ("engine",),
    ("transfer", "capture"),
    ("net",),
    ("mcp", "web"),
    ("cli", "mcp_server", "__init__"),
    ("console",),
)
#: The adapters: the only places a protocol, a web page or a terminal is spoken.
ADAPTERS = ("net", "mcp", "web", "cli", "mcp_server", "console")
ADAPTER_LIBRARIES = (
    *("mcp", "pydantic", "click", "typer", "rich"),
    *("starlette", "jinja2", "uvicorn", "markupsafe"),
)


def imported_names(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, relative ones resolved within the package."""
    import ast

    package = path.parent.relative_to(PACKAGE.parent).parts
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            if node.module is None:
                found.extend((node.lineno, f"{module}.{alias.name}") for alias in node.names)
            else:
                found.append((node.lineno, module))
    return found


PACKAGE = Path(prime_memory_folding.__file__).parent
CORE = sorted(
    path
    for path in PACKAGE.rglob("*.py")
    if path.relative_to(PACKAGE).parts[0].removesuffix(".py") not in ADAPTERS
)


def test_the_layering_check_sees_the_adapters_imports() -> None:
    names = {name for _, name in imported_names(PACKAGE / "mcp" / "server.py")}
    assert "prime_memory_folding.mcp.transport" in names
    assert any(name.split(".")[0] == "mcp" for name in names)


def _layer_of(path: Path) -> tuple[str, int]:
    """The package (or root module) ``path`` belongs to, and its layer."""
    top = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
    for rank, layer in enumerate(LAYERS):
        if top in layer:
            return top, rank
    raise AssertionError(f"{path.relative_to(PACKAGE)} is in no layer; add its package to LAYERS")


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_each_module_imports_only_its_package_and_the_layers_below(path: Path) -> None:
    own, rank = _layer_of(path)
    wrong = []
    for line, name in imported_names(path):
        parts = name.split(".")
        if parts[0] != "prime_memory_folding" or len(parts) < 2:
            continue
        target = PACKAGE / parts[1]
        target = target if target.is_dir() else target.with_suffix(".py")
        if not target.exists():
            continue  # a name the package itself defines (__version__)
        theirs, their_rank = _layer_of(target)
        if theirs != own and their_rank >= rank:
            wrong.append(f"line {line}: {name} ({theirs}, layer {their_rank} >= {rank})")
    assert wrong == []


def test_the_layer_check_knows_every_package() -> None:
    tops = {
        p.name.removesuffix(".py")
        for p in PACKAGE.iterdir()
        if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").is_file())
    }
    assert tops == {name for layer in LAYERS for name in layer}


def test_the_layering_check_sees_the_inspectors_imports() -> None:
    names = {name for _, name in imported_names(PACKAGE / "web" / "app.py")}
    assert "prime_memory_folding.engine.facade" in names
    assert {"starlette.applications", "jinja2"} <= names
    assert not any(path.relative_to(PACKAGE).parts[0] == "web" for path in CORE)


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_core_never_imports_an_adapter(path: Path) -> None:
    wrong = [
        f"line {line}: {name}"
        for line, name in imported_names(path)
        if name.split(".")[0] in ADAPTER_LIBRARIES
        or (name.startswith("prime_memory_folding.") and name.split(".")[1] in ADAPTERS)
    ]
    assert wrong == []


def _module_of(name: str) -> str | None:
    """The package module a dotted import name lands in (``a.b.c`` may be ``a.b``'s ``c``)."""
    parts = name.split(".")
    while parts:
        path = PACKAGE.parent.joinpath(*parts)
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return ".".join(parts)
        parts.pop()
    return None


def _import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere: at the top, lazily or for types."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
        module = ".".join(parts)
        targets = {_module_of(name) for _, name in imported_names(path)}
        graph[module] = {t for t in targets if t and t != module and t != "prime_memory_folding"}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle in ``graph``, as the modules along it, or None."""
    state: dict[str, int] = {}
    trail: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        trail.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*trail[trail.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        trail.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_imports_one_that_imports_it_back() -> None:
    graph = _import_graph()
    assert "prime_memory_folding.engine.facade" in graph["prime_memory_folding.cli._common"]
    assert _cycle(graph) is None
