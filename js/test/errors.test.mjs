// Bad input of every kind: each gives a rejected promise (or, for synchronous calls, a throw) with
// an Error named LoaderxError and a stable `code`, and after each one the same module still
// opens and reads a good store. Damaged stores are made on copies in a temp directory.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { openSync, closeSync, ftruncateSync, readFileSync, rmSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { Store, Sampler, NodeSource, HttpSource, LoaderxError } from '../src/node.js';
import { serve } from '../scripts/serve.mjs';
import { copyStore, expectedOf, expectedRecordBytes, fixture, range, readTable, removeDir, storeDir, tempDir } from './helpers/common.mjs';
import { assertSameArray, toTyped } from './helpers/dtype.mjs';

const GOOD = fixture('u8img_zstd');
let goodExp;
let tmp;
let copies = 0;

before(() => {
  tmp = tempDir('loaderx-errors-');
  goodExp = expectedOf(GOOD);
});
after(() => removeDir(tmp));

/** A writable copy of a fixture store. */
function copy(name) {
  return copyStore(storeDir(fixture(name)), join(tmp, `${name}-${copies++}`));
}

/** Overwrites bytes of a file in place. */
function patch(path, at, bytes) {
  const fd = openSync(path, 'r+');
  try { writeSync(fd, bytes, 0, bytes.length, at); } finally { closeSync(fd); }
}

/** The module still works: a good store opens and reads its expected records. */
async function stillWorks() {
  const store = await Store.open(storeDir(GOOD));
  try {
    const idx = [0, GOOD.length - 1, 5];
    const got = await store.gather(idx);
    const want = new Uint8Array(idx.flatMap((i) => [...expectedRecordBytes(GOOD, goodExp, i)]));
    assertSameArray(got, toTyped(want, GOOD.dtype), 'good store after an error');
  } finally {
    await store.close();
  }
}

/**
 * Asserts a LoaderxError with `code` (and the other given fields).
 * @param {import('../src/node.js').LoaderxErrorCode} code
 * @param {Record<string, unknown>} [fields]
 * @returns {(thrown: unknown) => boolean}
 */
function isError(code, fields = {}) {
  return (thrown) => {
    assert.ok(thrown instanceof Error, `an Error, got ${thrown}`);
    const e = /** @type {import('../src/node.js').LoaderxError} */ (thrown);
    assert.equal(e.name, 'LoaderxError', `name of ${e.stack}`);
    assert.equal(e.code, code, `code of: ${e.message}`);
    for (const [k, v] of Object.entries(fields)) assert.equal(e[k], v, `${k} of: ${e.message}`);
    assert.ok(e.message.length > 0);
    return true;
  };
}

/** `promise` rejects with `code`; then the module still works. */
async function rejectsWith(promise, code, fields) {
  await assert.rejects(promise, isError(code, fields));
  await stillWorks();
}

/** `fn()` throws synchronously with `code`. */
function throwsWith(fn, code) {
  assert.throws(fn, isError(code));
}

