#!/usr/bin/env bash
# Builds the two wasm flavours into js/pkg/ (incremental):
#   js/pkg/web      plain build (stable): Node, and pages that are not cross-origin isolated
#   js/pkg/threads  threaded build (nightly, +atomics, wasm-bindgen-rayon): isolated pages
# and checks that neither .wasm imports anything from `env` (a sign of a wrong C compiler).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
WHICH=${1:-all}
# cargo puts its output where CARGO_TARGET_DIR says (a common global setting), else in target/.
TARGET=${CARGO_TARGET_DIR:-target}

if [[ $WHICH == all || $WHICH == plain ]]; then
  cargo build -q -j"$JOBS" --release -p loaderx-wasm --target wasm32-unknown-unknown
  wasm-bindgen --target web --out-dir js/pkg/web "$TARGET/wasm32-unknown-unknown/release/loaderx_wasm.wasm"
fi

if [[ $WHICH == all || $WHICH == threads ]]; then
  # The flags live in this command only (never in .cargo/config.toml), with their own target dir.
  RUSTFLAGS='-C target-feature=+atomics,+bulk-memory,+mutable-globals -C link-arg=--shared-memory -C link-arg=--max-memory=1073741824 -C link-arg=--import-memory -C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size -C link-arg=--export=__tls_align -C link-arg=--export=__tls_base' \
    cargo +nightly build -q -j"$JOBS" --release -p loaderx-wasm --target wasm32-unknown-unknown \
      -Z build-std=panic_abort,std --target-dir "$TARGET/threads"
  wasm-bindgen --target web --out-dir js/pkg/threads "$TARGET/threads/wasm32-unknown-unknown/release/loaderx_wasm.wasm"
  # wasm-bindgen-rayon 1.3.0's worker helper starts each thread's module with positional
  # arguments, which this wasm-bindgen deprecates with a console warning per thread: pass the
  # one object it asks for instead. Fails if the helper no longer has that call.
  helper=$(ls js/pkg/threads/snippets/wasm-bindgen-rayon-*/src/workerHelpers.no-bundler.js)
  if grep -q 'await pkg.default(data.module, data.memory);' "$helper"; then
    sed -i 's/await pkg.default(data.module, data.memory);/await pkg.default({ module_or_path: data.module, memory: data.memory });/' "$helper"
  fi
  grep -q 'pkg.default({ module_or_path: data.module, memory: data.memory })' "$helper" ||
    { echo "build_wasm: $helper no longer starts threads as expected; check the rayon worker start-up" >&2; exit 1; }
fi

node js/scripts/check_wasm_imports.mjs js/pkg/*/loaderx_wasm_bg.wasm
