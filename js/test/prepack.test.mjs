// `npm pack` refuses to pack the package without the wasm build (js/pkg), with a message that
// says what is missing and how to build it; with the build there, the check lets it pack.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { JS_DIR, removeDir, tempDir } from './helpers/common.mjs';
import { skipUnlessRequired } from './helpers/require_all.mjs';

const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function npmPack(cwd, dest) {
  return new Promise((resolve) => {
    execFile(NPM, ['pack', '--pack-destination', dest, '--offline', '--ignore-scripts=false'], { cwd, encoding: 'utf8', timeout: 120000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? err.signal) : 0, stdout, stderr });
    });
  });
}

/** A copy of the package's manifest and scripts (not its pkg/) in a fresh directory. */
function packageCopy(dir) {
  cpSync(join(JS_DIR, 'package.json'), join(dir, 'package.json'));
  cpSync(join(JS_DIR, 'scripts'), join(dir, 'scripts'), { recursive: true });
  cpSync(join(JS_DIR, 'README.md'), join(dir, 'README.md'));
  mkdirSync(join(dir, 'out'));
}

test('npm pack without pkg/ fails, saying it needs make js-build', async () => {
  const dir = tempDir('loaderx-pack-');
  try {
    packageCopy(dir);
    const run = await npmPack(dir, join(dir, 'out'));
    assert.notEqual(run.code, 0, run.stdout);
    assert.match(run.stderr, /cannot pack .* without the wasm build/);
    assert.match(run.stderr, /pkg\/web\/loaderx_wasm_bg\.wasm is missing/);
    assert.match(run.stderr, /make js-build/);
    assert.deepEqual(readdirSync(join(dir, 'out')), [], 'no tarball');
  } finally {
    removeDir(dir);
  }
});

test('with the wasm build in pkg/, the check passes and npm pack makes the tarball', async (t) => {
  if (!existsSync(join(JS_DIR, 'pkg/threads/loaderx_wasm_bg.wasm'))) {
    skipUnlessRequired(t, 'no wasm build in js/pkg (make js-build)');
    return;
  }
  const dir = tempDir('loaderx-pack-');
  try {
    packageCopy(dir);
    cpSync(join(JS_DIR, 'pkg'), join(dir, 'pkg'), { recursive: true });
    const run = await npmPack(dir, join(dir, 'out'));
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readdirSync(join(dir, 'out')).filter((n) => n.endsWith('.tgz')).length, 1);
  } finally {
    removeDir(dir);
  }
});
