"""No import cycles inside the gsrender package, and no arrow out of it to the checkout's scripts.

Every module under gsrender/ is parsed (not imported) and each `import` / `from ... import`
statement, at module level or inside a function, becomes an edge to the gsrender modules it
executes: the named module, the submodule a `from pkg import name` names when there is one, and
the packages above the target that the importer is not itself inside (importing gsrender.io.ply
from outside gsrender.io runs gsrender/io/__init__.py first; from inside it that package is
already being imported). A function-level import only postpones a cycle, so it counts too.

The package is what `pip install` ships: it never imports benchmarks/, studies/, scripts/ or
tools/, neither by name (`import benchmarks.common`) nor at run time by path (importlib's
spec_from_file_location / import_module, runpy, a loader, exec of a file's text, sys.path edits)
naming one of those folders anywhere in the same function.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "gsrender"
OUTSIDE = ("benchmarks", "studies", "scripts", "tools")  # the checkout's folders outside the package
# calls that load code chosen at run time (by a path or a name built from strings)
LOADERS = {"spec_from_file_location", "spec_from_loader", "module_from_spec", "exec_module", "import_module",
           "run_path", "run_module", "SourceFileLoader", "__import__", "exec", "load_source"}
_OUTSIDE_TEXT = re.compile(r"(^|[/\\.])(" + "|".join(OUTSIDE) + r")([/\\.]|$)")


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


def outside_imports(path: Path) -> list[str]:
    """`import X` / `from X import ...` statements of a file naming a module of a folder outside the
    package (OUTSIDE), as "line N: module"."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        found += [(node.lineno, f"line {node.lineno}: import {n}")
                  for n in names if n.split(".")[0] in OUTSIDE]
    return [text for _, text in sorted(found)]


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _touches_sys_path(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "path" and isinstance(n.value, ast.Name)
               and n.value.id == "sys" for n in ast.walk(node))


def runtime_loads(path: Path) -> list[str]:
    """Run-time loads of code from a folder outside the package: in each function (and the module
    and class bodies), a loader call (LOADERS) or a sys.path edit together with a string naming
    one of OUTSIDE as a path or module component ("benchmarks", "studies/x.py", "scripts.y"), as
    "line N: call"."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    scopes = [tree, *(n for n in ast.walk(tree)
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    found = []
    for scope in scopes:
        # the scope's own statements: nested functions and classes are scopes of their own
        # (docstrings and other bare strings say where things are; they load nothing)
        own = [n for stmt in scope.body
               if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
               and not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))
               for n in ast.walk(stmt)]
        texts = [n.value for n in own if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        if not any(_OUTSIDE_TEXT.search(t) for t in texts):
            continue
        for n in own:
            if isinstance(n, ast.Call) and (_call_name(n) in LOADERS or _touches_sys_path(n.func)):
                found.append(f"line {n.lineno}: {_call_name(n) or 'call'}")
    return sorted(set(found))


def test_runtime_load_detection_on_toy_files(tmp_path):
    by_path = tmp_path / "by_path.py"
    by_path.write_text(
        "import importlib.util\nfrom pathlib import Path\n\n"
        "def run():\n    p = Path(__file__).parents[1] / 'benchmarks' / 'fps.py'\n"
        "    spec = importlib.util.spec_from_file_location('fps', p)\n")
    assert runtime_loads(by_path) == ["line 6: spec_from_file_location"]
    by_name = tmp_path / "by_name.py"
    by_name.write_text("import importlib, runpy, sys\n"
                       "def a():\n    return importlib.import_module('studies.voda.trained')\n"
                       "def b():\n    runpy.run_path('scripts/make_sample_scene.py')\n"
                       "def c():\n    sys.path.insert(0, 'tools')\n")
    assert runtime_loads(by_name) == ["line 3: import_module", "line 5: run_path", "line 7: insert"]
    static = tmp_path / "static.py"
    static.write_text("def f():\n    from benchmarks.common import median\nimport studies.scenes\n")
    assert outside_imports(static) == ["line 2: import benchmarks.common", "line 3: import studies.scenes"]
    # an unrelated loader, or a string naming a folder without a loader beside it, is not a load
    fine = tmp_path / "fine.py"
    fine.write_text("import importlib\n"
                    "def a():\n    return importlib.import_module('gsrender.io')\n"
                    "def b():\n    print('see benchmarks/fps.py')\n")
    assert runtime_loads(fine) == [] and outside_imports(fine) == []


def test_package_never_loads_the_checkout_folders():
    bad = {}
    for name, path in module_files().items():
        hits = outside_imports(path) + runtime_loads(path)
        if hits:
            bad[name] = hits
    assert not bad, ("gsrender imports from " + "/".join(OUTSIDE) + " (the package must run without a "
                     "checkout):\n" + "\n".join(f"  {m}: {', '.join(h)}" for m, h in sorted(bad.items())))
