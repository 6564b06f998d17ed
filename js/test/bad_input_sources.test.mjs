// Custom sources that return or throw junk: every read fails with a documented LoaderxError (the
// source's own error as its cause), never a trap or a hang, and the store keeps working.
// Seed, outcome checks, stores and arbitraries: ./helpers/properties.mjs (its header states the
// property every one of these files checks).
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Store, MemorySource } from '../src/node.js';
import { fixture, range, readStoreFiles, storeDir } from './helpers/common.mjs';
import * as prop from './helpers/properties.mjs';

prop.useTargets();

// ---------------------------------------------------------------------------------------------
// Custom sources that return or throw junk

const JUNK = ['null', 'undefined', '-1', 'NaN', '1.5', '2**53', '1e300', '1n', '"12"', '"abc"', '{}', '[]', '[1,2,3]', '{length:3}',
  '{length:-1}', '{length:2**31}', 'true', 'ArrayBuffer(8)', 'Uint16Array(4)', 'Float64Array(2)', 'Error', 'LoaderxError'];
function junkValue(j) {
  switch (j) {
    case 'null': return null;
    case 'undefined': return undefined;
    case '-1': return -1;
    case 'NaN': return NaN;
    case '1.5': return 1.5;
    case '2**53': return 2 ** 53;
    case '1e300': return 1e300;
    case '1n': return 1n;
    case '"12"': return '12';
    case '"abc"': return 'abc';
    case '{}': return {};
    case '[]': return [];
    case '[1,2,3]': return [1, 2, 3];
    case '{length:3}': return { length: 3 };
    case '{length:-1}': return { length: -1 };
    case '{length:2**31}': return { length: 2 ** 31 };
    case 'true': return true;
    case 'ArrayBuffer(8)': return new ArrayBuffer(8);
    case 'Uint16Array(4)': return new Uint16Array(4);
    case 'Float64Array(2)': return new Float64Array(2);
    case 'Error': return new TypeError('source broke');
    case 'LoaderxError': return Object.assign(new Error('source says no'), { name: 'LoaderxError', code: 'LOADERX_IO' });
    default: throw new Error(j);
  }
}
/** How one source method misbehaves: from its `after`-th call on `file` ('*': any file). */
const lieArb = fc.record({
  file: fc.constantFrom('*', 'meta.zr', 'schema.msgpack', 'dict.zr', '0.zr'),
  after: fc.nat(6),
  how: fc.constantFrom('return', 'resolve', 'throw', 'reject'),
  // Array-likes whose length is not their size get extra weight: they go straight to wasm.
  junk: fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...JUNK) }, { weight: 1, arbitrary: fc.constantFrom('{length:3}', '{length:-1}', '{length:2**31}') }),
});
const sourceArb = fc.record({
  base: fc.constantFrom('be_i4_raw', 'tokens_i32_ragged_zstd_dict', 'u8img_zstd_dict'),
  maxGap: fc.oneof({ weight: 4, arbitrary: fc.constant(65536) }, { weight: 1, arbitrary: fc.constantFrom(...JUNK) }),
  cacheBytes: fc.option(fc.constantFrom(0, -1, NaN, 2 ** 60, 'x', 100)),
  readInto: fc.boolean(),
  size: fc.option(lieArb),
  read: fc.option(lieArb),
  readIntoLie: fc.option(lieArb),
});