describe('opening', () => {
  test('a missing directory is LOADERX_NOT_FOUND', async () => {
    await rejectsWith(Store.open(join(tmp, 'no-such-store')), 'LOADERX_NOT_FOUND');
  });

  test('a directory without meta.zr is LOADERX_NOT_FOUND', async () => {
    const dir = copy('u8img_raw');
    rmSync(join(dir, 'meta.zr'));
    await rejectsWith(Store.open(dir), 'LOADERX_NOT_FOUND');
  });

  test('a meta.zr shorter than its 16-byte header is LOADERX_CORRUPT (every length 0..15, from files and memory)', async () => {
    const dir = copy('u8img_raw');
    const meta = readFileSync(join(dir, 'meta.zr'));
    for (let size = 0; size < 16; size++) {
      truncateSync(join(dir, 'meta.zr'), size);
      await rejectsWith(Store.open(dir), 'LOADERX_CORRUPT');
      await rejectsWith(Store.open({ 'meta.zr': meta.subarray(0, size) }), 'LOADERX_CORRUPT');
    }
  });

  test('corrupt errors carry the damaged file and offset as fields', async () => {
    const dir = copy('u8img_raw');
    const meta = readFileSync(join(dir, 'meta.zr'));
    const entry = 16 + 16 * 2; // entry 2: a logical length the raw record does not have
    patch(join(dir, 'meta.zr'), entry + 8, Buffer.from([0xe7, 0x03, 0, 0]));
    const store = await Store.open(dir);
    await assert.rejects(store.gather([0, 2]), (e) => {
      assert.ok(e instanceof LoaderxError, String(e));
      assert.deepEqual([e.code, e.file, e.offset, e.index], ['LOADERX_CORRUPT', 'meta.zr', entry, 2], e.message);
      return true;
    });
    await store.close();
    // A meta.zr cut short names where it ends.
    const short = await Store.open({ 'meta.zr': meta.subarray(0, 9) }).catch((e) => e);
    assert.deepEqual([short.code, short.file, short.offset], ['LOADERX_CORRUPT', 'meta.zr', 9]);
  });

  test('garbage magic is LOADERX_NOT_A_STORE', async () => {
    const dir = copy('u8img_raw');
    patch(join(dir, 'meta.zr'), 0, Buffer.from('JUNK'));
    await rejectsWith(Store.open(dir), 'LOADERX_NOT_A_STORE');
  });

  test('another format version is LOADERX_NOT_A_STORE', async () => {
    const dir = copy('u8img_raw');
    patch(join(dir, 'meta.zr'), 4, Buffer.from([4, 0]));
    await rejectsWith(Store.open(dir), 'LOADERX_NOT_A_STORE');
  });

  test('meta.zr cut inside the table is LOADERX_CORRUPT', async () => {
    const dir = copy('u8img_raw');
    truncateSync(join(dir, 'meta.zr'), 16 + 16 * 100 + 5);
    await rejectsWith(Store.open(dir), 'LOADERX_CORRUPT');
  });

  test('a tail chunk past the 4096-chunk limit is LOADERX_CORRUPT', async () => {
    const dir = copy('u8img_raw');
    patch(join(dir, 'meta.zr'), 6, Buffer.from([0x00, 0x10])); // tail_chunk 4096
    await rejectsWith(Store.open(dir), 'LOADERX_CORRUPT');
  });

  test('a garbage schema.msgpack is LOADERX_CORRUPT', async () => {
    const dir = copy('u8img_raw');
    writeFileSync(join(dir, 'schema.msgpack'), Buffer.from([0xc1, 0xff, 0x00, 0x13, 0x37]));
    await rejectsWith(Store.open(dir), 'LOADERX_CORRUPT');
  });

  test('a msgpack schema that is not a loaderx schema is LOADERX_CORRUPT', async () => {
    const dir = copy('u8img_raw');
    writeFileSync(join(dir, 'schema.msgpack'), Buffer.from([0x81, 0xa1, 0x61, 0x01])); // {"a": 1}
    await rejectsWith(Store.open(dir), 'LOADERX_CORRUPT');
  });
});

