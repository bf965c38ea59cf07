"""The house rules a newcomer relies on, read from the source: modules a reader can take in one
sitting, functions that fit on a screen, imports that go one way, and a map of core/ that names
every folder."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # the repository root is the package djx
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 60


def _modules(*folders: str) -> dict[str, Path]:
    """djx.dotted.name -> file, for every module under the folders."""
    found = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(("djx",) + (parts[:-1] if parts[-1] == "__init__" else parts))
            found[name] = path
    return found


CODE = _modules("core", "ops", "analyze")


def _imports(name: str, path: Path) -> set[str]:
    """The djx modules `name` imports, at module level or inside a function (lazily imported is
    still imported)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets.add(base)
            targets.update(f"{base}.{a.name}" for a in node.names)  # `from package import module`
    return {t for t in targets if t in CODE and t != name}


@pytest.mark.parametrize("name", sorted(n for n in CODE if n.startswith(("djx.core", "djx.ops"))))
def test_a_module_reads_in_one_sitting(name):
    path = CODE[name]
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(ROOT)}: {lines} lines (split it along a seam a reader would choose)"
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{path.relative_to(ROOT)}: functions over {MAX_FUNCTION_LINES} lines: {', '.join(long)}"


def test_imports_go_one_way_with_no_circle():
    graph = {name: _imports(name, path) for name, path in CODE.items()}
    cycles = _strongly_connected(graph)
    shown = ["  " + " -> ".join(sorted(c)) for c in cycles]
    assert not cycles, "import circles (a lazy import counts too):\n" + "\n".join(shown)


def test_the_framework_knows_no_concrete_op():
    named = {name: sorted(t for t in _imports(name, path) if t.startswith("djx.ops"))
             for name, path in CODE.items() if name.startswith("djx.core")}
    assert not {n: t for n, t in named.items() if t}, "core/ finds ops through the registry, never by import"


def test_the_map_in_core_names_every_folder():
    doc = ast.get_docstring(ast.parse((ROOT / "core" / "__init__.py").read_text(encoding="utf-8")))
    folders = sorted(p.name for p in (ROOT / "core").iterdir() if (p / "__init__.py").is_file())
    assert folders, "core/ has folders"
    assert [f for f in folders if f"{f}/" not in doc] == []


def test_the_layout_check_sees_a_circle_and_a_one_way_chain():
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of modules that import each other, directly or around a circle (Tarjan)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups
