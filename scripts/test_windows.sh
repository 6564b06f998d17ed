#!/usr/bin/env bash
# Runs the tests of loaderx-core and loaderx-native built for x86_64-pc-windows-gnu under wine,
# once plain and once with the `fault-injection` feature. Installs what is missing first
# (mingw-w64, wine64, the rustup target) and skips whatever is there, so a second run costs
# only the test time.
#
#   scripts/test_windows.sh            (make test-windows; JOBS=2 by default)
#
# Everything it builds or creates lives under target/windows/ (its own cargo target dir, the
# ProcessPrng shim, the wine prefix), so it never contends for target/'s build lock. The linker
# and the `wine` runner come from .cargo/config.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-2}
TARGET=x86_64-pc-windows-gnu
OUT=$ROOT/target/windows
start=$(date +%s)

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

APT=()
command -v x86_64-w64-mingw32-gcc >/dev/null || APT+=(mingw-w64)
command -v wine >/dev/null || APT+=(wine64)
if [ ${#APT[@]} -gt 0 ]; then
  echo "test-windows: installing ${APT[*]}"
  $SUDO apt-get update -qq
  # Waits for another apt run instead of failing on its lock.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${APT[@]}" >/dev/null
fi
if ! rustup target list --installed | grep -qx "$TARGET"; then
  echo "test-windows: adding the $TARGET target"
  rustup target add "$TARGET"
fi

# Wine 8.0 (bookworm) lacks bcryptprimitives.dll, whose ProcessPrng Rust's std needs: without it
# every test binary exits with status 53. The shim in scripts/wine/ stands in for it.
SHIM=$OUT/wine-shim
if [ ! "$SHIM/bcryptprimitives.dll" -nt scripts/wine/bcryptprimitives.c ]; then
  echo "test-windows: building the ProcessPrng shim"
  mkdir -p "$SHIM"
  x86_64-w64-mingw32-gcc -O2 -shared -o "$SHIM/bcryptprimitives.dll" scripts/wine/bcryptprimitives.c -ladvapi32
fi
# Wine does not find mingw's runtime DLLs (libgcc_s, libwinpthread) by itself either.
MINGW_GCC=$(ls -d /usr/lib/gcc/x86_64-w64-mingw32/*-posix | sort -V | tail -n 1)
export WINEPATH="$SHIM;$MINGW_GCC;/usr/x86_64-w64-mingw32/lib"

# A private prefix, created without any dialog: no display, no Mono or Gecko installer prompts.
export WINEPREFIX=$OUT/wine-prefix WINEARCH=win64 WINEDEBUG=-all DISPLAY=""
export WINEDLLOVERRIDES="mscoree,mshtml="
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  echo "test-windows: creating the wine prefix"
  mkdir -p "$WINEPREFIX"
  # It complains about syswow64 (no 32-bit wine installed, none needed) and still succeeds.
  wineboot -i >/dev/null 2>&1 || true
  wineserver -w
fi

# interop_reference runs the reference loaderx, a Linux Python, with piped output. Wine can start
# unix programs, but cannot give them Windows pipe handles (std's spawn fails with "Invalid
# handle", os error 6), so that test is left to the Linux run: without these variables it
# reports itself skipped.
unset LOADERX_REF_PYTHON LOADERX_REQUIRE_REF
# The golden stores, when tests/golden/run.sh has generated them, are read here too.
if [ -z "${LOADERX_GOLDEN:-}" ] && [ -f artifacts/golden/manifest.json ]; then
  export LOADERX_GOLDEN=$ROOT/artifacts/golden
fi

cargo_test() {
  cargo test -q -j"$JOBS" --target "$TARGET" --target-dir "$OUT" -p loaderx-core -p loaderx-native --no-default-features --features loaderx-native/cli "$@"
}

# One pass of the suite. If wine fails under a test rather than the test failing, the pass runs
# once more on a fresh wineserver: either wine's own server died ("wine client error", seen once
# on a loaded machine) or a test binary exited non-zero with no test reported failed and no panic
# (exit status 1 with no output at all, seen once in CI). A test that fails, or a crash that
# repeats, still fails the pass.
run() {
  echo "test-windows: cargo test ${*:-(all targets)}"
  local log status
  log=$(mktemp)
  set +e
  cargo_test "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  set -e
  if [ "$status" -ne 0 ] && { grep -q "wine client error" "$log" ||
    ! grep -qE "test result: FAILED|panicked at|^error\[|^error: could not compile" "$log"; }; then
    echo "test-windows: wine failed during the pass, not a test (exit $status, no test failed); running it once more"
    wineserver -k 2>/dev/null || true
    status=0
    cargo_test "$@" || status=$?
  fi
  rm -f "$log"
  return "$status"
}
run
# The feature changes only the I/O seam; its one test fails every write, sync, rename, resize
# and removal in turn (the rest of the suite ran above).
run --features loaderx-native/fault-injection --lib --test io_faults_leave_the_store_consistent
wineserver -k 2>/dev/null || true
echo "test-windows: all passed in $(( $(date +%s) - start )) s"
