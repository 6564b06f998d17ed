#!/usr/bin/env bash
# Builds every release artifact from this one Linux x86-64 machine into dist/:
#   abi3 wheels (one per platform, every CPython >= 3.9), cross-built by maturin with zig:
#     manylinux_2_17 x86_64/aarch64, musllinux_1_2 x86_64/aarch64, macosx_11_0 x86_64/arm64,
#     win_amd64, win_arm64
#   free-threaded wheels (cp314t; abi3 cannot serve free-threaded CPython): manylinux_2_17
#     x86_64/aarch64, built through PyO3's cross-compilation config (no 3.14t interpreter)
#   the sdist, and the npm tarball (`npm pack`).
# Then scripts/check_dist.py checks every artifact. A failed build fails the script: no
# platform is claimed that was not built.
#   DIST_TARGETS="x86_64-unknown-linux-gnu ..." limits the wheels to those targets.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
OUT=${DIST_DIR:-$PWD/dist}
PY=$PWD/.venv/bin/python

ALL="x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-unknown-linux-musl aarch64-unknown-linux-musl x86_64-apple-darwin aarch64-apple-darwin x86_64-pc-windows-gnu aarch64-pc-windows-gnullvm"
TARGETS=${DIST_TARGETS:-$ALL}
FT_TARGETS=${DIST_FT_TARGETS-"x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu"}

# Tools for the free-threaded builds (scripts/wheel.sh installs them for the abi3 ones).
"$PY" -c "import ziglang" 2>/dev/null || .venv/bin/pip install -q ziglang
installed=$(rustup target list --installed)
for t in $FT_TARGETS; do
  grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

rm -rf "$OUT" && mkdir -p "$OUT"
# Wheels build in their own target dir (the wasm build below keeps using target/).
maturin() {
  CARGO_TARGET_DIR=$PWD/target/dist MACOSX_DEPLOYMENT_TARGET=11.0 VIRTUAL_ENV=$PWD/.venv \
    PATH=$PWD/.venv/bin:$PATH .venv/bin/maturin "$@"
}

for t in $TARGETS; do
  JOBS=$JOBS ./scripts/wheel.sh "$t" "$OUT"
done

# Free-threaded: PyO3 reads the target interpreter from this config instead of running one.
for t in $FT_TARGETS; do
  echo "dist: cp314t wheel for $t"
  maturin build --release --strip --zig -q -j "$JOBS" -m py/Cargo.toml --target "$t" \
    --compatibility manylinux2014 -i python3.14t -o "$OUT"
done

echo "dist: sdist"
maturin sdist -m py/Cargo.toml -o "$OUT"

echo "dist: npm tarball"
JOBS=$JOBS ./scripts/build_wasm.sh
(cd js && npm pack --silent --pack-destination "$OUT" >/dev/null)

# Every platform must be there unless the caller chose a subset.
"$PY" scripts/check_dist.py "$OUT" ${DIST_TARGETS:+--partial}
