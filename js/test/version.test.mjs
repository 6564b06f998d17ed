// The wasm build inside the package reports the package's version (both come from the one
// workspace version; py/tests/test_version.py checks package.json against Cargo.toml).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { version } from '../src/node.js';

test('the wasm build reports the package version', () => {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  assert.match(version, /^\d+\.\d+\.\d+/);
  assert.equal(version, pkg.version);
});
