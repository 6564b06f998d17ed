"""No Rust crate of the workspace has a circle among its modules: every `crate::a` a module
names (in `use` lines and paths, test modules left out) points down a tree, so each module can
be read, and changed, knowing only the ones below it.

Run: .venv/bin/python -m pytest tests/tooling -q   (make test-tooling)
"""

import re
from pathlib import Path

import pytest
from _graph import circles

REPO = Path(__file__).resolve().parents[2]
CRATES = ["core/src", "native/src", "wasm/src", "py/src"]


def modules(root: Path) -> dict[str, str]:
    """Module path (`sources::local`) -> its source without its `#[cfg(test)] mod tests`."""
    found = {}
    for path in sorted(root.rglob("*.rs")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        source = re.sub(r"#\[cfg\(test\)\]\s*mod tests \{.*", "", path.read_text(), flags=re.S)
        found["::".join(parts) or "crate"] = source
    return found


def edges(mods: dict[str, str]) -> dict[str, set[str]]:
    """Which modules each module names, by the longest module path a `crate::` path starts with;
    a module's own children and parents do not count."""
    out: dict[str, set[str]] = {m: set() for m in mods}
    for m, source in mods.items():
        paths = re.findall(r"crate::([a-z_][a-z_0-9]*(?:::[a-z_][a-z_0-9]*)*)", source)
        for group in re.findall(r"use crate::\{([^}]*)\}", source):
            paths += [item.strip() for item in group.split(",")]
        for path in paths:
            parts = path.split("::")
            target = next(("::".join(parts[:k]) for k in range(len(parts), 0, -1) if "::".join(parts[:k]) in mods), None)
            if target and target != m and not target.startswith(m + "::") and not m.startswith(target + "::"):
                out[m].add(target)
    return out


@pytest.mark.parametrize("crate", CRATES)
def test_a_crates_modules_form_no_circle(crate):
    assert circles(edges(modules(REPO / crate))) == []


def test_the_check_finds_a_circle():
    graph = edges({"a": "use crate::b::X;", "b": "fn f() { crate::c::g() }", "c": "use crate::{a, d};", "d": ""})
    assert circles(graph) == [["a", "b", "c"]]