describe('damaged records', () => {
  test('a table entry pointing outside its chunk: gather rejects with its index, verify lists exactly it', async () => {
    const dir = copy('u8img_raw');
    patch(join(dir, 'meta.zr'), 16 + 16 * 5, Buffer.from([0x00, 0xf0, 0xff, 0xff])); // offset of entry 5
    const store = await Store.open(dir);
    try {
      await rejectsWith(store.gather([5]), 'LOADERX_CORRUPT', { index: 5 });
      await rejectsWith(store.gather([4, 5, 6]), 'LOADERX_CORRUPT', { index: 5 });
      await rejectsWith(store.gatherBytes([5]), 'LOADERX_CORRUPT', { index: 5 });
      const report = await store.verify();
      assert.equal(report.ok, false);
      assert.deepEqual(report.bad.map((b) => [b.index, b.code]), [[5, 'LOADERX_CORRUPT']]);
      // The store is still usable for the other records.
      const exp = expectedOf(fixture('u8img_raw'));
      const [r4] = await store.gatherBytes([4]);
      assertSameArray(r4, new Uint8Array(expectedRecordBytes(fixture('u8img_raw'), exp, 4)), 'record 4');
    } finally {
      await store.close();
    }
  });

  test('a header counting 2^24 records over a table written for 200: verify reports the blank run once', async () => {
    const dir = copy('u8img_raw');
    const claimed = 2 ** 24;
    const meta = join(dir, 'meta.zr');
    truncateSync(meta, 16 + 16 * claimed); // the table's full size, as loaderx preallocates it (sparse)
    const length = Buffer.alloc(4);
    length.writeUInt32LE(claimed);
    patch(meta, 12, length); // magic (4), version (2), tail chunk (2), tail offset (4), length (4)
    const store = await Store.open(dir);
    try {
      const seen = [];
      const report = await store.verify({ onProgress: (done, total) => seen.push([done, total]) });
      assert.equal(report.ok, false);
      assert.equal(report.checked, claimed);
      assert.deepEqual(report.bad.map((b) => [b.index, b.code]), [[200, 'LOADERX_CORRUPT']]);
      assert.match(report.bad[0].message, /meta\.zr: table entries 200\.\.16777216 are blank .* record count is damaged/);
      assert.equal(report.unlisted, claimed - 201);
      assert.deepEqual(seen.at(-1), [claimed, claimed]);
    } finally {
      await store.close();
    }
  });

  test('a truncated chunk file: the records past the cut are LOADERX_CORRUPT, the rest read', async () => {
    const dir = copy('u8img_zstd');
    const { entries } = readTable(dir);
    const cut = Math.floor(entries.reduce((a, e) => Math.max(a, e.end), 0) / 2);
    truncateSync(join(dir, '0.zr'), cut);
    const lost = entries.map((e, i) => /** @type {const} */ ([e, i])).filter(([e]) => e.end > cut).map(([, i]) => i);
    assert.ok(lost.length > 0 && lost.length < entries.length);
    const store = await Store.open(dir);
    try {
      await rejectsWith(store.gather([lost[0]]), 'LOADERX_CORRUPT', { index: lost[0] });
      await rejectsWith(store.gather(range(entries.length)), 'LOADERX_CORRUPT');
      const report = await store.verify();
      assert.deepEqual(report.bad.map((b) => b.index), lost);
      assert.ok(report.bad.every((b) => b.code === 'LOADERX_CORRUPT'));
      const kept = entries.findIndex((e) => e.end <= cut);
      const [r] = await store.gatherBytes([kept]);
      assertSameArray(r, new Uint8Array(expectedRecordBytes(GOOD, goodExp, kept)), `record ${kept}`);
    } finally {
      await store.close();
    }
  });

  test('a missing chunk file: its records are LOADERX_CORRUPT', async () => {
    const dir = copy('u8img_zstd');
    rmSync(join(dir, '0.zr'));
    const store = await Store.open(dir);
    try {
      await rejectsWith(store.gather([3]), 'LOADERX_CORRUPT', { index: 3 });
      const report = await store.verify();
      assert.deepEqual(report.bad.map((b) => b.index), range(GOOD.length));
    } finally {
      await store.close();
    }
  });

  test('a garbage zstd payload: gather rejects with its index, verify lists exactly it', async () => {
    const dir = copy('u8img_zstd');
    const { entries } = readTable(dir);
    const e = entries[7];
    assert.equal(e.compress, 1);
    patch(join(dir, '0.zr'), e.offset, Buffer.alloc(e.stored, 0xa5));
    const store = await Store.open(dir);
    try {
      await rejectsWith(store.gather([7]), 'LOADERX_CORRUPT', { index: 7 });
      await rejectsWith(store.gatherBytes([6, 7]), 'LOADERX_CORRUPT', { index: 7 });
      const report = await store.verify();
      assert.deepEqual(report.bad.map((b) => [b.index, b.code]), [[7, 'LOADERX_CORRUPT']]);
    } finally {
      await store.close();
    }
  });

  test('a zstd frame that decodes to another length than its entry says is LOADERX_CORRUPT', async () => {
    const dir = copy('tokens_i32_ragged_zstd');
    const { entries } = readTable(dir);
    // Entry a takes the frame of record b (a valid frame of another size), keeping its own length.
    const [a, b] = /** @type {number[]} */ ([0, 1, 2, 3, 4, 5].flatMap((x) => [0, 1, 2, 3, 4, 5].map((y) => [x, y]))
      .find(([x, y]) => entries[x].compress === 1 && entries[y].compress === 1 && entries[x].logic !== entries[y].logic)); // the fixture has such a pair
    const at = 16 + 16 * a;
    const meta = join(dir, 'meta.zr');
    const src = readFileSync(meta).subarray(16 + 16 * b, 16 + 16 * b + 8);
    patch(meta, at, Buffer.from(src)); // offset and phys_length of b
    const store = await Store.open(dir);
    try {
      await rejectsWith(store.gatherBytes([a]), 'LOADERX_CORRUPT', { index: a });
      const report = await store.verify();
      assert.deepEqual(report.bad.map((x) => x.index), [a]);
    } finally {
      await store.close();
    }
  });

  test('a dense record of the wrong size is LOADERX_CORRUPT with its index', async () => {
    const dir = copy('u8img_raw');
    // logic_length of raw record 9: 784 (28 x 28) -> 780, which no longer fits the schema.
    patch(join(dir, 'meta.zr'), 16 + 16 * 9 + 8, Buffer.from([0x0c, 0x03, 0, 0]));
    const store = await Store.open(dir);
    try {
      await rejectsWith(store.gather([9]), 'LOADERX_CORRUPT', { index: 9 });
      const report = await store.verify();
      assert.deepEqual(report.bad.map((x) => x.index), [9]);
    } finally {
      await store.close();
    }
  });
});

