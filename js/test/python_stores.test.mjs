// Every store the Python test suite writes must read the same in Node.
//
// The stores come from py/tests/conftest.py's export hook:
//   LOADERX_EXPORT_STORES=/tmp/pystores .venv/bin/python -m pytest py/tests -q
//   LOADERX_EXPORT_STORES=/tmp/pystores node --test test/python_stores.test.mjs
// Each <dir>/<test>/<n>/ holds a trimmed store plus expected.json (length, schema, stats, record
// lengths and per-record sha256 as our Python Zrecord reads them, and the records that do not fit
// the schema). Every store is compared: gatherBytes hashes, lengths, stats, schema, typed values
// (the checked bytes converted as documented) and verify. Records that do not fit the schema must
// be refused by the typed reads and listed by verify, as the Python datasets refuse them.
// Without the variable the test is skipped; with LOADERX_REQUIRE_PY_STORES=1 it fails instead, and
// also when no store is found.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Store } from '../src/node.js';
import { byteBatches, range, sha256 } from './helpers/common.mjs';
import { assertSameArray, tailShape, toTyped, viewOf } from './helpers/dtype.mjs';
import { skipUnlessRequired } from './helpers/require_all.mjs';

const ROOT = process.env.LOADERX_EXPORT_STORES;

/** The exported stores: directories `<root>/<test>/<n>` holding an expected.json. */
function exportedStores(root) {
  if (!root || !existsSync(root)) return [];
  const out = [];
  for (const t of readdirSync(root).sort()) {
    const tdir = join(root, t);
    if (!statSync(tdir).isDirectory()) continue;
    for (const n of readdirSync(tdir).sort((a, b) => Number(a) - Number(b))) {
      if (existsSync(join(tdir, n, 'expected.json'))) out.push(join(tdir, n));
    }
  }
  return out;
}

const stores = exportedStores(ROOT);
const skippedByPython = ROOT && existsSync(join(ROOT, 'skipped.jsonl'))
  ? readFileSync(join(ROOT, 'skipped.jsonl'), 'utf8').split('\n').filter(Boolean).length
  : 0;
const totals = { stores: 0, records: 0, bytes: 0, broken: 0 };

if (!ROOT || stores.length === 0) {
  const why = !ROOT
    ? 'LOADERX_EXPORT_STORES is not set: run the Python tests with LOADERX_EXPORT_STORES=<dir> first and pass the same variable here'
    : `no exported stores under LOADERX_EXPORT_STORES=${ROOT}`;
  test('stores written by the Python tests', (t) => {
    skipUnlessRequired(t, why, ['LOADERX_REQUIRE_PY_STORES']);
  });
} else {
  describe(`stores written by the Python tests (${stores.length} under ${ROOT})`, () => {
    after(() => {
      console.log(`# python stores: compared ${totals.stores} stores, ${totals.records} records, ${totals.bytes} bytes; ${totals.broken} broken stores refused as in Python; ${skippedByPython} lines in skipped.jsonl`);
    });
    for (const dir of stores) {
      const name = dir.slice(ROOT.length).replace(/^\/+/, '');
      test(name, async () => {
        const exp = JSON.parse(readFileSync(join(dir, 'expected.json'), 'utf8'));
        if (exp.broken) {
          // Python cannot open or verify this store (a test broke it on purpose): Node must
          // refuse it as well, at open or in verify.
          await checkBroken(dir, exp.broken);
          return;
        }
        if (exp.schema_error) {
          // Python's datasets cannot use this schema.msgpack; the wasm reader must refuse it too.
          await assert.rejects(Store.open(dir), { name: 'LoaderxError', code: 'LOADERX_CORRUPT' });
          totals.stores += 1;
          return;
        }
        const store = await Store.open(dir);
        try {
          await checkStore(store, exp);
        } finally {
          await store.close();
        }
      });
    }
  });
}

async function checkBroken(dir, reason) {
  let store;
  try {
    store = await Store.open(dir);
  } catch (e) {
    assert.equal(e.name, 'LoaderxError', `open failed with ${e.stack}`);
    totals.broken += 1;
    return;
  }
  try {
    const report = await store.verify();
    assert.equal(report.ok, false, `Python finds this store broken (${reason}), but it opens and verifies in Node`);
    totals.broken += 1;
  } finally {
    await store.close();
  }
}

