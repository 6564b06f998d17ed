// What Store.open takes in Node beyond a directory path: a file: URL (string or URL object),
// and {name: Blob} (as in browsers). What it refuses with LOADERX_ARGUMENT and a hint: a URL of
// another scheme (ftp, s3, ...), a Promise (a forgotten await), and the path of meta.zr or any
// other file rather than the store directory.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openAsBlob } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Store, LoaderxError } from '../src/node.js';
import { expectedOf, expectedRecordBytes, fixture, readStoreFiles, storeDir, rejection } from './helpers/common.mjs';

const GOOD = fixture('u8img_zstd');
const DIR = storeDir(GOOD);


/** Opens `value`, checks record 4 against the fixture, closes. */
async function readsTheFixture(value) {
  const store = await Store.open(value);
  try {
    assert.equal(store.length, GOOD.length);
    const exp = expectedOf(GOOD);
    assert.deepEqual([...(await store.gatherBytes([4]))[0]], [...expectedRecordBytes(GOOD, exp, 4)]);
  } finally {
    await store.close();
  }
}

test("a 'file:///...' string opens the directory, as a file: URL object does", async () => {
  const href = pathToFileURL(DIR).href;
  assert.match(href, /^file:\/\/\//);
  await readsTheFixture(href);
  await readsTheFixture(`${href}/`);
  await readsTheFixture(new URL(href));
});

test('{name: Blob} opens in Node (Blobs in memory and fs.openAsBlob), as a Map too', async () => {
  const bytes = readStoreFiles(DIR);
  await readsTheFixture(Object.fromEntries(Object.entries(bytes).map(([k, v]) => [k, new Blob([v])])));
  const fromFiles = new Map();
  for (const name of Object.keys(bytes)) fromFiles.set(name, await openAsBlob(join(DIR, name)));
  await readsTheFixture(fromFiles);
});

test('other URL schemes are LOADERX_ARGUMENT naming the scheme, with a hint', async () => {
  /** @type {[string | URL, RegExp][]} */
  const cases = [
    ['ftp://host/store/', /ftp:\/\/ URLs are not supported.*http\(s\) URL/],
    [new URL('ftp://host/store/'), /ftp:\/\/ URLs are not supported/],
    ['s3://bucket/store/', /s3:\/\/ URLs are not supported.*over https/],
    ['gs://bucket/store', /gs:\/\/ URLs are not supported.*over https/],
    ['az://container/store', /az:\/\/ URLs are not supported/],
  ];
  for (const [value, hint] of cases) {
    const e = await rejection(Store.open(value));
    assert.ok(e instanceof LoaderxError, String(e));
    assert.equal(e.code, 'LOADERX_ARGUMENT', e.message);
    assert.match(e.message, hint);
  }
  const secret = await rejection(Store.open('s3://KEY:SECRET@bucket/store/?token=SECRET'));
  assert.ok(!secret.message.includes('SECRET'), secret.message);
});

test('a Promise (a forgotten await) is LOADERX_ARGUMENT saying so, and is not awaited', async () => {
  let awaited = false;
  // biome-ignore lint/suspicious/noThenProperty: a thenable, to check that Store.open refuses one
  const pending = { then(resolve) { awaited = true; resolve(DIR); } };
  for (const value of [Promise.resolve(DIR), pending]) {
    const e = await rejection(Store.open(/** @type {any} */ (value)));
    assert.equal(e.code, 'LOADERX_ARGUMENT', e.message);
    assert.match(e.message, /Promise: did you forget an `await`\?/);
  }
  assert.equal(awaited, false);
});

test('the path of meta.zr is LOADERX_ARGUMENT: open the directory that holds it', async () => {
  for (const value of [join(DIR, 'meta.zr'), pathToFileURL(join(DIR, 'meta.zr')).href]) {
    const e = await rejection(Store.open(value));
    assert.equal(e.code, 'LOADERX_ARGUMENT', e.message);
    assert.match(e.message, /open the directory that holds it/);
    assert.ok(e.message.includes(DIR), e.message);
  }
  const overHttp = await rejection(Store.open('http://127.0.0.1:9/data/store/meta.zr'));
  assert.equal(overHttp.code, 'LOADERX_ARGUMENT', overHttp.message);
  assert.match(overHttp.message, /open the directory that holds it/);

  const chunk = await rejection(Store.open(join(DIR, '0.zr')));
  assert.equal(chunk.code, 'LOADERX_ARGUMENT', chunk.message);
  assert.match(chunk.message, /it is a file; a store is a directory/);
});

test('a missing directory is still LOADERX_NOT_FOUND', async () => {
  assert.equal((await rejection(Store.open(join(DIR, 'no-such-dir')))).code, 'LOADERX_NOT_FOUND');
});
