// Calls in flight on one store read and decode independently: several gathers started together
// (as `batches()` and callers that keep batches in flight do) each return their own records in
// order, whichever read path a call takes (local files read on this thread straight into wasm
// memory, or queued on libuv's thread pool while another call decodes; memory; a custom source).
// A read that fails rejects the call that made it and no other, the store keeps working after
// it, and closing with calls in flight settles every one of them.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Store, NodeSource, MemorySource } from '../src/node.js';
import { expectedOf, expectedRecordBytes, fixture, range, readStoreFiles, readTable, storeDir } from './helpers/common.mjs';

const ENTRY = fixture('u8img_zstd');
const DIR = storeDir(ENTRY);
const EXP = expectedOf(ENTRY);
const N = ENTRY.length;
/** Where the last five records start in 0.zr: reads reaching past it fail in FailingSource. */
const TAIL_START = Math.min(...readTable(DIR).entries.slice(N - 5).map((e) => e.offset));

/** Index batches that cover the store several times, in an order that jumps around. */
const BATCHES = range(12).map((b) => range(17).map((k) => (b * 37 + k * 11) % N));

function assertBatch(got, idx, what) {
  assert.equal(got.length, idx.length, `${what}: record count`);
  got.forEach((bytes, k) => {
    assert.deepEqual(Buffer.from(bytes), Buffer.from(expectedRecordBytes(ENTRY, EXP, idx[k])), `${what}: record ${idx[k]} (position ${k})`);
  });
}

/** Starts every batch with at most `depth` in flight, and checks each against the fixture.
 * @param {any} store @param {number} depth @param {string} what */
async function readAll(store, depth, what) {
  /** @type {[number[], Promise<Uint8Array[]>][]} */
  const inFlight = [];
  let done = 0;
  for (const idx of BATCHES) {
    inFlight.push([idx, store.gatherBytes(idx)]);
    if (inFlight.length >= depth) {
      const [i, p] = /** @type {[number[], Promise<Uint8Array[]>]} */ (inFlight.shift());
      assertBatch(await p, i, `${what}, batch ${done++}`);
    }
  }
  for (const [i, p] of inFlight) assertBatch(await p, i, `${what}, batch ${done++}`);
}

/** The internal read path of the built-in sources (not in the typings). */
/** @typedef {NodeSource & {readIntoSync: (name: string, start: number, end: number, target: Uint8Array, offset: number) => number | null}} SyncSource */

/** A NodeSource whose reads (either path) of chunk bytes at or past `failAt` throw, while `armed`. */
class FailingSource extends NodeSource {
  armed = false;
  reads = 0;
  constructor(dir, failAt) {
    super(dir);
    this.failAt = failAt;
  }
  #maybeFail(name, end) {
    this.reads++;
    if (this.armed && name.endsWith('.zr') && name !== 'meta.zr' && end > this.failAt) throw Object.assign(new Error('injected EIO'), { code: 'EIO' });
  }
  readIntoSync(name, start, end, target, offset) {
    this.#maybeFail(name, end);
    return /** @type {SyncSource} */ (/** @type {unknown} */ (NodeSource.prototype)).readIntoSync.call(this, name, start, end, target, offset);
  }
  async readInto(name, start, end, target, offset) {
    this.#maybeFail(name, end);
    return super.readInto(name, start, end, target, offset);
  }
}

