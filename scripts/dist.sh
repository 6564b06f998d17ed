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

# target -> maturin's --compatibility (platform tag policy)
declare -A COMPAT=(
  [x86_64-unknown-linux-gnu]=manylinux2014
  [aarch64-unknown-linux-gnu]=manylinux2014
  [x86_64-unknown-linux-musl]=musllinux_1_2
  [aarch64-unknown-linux-musl]=musllinux_1_2
  [x86_64-apple-darwin]=
  [aarch64-apple-darwin]=
  [x86_64-pc-windows-gnu]=
  [aarch64-pc-windows-gnullvm]=
)
ALL="x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-unknown-linux-musl aarch64-unknown-linux-musl x86_64-apple-darwin aarch64-apple-darwin x86_64-pc-windows-gnu aarch64-pc-windows-gnullvm"
TARGETS=${DIST_TARGETS:-$ALL}
FT_TARGETS=${DIST_FT_TARGETS-"x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu"}

# Tools: zig (from PyPI) links every target; rustup supplies each target's std.
"$PY" -c "import ziglang" 2>/dev/null || .venv/bin/pip install -q ziglang
installed=$(rustup target list --installed)
for t in $TARGETS $FT_TARGETS; do
  grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

rm -rf "$OUT" && mkdir -p "$OUT"
# Wheels build in their own target dir (the wasm build below keeps using target/).
maturin() {
  CARGO_TARGET_DIR=$PWD/target/dist MACOSX_DEPLOYMENT_TARGET=11.0 VIRTUAL_ENV=$PWD/.venv \
    PATH=$PWD/.venv/bin:$PATH .venv/bin/maturin "$@"
}

# Windows: maturin's --zig mode exports the module init under its dotted name there and fails
# to link, so x86-64 links with Debian's mingw-w64 (the linker is set in .cargo/config.toml)
# and arm64 with zig handed to cargo directly (scripts/zig/). maturin makes python3.dll's
# import library itself.
if [[ " $TARGETS " == *windows* ]] && ! command -v x86_64-w64-mingw32-gcc >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq mingw-w64 >/dev/null
fi
export MATURIN=$PWD/.venv/bin/maturin
export CARGO_TARGET_AARCH64_PC_WINDOWS_GNULLVM_LINKER=$PWD/scripts/zig/cc-aarch64-windows.sh
export CC_aarch64_pc_windows_gnullvm=$PWD/scripts/zig/cc-aarch64-windows.sh
export AR_aarch64_pc_windows_gnullvm=$PWD/scripts/zig/ar.sh

for t in $TARGETS; do
  args=(build --release --strip -q -j "$JOBS" -m py/Cargo.toml --target "$t" -o "$OUT")
  [[ $t == *windows* ]] || args+=(--zig)
  [[ -n ${COMPAT[$t]:-} ]] && args+=(--compatibility "${COMPAT[$t]}")
  echo "dist: abi3 wheel for $t"
  maturin "${args[@]}"
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
