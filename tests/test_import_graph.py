"""No import cycles inside the gsrender package.

Every module under gsrender/ is parsed (not imported) and each `import` / `from ... import`
statement, at module level or inside a function, becomes an edge to the gsrender modules it
executes: the named module, the submodule a `from pkg import name` names when there is one, and
the packages above the target that the importer is not itself inside (importing gsrender.io.ply
from outside gsrender.io runs gsrender/io/__init__.py first; from inside it that package is
already being imported). A function-level import only postpones a cycle, so it counts too.
"""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "gsrender"


def module_files(pkg: Path = PKG) -> dict[str, Path]:
    """{dotted module name: file} of every .py file of the package."""
    out = {}
    for f in sorted(pkg.rglob("*.py")):
        parts = list(f.relative_to(pkg.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_edges(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The gsrender modules that executing `path` (module `name`) may import, directly."""
    is_pkg = path.name == "__init__.py"
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the importer's package, level - 1 packages up
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            targets.add(mod)
            targets.update(f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in modules)
    inside = set(_ancestors(name)) | ({name} if is_pkg else set())
    edges = set()
    for t in targets:
        for m in [*_ancestors(t), t]:
            if m in modules and m not in inside and m != name:
                edges.add(m)
    return edges


def import_graph(pkg: Path = PKG) -> dict[str, set[str]]:
    modules = module_files(pkg)
    return {name: import_edges(name, path, modules) for name, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v: str) -> None:  # recursion depth <= number of modules (~120)
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(comps)


def test_graph_sees_the_package():
    graph = import_graph()
    assert len(graph) > 50 and "gsrender.render" in graph
    # a module-level and a function-level edge (main() imports the trainer when run)
    assert "gsrender.render" in graph["gsrender"]
    assert "gsrender.train.run" in graph["gsrender.cli.main"]


def test_find_cycles_on_a_toy_graph():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert find_cycles(g) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_toy_package_edges(tmp_path):
    # function-level and relative imports count; the importer's own package does not
    pkg = tmp_path / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from p.a import f\n")
    (pkg / "a.py").write_text("def f():\n    from p.sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("from .. import a\n")
    (pkg / "sub" / "b.py").write_text("from . import c\n")
    (pkg / "sub" / "c.py").write_text("import p.sub.b\n")
    g = import_graph(pkg)
    assert g["p"] == {"p.a"}
    assert g["p.a"] == {"p.sub", "p.sub.b"}
    assert g["p.sub"] == {"p.a"}
    assert g["p.sub.b"] == {"p.sub.c"}
    assert g["p.sub.c"] == {"p.sub.b"}
    assert find_cycles(g) == [["p.a", "p.sub"], ["p.sub.b", "p.sub.c"]]


def test_no_import_cycles():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles in gsrender (each line one strongly connected set):\n" + \
        "\n".join("  " + " <-> ".join(c) for c in cycles)