describe('indices and arguments', () => {
  /** @type {import('../src/node.js').Store} */
  let store;
  before(async () => {
    store = await Store.open(storeDir(GOOD));
  });
  after(async () => {
    await store.close();
  });

  const n = () => GOOD.length;
  /** @type {[string, () => unknown[]][]} */
  const badIndices = [
    ['the length', () => [n()]],
    ['past the length', () => [0, n() + 1000]],
    ['negative', () => [-1]],
    ['fractional', () => [1.5]],
    ['NaN', () => [NaN]],
    ['Infinity', () => [Infinity]],
    ['2^53', () => [2 ** 53]],
    ['a string element', () => ['x']],
    ['a negative bigint', () => [-1n]],
  ];
  for (const [what, make] of badIndices) {
    test(`an index that is ${what} is LOADERX_INDEX`, async () => {
      await rejectsWith(store.gather(/** @type {any} */ (make())), 'LOADERX_INDEX');
      await rejectsWith(store.gatherBytes(/** @type {any} */ (make())), 'LOADERX_INDEX');
      await rejectsWith(store.lengths(/** @type {any} */ (make())), 'LOADERX_INDEX');
    });
  }

  test('get() of an index out of range is LOADERX_INDEX', async () => {
    await rejectsWith(store.get(n()), 'LOADERX_INDEX');
    await rejectsWith(store.get(-1), 'LOADERX_INDEX');
  });

  for (const [what, value] of [['a number', 3], ['null', null], ['undefined', undefined], ['an object', { 0: 1 }], ['a bigint', 3n]]) {
    test(`indices given as ${what} are LOADERX_ARGUMENT`, async () => {
      await rejectsWith(store.gather(/** @type {any} */ (value)), 'LOADERX_ARGUMENT');
      await rejectsWith(store.gatherBytes(/** @type {any} */ (value)), 'LOADERX_ARGUMENT');
      await rejectsWith(store.lengths(/** @type {any} */ (value)), 'LOADERX_ARGUMENT');
    });
  }

  test('a good call still works on the same store after the bad ones', async () => {
    const got = /** @type {import('../src/node.js').Shaped} */ (await store.gather([1, 2])); // dense: one array
    assert.deepEqual(got.shape, [2, 28, 28]);
  });

  test('verify with a batchSize that is not a positive integer is LOADERX_ARGUMENT', async () => {
    for (const batchSize of [0, -1, 1.5, NaN]) await rejectsWith(store.verify({ batchSize }), 'LOADERX_ARGUMENT');
  });

  test('a batch over the 512 MiB output cap is LOADERX_TOO_LARGE', async () => {
    const big = await Store.open(storeDir(fixture('bigrec_1mib_zstd')));
    try {
      await rejectsWith(big.gather(new Array(600).fill(0)), 'LOADERX_TOO_LARGE');
      await rejectsWith(big.gatherBytes(new Array(600).fill(1)), 'LOADERX_TOO_LARGE');
    } finally {
      await big.close();
    }
  });
});