describe('calls in flight on one store', () => {
  for (const depth of [1, 2, 5]) {
    test(`local files, ${depth} at a time: every batch gives its own records in order`, async () => {
      const store = await Store.open(DIR);
      try {
        await readAll(store, depth, `files depth ${depth}`);
      } finally {
        await store.close();
      }
    });
  }

  // Which path local files are read by: `unused` is the source's read method (sync: on the
  // calling thread; async: on libuv's pool) that no read counted by `counts(name)` may take.
  const PATHS = [
    { test: 'local files read on the thread pool only (syncLimit 0), 3 at a time', what: 'thread pool', syncLimit: 0, depth: 3,
      unused: 'readIntoSync', counts: () => true, says: 'no read on the calling thread' },
    { test: 'local files, one call at a time, read on the calling thread', what: 'calling thread', syncLimit: undefined, depth: 1,
      unused: 'readInto', counts: (/** @type {string} */ name) => /^\d+\.zr$/.test(name), says: 'every chunk read made on the calling thread' },
  ];
  for (const p of PATHS) {
    test(p.test, async () => {
      const source = /** @type {any} */ (new NodeSource(DIR));
      if (p.syncLimit !== undefined) source.syncLimit = p.syncLimit;
      let reads = 0;
      const real = source[p.unused].bind(source);
      source[p.unused] = (name, ...a) => { if (p.counts(name)) reads++; return real(name, ...a); };
      const store = await Store.open(source);
      try {
        await readAll(store, p.depth, p.what);
        assert.equal(reads, 0, p.says);
      } finally {
        await store.close();
      }
    });
  }

  test('memory and a custom source (no readIntoSync), 4 at a time', async () => {
    const files = readStoreFiles(DIR);
    const mem = await Store.open(new MemorySource(files));
    const inner = new MemorySource(files);
    const custom = await Store.open({ label: 'custom', maxGap: 4096, size: (n) => inner.size(n), read: (n, s, e) => inner.read(n, s, e) });
    try {
      await readAll(mem, 4, 'memory');
      await readAll(custom, 4, 'custom');
    } finally {
      await mem.close();
      await custom.close();
    }
  });

  for (const [path, depth] of /** @type {[string, number][]} */ ([['calling thread', 1], ['thread pool', 3]])) {
    test(`a failing read (${path}) rejects its own call only, and the store reads on afterwards`, async () => {
      const bad = range(N).filter((i) => i >= N - 5); // records at the end of 0.zr
      const source = new FailingSource(DIR, TAIL_START);
      const store = await Store.open(source);
      try {
        const good = [range(10), range(20, 10), range(30, 20)];
        source.armed = true;
        const calls = [store.gatherBytes(good[0]), store.gatherBytes(bad), store.gatherBytes(good[1])].slice(0, Math.max(2, depth));
        const [before, failing, afterwards] = /** @type {any[]} */ (await Promise.allSettled(calls));
        assertBatch(before.value, good[0], 'the call before the failing one');
        assert.equal(failing.status, 'rejected', 'the call whose read failed rejects');
        assert.equal(failing.reason.code, 'LOADERX_IO');
        assert.match(failing.reason.message, /injected EIO/);
        if (afterwards) assertBatch(afterwards.value, good[1], 'the call after the failing one');
        source.armed = false;
        assertBatch(await store.gatherBytes(bad), bad, 'the same records once reads work again');
        assertBatch(await store.gatherBytes(good[2]), good[2], 'a later call');
      } finally {
        await store.close();
      }
    });
  }

  test('a failing read inside batches() rejects the step that read it, after the good steps before it', async () => {
    const source = new FailingSource(DIR, TAIL_START);
    const store = await Store.open(source);
    try {
      source.armed = true;
      // Batches of 20 in order: the last batch holds the failing records, the others not.
      const seen = [];
      await assert.rejects(async () => {
        for await (const batch of store.batches({ batchSize: 20, read: 'bytes' })) seen.push(batch);
      }, (/** @type {any} */ e) => e.code === 'LOADERX_IO' && /injected EIO/.test(e.message));
      assert.equal(seen.length, Math.ceil(N / 20) - 1, 'every batch before the failing one arrived');
      seen.forEach((b, k) => { assertBatch(b, range(k * 20 + 20, k * 20), `batch ${k}`); });
    } finally {
      await store.close();
    }
  });

  test('closing with calls in flight settles every call (resolved or LOADERX_CLOSED)', async () => {
    for (const syncLimit of [undefined, 0]) {
      const source = new NodeSource(DIR);
      if (syncLimit != null) source.syncLimit = syncLimit;
      const store = await Store.open(source);
      const settling = Promise.allSettled(BATCHES.map((idx) => store.gatherBytes(idx)));
      await store.close();
      const settled = await settling;
      settled.forEach((s, k) => {
        if (s.status === 'fulfilled') assertBatch(s.value, BATCHES[k], `call ${k}`);
        else assert.equal(s.reason.code, 'LOADERX_CLOSED', `call ${k}: ${s.reason.message}`);
      });
    }
  });
});
