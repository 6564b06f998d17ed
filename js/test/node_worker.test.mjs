// Calls on a store directory shared with the worker thread (node-store.js). The fixtures are
// small, so these stores set `workerMin` to 0 and every call of two records or more is shared.
// A shared call gives what the same call gives on the calling thread alone: the same arrays
// (type, shape, bytes) for every fixture kind, and the same errors (a bad index, a corrupt record
// in the worker's part). The calling thread reads only its part of a shared call; small calls,
// stores whose workerMin is Infinity and sources other than a plain NodeSource read everything
// there. A worker that stops rejects the call waiting on
// it (LOADERX_IO) instead of leaving it pending, and the store goes on without it; a process
// exits once its stores are closed, and also when it never closes them. Stores that never share
// set `workerMin` to Infinity.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Store, NodeSource, MemorySource } from '../src/node.js';
import { currentHost } from '../src/node-store.js';
import { JS_DIR, copyStore, fixture, range, readStoreFiles, readTable, removeDir, storeDir, tempDir, rejection } from './helpers/common.mjs';

const KINDS = [
  'u8img_zstd', 'u8img_zstd_dict', 'u8img_raw', 'f32_8x2x4_zstd', 'labels_i64_zstd', 'tokens_i32_ragged_zstd',
  'tokens_i32_ragged_zstd_dict', 'rows_f32x3_ragged_raw', 'fallback_mixed_zstd', 'be_i4_raw', 'bool_zstd', 'f16_zstd',
  'void12_raw', 'bigrec_1mib_zstd', 'zrecord_mixed_codecs', 'deleted_compacted', 'appended_twice',
];

/** Index lists for a store of `n` records: in order, reversed, repeated and jumping about, and two. */
function indexLists(n) {
  return [range(n), range(n).reverse(), range(3 * n).map((k) => (k * 7 + 3) % n), [n - 1, 0]];
}

/** Chunk bytes read on the calling thread (the worker reads through its own source). */
/** @typedef {NodeSource & {readIntoSync: Function, readInto: Function, mainBytes: number}} CountingSource */

/** A NodeSource (still a plain one, as sharing requires) that counts the chunk bytes read here. */
function countingSource(dir, workerMin = 0) {
  const source = /** @type {CountingSource} */ (new NodeSource(dir));
  source.workerMin = workerMin;
  source.mainBytes = 0;
  const sync = source.readIntoSync.bind(source);
  const later = source.readInto.bind(source);
  const count = (name, n) => { if (name !== 'meta.zr' && n) source.mainBytes += n; return n; };
  source.readIntoSync = (name, ...a) => count(name, sync(name, ...a));
  source.readInto = async (name, ...a) => count(name, await later(name, ...a));
  return source;
}

/** How long (ms) a worker may take to start, on a machine that is busy with other work. */
const STARTS = 30_000;

/** A store on `dir` that never shares its calls. */
function alone(dir) {
  const source = new NodeSource(dir);
  source.workerMin = Infinity;
  return Store.open(source);
}

/** A store on `source` once its calls are shared: its first call starts the worker, and calls
 *  of two records are made until one is shared (fewer bytes read here than the call needs). */
async function shared(source) {
  const store = await Store.open(source);
  if (await untilShared(store, source, [0, 1], readAll(source.dir, [0, 1]))) return store;
  await store.close();
  throw new Error('no call was shared');
}

/** Runs `body(store, source)` on a store over `countingSource(dir, 0)`, and closes the store. */
async function withCounting(dir, body) {
  const source = countingSource(dir, 0);
  const store = await Store.open(source);
  try {
    await body(store, source);
  } finally {
    await store.close();
  }
}

/** Lets timers run (the worker starts meanwhile). */
const aTimer = () => new Promise((r) => setTimeout(r, 10));

/**
 * Makes the call `store.gatherBytes(idx)` again and again, `pause()` before each, until one is
 * shared (fewer chunk bytes read on this thread than `want`, the bytes the call needs) or STARTS
 * ms have passed: whether one was. Every call must return one record per index.
 */
