#!/usr/bin/env bash
# Runs native's tests that exercise its unsafe code (the memory maps in map.rs, the gather
# fan-out) under a sanitizer: nightly, std rebuilt with the sanitizer (-Zbuild-std).
# Usage: scripts/sanitize.sh address|thread   (a separate target dir keeps normal builds warm)
set -euo pipefail
cd "$(dirname "$0")/.."
SAN=${1:-address}
TARGET=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Zsanitizer=$SAN"
export RUSTDOCFLAGS="-Zsanitizer=$SAN"
export ASAN_OPTIONS=detect_leaks=0
export CARGO_TARGET_DIR=target/sanitize-$SAN
cargo +nightly test -Zbuild-std --target "$TARGET" -j"${JOBS:-2}" -p loaderx-native --no-default-features \
  --test concurrent_readers_see_whole_records --test model_matches_vec --test bad_input_is_a_typed_error \
  --test fixtures_read_identically
