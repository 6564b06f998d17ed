// Every reference fixture (tests/fixtures/v3, or $LOADERX_FIXTURES) read through the package:
// length, header, schema, stats, lengths, typed values, record bytes and verify, compared with
// the manifest and the expected .npy files; then the same store through MemorySource and
// HttpSource (scripts/serve.mjs), which must give identical results.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { Store, MemorySource, HttpSource } from '../src/node.js';
import { serve } from '../scripts/serve.mjs';
import { FIXTURES, loadManifest, storeDir, expectedOf, expectedRecordBytes, readStoreFiles, sha256, range } from './helpers/common.mjs';
import { assertSameArray, tailShape, toTyped, viewOf } from './helpers/dtype.mjs';

const manifest = loadManifest();
const prod = (xs) => xs.reduce((a, b) => a * b, 1);

/** Everything a store gives, in a deep-comparable form (values hashed). */
async function snapshot(store) {
  const idx = range(store.length);
  const describeArray = (a) => ({ type: a.constructor.name, shape: a.shape, sha256: sha256(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)) });
  const typed = await store.gather(idx);
  const progress = [];
  const verify = await store.verify({ onProgress: (done, total) => progress.push([done, total]) });
  return {
    length: store.length,
    header: store.header,
    schema: store.schema,
    hasDict: store.hasDict,
    stats: await store.stats(),
    lengths: Array.from(await store.lengths(idx)),
    bytes: (await store.gatherBytes(idx)).map((b) => [b.shape, sha256(b)]),
    typed: Array.isArray(typed) ? typed.map(describeArray) : describeArray(typed),
    verify,
    progress,
  };
}

let server;
before(async () => {
  server = await serve({ root: FIXTURES });
});
after(async () => {
  await server?.close();
});

test('the manifest lists stores', () => {
  assert.ok(manifest.stores.length > 0, `no stores in ${FIXTURES}/manifest.json`);
});

