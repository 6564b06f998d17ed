#!/usr/bin/env bash
# The read path's A/B benchmark: the local mapped gather of this tree beside a base commit's
# (default: origin's main, or BASE=<rev>), in one run. Builds native/examples/ab_gather.rs
# against both (the base in a temporary git worktree, the same file copied in), then runs the
# two binaries in alternation ROUNDS times (default 5) on the same stores, and prints, per case
# (record size, codec, batch), the median records/s of each and their ratio (this tree / base).
#   scripts/ab_gather.sh [BASE] ; ROUNDS=5 SECONDS_PER_RUN=24
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BASE=${1:-${BASE:-HEAD}}
ROUNDS=${ROUNDS:-5}
SECS=${SECONDS_PER_RUN:-24}
JOBS=${JOBS:-2}
work=$(mktemp -d)
trap 'git -C "$ROOT" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add -q --detach "$work/base" "$BASE"
cp native/examples/ab_gather.rs "$work/base/native/examples/ab_gather.rs"
mkdir -p "$work/base/native/benches/support" && cp native/benches/support/bench_data.rs "$work/base/native/benches/support/"
out=${CARGO_TARGET_DIR:-$ROOT/target}
echo "ab: building this tree and $BASE ($(git rev-parse --short "$BASE"))"
cargo build -q --release -j"$JOBS" -p loaderx-native --example ab_gather
cp "$out/release/examples/ab_gather" "$work/new"
(cd "$work/base" && cargo build -q --release -j"$JOBS" -p loaderx-native --example ab_gather)
cp "$out/release/examples/ab_gather" "$work/old"
mkdir -p "$work/stores"
"$work/new" "$work/stores" 0.1 >/dev/null  # make the stores, warm the page cache
for r in $(seq "$ROUNDS"); do
  "$work/old" "$work/stores" "$SECS" | sed 's/^/old /' >>"$work/runs"
  "$work/new" "$work/stores" "$SECS" | sed 's/^/new /' >>"$work/runs"
  echo "ab: round $r of $ROUNDS done"
done
python3 - "$work/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    side, case, batch, rate = line.split()
    runs.setdefault((case, int(batch)), {}).setdefault(side, []).append(float(rate))
print(f"{'case':<12} {'batch':>6} {'base rec/s':>12} {'new rec/s':>12} {'new/base':>9}")
for (case, batch), sides in sorted(runs.items()):
    old, new = statistics.median(sides["old"]), statistics.median(sides["new"])
    print(f"{case:<12} {batch:>6} {old:>12.0f} {new:>12.0f} {new / old:>9.3f}")
PY