describe('custom sources', () => {
  const bases = {};
  before(() => {
    for (const name of ['be_i4_raw', 'tokens_i32_ragged_zstd_dict', 'u8img_zstd_dict']) bases[name] = readStoreFiles(storeDir(fixture(name)));
  });

  /** A MemorySource whose methods lie as `d` says. */
  function junkSource(d, extra = {}) {
    const m = new MemorySource(bases[d.base]);
    const counts = { size: 0, read: 0, readInto: 0 };
    const wrap = (method, lie, honest) => (name, ...rest) => {
      if (lie && (lie.file === '*' || lie.file === name) && counts[method]++ >= lie.after) {
        const v = junkValue(lie.junk);
        if (lie.how === 'return') return v;
        if (lie.how === 'resolve') return Promise.resolve(v);
        if (lie.how === 'throw') throw v;
        return Promise.reject(v);
      }
      return honest(name, ...rest);
    };
    /** @typedef {(name: string, ...rest: any[]) => any} Lying  a method that may lie */
    /** @type {{label: string, maxGap: any, size: Lying, read: Lying, cacheBytes?: any, readInto?: Lying}} */
    const src = {
      label: `junk ${d.base}`,
      maxGap: typeof d.maxGap === 'number' ? d.maxGap : junkValue(d.maxGap),
      size: wrap('size', d.size, (n) => m.size(n)),
      read: wrap('read', d.read, (n, s, e) => m.read(n, s, e)),
      ...extra,
    };
    if (d.cacheBytes != null) src.cacheBytes = d.cacheBytes;
    if (d.readInto) src.readInto = wrap('readInto', d.readIntoLie, (n, s, e, t, o) => m.readInto(n, s, e, t, o));
    return src;
  }

  test('sources whose size / read / readInto return or throw junk: LoaderxErrors only, no trap', async () => {
    const t = prop.targets.get('u8img_zstd');
    await fc.assert(
      fc.asyncProperty(sourceArb, async (d) => {
        const what = 'Store.open(junk source)';
        const res = await prop.settle(() => Store.open(junkSource(d)));
        if ('error' in res || res.hang) {
          prop.expectRejects(res, null, what);
        } else {
          const store = prop.expectResolves(res, what);
          try {
            const idx = range(Math.min(store.length, 8));
            prop.okOrRejects(await prop.settle(() => store.gatherBytes(idx)), null, `${what}.gatherBytes`);
            prop.okOrRejects(await prop.settle(() => store.gather(idx)), null, `${what}.gather`);
            prop.okOrRejects(await prop.settle(() => store.lengths(idx)), null, `${what}.lengths`);
            prop.okOrRejects(await prop.settle(() => store.verify()), null, `${what}.verify`);
            prop.okOrRejects(await prop.settle(() => store.stats()), null, `${what}.stats`);
          } finally {
            prop.okOrRejects(await prop.settle(() => store.close()), null, `${what}.close`);
          }
        }
        await prop.assertUnchanged(t);
      }),
      { seed: prop.SEED, numRuns: 400 },
    );
    await prop.stillWorks();
  });

  /** A MemorySource over `base` whose `where.method` lies about `where.file` from its
   *  `where.after`-th call on: it gives `junk`, or 'too long' (one byte more than asked), or its
   *  honest bytes as another type ('as ArrayBuffer' / 'as DataView' / 'as Buffer'). */
  function lyingSource(base, where, junk) {
    const m = new MemorySource(bases[base]);
    let calls = 0;
    const lie = (method, name, start, end, honest) => {
      if (method !== where.method || name !== where.file || calls++ < where.after) return honest();
      if (junk === 'too long') return method === 'read' ? new Uint8Array(end - start + 1) : end - start + 1;
      if (junk.startsWith('as ')) {
        return Promise.resolve(honest()).then((b) => (b == null ? b : junk === 'as ArrayBuffer' ? b.slice().buffer
          : junk === 'as DataView' ? new DataView(b.buffer, b.byteOffset, b.byteLength) : Buffer.from(b)));
      }
      return junkValue(junk);
    };
    const src = {
      label: `liar ${where.method}(${where.file}) ${junk}`,
      maxGap: 0,
      size: async (name) => lie('size', name, 0, 0, () => m.size(name)),
      read: async (name, s, e) => lie('read', name, s, e, () => m.read(name, s, e)),
    };
    if (where.method === 'readInto') src.readInto = async (name, s, e, t, o) => lie('readInto', name, s, e, () => m.readInto(name, s, e, t, o));
    return src;
  }

  test('what a source gives is checked before wasm, wherever it is read: LOADERX_IO naming the source', async () => {
    // Where a lie is met: the header, schema.msgpack and dict.zr at open, a table page of meta.zr
    // (its second read on), record ranges of 0.zr (by read or readInto), and sizes at open.
    const whereArb = fc.constantFrom(
      { method: 'read', file: 'meta.zr', after: 0, at: 'open' },
      { method: 'read', file: 'schema.msgpack', after: 0, at: 'open' },
      { method: 'read', file: 'dict.zr', after: 0, at: 'open' },
      { method: 'read', file: 'meta.zr', after: 1, at: 'table' },
      { method: 'read', file: '0.zr', after: 0, at: 'records' },
      { method: 'readInto', file: '0.zr', after: 0, at: 'records' },
      { method: 'size', file: 'meta.zr', after: 0, at: 'open' },
      { method: 'size', file: '0.zr', after: 0, at: 'open' },
    );
    const JUNK_FOR = {
      read: ['-1', 'NaN', '1n', '"abc"', '{}', '[]', '[1,2,3]', '{length:3}', '{length:-1}', '{length:2**31}', 'true', 'too long'],
      readInto: ['-1', 'NaN', '1.5', '1e300', '1n', '"12"', '{}', '{length:3}', 'true', 'too long'],
      size: ['-1', 'NaN', '1.5', '1e300', '1n', '"12"', '"abc"', '{}', '[]', '{length:3}', 'true'],
    };
    const base = 'u8img_zstd_dict';
    const want = await Store.open(bases[base]);
    const all = range(want.length);
    const wantBytes = await want.gatherBytes(all);
    await want.close();
    const lieArb = whereArb.chain((where) => fc.tuple(fc.constant(where), fc.constantFrom(
      ...JUNK_FOR[where.method], ...(where.method === 'read' ? ['as ArrayBuffer', 'as DataView', 'as Buffer'] : []))));
    await fc.assert(
      fc.asyncProperty(lieArb, async ([where, junk]) => {
        const src = lyingSource(base, where, junk);
        const what = src.label;
        const res = await prop.settle(() => Store.open(src));
        if (junk.startsWith('as ')) {
          // Bytes of another type are bytes: the same store.
          const store = prop.expectResolves(res, what);
          try {
            const got = await store.gatherBytes(all);
            all.forEach((i) => { assert.ok(prop.sameBytes(got[i], wantBytes[i]), `${what}: record ${i}`); });
          } finally {
            await store.close();
          }
          return;
        }
        const failed = (r, call) => {
          prop.expectRejects(r, ['LOADERX_IO'], `${what}: ${call}`);
          assert.ok(r.error.message.includes(src.label), `${what}: ${call}: the message names the source: ${r.error.message}`);
        };
        if (where.at === 'open') return failed(res, 'open');
        const store = prop.expectResolves(res, what);
        try {
          if (where.at === 'table') failed(await prop.settle(() => store.lengths([0])), 'lengths');
          else failed(await prop.settle(() => store.gatherBytes([0])), 'gatherBytes');
          failed(await prop.settle(() => store.verify()), 'verify');
        } finally {
          await store.close();
        }
      }),
      { seed: prop.SEED, numRuns: 150 },
    );
    await prop.stillWorks();
  });

  test('a source whose close() throws: open and close still settle with a LoaderxError, never the raw value', async () => {
    const closeArb = fc.record({ how: fc.constantFrom('throw', 'reject'), junk: fc.constantFrom('"abc"', 'undefined', '1n', 'null', 'Error', 'LoaderxError') });
    await fc.assert(
      fc.asyncProperty(closeArb, fc.boolean(), async (c, missing) => {
        const d = { base: 'be_i4_raw', maxGap: 0, readInto: false, size: missing ? { file: 'meta.zr', after: 0, how: 'resolve', junk: 'null' } : null, read: null };
        const close = () => { if (c.how === 'throw') throw junkValue(c.junk); return Promise.reject(junkValue(c.junk)); };
        const res = await prop.settle(() => Store.open(junkSource(d, { close })));
        if (missing) {
          // The open error is the one reported, not the close() that failed after it.
          prop.expectRejects(res, ['LOADERX_NOT_FOUND'], `Store.open(a missing store whose close() ${c.how}s ${c.junk})`);
        } else {
          const store = prop.expectResolves(res, 'Store.open');
          const closed = await prop.settle(() => store.close());
          prop.expectRejects(closed, ['LOADERX_IO'], `store.close() when the source's close() ${c.how}s ${c.junk}`);
          prop.expectRejects(await prop.settle(() => store.gather([0])), ['LOADERX_CLOSED'], 'gather after close');
          prop.expectResolves(await prop.settle(() => store.close()), 'close again');
        }
      }),
      { seed: prop.SEED, numRuns: 40 },
    );
    await prop.stillWorks();
  });
});