for (const entry of manifest.stores) {
  describe(entry.name, () => {
    const dir = storeDir(entry);
    let exp;
    let store;
    let pathSnapshot;
    before(async () => {
      exp = expectedOf(entry);
      store = await Store.open(dir);
    });
    after(async () => {
      await store?.close();
    });

    test('length, header and schema match the manifest', () => {
      assert.equal(store.length, entry.length);
      const h = entry.header;
      assert.deepEqual(store.header, { version: h.version, tailChunk: h.tail_chunk, tailOffset: h.tail_offset, length: h.length });
      if (!entry.schema) {
        assert.equal(store.schema, null);
        return;
      }
      const s = store.schema;
      assert.equal(s.kind, entry.kind);
      assert.equal(s.dtype, entry.dtype);
      assert.deepEqual(s.itemShape, entry.item_shape);
      assert.equal(s.codec, entry.codec);
      // ... and the manifest's copy of schema.msgpack says the same.
      assert.deepEqual([s.kind, s.dtype, s.itemShape, s.codec], [entry.schema.kind, entry.schema.dtype, entry.schema.item_shape, entry.schema.codec]);
      const v = viewOf(entry.dtype);
      assert.equal(s.arrayType, v.arrayType, 'typed array for the dtype');
      assert.equal(s.extraDim, v.extraDim, 'trailing dimension for the dtype');
      assert.equal(s.itemBytes, v.itemsize * prod(entry.item_shape));
    });

    test('stats match the manifest and the files', async () => {
      const st = await store.stats();
      const m = entry.stats;
      assert.deepEqual(
        { records: st.records, liveBytes: st.liveBytes, chunkBytes: st.chunkBytes, reclaimable: st.reclaimable },
        { records: m.records, liveBytes: m.live_bytes, chunkBytes: m.chunk_bytes, reclaimable: m.reclaimable },
      );
      const logical = exp.lengths.reduce((a, b) => a + b, 0);
      assert.equal(st.logicalBytes, logical);
      assert.equal(st.compressionRatio, m.live_bytes ? logical / m.live_bytes : 1);
      assert.equal(st.hasDict, entry.dict != null);
      assert.equal(store.hasDict, entry.dict != null);
      for (const [name, size] of Object.entries(st.fileBytes)) {
        let onDisk = 0;
        try { onDisk = statSync(join(dir, name)).size; } catch { /* absent: 0 */ }
        assert.equal(size, onDisk, `fileBytes of ${name}`);
      }
      if (entry.dict) assert.equal(st.fileBytes['dict.zr'], entry.dict.size);
      assert.equal(st.apparentBytes, Object.values(st.fileBytes).reduce((a, b) => a + b, 0));
      assert.ok(!('diskBytes' in st), 'apparentBytes, not diskBytes (which means allocated blocks natively)');
    });

    test('lengths() equal lengths.npy', async () => {
      const got = await store.lengths(range(entry.length));
      assert.ok(got instanceof Float64Array);
      assert.deepEqual(Array.from(got), exp.lengths);
    });

    test('gather() gives the documented typed values', async () => {
      const all = range(entry.length);
      const got = await store.gather(all);
      if (!entry.schema) {
        // Schemaless: plain bytes, one Uint8Array per record.
        assert.ok(Array.isArray(got));
        got.forEach((r, k) => {
          const want = expectedRecordBytes(entry, exp, k);
          assertSameArray(r, new Uint8Array(want), `record ${k}`);
          assert.deepEqual(r.shape, [want.byteLength]);
        });
        return;
      }
      const tail = tailShape(entry.dtype, entry.item_shape);
      if (entry.kind === 'dense') {
        assert.ok(!Array.isArray(got), 'a dense gather is one array');
        assertSameArray(got, toTyped(exp.values.data, entry.dtype), 'values');
        assert.deepEqual(got.shape, [entry.length, ...tail]);
        if (entry.length) {
          const last = entry.length - 1;
          const one = await store.get(last);
          assertSameArray(one, toTyped(expectedRecordBytes(entry, exp, last), entry.dtype), `get(${last})`);
          assert.deepEqual(one.shape, tail);
        }
      } else {
        assert.ok(Array.isArray(got), 'a ragged gather is one array per record');
        assert.equal(got.length, entry.length);
        got.forEach((r, k) => {
          assertSameArray(r, toTyped(expectedRecordBytes(entry, exp, k), entry.dtype), `record ${k}`);
          assert.deepEqual(r.shape, [exp.rowSplits[k + 1] - exp.rowSplits[k], ...tail], `shape of record ${k}`);
        });
      }
      const none = await store.gather([]);
      if (entry.kind === 'dense') assert.deepEqual([none.length, none.shape], [0, [0, ...tail]]);
      else assert.deepEqual(none, []);
    });

    test('gatherBytes() gives the stored record bytes, in request order', async () => {
      const all = range(entry.length);
      const got = await store.gatherBytes(all);
      assert.equal(got.length, entry.length);
      got.forEach((r, k) => {
        assertSameArray(r, new Uint8Array(expectedRecordBytes(entry, exp, k)), `record ${k}`);
        assert.deepEqual(r.shape, [exp.lengths[k]]);
      });
      if (entry.length) {
        // Reversed, with repeats, as a typed array: each slot is still its own record.
        const order = Uint32Array.from([...all].reverse().concat([0, entry.length - 1, 0]));
        const again = await store.gatherBytes(order);
        assert.equal(again.length, order.length);
        again.forEach((r, k) => { assertSameArray(r, new Uint8Array(expectedRecordBytes(entry, exp, order[k])), `slot ${k} (record ${order[k]})`); });
      }
    });

    test('verify() passes and reports progress up to (length, length)', async () => {
      for (const batchSize of [undefined, 7]) {
        const progress = [];
        const r = await store.verify({ onProgress: (done, total) => progress.push([done, total]), ...(batchSize ? { batchSize } : {}) });
        // The reference writes no checksums: every record is uncovered.
        const checksums = { verified: 0, mismatched: 0, uncovered: entry.length, unverified: 0 };
        assert.deepEqual(r, { ok: true, checked: entry.length, length: entry.length, bad: [], unlisted: 0, checksums });
        assert.ok(progress.length > 0, 'progress was reported');
        assert.deepEqual(progress.at(-1), [entry.length, entry.length]);
        progress.forEach(([done, total], k) => {
          assert.equal(total, entry.length);
          if (k) assert.ok(done > progress[k - 1][0], 'progress increases');
        });
        if (batchSize) assert.equal(progress.length, Math.max(1, Math.ceil(entry.length / batchSize)));
      }
    });

    test('MemorySource and HttpSource give the same results as the path', async () => {
      pathSnapshot ??= await snapshot(store);
      const files = readStoreFiles(dir);
      for (const [label, source] of [
        ['{name: bytes}', files],
        ['MemorySource', new MemorySource(files)],
        ['URL string', new URL(`${entry.store}/`, server.url).href],
        ['HttpSource', new HttpSource(new URL(`${entry.store}/`, server.url))],
      ]) {
        const other = await Store.open(source);
        try {
          assert.deepEqual(await snapshot(other), pathSnapshot, `${label} differs from the path open`);
        } finally {
          await other.close();
        }
      }
    });
  });
}
