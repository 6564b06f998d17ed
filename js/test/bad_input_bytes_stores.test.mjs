// Store.open on `{name: bytes}` of random bytes (and of values that are not bytes): a store that
// reads what its bytes say, or a documented LoaderxError; never a trap or a hang.
// Seed, outcome checks, stores and arbitraries: ./helpers/properties.mjs (its header states the
// property every one of these files checks).
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Store } from '../src/node.js';
import { fixture, range, readStoreFiles, storeDir } from './helpers/common.mjs';
import * as prop from './helpers/properties.mjs';

prop.useTargets();

// ---------------------------------------------------------------------------------------------
// {name: bytes} of random bytes

/** A tiny MessagePack writer (maps, arrays, strings, ints to 64 bits, floats, nil, bools). */
function msgpack(v) {
  const out = [];
  const be = (x, n) => { for (let k = n - 1; k >= 0; k--) out.push(Number((BigInt(x) >> BigInt(8 * k)) & 0xffn)); };
  const enc = (x) => {
    if (x == null) out.push(0xc0);
    else if (typeof x === 'boolean') out.push(x ? 0xc3 : 0xc2);
    else if (typeof x === 'bigint' || (typeof x === 'number' && Number.isInteger(x))) {
      const b = BigInt(x);
      if (b >= 0n && b < 128n) out.push(Number(b));
      else if (b >= 0n) { out.push(0xcf); be(b, 8); }
      else if (b >= -32n) out.push(Number(b & 0xffn));
      else { out.push(0xd3); be(BigInt.asUintN(64, b), 8); }
    } else if (typeof x === 'number') {
      const f = new DataView(new ArrayBuffer(8));
      f.setFloat64(0, x);
      out.push(0xcb, ...new Uint8Array(f.buffer));
    } else if (typeof x === 'string') {
      const s = Buffer.from(x, 'utf8').subarray(0, 255);
      if (s.length < 32) out.push(0xa0 | s.length);
      else out.push(0xd9, s.length);
      out.push(...s);
    } else if (Array.isArray(x)) {
      out.push(0xdc);
      be(x.length, 2);
      x.forEach(enc);
    } else {
      const e = Object.entries(x);
      out.push(0xde);
      be(e.length, 2);
      for (const [k, val] of e) { enc(k); enc(val); }
    }
  };
  enc(v);
  return new Uint8Array(out);
}

/** meta.zr bytes from header fields and 16-byte entries (docs/format.md). */
function metaBytes(m) {
  const b = Buffer.alloc(16 + 16 * m.entries.length);
  b.write(m.magic, 0, 4, 'latin1');
  b.writeUInt16LE(m.version, 4);
  b.writeUInt16LE(m.tailChunk, 6);
  b.writeUInt32LE(m.tailOffset, 8);
  b.writeUInt32LE(m.length, 12);
  m.entries.forEach((e, k) => {
    const at = 16 + 16 * k;
    b.writeUInt32LE(e.offset, at);
    b.writeUInt32LE(e.phys, at + 4);
    b.writeUInt32LE(e.logic, at + 8);
    b.writeUInt16LE(e.chunk, at + 12);
    b[at + 14] = e.compress;
    b[at + 15] = e.pad;
  });
  return new Uint8Array(b);
}