describe('verify of big records', () => {
  test('verify of 600 records of 1 MiB (600 MiB decoded) passes and stays under the output cap', async () => {
    // 600 raw entries sharing one 1 MiB record: the format only asks entries to lie inside
    // their chunk, so this is a valid store of 600 MiB whose files take 1 MiB.
    const dir = join(tmp, 'big-records');
    const N = 600, L = 1 << 20;
    copyStore(storeDir(GOOD), dir);
    rmSync(join(dir, 'schema.msgpack'));
    writeFileSync(join(dir, '0.zr'), Buffer.alloc(L, 7));
    const meta = Buffer.alloc(16 + 16 * N);
    meta.write('ZREC', 0, 'latin1');
    meta.writeUInt16LE(3, 4);
    meta.writeUInt32LE(L, 8);
    meta.writeUInt32LE(N, 12);
    for (let i = 0; i < N; i++) {
      meta.writeUInt32LE(L, 16 + 16 * i + 4);
      meta.writeUInt32LE(L, 16 + 16 * i + 8);
    }
    writeFileSync(join(dir, 'meta.zr'), meta);
    const store = await Store.open(dir);
    try {
      await rejectsWith(store.gatherBytes(range(N)), 'LOADERX_TOO_LARGE');
      const progress = [];
      const report = await store.verify({ onProgress: (d, t) => progress.push([d, t]) });
      const checksums = { verified: 0, mismatched: 0, uncovered: N, unverified: 0 };
      assert.deepEqual(report, { ok: true, checked: N, length: N, bad: [], unlisted: 0, checksums });
      assert.deepEqual(progress.at(-1), [N, N]);
    } finally {
      await store.close();
    }
  });
});

