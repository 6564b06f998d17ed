#!/usr/bin/env bash
# The reliability soak: every robustness suite at full size, then docs/reliability.md
# regenerated from what they printed. Logs and JSON land in artifacts/soak/.
#   CYCLES        crash-loop kills per operation (default 1000)
#   FUZZ_SECONDS  seconds per fuzz target (default 300)
#   STRESS        appends in the length-publication stress (default 200000)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=artifacts/soak
rm -rf "$OUT" && mkdir -p "$OUT"
export LOADERX_RELIABILITY_OUT=$PWD/$OUT
CYCLES=${CYCLES:-1000}
FUZZ_SECONDS=${FUZZ_SECONDS:-300}
STRESS=${STRESS:-200000}
JOBS=${JOBS:-2}
status=0
echo "CYCLES=$CYCLES FUZZ_SECONDS=$FUZZ_SECONDS STRESS=$STRESS" >"$OUT/params"

step() { # name, command...
  local name=$1; shift
  echo "soak: $name"
  local start=$SECONDS
  if "$@" >"$OUT/$name.log" 2>&1; then
    echo "ok $((SECONDS - start))" >"$OUT/$name.status"
  else
    echo "FAILED $((SECONDS - start))" >"$OUT/$name.status"
    echo "soak: $name FAILED (see $OUT/$name.log)"; status=1
  fi
}

step crash env LOADERX_CRASH_CYCLES="$CYCLES" cargo test --release -j"$JOBS" -p loaderx-native \
  --test crash_loop_reaches_valid_states -- --nocapture
step faults cargo test --release -j"$JOBS" -p loaderx-native --features fault-injection \
  --test io_faults_leave_the_store_consistent -- --nocapture
step corruption-native cargo test --release -j"$JOBS" -p loaderx-native \
  --test corruption_sweep_is_detected_or_harmless -- --nocapture
step corruption-py .venv/bin/python -m pytest -q py/tests/test_corruption_sweep.py
step corruption-js node --test js/test/corruption.test.mjs
step concurrency env LOADERX_STRESS_APPENDS="$STRESS" cargo test --release -j"$JOBS" -p loaderx-native \
  --test concurrent_readers_see_whole_records -- --nocapture
step properties-py .venv/bin/python -m pytest -q py/tests/test_properties_*.py py/tests/test_bad_input.py
step properties-js node --test js/test/bad_input_*.test.mjs js/test/errors.test.mjs
step fuzz ./scripts/fuzz_smoke.sh "$FUZZ_SECONDS"
step miri env MIRIFLAGS=-Zmiri-disable-isolation PROPTEST_CASES=4 cargo +nightly miri test -j"$JOBS" \
  -p loaderx-core --lib -- format:: plan:: journal:: sampler:: stats:: view:: dtype:: schema::
step asan ./scripts/sanitize.sh address
step tsan ./scripts/sanitize.sh thread

python3 scripts/reliability_report.py "$OUT" > docs/reliability.md
echo "soak: docs/reliability.md regenerated"
exit $status