const BASES = ['u8img_raw', 'rows_f32x3_ragged_raw', 'tokens_i32_ragged_zstd_dict', 'be_i4_raw', 'f16_zstd', 'void12_raw', 'bool_zstd', 'zrecord_mixed_codecs'];
const u32 = fc.integer({ min: 0, max: 2 ** 32 - 1 });
const u16 = fc.integer({ min: 0, max: 65535 });
const entryArb = fc.record({
  offset: fc.oneof(fc.nat(600), u32),
  phys: fc.oneof(fc.nat(600), u32),
  // Claimed decoded lengths: small, or over the 512 MiB cap (never a real 300 MiB allocation).
  logic: fc.oneof({ weight: 8, arbitrary: fc.nat(1200) }, { weight: 1, arbitrary: fc.constantFrom(2 ** 29 + 1, 2 ** 32 - 1) }),
  chunk: fc.oneof({ weight: 6, arbitrary: fc.nat(2) }, { weight: 1, arbitrary: u16 }),
  compress: fc.oneof({ weight: 6, arbitrary: fc.nat(3) }, { weight: 1, arbitrary: fc.nat(255) }),
  pad: fc.nat(255),
});
const plausibleMeta = fc.record({
  magic: fc.oneof({ weight: 9, arbitrary: fc.constant('ZREC') }, { weight: 1, arbitrary: fc.string({ minLength: 4, maxLength: 4, unit: 'binary-ascii' }) }),
  version: fc.oneof({ weight: 9, arbitrary: fc.constant(3) }, { weight: 1, arbitrary: u16 }),
  tailChunk: fc.oneof({ weight: 8, arbitrary: fc.nat(2) }, { weight: 1, arbitrary: u16 }),
  tailOffset: fc.oneof(fc.nat(2048), u32),
  length: fc.nat(8),
  entries: fc.array(entryArb, { maxLength: 8 }),
});
const schemaArb = fc.record({
  kind: fc.constantFrom('dense', 'ragged', 'sparse', '', 7, null),
  dtype: fc.oneof(
    fc.constantFrom('|u1', '<i4', '>i4', '<f2', '<f4', '>f8', '<c8', '>c16', '|b1', '|V12', '|V0', '<U0', '<U1', '>U3', '|S0', '|S5',
      '<M8[ns]', '>m8[2s]', '<M8', 'O', '<i3', '<f16', '', 'u1', '=i2', '|V4294967296', '<U1073741824', '|S18446744073709551615'),
    fc.string({ maxLength: 8 }),
  ),
  item_shape: fc.oneof(
    fc.array(fc.oneof(fc.nat(64), fc.constantFrom(0, 2 ** 32, 2 ** 53, -1, 2n ** 63n, 2n ** 64n - 1n, 1.5, 'x')), { maxLength: 5 }),
    fc.constantFrom(null, 'x', 5, {}),
  ),
  format: fc.constantFrom('loaderx-zrecord', 'other'),
  version: fc.constantFrom(1, 2, 0, -1),
  codec: fc.constantFrom('raw', 'zstd', 'zstd_dict', 'lz4', null, 3),
}, { requiredKeys: [] });

const fileArb = (extra = []) => fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...BASES).map((from) => ({ from })) },
  { weight: 2, arbitrary: fc.uint8Array({ maxLength: 96 }).map((bytes) => ({ bytes: Array.from(bytes) })) },
  { weight: 1, arbitrary: fc.constant({ absent: true }) },
  ...extra,
);
const randomStoreArb = fc.record({
  'meta.zr': fileArb([{ weight: 4, arbitrary: plausibleMeta.map((meta) => ({ meta })) }]),
  'schema.msgpack': fileArb([{ weight: 3, arbitrary: schemaArb.map((schema) => ({ schema })) }]),
  'dict.zr': fileArb(),
  '0.zr': fileArb(),
  '1.zr': fc.option(fc.uint8Array({ maxLength: 64 }).map((bytes) => ({ bytes: Array.from(bytes) })), { nil: { absent: true } }),
  flips: fc.array(fc.record({ file: fc.constantFrom('meta.zr', 'schema.msgpack', 'dict.zr', '0.zr'), at: fc.nat(), xor: fc.integer({ min: 1, max: 255 }) }), { maxLength: 3 }),
});

