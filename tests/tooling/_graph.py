"""Strongly connected components of a directed graph, for the module-circle checks of
tests/tooling (Python imports in test_import_circles.py, Rust `crate::` paths in
test_rust_module_circles.py).

A graph maps each node to the nodes it points at (any iterable of them: a set, or a dict keyed by
node); every target is itself a key.
"""

from collections.abc import Iterable, Mapping


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more nodes (Tarjan), each as a sorted list, found
    from the nodes in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found