async function untilShared(store, source, idx, want, pause = aTimer) {
  for (const until = Date.now() + STARTS; Date.now() < until;) {
    await pause();
    source.mainBytes = 0;
    const got = await store.gatherBytes(idx);
    assert.equal(got.length, idx.length);
    if (source.mainBytes < want) return true;
  }
  return false;
}

/** What a gather gave, comparable with deepEqual: each array's type, shape and bytes. */
function arrays(result) {
  const list = Array.isArray(result) ? result : [result];
  return { single: !Array.isArray(result), items: list.map((a) => [a.constructor.name, a.shape, Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('hex')]) };
}


/** The fields a LoaderxError is compared by. */
const fields = (e) => ({ name: e.name, code: e.code, message: e.message, index: e.index });

describe('a shared call gives what the call gives on this thread alone', () => {
  for (const name of KINDS) {
    test(name, async () => {
      const dir = storeDir(fixture(name));
      const source = countingSource(dir);
      const one = await alone(dir);
      const two = one.length < 2 ? await Store.open(source) : await shared(source);
      try {
        const n = one.length;
        let readLess = false;
        for (const idx of indexLists(n)) {
          for (const method of /** @type {const} */ (['gather', 'gatherBytes'])) {
            const want = arrays(await one[method](idx));
            source.mainBytes = 0;
            const got = arrays(await two[method](idx));
            assert.deepEqual(got, want, `${method} of ${idx.length} records`);
            if (source.mainBytes > 0 && idx.length === n) readLess ||= source.mainBytes < readAll(dir, idx);
          }
        }
        assert.ok(readLess || n < 2, 'the worker read part of a call');
        // batches() goes through the shared gathers too.
        const seen = [];
        for await (const b of two.batches({ batchSize: 7, read: 'bytes' })) seen.push(...b.map((r) => Buffer.from(r).toString('hex')));
        const all = await one.gatherBytes(range(n));
        assert.deepEqual(seen, all.map((r) => Buffer.from(r).toString('hex')), 'batches()');
      } finally {
        await two.close();
        await one.close();
      }
    });
  }
});

/** Chunk bytes of the records `idx` as stored: what a call reads for them, at least (it also
 *  reads the gaps between records it merges into one range). */
function readAll(dir, idx) {
  const { entries } = readTable(dir);
  return [...new Set(idx)].reduce((sum, i) => sum + entries[i].stored, 0);
}

