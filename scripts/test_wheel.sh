#!/usr/bin/env bash
# Builds the wheel with maturin and installs it into a fresh venv, then checks that the package
# imports and round-trips a store there; also checks that `pip install ./py` builds from source.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
.venv/bin/maturin build --release -q -m py/Cargo.toml -o "$out/wheels"
smoke='
import numpy as np, tempfile, os
from loaderx.converter import from_numpy
from loaderx.dataset import DenseDataset
d = tempfile.mkdtemp()
x = np.arange(600, dtype=np.float32).reshape(50, 3, 4)
from_numpy(os.path.join(d, "s"), x)
assert (DenseDataset(os.path.join(d, "s"))[[3, 1]] == x[[3, 1]]).all()
print("wheel ok:", __import__("loaderx").__file__)
'
python3 -m venv "$out/wheel-venv"
"$out/wheel-venv/bin/pip" install -q "$out"/wheels/*.whl
(cd "$out" && "$out/wheel-venv/bin/python" -c "$smoke")
python3 -m venv "$out/src-venv"
"$out/src-venv/bin/pip" install -q ./py
(cd "$out" && "$out/src-venv/bin/python" -c "$smoke")
