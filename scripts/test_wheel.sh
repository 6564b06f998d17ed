#!/usr/bin/env bash
# The Python package as users get it:
#   1. the release artifacts for this machine, built as `make dist` builds them: the
#      manylinux_2_17 x86_64 abi3 wheel (maturin + zig), the win_amd64 abi3 wheel (mingw-w64),
#      the sdist and the npm tarball, each checked by scripts/check_dist.py (tags, glibc symbol
#      versions, links, contents), and the checker shown to catch broken copies of them
#      (tests/release);
#   2. the wheel in a fresh venv (.venv-wheel, made anew each run) runs the whole pytest suite,
#      exporting every store it writes for the JavaScript tests ($LOADERX_EXPORT_STORES);
#   3. the sdist builds with pip into a wheel that installs in another fresh venv and round-trips a
#      store.
# The artifacts stay in target/test-dist for scripts/test_npm.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
DIST=$PWD/target/test-dist
# Each step's time on stderr, to see where this suite's minutes go.
started=$SECONDS
mark() { echo "test-wheel: $1 at $((SECONDS - started)) s" >&2; }
# The win_amd64 wheel too: its link (mingw-w64, Windows' system DLLs) differs most from ours.
DIST_DIR=$DIST DIST_TARGETS="x86_64-unknown-linux-gnu x86_64-pc-windows-gnu" DIST_FT_TARGETS= ./scripts/dist.sh
# The checker itself must catch broken artifacts (made from the good ones).
.venv/bin/python -m pytest tests/release -q -p no:cacheprovider
mark "artifacts built and checked"

venv=$PWD/.venv-wheel
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q -U pip
"$venv/bin/pip" install -q "$DIST"/loaderx-*-cp39-abi3-manylinux*_x86_64.whl pytest hypothesis tqdm msgpack "moto[server]" boto3 azure-storage-blob pyarrow polars duckdb datasets pillow scikit-learn scikit-image
"$venv/bin/python" -c 'import loaderx, sys; assert "/.venv-wheel/" in loaderx.__file__, loaderx.__file__; print("testing", loaderx.__file__)'
# From outside the source tree, so `import loaderx` can only find the installed wheel.
mark "wheel venv ready"
(cd /tmp && "$venv/bin/python" -m pytest "$OLDPWD/py/tests" -q -p no:cacheprovider)
mark "pytest suite passed"

smoke='
import numpy as np, tempfile, os
from loaderx.converter import from_numpy
from loaderx.dataset import DenseDataset
d = tempfile.mkdtemp()
x = np.arange(600, dtype=np.float32).reshape(50, 3, 4)
from_numpy(os.path.join(d, "s"), x)
assert (DenseDataset(os.path.join(d, "s"))[[3, 1]] == x[[3, 1]]).all()
print("sdist ok:", __import__("loaderx").__file__)
'
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
python3 -m venv "$src/venv"
# pip builds the sdist as it would for a user (unpacked, through the PEP 517 backend), but with
# this tree's maturin (no build isolation) and the wheels' build settings, in their target dir:
# maturin's zig linker wrapper is then the same file, so cargo reuses every compiled dependency
# and compiles only what the sdist's own sources change (a file missing from the sdist fails it).
PATH=$PWD/.venv/bin:$PATH CARGO_TARGET_DIR=$PWD/target/dist \
  MATURIN_PEP517_ARGS="--target x86_64-unknown-linux-gnu --zig --compatibility manylinux2014 --strip" \
  .venv/bin/pip wheel -q --no-cache-dir --no-build-isolation --no-deps -w "$src/wheel" "$DIST"/loaderx-*.tar.gz
"$src/venv/bin/pip" install -q "$src"/wheel/loaderx-*.whl
(cd "$src" && "$src/venv/bin/python" -c "$smoke")
mark "sdist built and ran"