describe('{name: bytes} stores of random bytes', () => {
  const bases = {};
  before(() => {
    for (const name of BASES) bases[name] = readStoreFiles(storeDir(fixture(name)));
  });

  function filesOf(d) {
    /** @type {Record<string, Uint8Array>} */
    const files = {};
    for (const name of ['meta.zr', 'schema.msgpack', 'dict.zr', '0.zr', '1.zr']) {
      const f = d[name];
      let bytes;
      if ('from' in f) bytes = bases[f.from][name]?.slice();
      else if ('bytes' in f) bytes = Uint8Array.from(f.bytes);
      else if ('meta' in f) bytes = metaBytes(f.meta);
      else if ('schema' in f) bytes = msgpack(f.schema);
      if (bytes) files[name] = bytes;
    }
    for (const { file, at, xor } of d.flips) if (files[file]?.length) files[file][at % files[file].length] ^= xor;
    return files;
  }

  test('my msgpack writer writes the schema the fixtures hold', async () => {
    const files = { ...bases.u8img_raw, 'schema.msgpack': msgpack({ kind: 'dense', dtype: '|u1', item_shape: [28, 28], format: 'loaderx-zrecord', version: 1, codec: 'raw' }) };
    const [mine, theirs] = await Promise.all([Store.open(files), Store.open(bases.u8img_raw)]);
    assert.deepEqual(mine.schema, theirs.schema);
    await Promise.all([mine.close(), theirs.close()]);
  });

  test('opening and reading give a store or LOADERX_NOT_FOUND / NOT_A_STORE / CORRUPT / TOO_LARGE, never a trap', async () => {
    const seen = new Map();
    await fc.assert(
      fc.asyncProperty(randomStoreArb, async (d) => {
        const res = await prop.settle(() => Store.open(filesOf(d)));
        const what = 'Store.open(random files)';
        if ('error' in res || res.hang) {
          prop.expectRejects(res, ['LOADERX_NOT_FOUND', 'LOADERX_NOT_A_STORE', 'LOADERX_CORRUPT'], what);
          seen.set(res.error.code, (seen.get(res.error.code) ?? 0) + 1);
          const meta = filesOf(d)['meta.zr'];
          if (!meta) assert.equal(res.error.code, 'LOADERX_NOT_FOUND');
          else if (meta.length < 16) assert.ok(res.error.code === 'LOADERX_CORRUPT', `${what}: a ${meta.length}-byte meta.zr gave ${res.error.code}`);
        } else {
          const store = prop.expectResolves(res, what);
          seen.set('opened', (seen.get('opened') ?? 0) + 1);
          try {
            const idx = range(Math.min(store.length, 16));
            const reads = ['LOADERX_CORRUPT', 'LOADERX_TOO_LARGE'];
            prop.okOrRejects(await prop.settle(() => store.lengths(idx)), reads, `${what}.lengths`);
            prop.okOrRejects(await prop.settle(() => store.gatherBytes(idx)), reads, `${what}.gatherBytes`);
            prop.okOrRejects(await prop.settle(() => store.gather(idx)), reads, `${what}.gather`);
            if (store.length) prop.okOrRejects(await prop.settle(() => store.get(store.length - 1)), reads, `${what}.get`);
            const v = prop.okOrRejects(await prop.settle(() => store.verify()), reads, `${what}.verify`);
            if (v.value) {
              assert.equal(v.value.checked, store.length);
              for (const b of v.value.bad) assert.ok(reads.includes(b.code) && b.index >= 0 && b.index < store.length, `verify bad entry ${fc.stringify(b)}`);
            }
            prop.okOrRejects(await prop.settle(() => store.stats()), reads, `${what}.stats`);
          } finally {
            await store.close();
          }
        }
      }),
      { seed: prop.SEED, numRuns: 600 },
    );
    assert.ok(seen.get('opened') > 20, `enough random stores open to be read: ${fc.stringify([...seen])}`);
    await prop.stillWorks();
    await prop.assertUnchanged(prop.targets.get('u8img_zstd'), true);
  });

  test('{name: value} where a value is not bytes: a rejected LoaderxError, not a synchronous RangeError/TypeError', async () => {
    const notBytes = fc.oneof(
      fc.integer({ min: -10, max: 64 }),
      fc.double({ min: -10, max: 64 }),
      fc.bigInt({ min: -5n, max: 64n }),
      fc.string({ maxLength: 6 }),
      fc.array(fc.oneof(fc.nat(300), fc.string({ maxLength: 2 })), { maxLength: 6 }),
      fc.integer({ min: -5, max: 64 }).map((length) => ({ length })),
      fc.constantFrom(null, undefined, true, false, Symbol('b'), {}, { length: 2 ** 53 }, new ArrayBuffer(3), new Uint16Array(3), new DataView(new ArrayBuffer(2))),
    );
    const files = fc.dictionary(fc.oneof(fc.constantFrom('meta.zr', 'schema.msgpack', 'dict.zr', '0.zr'), fc.string({ maxLength: 4 })), notBytes, { maxKeys: 4 });
    await fc.assert(
      fc.asyncProperty(files, async (f) => {
        const res = await prop.settle(() => Store.open(/** @type {any} */ (f))); // (values that are not bytes, on purpose)
        const what = `Store.open(${fc.stringify(f)})`;
        if (prop.holdsNonBytes(f)) prop.expectRejects(res, ['LOADERX_ARGUMENT'], what);
        else if ('error' in res || res.hang) prop.expectRejects(res, ['LOADERX_NOT_FOUND', 'LOADERX_NOT_A_STORE', 'LOADERX_CORRUPT'], what);
        else await prop.expectResolves(res, what).close();
      }),
      { seed: prop.SEED, numRuns: 150 },
    );
    await prop.stillWorks();
  });
});
