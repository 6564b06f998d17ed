#!/usr/bin/env bash
# One abi3 wheel of the Python package for a Rust target, built as `make dist` builds it (maturin,
# release, stripped; Linux and macOS linked by zig, x86-64 Windows by mingw-w64), in the wheels'
# own target dir, target/dist. Then installed into each VENV given (`--force-reinstall --no-deps`).
#   scripts/wheel.sh TARGET OUT_DIR [VENV...]
# scripts/dist.sh builds every wheel through this script, and CI's `make py-build` builds the
# host's wheel with it (LOADERX_PY_WHEEL=1): the release wheel test-wheel checks is then the very
# build the lint and the ML suites import, compiled once.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 2 ]] || { echo "usage: $0 TARGET OUT_DIR [VENV...]" >&2; exit 2; }
t=$1 out=$2
shift 2
JOBS=${JOBS:-2}

# target -> maturin's --compatibility (platform tag policy)
declare -A COMPAT=(
  [x86_64-unknown-linux-gnu]=manylinux2014
  [aarch64-unknown-linux-gnu]=manylinux2014
  [x86_64-unknown-linux-musl]=musllinux_1_2
  [aarch64-unknown-linux-musl]=musllinux_1_2
)

# Tools: zig (from PyPI) links every non-Windows target; rustup supplies each target's std.
.venv/bin/python -c "import ziglang" 2>/dev/null || .venv/bin/pip install -q ziglang
rustup target list --installed | grep -qx "$t" || rustup target add "$t"
# Windows: maturin's --zig mode exports the module init under its dotted name there and fails
# to link, so x86-64 links with Debian's mingw-w64 (the linker is set in .cargo/config.toml)
# and arm64 with zig handed to cargo directly (scripts/zig/). maturin makes python3.dll's
# import library itself.
if [[ $t == x86_64-pc-windows-gnu ]] && ! command -v x86_64-w64-mingw32-gcc >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq mingw-w64 >/dev/null
fi
export CARGO_TARGET_AARCH64_PC_WINDOWS_GNULLVM_LINKER=$PWD/scripts/zig/cc-aarch64-windows.sh
export CC_aarch64_pc_windows_gnullvm=$PWD/scripts/zig/cc-aarch64-windows.sh
export AR_aarch64_pc_windows_gnullvm=$PWD/scripts/zig/ar.sh

# macOS: the TLS stack's certificate check links Security and CoreFoundation, and zig has no
# Apple SDK; scripts/zig/macos_frameworks.py writes their link stubs (.tbd), found through -F.
if [[ $t == *apple* ]]; then
  stubs=$(.venv/bin/python scripts/zig/macos_frameworks.py "$PWD/target/dist/macos-frameworks" "$t")
  var=CARGO_TARGET_$(echo "${t//-/_}" | tr a-z A-Z)_RUSTFLAGS
  export "$var=-C link-arg=-F$stubs"
fi

args=(build --release --strip -q -j "$JOBS" -m py/Cargo.toml --target "$t" -o "$out")
[[ $t == *windows* ]] || args+=(--zig)
[[ -n ${COMPAT[$t]:-} ]] && args+=(--compatibility "${COMPAT[$t]}")
echo "wheel: abi3 wheel for $t"
mkdir -p "$out"
CARGO_TARGET_DIR=$PWD/target/dist MACOSX_DEPLOYMENT_TARGET=11.0 VIRTUAL_ENV=$PWD/.venv \
  PATH=$PWD/.venv/bin:$PATH MATURIN=$PWD/.venv/bin/maturin .venv/bin/maturin "${args[@]}"

for venv in "$@"; do
  # The newest wheel for this target in OUT_DIR (maturin prints no name under -q).
  case $t in
    *windows*) pat='*win*.whl' ;; *apple*) pat='*macosx*.whl' ;;
    *-musl) pat="*musllinux*_${t%%-*}.whl" ;; *) pat="*manylinux*_${t%%-*}.whl" ;;
  esac
  whl=$(ls -t "$out"/loaderx-*-cp39-abi3-$pat | head -1)
  "$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$whl"
  echo "wheel: $(basename "$whl") installed into $venv"
done