describe('I/O failures', () => {
  /**
   * A NodeSource over the good fixture whose reads (of `which` files) throw.
   * @param {(name: string) => boolean} [which]
   */
  function failingSource(which = () => true) {
    const inner = new NodeSource(storeDir(GOOD));
    return {
      label: 'failing',
      maxGap: 0,
      size: (name) => inner.size(name),
      read: (name, s, e) => (which(name) ? Promise.reject(new Error(`disk on fire reading ${name}`)) : inner.read(name, s, e)),
      close: () => inner.close(),
    };
  }

  test('a source whose read() throws is LOADERX_IO, with the cause kept', async () => {
    await assert.rejects(Store.open(failingSource()), (/** @type {any} */ e) => isError('LOADERX_IO')(e) && /disk on fire/.test(e.cause?.message));
    await stillWorks();
  });

  test('a source whose size() throws is LOADERX_IO', async () => {
    const src = { label: 'sizeless', maxGap: 0, size: async () => { throw new TypeError('no size today'); }, read: async () => new Uint8Array(0) };
    await rejectsWith(Store.open(src), 'LOADERX_IO');
  });

  test('chunk reads that throw are LOADERX_IO; the table still reads', async () => {
    const store = await Store.open(failingSource((name) => /^\d+\.zr$/.test(name)));
    try {
      await rejectsWith(store.gather([0]), 'LOADERX_IO');
      await rejectsWith(store.verify(), 'LOADERX_IO');
      assert.equal((await store.stats()).records, GOOD.length);
      assert.equal((await store.lengths([0]))[0], goodExp.lengths[0]);
    } finally {
      await store.close();
    }
  });

  test('an HttpSource whose fetch rejects is LOADERX_IO', async () => {
    const fetch = async () => { throw new TypeError('fetch failed'); };
    await rejectsWith(Store.open(new HttpSource('http://127.0.0.1:9/store/', { fetch })), 'LOADERX_IO');
  });

  describe('over HTTP', () => {
    let server, plain;
    const sockets = [];
    before(async () => {
      server = await serve({ root: tmp });
      plain = await serve({ root: tmp, range: false });
      plain.server.on('connection', (s) => sockets.push(s));
    });
    after(async () => {
      await server?.close();
      await plain?.close();
    });

    test('chunk fetches that fail later are LOADERX_IO', async () => {
      const dir = copy('u8img_zstd');
      const base = new URL(`${dir.slice(tmp.length + 1)}/`, server.url);
      let failChunks = false;
      const fetch = (url, init) => (failChunks && /\/\d+\.zr$/.test(url) ? Promise.reject(new TypeError('network down')) : globalThis.fetch(url, init));
      const store = await Store.open(new HttpSource(base, { fetch }));
      try {
        failChunks = true;
        await rejectsWith(store.gather([0]), 'LOADERX_IO');
        failChunks = false;
        assert.equal((await store.gatherBytes([0]))[0].byteLength, goodExp.lengths[0]);
      } finally {
        await store.close();
      }
    });

    test('an empty file answered with a bodiless 200 is an empty file, not LOADERX_NO_RANGE', async () => {
      const dir = copy('empty_dense'); // its 0.zr is empty
      const base = new URL(`${dir.slice(tmp.length + 1)}/`, server.url);
      let rewritten = 0;
      const fetch = async (url, init) => {
        const res = await globalThis.fetch(url, init);
        if (res.status !== 416 || res.headers.get('Content-Range') !== 'bytes */0') return res;
        rewritten++;
        return new Response(null, { status: 200, headers: { 'Content-Length': '0' } });
      };
      const store = await Store.open(new HttpSource(base, { fetch }));
      try {
        assert.ok(rewritten > 0);
        assert.equal(store.length, 0);
        assert.equal((await store.stats()).fileBytes['0.zr'], 0);
        assert.equal((await store.verify()).ok, true);
      } finally {
        await store.close();
      }
      // A 200 with a body is still refused.
      const withBody = async () => new Response(new Uint8Array(100), { status: 200 });
      await rejectsWith(Store.open(new HttpSource(base, { fetch: withBody })), 'LOADERX_NO_RANGE');
    });

    test('a 404 store is LOADERX_NOT_FOUND', async () => {
      await rejectsWith(Store.open(new URL('no-such-store/', server.url).href), 'LOADERX_NOT_FOUND');
    });

    test('a chunk missing on the server is LOADERX_CORRUPT for its records', async () => {
      const dir = copy('u8img_zstd');
      rmSync(join(dir, '0.zr'));
      const store = await Store.open(new URL(`${dir.slice(tmp.length + 1)}/`, server.url).href);
      try {
        await rejectsWith(store.gather([0]), 'LOADERX_CORRUPT', { index: 0 });
      } finally {
        await store.close();
      }
    });

    test('a server that ignores Range is LOADERX_NO_RANGE, without downloading the file', async () => {
      // meta.zr at the size a writer leaves it (268 MB, sparse): a download would show.
      const dir = copy('u8img_zstd');
      const fd = openSync(join(dir, 'meta.zr'), 'r+');
      ftruncateSync(fd, 16 + 16 * 2 ** 24);
      closeSync(fd);
      const t0 = performance.now();
      await assert.rejects(Store.open(new URL(`${dir.slice(tmp.length + 1)}/`, plain.url).href), isError('LOADERX_NO_RANGE'));
      const ms = performance.now() - t0;
      assert.ok(ms < 3000, `took ${ms} ms`);
      await new Promise((r) => setTimeout(r, 100));
      const sent = sockets.reduce((a, s) => a + s.bytesWritten, 0);
      assert.ok(sockets.length > 0);
      assert.ok(sent < 32 << 20, `the server sent ${sent} bytes of a ${16 + 16 * 2 ** 24}-byte file`);
      await stillWorks();
    });
  });
});

