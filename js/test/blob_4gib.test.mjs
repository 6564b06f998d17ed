// Node's fs.openAsBlob reports a file of exactly 2^32 bytes, the size of every preallocated chunk
// file, as 0 bytes and reads nothing from it. A store opened from such Blobs is refused at open
// with LOADERX_IO saying why (not read as a corrupt store), while the same directory opened by
// its path reads every record. The chunk is a sparse file: it costs no disk.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { openAsBlob, readdirSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { Store, BlobSource } from '../src/node.js';
import { copyStore, expectedOf, expectedRecordBytes, fixture, removeDir, storeDir, tempDir } from './helpers/common.mjs';

const GOOD = fixture('u8img_zstd');
let tmp = '';
let dir = '';

before(() => {
  tmp = tempDir();
  dir = copyStore(storeDir(GOOD), join(tmp, 'store'));
  truncateSync(join(dir, '0.zr'), 2 ** 32); // as the writer preallocates it
});
after(() => removeDir(tmp));

/** @returns {Promise<Record<string, Blob>>} */
async function blobs() {
  /** @type {Record<string, Blob>} */
  const out = {};
  for (const name of readdirSync(dir)) out[name] = await openAsBlob(join(dir, name));
  return out;
}

test('fs.openAsBlob gives the 4 GiB chunk size 0 (the Node behaviour this guards against)', async () => {
  const b = await openAsBlob(join(dir, '0.zr'));
  assert.equal(b.size, 0);
});

test('Blobs of a store with a 4 GiB chunk: LOADERX_IO naming the cause, from BlobSource and {name: Blob}', async () => {
  const files = await blobs();
  for (const value of [new BlobSource(files), files]) {
    await assert.rejects(Store.open(value), (/** @type {any} */ e) => {
      assert.equal(e.code, 'LOADERX_IO', e.message);
      assert.match(e.message, /0\.zr is a Blob of 0 bytes/);
      assert.match(e.message, /fs\.openAsBlob reports a file of exactly 4 GiB/);
      assert.match(e.message, /open the store directory by its path/);
      return true;
    });
  }
});

test('the same directory by its path is healthy', async () => {
  const store = await Store.open(dir);
  try {
    const exp = expectedOf(GOOD);
    assert.deepEqual([...(await store.gatherBytes([GOOD.length - 1]))[0]], [...expectedRecordBytes(GOOD, exp, GOOD.length - 1)]);
    assert.equal((await store.verify()).ok, true);
  } finally {
    await store.close();
  }
});

test('a Blob store whose empty tail chunk holds nothing yet still opens', async () => {
  const empty = fixture('empty_dense');
  const names = readdirSync(storeDir(empty));
  /** @type {Record<string, Blob>} */
  const files = {};
  for (const name of names) files[name] = await openAsBlob(join(storeDir(empty), name));
  const store = await Store.open(new BlobSource(files));
  try {
    assert.equal(store.length, 0);
  } finally {
    await store.close();
  }
});
