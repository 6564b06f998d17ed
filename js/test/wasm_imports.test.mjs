// Every wasm build in pkg/ imports nothing from the module `env`: zstd compiled with the wrong C
// compiler leaves unresolved `env.ZSTD_*` (or libc) imports that only fail at instantiation.
// The plain build (pkg/web), which the Node entry loads, must exist.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { JS_DIR } from './helpers/common.mjs';

const PKG = join(JS_DIR, 'pkg');
const builds = existsSync(PKG)
  ? readdirSync(PKG).filter((d) => existsSync(join(PKG, d, 'loaderx_wasm_bg.wasm'))).sort()
  : [];

test('the plain build exists', () => {
  assert.ok(builds.includes('web'), `no ${join(PKG, 'web/loaderx_wasm_bg.wasm')}: run ./scripts/build_wasm.sh plain`);
  assert.ok(existsSync(join(PKG, 'web/loaderx_wasm.js')), 'the wasm-bindgen glue of the plain build');
});

for (const build of builds) {
  test(`pkg/${build}/loaderx_wasm_bg.wasm imports nothing from env`, () => {
    const module = new WebAssembly.Module(readFileSync(join(PKG, build, 'loaderx_wasm_bg.wasm')));
    const imports = WebAssembly.Module.imports(module);
    const env = imports.filter((i) => i.module === 'env');
    assert.deepEqual(env.map((i) => `${i.kind} ${i.name}`), [], `imports from env`);
    // Everything else comes from the wasm-bindgen glue.
    const others = imports.filter((i) => i.module !== 'env' && !/loaderx_wasm|wbg/.test(i.module));
    assert.deepEqual(others.map((i) => `${i.module}.${i.name}`), [], 'imports from unknown modules');
  });
}
