// stats() leads with the bytes a store's files hold (usedBytes): meta.zr to the end of its
// table, the side files, each chunk to the append frontier. It is the same for a store written
// in place (4 GiB sparse chunk, 256 MiB sparse meta.zr) as for its trimmed copy, and within a
// block per file of what the native tool reports as on disk (the manifest's `files` column);
// fileBytes lists only files that exist, and QA counts those and leads with usedBytes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, statSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { Store } from '../src/node.js';
import { JS_DIR, copyStore, loadManifest, removeDir, storeDir, tempDir } from './helpers/common.mjs';

const BLOCK = 4096;

function qa(...args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(JS_DIR, 'examples/qa.mjs'), ...args], { encoding: 'utf8', timeout: 60000 }, (err, stdout, stderr) => {
      resolve({ code: err ? err.code : 0, stdout, stderr });
    });
  });
}

async function statsOf(dir) {
  const store = await Store.open(dir);
  try {
    return await store.stats();
  } finally {
    await store.close();
  }
}

describe('sizes of every fixture, trimmed and as written', () => {
  let tmp = '';
  before(() => { tmp = tempDir(); });
  after(() => removeDir(tmp));

  for (const entry of loadManifest().stores) {
    test(entry.name, async () => {
      const dir = storeDir(entry);
      const present = readdirSync(dir).sort();
      const trimmed = await statsOf(dir);
      assert.deepEqual(Object.keys(trimmed.fileBytes).sort(), present, 'fileBytes lists the files there, no more');
      // A trimmed store holds nothing but what it uses.
      const sizes = present.map((n) => statSync(join(dir, n)).size);
      assert.equal(trimmed.usedBytes, sizes.reduce((a, b) => a + b, 0));
      assert.equal(trimmed.usedBytes, Object.values(entry.trunc_files).reduce((a, b) => a + b, 0));

      // As the writer left it: every file at its full apparent size (the manifest's), sparse.
      const full = copyStore(dir, join(tmp, entry.name));
      for (const [name, [apparent]] of Object.entries(entry.files)) truncateSync(join(full, name), apparent);
      const written = await statsOf(full);
      assert.equal(written.usedBytes, trimmed.usedBytes, 'usedBytes does not count preallocated space');
      const apparent = Object.values(entry.files).reduce((a, [n]) => a + n, 0);
      assert.equal(written.apparentBytes, apparent);
      assert.deepEqual(Object.keys(written.fileBytes).sort(), Object.keys(entry.files).sort());
      // The native tool's "on disk" counts whole blocks of what was written.
      const disk = Object.values(entry.files).reduce((a, [, d]) => a + d, 0);
      assert.ok(written.usedBytes <= disk && disk - written.usedBytes < BLOCK * present.length, `used ${written.usedBytes}, native on disk ${disk}`);
    });
  }
});

describe('QA leads with the bytes used and counts the files there', () => {
  let tmp = '';
  before(() => { tmp = tempDir(); });
  after(() => removeDir(tmp));

  test('a store as written (no dict.zr): 3 files, used bytes first, apparent size after', async () => {
    const entry = loadManifest().stores.find((e) => e.name === 'u8img_zstd');
    assert.ok(entry && !entry.dict);
    const full = copyStore(storeDir(entry), join(tmp, 'store'));
    for (const [name, [apparent]] of Object.entries(entry.files)) truncateSync(join(full, name), apparent);
    const used = Object.values(entry.trunc_files).reduce((a, b) => a + b, 0);
    const apparent = Object.values(entry.files).reduce((a, [n]) => a + n, 0);

    const text = await qa(full);
    assert.equal(text.code, 0, text.stderr + text.stdout);
    const lines = text.stdout.split('\n');
    const usedLine = lines.findIndex((l) => l.startsWith('used '));
    assert.match(lines[usedLine], new RegExp(`^used\\s+${used} bytes \\(.*\\) in 3 files, `));
    const sizeLines = lines.filter((l) => /bytes/.test(l) && /^(used|stored|apparent|files)\s/.test(l));
    assert.ok(sizeLines[0].startsWith('used '), `the first size shown is the bytes used:\n${text.stdout}`);
    assert.match(text.stdout, new RegExp(`^apparent\\s+${apparent} bytes \\(4\\.\\d GiB`, 'm'));

    const json = JSON.parse((await qa(full, '--json')).stdout);
    assert.equal(json.stats.usedBytes, used);
    assert.equal(json.stats.apparentBytes, apparent);
    assert.equal(Object.keys(json.stats.fileBytes).length, 3);
  });
});
