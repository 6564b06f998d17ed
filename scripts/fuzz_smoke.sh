#!/usr/bin/env bash
# Runs every cargo-fuzz target for N seconds (default 60), seeded from the reference fixtures,
# and fails if any target finds a crash. Prints executions per target.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz-smoke: installing cargo-fuzz"
  cargo install -q cargo-fuzz --locked
fi
CORPUS=artifacts/fuzz/corpus
python3 scripts/fuzz_seeds.py tests/fixtures/v3 "$CORPUS"
status=0
for target in format schema decode store checksums image; do
  mkdir -p "$CORPUS/$target" fuzz/artifacts/$target
  log=artifacts/fuzz/$target.log
  if cargo +nightly fuzz run --fuzz-dir fuzz "$target" "$CORPUS/$target" -- \
      -max_total_time="$SECONDS_EACH" -max_len=1100000 -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1; then
    runs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
    echo "fuzz $target: ${runs:-?} executions in ${SECONDS_EACH}s, no crash"
  else
    status=1
    echo "fuzz $target: FAILED (see $log; crashers in fuzz/artifacts/$target/)"
    tail -30 "$log"
  fi
done
exit $status
