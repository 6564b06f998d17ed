#!/usr/bin/env bash
# The release check: `make dist` (every artifact, each checked), then what can run here:
#   - the aarch64 manylinux wheel under qemu user-mode emulation, with Debian's arm64 Python
#     and numpy (scripts/arm64_root.sh): the README quick start and every reference fixture;
#   - native's test suite built for Windows (x86_64-pc-windows-gnu) under wine.
# Writes the outcome between the markers of docs/release.md ("Last release check").
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
log=$(mktemp)
trap 'rm -rf "$log" "${site:-}"' EXIT
t0=$SECONDS
section() { echo "== $*" | tee -a "$log"; }

section "make dist"
s=$SECONDS
./scripts/dist.sh 2>&1 | grep -E '^(ok|BAD|check_dist|dist:)' | tee -a "$log"
echo "(dist: $((SECONDS - s)) s)" | tee -a "$log"

section "aarch64 manylinux wheel under qemu-aarch64 (Debian bookworm arm64 python3, numpy)"
s=$SECONDS
./scripts/arm64_root.sh target/arm64-root
site=$(mktemp -d)
wheel=$(ls dist/loaderx-*-cp39-abi3-manylinux*_aarch64.whl)
(cd "$site" && python3 -m zipfile -e "$REPO/$wheel" .)
(cd /tmp && PYTHONPATH=$site qemu-aarch64-static -L "$REPO/target/arm64-root" \
  "$REPO/target/arm64-root/usr/bin/python3" "$REPO/tests/release/wheel_smoke.py" "$REPO") | tee -a "$log"
echo "(qemu: $((SECONDS - s)) s)" | tee -a "$log"

section "native tests for x86_64-pc-windows-gnu under wine"
s=$SECONDS
./scripts/test_windows.sh 2>&1 | awk '
  /^test-windows: cargo test/ { if (h) print h ": " p " passed, " f " failed"; h = $0; p = 0; f = 0 }
  /^test result/ { p += $4; f += $6 }
  /^test-windows: all passed/ { print h ": " p " passed, " f " failed"; print }' | tee -a "$log"
echo "(wine: $((SECONDS - s)) s)" | tee -a "$log"

echo "release check passed in $((SECONDS - t0)) s" | tee -a "$log"
python3 - "$log" <<'PY'
import datetime, pathlib, subprocess, sys
doc = pathlib.Path("docs/release.md")
text = doc.read_text()
start, end = "<!-- release-check:start -->", "<!-- release-check:end -->"
head, rest = text.split(start)
_, tail = rest.split(end)
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
body = f"\nRun {when} on commit {commit} (`make release-check`):\n\n```text\n{pathlib.Path(sys.argv[1]).read_text()}```\n"
doc.write_text(head + start + body + end + tail)
PY
