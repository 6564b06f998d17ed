"""loaderx's Python modules import each other without a circle: the module graph, built from every
import statement (module level, under TYPE_CHECKING and inside functions alike), is acyclic. A
piece two modules share moves down into a module both import.

Run: .venv/bin/python -m pytest tests/tooling/test_import_circles.py -q
"""

import ast
from pathlib import Path

from _graph import circles

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "py" / "python" / "loaderx"


def modules(package_dir):
    """Dotted module name -> source file, for every .py file under ``package_dir``, and for every
    extension module there, known by its .pyi stub (a leaf: it imports no Python module)."""
    out = {}
    for path in sorted(package_dir.rglob("*.py")) + sorted(package_dir.rglob("*.pyi")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.setdefault(".".join(parts), path)
    return out


def import_graph(package_dir):
    """Module -> {imported module of the same package: first line importing it}."""
    mods = modules(package_dir)
    graph = {}
    for name, path in mods.items():
        if path.suffix == ".pyi":
            graph[name] = {}
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                # `from .pkg import sub` imports the submodule; `from .mod import name` the module.
                targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in mods else source for alias in node.names]
            for target in targets:
                # `import loaderx.a.b` imports loaderx.a.b (its parents' __init__ files are not edges:
                # they run first, and a package's __init__ importing its children is no circle).
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.setdefault(target, node.lineno)
        graph[name] = edges
    return graph


def test_loaderx_has_no_import_circle():
    graph = import_graph(PACKAGE)
    assert len(graph) > 10 and sum(map(len, graph.values())) > 20  # the scan saw the package
    found = circles(graph)
    lines = [" <-> ".join(group) + ": " + "; ".join(f"{a} imports {b} (line {graph[a][b]})" for a in group
                                                    for b in group if b in graph[a]) for group in found]
    assert not found, "import circles in loaderx:\n" + "\n".join(lines)


def test_the_scan_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import a\n")
    (pkg / "a.py").write_text("from .sub import c\nimport pkg.b\n")
    (pkg / "b.py").write_text("def late():\n    from . import a\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from ..b import late\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .e import X\n")
    (pkg / "e.py").write_text("from pkg import d\nfrom . import _native\n")
    (pkg / "_native.pyi").write_text("from . import d\n")  # a stub: not a module that imports
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.c": 1, "pkg.b": 2}
    assert graph["pkg.sub.c"] == {"pkg.b": 1}
    assert graph["pkg.e"] == {"pkg.d": 1, "pkg._native": 2} and graph["pkg._native"] == {}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"], ["pkg.d", "pkg.e"]]