describe('which calls are shared', () => {
  const dir = storeDir(fixture('u8img_zstd'));

  test('calls under workerMin, and every call of a store whose workerMin is Infinity, read every record here', async () => {
    const small = countingSource(dir, 1 << 30);
    const off = countingSource(dir, Infinity);
    const a = await Store.open(small);
    const b = await Store.open(off);
    try {
      for (const [store, source] of /** @type {const} */ ([[a, small], [b, off]])) {
        source.mainBytes = 0;
        await store.gatherBytes(range(200));
        assert.ok(source.mainBytes >= readAll(dir, range(200)), 'every record read here');
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('the first large call runs here and starts the worker; later ones are shared', () => withCounting(dir, async (store, source) => {
    const total = readAll(dir, range(200));
    await store.gatherBytes(range(200));
    assert.ok(source.mainBytes >= total, 'the first call read every record here');
    assert.ok(await untilShared(store, source, range(200), total), 'a later call was shared');
  }));

  test('a caller that never leaves microtasks (await after await, no timer) gets shared calls', () => withCounting(dir, async (store, source) => {
    // An await of a settled promise: a microtask, never a timer.
    assert.ok(await untilShared(store, source, range(200), readAll(dir, range(200)), async () => {}), 'a call was shared');
  }));

  test('a store opened by a relative path shares after the working directory changes', async () => {
    const cwd = process.cwd();
    const tmp = tempDir();
    try {
      process.chdir(dirname(dir));
      await withCounting(basename(dir), async (store, source) => {
        await store.gatherBytes(range(200)); // reads here (its files are open now), starts the worker
        process.chdir(tmp);
        assert.ok(await untilShared(store, source, range(200), readAll(dir, range(200))), 'a later call was shared');
      });
    } finally {
      process.chdir(cwd);
      removeDir(tmp);
    }
  });

  test('a subclass of NodeSource, memory and custom sources never share', async () => {
    class Sub extends NodeSource {}
    const sub = new Sub(dir);
    sub.workerMin = 0;
    const mem = new MemorySource(readStoreFiles(dir));
    let reads = 0;
    const custom = { label: 'custom', size: (/** @type {string} */ n) => mem.size(n), read: (/** @type {string} */ n, /** @type {number} */ a, /** @type {number} */ b) => { reads += b - a; return mem.read(n, a, b); } };
    for (const source of [sub, mem, custom]) {
      const store = await Store.open(source);
      try {
        const before = currentHost();
        for (let k = 0; k < 5; k++) await store.gatherBytes(range(200));
        assert.equal(currentHost(), before, 'no worker started');
      } finally {
        await store.close();
      }
    }
    assert.ok(reads >= readAll(dir, range(200)), 'the custom source read every record');
  });
});

describe('a shared call fails as the call on this thread alone', () => {
  test('an index out of range in the worker\'s part; a call over the output cap', async () => {
    const dir = storeDir(fixture('u8img_zstd'));
    const two = await shared(countingSource(dir));
    const one = await alone(dir);
    try {
      for (const idx of /** @type {any[][]} */ ([[...range(100), 200], [...range(150), 1e9, 3], [...range(100), -1], [...range(100), 'x']])) {
        const want = await rejection(one.gather(idx));
        const got = await rejection(two.gather(idx));
        assert.deepEqual(fields(got), fields(want));
      }
      // Over wasm's cap on one call's output: rejected whole, not gathered in two parts.
      const big = await alone(storeDir(fixture('bigrec_1mib_zstd')));
      const bigShared = await shared(countingSource(storeDir(fixture('bigrec_1mib_zstd'))));
      try {
        const many = Array(513).fill(0);
        const want = await rejection(big.gatherBytes(many));
        assert.deepEqual(fields(await rejection(bigShared.gatherBytes(many))), fields(want));
      } finally {
        await big.close();
        await bigShared.close();
      }
      // A generator gives its indices once.
      const gen = function* () { yield* range(200); };
      assert.deepEqual(arrays(await two.gather(gen())), arrays(await one.gather(gen())));
    } finally {
      await two.close();
      await one.close();
    }
  });

  test('a corrupt record in the worker\'s part', async () => {
    const tmp = tempDir();
    try {
      const dir = copyStore(storeDir(fixture('u8img_zstd')), join(tmp, 'bad'));
      const { entries } = readTable(dir);
      const last = entries[entries.length - 2];
      const chunk = join(dir, `${last.chunk}.zr`);
      const bytes = readFileSync(chunk);
      bytes.fill(0xa5, last.offset, last.offset + Math.min(16, last.stored));
      writeFileSync(chunk, bytes);
      const source = countingSource(dir);
      const two = await shared(source);
      const one = await alone(dir);
      try {
        const want = await rejection(one.gatherBytes(range(entries.length)));
        assert.equal(want.code, 'LOADERX_CORRUPT');
        const got = await rejection(two.gatherBytes(range(entries.length)));
        assert.deepEqual(fields(got), fields(want));
        // The store reads on, and still shares.
        source.mainBytes = 0;
        const good = range(entries.length - 2);
        assert.deepEqual(arrays(await two.gatherBytes(good)), arrays(await one.gatherBytes(good)));
        assert.ok(source.mainBytes < readAll(dir, good), 'the next call was shared');
      } finally {
        await two.close();
        await one.close();
      }
    } finally {
      removeDir(tmp);
    }
  });
});

describe('a worker that stops', () => {
  test('rejects the call waiting on it (LOADERX_IO), and the store goes on without it', { timeout: 60_000 }, async () => {
    const dir = storeDir(fixture('u8img_zstd'));
    const source = countingSource(dir);
    const store = await shared(source);
    const one = await alone(dir);
    try {
      const host = /** @type {any} */ (currentHost());
      assert.ok(host, 'a worker is running');
      const post = host.port.postMessage.bind(host.port);
      // The worker ends as the call is sent (so it never answers it).
      host.port.postMessage = (/** @type {any} */ msg, /** @type {any} */ transfer) => {
        if (msg.op === 'gather') host.worker.terminate();
        else post(msg, transfer);
      };
      const e = await rejection(store.gatherBytes(range(200)));
      assert.equal(e.code, 'LOADERX_IO');
      assert.match(e.message, /worker/);
      // Later calls run here: right records, every byte read on this thread.
      source.mainBytes = 0;
      assert.deepEqual(arrays(await store.gatherBytes(range(200))), arrays(await one.gatherBytes(range(200))));
      assert.ok(source.mainBytes >= readAll(dir, range(200)), 'every record read here');
      // A store opened now gets a new worker.
      const next = await shared(countingSource(dir));
      try {
        assert.notEqual(currentHost(), host);
        assert.deepEqual(arrays(await next.gather(range(200))), arrays(await one.gather(range(200))));
      } finally {
        await next.close();
      }
    } finally {
      await store.close();
      await one.close();
    }
  });

  test('closing with shared calls in flight settles each (its records, or LOADERX_CLOSED); the last store closed ends the worker', { timeout: 60_000 }, async () => {
    const dir = storeDir(fixture('u8img_zstd'));
    const one = await alone(dir);
    const want = arrays(await one.gatherBytes(range(200)));
    await one.close();
    const store = await shared(countingSource(dir));
    const host = /** @type {any} */ (currentHost());
    const exited = once(host.worker, 'exit');
    const settling = Promise.allSettled(range(6).map(() => store.gatherBytes(range(200))));
    await store.close();
    for (const s of await settling) {
      if (s.status === 'fulfilled') assert.deepEqual(arrays(s.value), want);
      else assert.equal(s.reason.code, 'LOADERX_CLOSED', s.reason.message);
    }
    await exited;
    assert.equal(currentHost(), null);
  });
});

/** Child code: `shared()` opens a store whose calls are shared (its worker started), and `all`
 *  lists every record. */
const SHARED = 'const all = [...Array(200).keys()];\nconst shared = async () => { const src = new NodeSource(dir); src.workerMin = 0; const t = await Store.open(src);\n'
  + '  await t.gatherBytes(all); await new Promise((r) => setTimeout(r, 500)); await t.gatherBytes(all); return t; };';

describe('a process with shared stores exits', () => {
  /** Runs `body` (an async function of Store and NodeSource, as source text) in a child node. */
  const child = (body) => new Promise((resolve) => {
    const code = `import { Store, NodeSource } from ${JSON.stringify(join(JS_DIR, 'src/node.js'))};\n`
      + `const dir = ${JSON.stringify(storeDir(fixture('u8img_zstd')))};\n${body}`;
    const t0 = Date.now();
    execFile(process.execPath, ['--input-type=module', '-e', code], { timeout: 30_000 }, (error, stdout, stderr) => {
      resolve({ error, stdout, stderr, ms: Date.now() - t0 });
    });
  });

  for (const [what, body] of [
    ['after closing its stores', `${SHARED}\nconst s = await Store.open(dir); const t = await shared(); await s.gatherBytes(all); await s.close(); await t.close(); console.log("done");`],
    ['without closing them', `${SHARED}\nconst t = await shared(); const r = await t.gatherBytes(all); console.log(r.length === 200 ? "done" : "wrong");`],
  ]) {
    test(what, async () => {
      const { error, stdout, stderr, ms } = await child(body);
      assert.equal(error, null, `the child failed or hung (${ms} ms): ${stderr}`);
      assert.equal(stdout.trim(), 'done');
    });
  }
});
