#!/usr/bin/env bash
# The npm package as users get it: the tarball `npm pack` makes (target/test-dist, from
# scripts/test_wheel.sh, or packed here) passes scripts/check_dist.py, publint and
# @arethetypeswrong/cli; installed offline into a fresh Node project, the README's JavaScript
# snippet runs against a store written by the Python package, and `npx loaderx-qa` checks a
# reference fixture.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
tgz=$(ls target/test-dist/loaderx-*.tgz 2>/dev/null | head -1 || true)
if [ -z "$tgz" ]; then
  mkdir -p target/test-dist
  (cd js && npm pack --silent --pack-destination ../target/test-dist >/dev/null)
  tgz=$(ls target/test-dist/loaderx-*.tgz | head -1)
fi
tgz=$(realpath "$tgz")
.venv/bin/python scripts/check_dist.py --partial "$(dirname "$tgz")" >/dev/null
echo "npm: $(basename "$tgz") (check_dist ok)"
js/node_modules/.bin/publint run "$tgz" --strict
# The browser entry awaits the wasm at top level (ES modules only); attw's node10 and
# node16-CJS resolutions cannot load an ESM-only package by design, so they are not checked.
js/node_modules/.bin/attw "$tgz" --profile esm-only

proj=$(mktemp -d)
trap 'rm -rf "$proj"' EXIT
cd "$proj"
npm init -y >/dev/null
npm install --offline --no-audit --no-fund --silent "$tgz"
# A store like the README's, written by the Python package.
"$REPO/.venv/bin/python" -c '
import numpy as np
from loaderx.converter import from_numpy
from_numpy("train_data", np.random.default_rng(0).integers(0, 255, (1000, 28, 28), dtype=np.uint8))'
# The README's ```js block, as written, then checks of what it produced.
sed -n '/^```js$/,/^```$/p' "$REPO/README.md" | sed '1d;$d' > readme.mjs
test -s readme.mjs
cat >> readme.mjs <<'JS'
import assert from 'node:assert/strict';
assert.deepEqual(batch.shape, [3, 28, 28]);
assert.equal(report.ok, true);
assert.equal(sampler.batchAt(0).length, 32);
console.log('npm: README snippet ok from', (await import.meta.resolve('loaderx')));
JS
node readme.mjs
npx --offline loaderx-qa "$REPO/tests/fixtures/v3/u8img_zstd/store" >/dev/null
if npx --offline loaderx-qa "$proj/no-such-store" >/dev/null 2>&1; then echo "loaderx-qa accepted a missing store" >&2; exit 1; fi
echo "npm: loaderx-qa ok; installed package works"
