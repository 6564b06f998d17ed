// Over HTTP a call reads only the ranges it needs: never a whole meta.zr or chunk file, one
// Range GET per coalesced range, and a repeated batch is served from the range cache.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serve } from '../scripts/serve.mjs';
import { Store, HttpSource } from '../src/node.js';
import { FIXTURES } from './helpers/common.mjs';

/** A fetch that records every request's path and Range header. */
function recordingFetch(log) {
  return (url, init) => {
    log.push({ path: new URL(url).pathname, range: init?.headers?.Range });
    return fetch(url, init);
  };
}

test('reads are ranged, coalesced, and repeated batches hit the cache', async () => {
  const server = await serve({ root: FIXTURES });
  const log = [];
  try {
    const source = new HttpSource(`${server.url}u8img_zstd/store/`, { fetch: recordingFetch(log) });
    source.maxGap = 0; // merge only touching records (the default gap spans this whole small store)
    const store = await Store.open(source);
    assert.ok(log.every((r) => r.range), 'every request carries a Range header');
    const metaReads = log.filter((r) => r.path.endsWith('/meta.zr'));
    assert.deepEqual(metaReads.map((r) => r.range), ['bytes=0-0', 'bytes=0-15'], 'open reads the size and the header only');

    log.length = 0;
    const first = await store.gather([3, 4, 5, 150]);
    const tableReads = log.filter((r) => r.path.endsWith('/meta.zr'));
    // 200 records: the live table is bytes 0..3216, one page, read once and no further.
    assert.deepEqual(tableReads.map((r) => r.range), [`bytes=0-${16 + 16 * store.length - 1}`]);
    const chunkReads = log.filter((r) => r.path.endsWith('/0.zr'));
    assert.equal(chunkReads.length, 2, 'neighbouring records 3..5 are one read, record 150 another');

    log.length = 0;
    const again = await store.gather([3, 4, 5, 150]);
    assert.equal(log.length, 0, 'the same batch again is served from the caches');
    assert.deepEqual(again, first);
    await store.close();
  } finally {
    await server.close();
  }
});

test('a cache of zero bytes reads again', async () => {
  const server = await serve({ root: FIXTURES });
  const log = [];
  try {
    const store = await Store.open(new HttpSource(`${server.url}u8img_zstd/store/`, { fetch: recordingFetch(log), cacheBytes: 0 }));
    await store.gather([7]);
    log.length = 0;
    await store.gather([7]);
    assert.equal(log.filter((r) => r.path.endsWith('/0.zr')).length, 1);
    await store.close();
  } finally {
    await server.close();
  }
});
