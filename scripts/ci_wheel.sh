#!/usr/bin/env bash
# CI's Python extension (`make py-build` under LOADERX_CI_PRUNE): the manylinux_2_17 x86_64 wheel
# exactly as `make dist` builds it (maturin + zig, in target/dist), installed into .venv. test-wheel
# then builds the same wheel again and finds every crate already compiled, so a fresh clone
# compiles the engine's release tree once instead of twice (`maturin develop`, then the wheel).
# Elsewhere `make py-build` stays an editable `maturin develop`, which follows source edits.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/target/ci-wheel
DIST_DIR=$out DIST_TARGETS=x86_64-unknown-linux-gnu DIST_FT_TARGETS= DIST_WHEELS_ONLY=1 ./scripts/dist.sh
wheel=$(ls "$out"/loaderx-*-cp39-abi3-manylinux*_x86_64.whl)
# The dependencies (numpy, cloudpickle) are setup.sh's; only the package is replaced.
.venv/bin/pip install -q --force-reinstall --no-deps "$wheel"
.venv/bin/python -c 'import loaderx, loaderx._loaderx as m; print("py-build: installed", loaderx.__file__, m.__version__)'
rm -rf "$out"
