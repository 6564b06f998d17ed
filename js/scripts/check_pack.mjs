#!/usr/bin/env node
// `prepack`: refuses to pack the npm package without the wasm build in pkg/ (what src/node.js,
// src/browser.js and the workers import). A tarball without it installs, then fails at import.
//
//   node scripts/check_pack.mjs [PACKAGE_DIR]      (default: the package this script is in)
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The files of the wasm build the package imports, by build flavour. */
const NEEDED = ['pkg/names.js', 'pkg/web/loaderx_wasm.js', 'pkg/web/loaderx_wasm_bg.wasm', 'pkg/threads/loaderx_wasm.js', 'pkg/threads/loaderx_wasm_bg.wasm'];

const dir = resolve(process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), '..'));
const problems = [];
for (const name of NEEDED) {
  const path = join(dir, name);
  if (!existsSync(path)) problems.push(`${name} is missing`);
  else if (name.endsWith('.wasm') && !WebAssembly.validate(readFileSync(path))) problems.push(`${name} is not valid WebAssembly`);
}
if (problems.length) {
  console.error(`loaderx: cannot pack ${relative(process.cwd(), dir) || '.'} without the wasm build:\n  ${problems.join('\n  ')}\n`
    + 'Build it first with `make js-build` at the repository root (it writes js/pkg/web and js/pkg/threads), then pack again.');
  process.exitCode = 1;
}
