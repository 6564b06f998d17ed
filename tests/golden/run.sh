#!/usr/bin/env bash
# The cross-language golden suite: generate the golden stores, read them with Python, Rust, Node
# and headless Chromium (plain and threaded wasm, over HTTP and from Files), compare every reader
# with the manifest. Exits non-zero on any mismatch or failed reader.
#
#   tests/golden/run.sh                 (from anywhere; writes only under artifacts/)
#
# Needs: .venv with the loaderx package (make py-build), js/pkg/web and js/pkg/threads
# (scripts/build_wasm.sh), /usr/bin/chromium and js/node_modules/playwright-core.
# Env: LOADERX_GOLDEN (golden dir, default artifacts/golden), LOADERX_GOLDEN_RESULTS (reader
# outputs, default artifacts/golden-out), PY, CARGO, JOBS (cargo -j, default 2).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
GOLDEN=${LOADERX_GOLDEN:-artifacts/golden}
RESULTS=${LOADERX_GOLDEN_RESULTS:-artifacts/golden-out}
PY=${PY:-$ROOT/.venv/bin/python}
CARGO=${CARGO:-cargo}
JOBS=${JOBS:-2}

for pkg in js/pkg/web js/pkg/threads; do
  if [[ ! -f $pkg/loaderx_wasm_bg.wasm ]]; then
    echo "golden: $pkg is missing: run scripts/build_wasm.sh first" >&2
    exit 2
  fi
done

start=$(date +%s)
failed=()
step() { # step NAME COMMAND...: runs a reader, timing it; a failure is recorded, not fatal
  local name=$1 t=$(date +%s)
  shift
  if "$@"; then
    echo "golden: $name done in $(( $(date +%s) - t )) s"
  else
    echo "golden: $name FAILED (exit $?)" >&2
    failed+=("$name")
  fi
}

"$PY" tests/golden/generate.py "$GOLDEN" || exit 1
GOLDEN=$(realpath "$GOLDEN")
mkdir -p "$RESULTS"
RESULTS=$(realpath "$RESULTS")
rm -f "$RESULTS"/{python,rust,node,browser}.json

step python "$PY" tests/golden/read_py.py "$GOLDEN" "$RESULTS/python.json"
step rust env LOADERX_GOLDEN="$GOLDEN" LOADERX_GOLDEN_OUT="$RESULTS/rust.json" \
  "$CARGO" test -q -j"$JOBS" -p loaderx-native --test golden_stores_read_identically
step node node tests/golden/read_node.mjs "$GOLDEN" "$RESULTS/node.json"
step browser node tests/golden/read_browser.mjs "$GOLDEN" "$RESULTS/browser.json"

outputs=()
for r in python rust node browser; do
  if [[ -f $RESULTS/$r.json ]]; then outputs+=("$RESULTS/$r.json"); else failed+=("$r: no output"); fi
done
if ((${#outputs[@]})); then
  "$PY" tests/golden/compare.py "$GOLDEN" "${outputs[@]}" || failed+=(compare)
fi

if ((${#failed[@]})); then
  echo "golden: FAILED (${failed[*]}) in $(( $(date +%s) - start )) s" >&2
  exit 1
fi
echo "golden: all readers match the manifest, in $(( $(date +%s) - start )) s"
