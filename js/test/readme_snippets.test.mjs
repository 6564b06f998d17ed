// Every JavaScript snippet of js/README.md (```js, ```javascript, ```mjs) runs as written, in
// order, each as its own module in one temporary directory where `loaderx` resolves to this
// package and `train_data` is a store (the root README's Python snippet writes one of that name;
// here it is a copy of the reference-written u8img_zstd fixture), and `photos` a store of encoded
// images (written by the Python package from scripts/image_set.py's pictures). The first
// snippet's results are then checked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { JS_DIR, REPO, copyStore, fixture, removeDir, storeDir, tempDir } from './helpers/common.mjs';
import { pythonJson } from './helpers/python.mjs';

/** Writes the `photos` store: encoded images of every kind the decoders take. */
const PHOTOS = `
import importlib.util, json, sys
from loaderx.converter import from_images
spec = importlib.util.spec_from_file_location("image_set", ${JSON.stringify(join(REPO, 'scripts', 'image_set.py'))})
image_set = importlib.util.module_from_spec(spec); spec.loader.exec_module(image_set)
odd = image_set.oddities()
print(json.dumps(from_images(json.load(sys.stdin), [odd[n] for n in sorted(odd)], progress=False)))
`;

/** The README's JavaScript snippets, in order. */
function snippets() {
  const text = readFileSync(join(JS_DIR, 'README.md'), 'utf8');
  return [...text.matchAll(/^```(?:js|javascript|mjs)\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

/** What is checked after the first snippet, in the same module (its names are in scope). */
const CHECKS = `
import assert from 'node:assert/strict';
assert.deepEqual(batch.shape, [3, 28, 28]);
assert.deepEqual(one.shape, [28, 28]);
assert.equal(bytes.length, 2);
assert.equal(report.ok, true);
assert.equal(stats.records, report.checked);
assert.ok(stats.usedBytes > 0);
assert.equal(sampler.step, 101);
await assert.rejects(store.gather([0]), (e) => e.code === 'LOADERX_CLOSED');
console.log('checked');
`;

function node(file, cwd) {
  return new Promise((resolve) => {
    execFile(process.execPath, [file], { cwd, encoding: 'utf8', timeout: 120000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? err.signal) : 0, stdout, stderr });
    });
  });
}

test('js/README.md snippets run in order in one directory', async () => {
  const blocks = snippets();
  assert.ok(blocks.length >= 1, 'the README has JavaScript snippets');
  const dir = tempDir('loaderx-readme-');
  try {
    mkdirSync(join(dir, 'node_modules'));
    symlinkSync(JS_DIR, join(dir, 'node_modules', 'loaderx'), 'dir');
    writeFileSync(join(dir, 'package.json'), '{"type": "module"}\n');
    copyStore(storeDir(fixture('u8img_zstd')), join(dir, 'train_data'));
    const photos = pythonJson(PHOTOS, join(dir, 'photos'));
    assert.ok(!photos.missing, `the README's image snippet needs the Python package: ${photos.missing}`);
    for (const [k, code] of blocks.entries()) {
      const file = join(dir, `snippet_${k + 1}.mjs`);
      writeFileSync(file, k === 0 ? code + CHECKS : code);
      const run = await node(file, dir);
      assert.equal(run.code, 0, `snippet ${k + 1} failed:\n${code}\n${run.stderr}`);
      if (k === 0) assert.match(run.stdout, /^checked$/m);
    }
  } finally {
    removeDir(dir);
  }
});