async function checkStore(store, exp) {
  assert.equal(store.length, exp.length, 'length');
  const misfits = new Set(exp.misfits ?? []);
  const s = store.schema;
  if (exp.schema == null) {
    assert.equal(s, null, 'no schema.msgpack, so no schema');
  } else {
    assert.ok(s, 'schema');
    assert.deepEqual(
      { kind: s.kind, dtype: s.dtype, itemShape: s.itemShape, codec: s.codec },
      { kind: exp.schema.kind, dtype: exp.schema.dtype, itemShape: exp.schema.item_shape, codec: exp.schema.codec ?? null },
    );
    const v = viewOf(s.dtype);
    assert.deepEqual([s.arrayType, s.extraDim], [v.arrayType, v.extraDim], `typed view of ${s.dtype}`);
  }
  assert.equal(store.hasDict, exp.has_dict, 'hasDict');
  const st = await store.stats();
  assert.deepEqual(
    { records: st.records, liveBytes: st.liveBytes, chunkBytes: st.chunkBytes, reclaimable: st.reclaimable },
    { records: exp.stats.records, liveBytes: exp.stats.live_bytes, chunkBytes: exp.stats.chunk_bytes, reclaimable: exp.stats.reclaimable },
    'stats',
  );
  const lengths = Array.from(await store.lengths(range(exp.length)));
  assert.deepEqual(lengths, exp.lengths, 'lengths');

  // Records that do not fit the schema (written so on purpose by some Python tests, refused by
  // the Python datasets) are refused by the typed reads, with their index, and listed by verify.
  for (const i of misfits) {
    await assert.rejects(store.gather([i]), (/** @type {any} */ e) => e.name === 'LoaderxError' && e.code === 'LOADERX_CORRUPT' && e.index === i, `gather([${i}]) of a misfit record`);
    // Its bytes come back exactly, or not at all: never different bytes.
    try {
      const [r] = await store.gatherBytes([i]);
      assert.equal(sha256(r), exp.sha256[i], `record ${i}: gatherBytes of a misfit record`);
    } catch (e) {
      assert.deepEqual([e.name, e.code, e.index], ['LoaderxError', 'LOADERX_CORRUPT', i], `gatherBytes([${i}]) of a misfit record`);
    }
  }
  const fitting = lengths.map((n, i) => [n, i]).filter(([, i]) => !misfits.has(i));
  for (const part of byteBatches(fitting.map(([n]) => n))) {
    const batch = part.map((k) => fitting[k][1]);
    const raw = await store.gatherBytes(batch);
    raw.forEach((r, k) => {
      const i = batch[k];
      if (sha256(r) !== exp.sha256[i]) assert.fail(`record ${i}: sha256 of gatherBytes differs from Python's (${r.byteLength} bytes)`);
    });
    totals.records += batch.length;
    totals.bytes += raw.reduce((a, r) => a + r.byteLength, 0);
    if (!s) continue;
    // The typed values are the checked bytes converted as documented.
    const typed = await store.gather(batch);
    const tail = tailShape(s.dtype, s.itemShape);
    if (s.kind === 'dense') {
      const all = new Uint8Array(raw.reduce((a, r) => a + r.byteLength, 0));
      let at = 0;
      for (const r of raw) {
        all.set(r, at);
        at += r.byteLength;
      }
      assertSameArray(typed, toTyped(all, s.dtype), `records ${batch[0]}..${batch.at(-1)}`);
      assert.deepEqual(typed.shape, [batch.length, ...tail]);
    } else {
      const rowBytes = s.itemBytes;
      typed.forEach((t, k) => {
        assertSameArray(t, toTyped(raw[k], s.dtype), `record ${batch[k]}`);
        assert.deepEqual(t.shape, [raw[k].byteLength / rowBytes, ...tail], `shape of record ${batch[k]}`);
      });
    }
  }
  const report = await store.verify();
  assert.deepEqual(report.bad.map((b) => b.index), [...misfits].sort((a, b) => a - b), 'verify lists exactly the misfit records');
  totals.stores += 1;
}
