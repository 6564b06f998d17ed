#!/usr/bin/env bash
# The release check: `make dist` (every artifact, each checked), then what can run here:
#   - the aarch64 manylinux wheel under qemu user-mode emulation, with Debian's arm64 Python
#     and numpy (scripts/arm64_root.sh): the README quick start and every reference fixture,
#     then every fixture again from an S3 server (moto, the test suites' server) by URL;
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

section "aarch64 manylinux wheel reads the fixtures from S3 (moto on 127.0.0.1) under qemu-aarch64"
s=$SECONDS
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
.venv/bin/moto_server -H 127.0.0.1 -p "$port" >/dev/null 2>&1 &
moto=$!
trap 'kill $moto 2>/dev/null || true; rm -rf "$log" "${site:-}"' EXIT
export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
  AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true
# The host's loaderx (x86-64) copies each fixture up; the aarch64 wheel reads them back.
.venv/bin/python - <<'PY'
import json, subprocess, sys, time
import boto3
s3 = boto3.client("s3")
for _ in range(100):
    try:
        s3.create_bucket(Bucket="release")
        break
    except Exception:
        time.sleep(0.1)
for case in json.load(open("tests/fixtures/v3/manifest.json"))["stores"]:
    subprocess.run([sys.executable, "-m", "loaderx", "cp", "-q", f"tests/fixtures/v3/{case['store']}",
                    f"s3://release/{case['name']}"], check=True, stdout=subprocess.DEVNULL)
PY
(cd /tmp && PYTHONPATH=$site qemu-aarch64-static -L "$REPO/target/arm64-root" \
  "$REPO/target/arm64-root/usr/bin/python3" "$REPO/tests/release/remote_smoke.py" "$REPO" s3://release) | tee -a "$log"
kill $moto
unset AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION AWS_ALLOW_HTTP
echo "(qemu, S3: $((SECONDS - s)) s)" | tee -a "$log"

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