describe('a closed store', () => {
  test('every call is LOADERX_CLOSED', async () => {
    const store = await Store.open(storeDir(GOOD));
    await store.close();
    await store.close(); // twice is fine
    await rejectsWith(store.gather([0]), 'LOADERX_CLOSED');
    await rejectsWith(store.gatherBytes([0]), 'LOADERX_CLOSED');
    await rejectsWith(store.get(0), 'LOADERX_CLOSED');
    await rejectsWith(store.lengths([0]), 'LOADERX_CLOSED');
    await rejectsWith(store.stats(), 'LOADERX_CLOSED');
    await rejectsWith(store.verify(), 'LOADERX_CLOSED');
    throwsWith(() => store.length, 'LOADERX_CLOSED');
    throwsWith(() => store.header, 'LOADERX_CLOSED');
    throwsWith(() => store.hasDict, 'LOADERX_CLOSED');
    await stillWorks();
  });

  test('calls in flight when the store closes are LOADERX_CLOSED', async () => {
    for (const call of [(s) => s.gather(range(GOOD.length)), (s) => s.verify(), (s) => s.stats(), (s) => s.lengths([0, 100])]) {
      const store = await Store.open(storeDir(GOOD));
      const pending = assert.rejects(call(store), isError('LOADERX_CLOSED')); // handled from the start
      await store.close();
      await pending;
      await stillWorks();
    }
  });
});

describe('Sampler arguments', () => {
  const cases = [
    ['length 0', () => new Sampler(0, 4, 0, 1)],
    ['batch size 0', () => new Sampler(10, 0, 1, 1)],
    // @ts-expect-error 7 is no SamplerMode
    ['mode 7', () => new Sampler(10, 4, 7, 1)],
    // @ts-expect-error -1 is no SamplerMode
    ['mode -1', () => new Sampler(10, 4, -1, 1)],
    // @ts-expect-error 'RANDOM' is no SamplerMode
    ["mode 'RANDOM'", () => new Sampler(10, 4, 'RANDOM', 1)],
    ['a negative seed', () => new Sampler(10, 4, 1, -1)],
    ['a fractional seed', () => new Sampler(10, 4, 1, 0.5)],
    ['a seed of 2^64', () => new Sampler(10, 4, 1, 2n ** 64n)],
    ['a length over 2^53 - 1', () => new Sampler(2 ** 53, 4, 0, 1)],
    ['a batch over 2^24', () => new Sampler(10, 2 ** 24 + 1, 0, 1)],
    ['a negative step for batchAt', () => new Sampler(10, 4, 2, 1).batchAt(-1)],
    ['a fractional step for seek', () => new Sampler(10, 4, 2, 1).seek(1.5)],
  ];
  for (const [what, make] of cases) {
    test(`${what} is LOADERX_ARGUMENT`, async () => {
      throwsWith(make, 'LOADERX_ARGUMENT');
      assert.deepEqual(Array.from(new Sampler(10, 4, 0, 1).next()), [0, 1, 2, 3]);
      await stillWorks();
    });
  }
});

test('a store with a damaged delete.journal is refused, naming it (journal.test.mjs reads whole ones)', async () => {
  const dir = copy(GOOD.name);
  writeFileSync(join(dir, 'delete.journal'), new Uint8Array(40));
  await assert.rejects(Store.open(dir), (/** @type {any} */ e) => isError('LOADERX_CORRUPT')(e) && /delete\.journal/.test(e.message) && e.file === 'delete.journal');
  rmSync(join(dir, 'delete.journal'));
  const store = await Store.open(dir);
  assert.ok(store.length > 0);
  await store.close();
  await stillWorks();
});
