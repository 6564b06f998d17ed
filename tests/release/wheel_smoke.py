"""Smoke test for a wheel on an interpreter of another platform (run under emulation).

Usage: wheel_smoke.py REPO
Runs every ```python block of REPO/README.md (the quick start) in a scratch directory (a block
that imports a module this interpreter lacks, such as torch, is named and skipped), then
reads every reference fixture in REPO/tests/fixtures/v3 with DenseDataset / RaggedDataset and
Zrecord and compares values, lengths and stats with the manifest's expectations. Prints one
line per check and exits non-zero on the first difference.
"""

import ast
import importlib.util
import json
import os
import platform
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

import loaderx
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.zrecord import Zrecord

repo = Path(sys.argv[1]).resolve()
print(f"loaderx {loaderx.__version__} from {Path(loaderx.__file__).parent} on {platform.machine()}, "
      f"Python {platform.python_version()}, numpy {np.__version__}")

blocks = re.findall(r"^```python\n(.*?)^```", (repo / "README.md").read_text(), re.S | re.M)
assert blocks, "README.md has no python block"
def missing_modules(code):
    """Top-level modules the block imports that this interpreter lacks (torch, JAX, Ray: the
    arm64 root holds only Python and NumPy)."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return sorted(n for n in names if importlib.util.find_spec(n) is None)


# The blocks run in order in one scratch directory, as a reader runs them (a later block may use
# the stores an earlier one wrote), each in its own namespace.
cwd = os.getcwd()
skipped = []
with tempfile.TemporaryDirectory() as scratch:
    os.chdir(scratch)
    try:
        for k, code in enumerate(blocks):
            lacking = missing_modules(code)
            if lacking:
                print(f"skip README python block {k}: needs {', '.join(lacking)}, not installed here")
                skipped.append(str(k))
                continue
            try:
                exec(compile(code, f"README.md python block {k}", "exec"), {"__name__": "__readme__"})
            except ModuleNotFoundError as e:
                # A loaderx module for another library (loaderx.jax) names the library it lacks.
                top = (e.name or "").split(".")[0]
                if not top or top == "loaderx" or importlib.util.find_spec(top) is not None:
                    raise
                print(f"skip README python block {k}: needs {top}, not installed here")
                skipped.append(str(k))
                continue
            print(f"ok  README python block {k}")
    finally:
        os.chdir(cwd)

fixtures = repo / "tests" / "fixtures" / "v3"
manifest = json.loads((fixtures / "manifest.json").read_text())
for case in manifest["stores"]:
    name, store = case["name"], str(fixtures / case["store"])
    want = {k: np.load(fixtures / v, allow_pickle=False) for k, v in case["expected"].items()}
    n = case["length"]
    with Zrecord(store) as z:
        assert len(z) == n, (name, len(z), n)
        if n:
            assert (z.lengths(np.arange(n, dtype=np.uint64)) == want["lengths"]).all(), name
        stats = z.stats()
        for key in ("records", "live_bytes", "chunk_bytes", "reclaimable"):
            assert int(stats[key]) == case["stats"][key], (name, key)
    if case["kind"] == "dense":
        got = DenseDataset(store)[np.arange(n)] if n else None
        if n:
            assert got.dtype == want["values"].dtype and got.shape == want["values"].shape, name
            assert got.tobytes() == want["values"].tobytes(), name
    else:
        ds = RaggedDataset(store)
        rows = ds[np.arange(n)]
        flat = np.concatenate([np.asarray(r).reshape(-1) for r in rows]) if n else np.zeros(0)
        assert flat.tobytes() == want["values"].reshape(-1).tobytes(), name
    print(f"ok  fixture {name} ({n} records)")
print(f"wheel smoke: {len(blocks) - len(skipped)} README blocks ok ({len(skipped)} skipped: {', '.join(skipped)}) "
      f"and {len(manifest['stores'])} fixtures ok")
