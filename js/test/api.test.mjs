// The API as a new user meets it: what the typings promise holds at run time. Every error is an
// instance of the exported LoaderxError class (from JS, from wasm and from a worker); the Node
// entry exports what node.d.ts declares (BlobSource included); Store.open(undefined) is
// LOADERX_ARGUMENT; array-likes and bigints are indices; `for await` over store.batches() gives
// the gathered batches in order; an HttpSource with a custom fetch never goes to a worker silently.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import * as entry from '../src/node.js';
import { Store, Sampler, LoaderxError, loaderxError, BlobSource, HttpSource, MemorySource, NodeSource } from '../src/node.js';
import { openInWorker, WorkerStore } from '../src/worker-client.js';
import { JS_DIR, copyStore, expectedOf, expectedRecordBytes, fixture, readStoreFiles, removeDir, storeDir, tempDir, rejection } from './helpers/common.mjs';

const GOOD = fixture('u8img_zstd');
let tmp;
before(() => { tmp = tempDir('loaderx-api-'); });
after(() => removeDir(tmp));


/** `e` is a LoaderxError instance with `code`. */
function assertLoaderxError(e, code) {
  assert.ok(e instanceof LoaderxError, `an instance of LoaderxError: ${e?.stack ?? e}`);
  assert.ok(e instanceof Error);
  assert.equal(e.name, 'LoaderxError');
  assert.equal(e.code, code, e.message);
}

/** The value names a module's declaration file exports (types left out). */
function declaredValues(file) {
  const program = ts.createProgram([file], { allowJs: true, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noEmit: true, types: [], lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'] });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  assert.ok(source, file);
  const mod = checker.getSymbolAtLocation(source);
  assert.ok(mod, `${file} is a module`);
  return checker.getExportsOfModule(mod)
    .filter((s) => {
      const target = s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s;
      return (target.flags & ts.SymbolFlags.Value) !== 0;
    })
    .map((s) => s.name)
    .sort();
}

describe('LoaderxError is a class, and every error is an instance', () => {
  test('the class: name, code, index, cause; loaderxError builds one', () => {
    const e = new LoaderxError('LOADERX_INDEX', 'index 9 out of range', { index: 9, cause: 'x' });
    assertLoaderxError(e, 'LOADERX_INDEX');
    assert.equal(e.index, 9);
    assert.equal(e.cause, 'x');
    assert.equal(e.message, 'index 9 out of range');
    assert.ok(!('index' in new LoaderxError('LOADERX_IO', 'm')), 'no index unless given');
    assertLoaderxError(loaderxError('LOADERX_IO', 'm'), 'LOADERX_IO');
  });

  test('errors raised in JS (a bad argument, a closed store)', async () => {
    assertLoaderxError(await rejection(Store.open(/** @type {any} */ (undefined))), 'LOADERX_ARGUMENT');
    const store = await Store.open(storeDir(GOOD));
    await store.close();
    assertLoaderxError(await rejection(store.gather([0])), 'LOADERX_CLOSED');
    assert.throws(() => store.length, (e) => { assertLoaderxError(e, 'LOADERX_CLOSED'); return true; });
  });

  test('errors raised in wasm: at open, while reading (with index), in verify, from the Sampler', async () => {
    const dir = copyStore(storeDir(fixture('u8img_raw')), join(tmp, 'magic'));
    writeFileSync(join(dir, 'meta.zr'), Buffer.concat([Buffer.from('JUNK'), readFileSync(join(dir, 'meta.zr')).subarray(4)]));
    assertLoaderxError(await rejection(Store.open(dir)), 'LOADERX_NOT_A_STORE');

    // A chunk cut short: record reads fail in wasm, naming the record.
    const cut = copyStore(storeDir(fixture('u8img_raw')), join(tmp, 'cut'));
    truncateSync(join(cut, '0.zr'), 100);
    const store = await Store.open(cut);
    try {
      const e = await rejection(store.gather([5]));
      assertLoaderxError(e, 'LOADERX_CORRUPT');
      assert.equal(e.index, 5);
      const report = await store.verify();
      assert.ok(!report.ok && report.bad.every((b) => b.code === 'LOADERX_CORRUPT'));
    } finally {
      await store.close();
    }
    // batchSize 0 is refused by the wasm sampler.
    assert.throws(() => new Sampler(10, 0, 'SEQUENTIAL'), (e) => { assertLoaderxError(e, 'LOADERX_ARGUMENT'); return true; });
  });

  test('errors coming back from a worker are LoaderxErrors of this realm, index kept', async () => {
    const restore = fakeWorker((msg, reply) => reply({ id: msg.id, error: { code: 'LOADERX_CORRUPT', message: 'record 3 is damaged', index: 3 } }));
    try {
      const e = await rejection(WorkerStore.open(new MemorySource({}), { threads: false }));
      assertLoaderxError(e, 'LOADERX_CORRUPT');
      assert.equal(e.index, 3);
    } finally {
      restore();
    }
  });
});

/** Installs a stand-in for the browser's Worker that answers each message with `answer`. */
function fakeWorker(answer) {
  const had = Object.getOwnPropertyDescriptor(globalThis, 'Worker');
  const posted = [];
  globalThis.Worker = /** @type {any} */ (class {
    constructor() { this.onmessage = null; }
    postMessage(msg) {
      posted.push(msg);
      queueMicrotask(() => answer(msg, (data) => this.onmessage?.({ data })));
    }
    terminate() {}
  });
  const restore = () => {
    if (had) Object.defineProperty(globalThis, 'Worker', had);
    else delete /** @type {any} */ (globalThis).Worker;
  };
  restore.posted = posted;
  return restore;
}

describe('entry points export what their typings declare', () => {
  test('src/node.js exports exactly the values src/node.d.ts declares', () => {
    assert.deepEqual(Object.keys(entry).sort(), declaredValues(join(JS_DIR, 'src/node.d.ts')));
  });

  test('src/browser.js exports exactly the values src/browser.d.ts declares', () => {
    // Read statically: browser.js loads its wasm with fetch, which Node does not do for files.
    // (Its `export * from './common.js'` is read through common.d.ts, which the Node entry's
    // run-time exports check above.)
    const names = declaredValues(join(JS_DIR, 'src/browser.js'));
    assert.ok(['Store', 'Sampler', 'DirectoryHandleSource', 'filesFromDataTransfer', 'LoaderxError'].every((n) => names.includes(n)), names.join());
    assert.deepEqual(names, declaredValues(join(JS_DIR, 'src/browser.d.ts')));
  });

  test("import { BlobSource } from 'loaderx' works in Node, and reads a store from Blobs", async () => {
    const pkg = await import('loaderx');
    assert.equal(pkg.BlobSource, BlobSource);
    assert.equal(pkg.Store, Store);
    const files = readStoreFiles(storeDir(GOOD));
    const blobs = Object.fromEntries(Object.entries(files).map(([k, v]) => [k, new Blob([v])]));
    const store = await Store.open(new BlobSource(blobs));
    try {
      const exp = expectedOf(GOOD);
      assert.deepEqual([...(await store.gatherBytes([3]))[0]], [...expectedRecordBytes(GOOD, exp, 3)]);
    } finally {
      await store.close();
    }
  });

  test('Store is only made by Store.open; its internals are private', async () => {
    assert.throws(() => new (/** @type {any} */ (Store))(), (e) => { assertLoaderxError(e, 'LOADERX_ARGUMENT'); return true; });
    const store = await Store.open(storeDir(GOOD));
    try {
      assert.deepEqual(Object.keys(store), []);
      assert.ok(!('reader' in store) && !('source' in store));
    } finally {
      await store.close();
    }
  });
});

describe('Store.open takes only what opens a store', () => {
  for (const [what, value] of [['undefined (process.argv[2] missing)', undefined], ['null', null], ['a number', 42], ['a boolean', true], ['a bigint', 1n], ['a symbol', Symbol('s')], ['a function', () => 0]]) {
    test(`${String(what)} is LOADERX_ARGUMENT`, async () => {
      assertLoaderxError(await rejection(Store.open(/** @type {any} */ (value))), 'LOADERX_ARGUMENT');
    });
  }
  test('a file: URL opens the directory it names', async () => {
    const store = await Store.open(new URL(`file://${storeDir(GOOD)}/`));
    try {
      assert.equal(store.length, GOOD.length);
    } finally {
      await store.close();
    }
  });
});

describe('indices: array-likes and bigints', () => {
  let store;
  let exp;
  before(async () => {
    store = await Store.open(storeDir(GOOD));
    exp = expectedOf(GOOD);
  });
  after(() => store.close());
  const rec = (i) => [...expectedRecordBytes(GOOD, exp, i)];

  test('{length: 2, 0: 3, 1: 1} reads records 3 and 1', async () => {
    const got = await store.gatherBytes({ length: 2, 0: 3, 1: 1 });
    assert.deepEqual(got.map((r) => [...r]), [rec(3), rec(1)]);
    assert.deepEqual([...(await store.lengths({ length: 1, 0: 2 }))], [exp.lengths[2]]);
  });

  test('bigints, alone, mixed with numbers, and in a BigInt64Array', async () => {
    assert.deepEqual((await store.gatherBytes([4n, 0, 2n])).map((r) => [...r]), [rec(4), rec(0), rec(2)]);
    assert.deepEqual((await store.gatherBytes(BigInt64Array.of(1n, 6n))).map((r) => [...r]), [rec(1), rec(6)]);
    assert.deepEqual([...(await store.get(5n))], rec(5));
  });

  test('an array-like with a hole or a non-number is LOADERX_INDEX, one with no length LOADERX_ARGUMENT', async () => {
    assertLoaderxError(await rejection(store.gather(/** @type {any} */ ({ length: 2, 0: 1 }))), 'LOADERX_INDEX');
    assertLoaderxError(await rejection(store.gather(/** @type {any} */ ({ length: 1, 0: '1' }))), 'LOADERX_INDEX');
    assertLoaderxError(await rejection(store.gather(/** @type {any} */ ({ 0: 1 }))), 'LOADERX_ARGUMENT');
    assertLoaderxError(await rejection(store.gather(/** @type {any} */ ('01'))), 'LOADERX_ARGUMENT');
  });

  test('bad values name the index as given', async () => {
    for (const bad of [-1, 1.5, NaN, GOOD.length, -1n, BigInt(GOOD.length), 2n ** 64n]) {
      const e = await rejection(store.gather([0, bad]));
      assertLoaderxError(e, 'LOADERX_INDEX');
      assert.ok(e.message.includes(`index ${String(bad)} `), `${e.message} names ${String(bad)}`);
    }
  });
});

describe('for await over store.batches()', () => {
  let store;
  before(async () => { store = await Store.open(storeDir(GOOD)); });
  after(() => store.close());

  test('every record in order, in batches of batchSize (the last one shorter)', async () => {
    const seen = [];
    const sizes = [];
    for await (const batch of store.batches({ batchSize: 7, read: 'bytes' })) {
      sizes.push(batch.length);
      seen.push(...batch.map((r) => Buffer.from(r).toString('hex')));
    }
    const all = await store.gatherBytes(Array.from({ length: store.length }, (_, k) => k));
    assert.deepEqual(seen, all.map((r) => Buffer.from(r).toString('hex')));
    assert.equal(sizes.length, Math.ceil(store.length / 7));
    assert.ok(sizes.slice(0, -1).every((n) => n === 7));
  });

  test('values by default, equal to gather of the same indices; `indices` and `steps`', async () => {
    const indices = [9, 3, 3, 0, 12];
    const got = [];
    for await (const batch of store.batches({ indices, batchSize: 2 })) got.push(batch);
    assert.equal(got.length, 3);
    assert.deepEqual(got.map((b) => [...b]), [await store.gather([9, 3]), await store.gather([3, 0]), await store.gather([12])].map((b) => [...b]));
    assert.deepEqual(got.map((b) => /** @type {any} */ (b).shape[0]), [2, 2, 1]);
    let n = 0;
    for await (const lens of store.batches({ read: 'lengths', batchSize: 5, steps: 2 })) n += lens.length;
    assert.equal(n, 10);
  });

  test('with a sampler: its batches from its step, and it is left after the last one yielded', async () => {
    const sampler = new Sampler(store.length, 4, 'IID', 7);
    const ref = new Sampler(store.length, 4, 'IID', 7);
    try {
      sampler.seek(2);
      let k = 2;
      for await (const lens of store.batches({ sampler, read: 'lengths' })) {
        assert.deepEqual([...lens], [...(await store.lengths(ref.batchAt(k)))]);
        if (++k === 5) break;
      }
      assert.equal(sampler.step, 5, 'the next batch is the one after the last yielded');
    } finally {
      sampler.free();
      ref.free();
    }
  });

  test('bad options reject the first step with LOADERX_ARGUMENT; a failing read ends the loop with its error', async () => {
    const sampler = new Sampler(4, 2, 0);
    for (const bad of [5, { batchSize: 0 }, { read: 'rows' }, { steps: -1 }, { indices: [0], sampler }, { sampler, batchSize: 2 }, { sampler: {} }]) {
      const it = store.batches(/** @type {any} */ (bad));
      assertLoaderxError(await rejection(it.next()), 'LOADERX_ARGUMENT');
    }
    sampler.free();
    const it = store.batches({ indices: [0, 1, store.length] });
    assertLoaderxError(await rejection(it.next()), 'LOADERX_INDEX');
  });
});

describe('a custom fetch never goes to a worker', () => {
  const server = 'http://127.0.0.1:9/store/';
  const myFetch = /** @type {typeof fetch} */ (async () => new Response(null, { status: 404 }));

  test('its descriptor() is LOADERX_ARGUMENT; without a custom fetch it describes the source', () => {
    assert.throws(() => new HttpSource(server, { fetch: myFetch }).descriptor(), (/** @type {any} */ e) => { assertLoaderxError(e, 'LOADERX_ARGUMENT'); return /custom fetch/.test(e.message); });
    assert.deepEqual(new HttpSource(server).descriptor(), { kind: 'http', base: server, headers: {}, cacheBytes: 64 << 20, timeout: 30_000 });
    assert.equal(/** @type {any} */ (new HttpSource(server, { timeout: 500 }).descriptor()).timeout, 500);
    // A signal cannot be sent to a worker either.
    assert.throws(() => new HttpSource(server, { signal: new AbortController().signal }).descriptor(), (/** @type {any} */ e) => /a signal/.test(e.message));
  });

  test('{worker: true} or {threads: true} with it rejects with LOADERX_ARGUMENT, before any worker starts', async () => {
    const restore = fakeWorker(() => assert.fail('no message may reach a worker'));
    try {
      for (const opts of [{ worker: true }, { threads: true }, { worker: true, threads: false }]) {
        const e = await rejection(/** @type {Promise<unknown>} */ (openInWorker(new HttpSource(server, { fetch: myFetch }), opts)));
        assertLoaderxError(e, 'LOADERX_ARGUMENT');
        assert.match(e.message, /custom fetch/);
      }
      assert.equal(restore.posted.length, 0);
    } finally {
      restore();
    }
  });

  test('on a cross-origin-isolated page by default, it (and a source without descriptor) opens on this thread', () => {
    const had = Object.getOwnPropertyDescriptor(globalThis, 'crossOriginIsolated');
    Object.defineProperty(globalThis, 'crossOriginIsolated', { value: true, configurable: true });
    const restore = fakeWorker(() => {});
    try {
      assert.equal(openInWorker(new HttpSource(server, { fetch: myFetch }), {}), null);
      assert.equal(openInWorker({ size: async () => null, read: async () => null }, {}), null);
      assert.notEqual(openInWorker(new MemorySource({}), {}), null, 'a source with a descriptor goes to the worker');
    } finally {
      restore();
      if (had) Object.defineProperty(globalThis, 'crossOriginIsolated', had);
      else delete /** @type {any} */ (globalThis).crossOriginIsolated;
    }
  });

  test('in Node a custom fetch is used for every request', async () => {
    const urls = [];
    const files = readStoreFiles(storeDir(GOOD));
    const fetchFiles = /** @type {typeof fetch} */ (async (url, init) => {
      urls.push(String(url));
      const name = String(url).slice(server.length);
      const body = files[name];
      if (!body) return new Response(null, { status: 404 });
      const [, a, b] = /bytes=(\d+)-(\d+)/.exec(/** @type {any} */ (init).headers.Range) ?? [];
      const start = Number(a);
      const end = Math.min(Number(b), body.length - 1);
      if (start >= body.length) return new Response(null, { status: 416, headers: { 'Content-Range': `bytes */${body.length}` } });
      return new Response(body.subarray(start, end + 1), { status: 206, headers: { 'Content-Range': `bytes ${start}-${end}/${body.length}` } });
    });
    const store = await Store.open(new HttpSource(server, { fetch: fetchFiles }));
    try {
      assert.equal(store.length, GOOD.length);
      await store.gather([0, 1]);
    } finally {
      await store.close();
    }
    assert.ok(urls.length > 3 && urls.every((u) => u.startsWith(server)));
  });

  /** A fetch over the GOOD store's files that logs `url range` and can hold requests back. */
  const loggingFetch = (/** @type {string[]} */ log, /** @type {(url: string) => Promise<void> | null} */ hold = () => null) => {
    const files = readStoreFiles(storeDir(GOOD));
    return /** @type {typeof fetch} */ (async (url, init) => {
      const range = /** @type {any} */ (init).headers.Range;
      log.push(`${String(url).slice(server.length)} ${range}`);
      const body = files[String(url).slice(server.length)];
      if (!body) return new Response(null, { status: 404 });
      const held = hold(String(url));
      const signal = init?.signal;
      if (held) {
        // As a real fetch: an abort rejects a request held back.
        await Promise.race([held, new Promise((_, reject) => signal?.addEventListener('abort', () => reject(signal.reason), { once: true }))]);
      }
      signal?.throwIfAborted();
      const [, a, b] = /bytes=(\d+)-(\d+)/.exec(range) ?? [];
      const start = Number(a);
      const end = Math.min(Number(b), body.length - 1);
      if (start >= body.length) return new Response(null, { status: 416, headers: { 'Content-Range': `bytes */${body.length}` } });
      return new Response(body.subarray(start, end + 1), { status: 206, headers: { 'Content-Range': `bytes ${start}-${end}/${body.length}` } });
    });
  };

  test('concurrent whole-table reads (stats, checksums, identity) request each table range once', async () => {
    const log = [];
    const store = await Store.open(new HttpSource(server, { fetch: loggingFetch(log) }));
    try {
      log.length = 0;
      await Promise.all([store.stats(), store.checksums(), store.maskIdentity()]);
    } finally {
      await store.close();
    }
    const table = log.filter((l) => l.startsWith('meta.zr ') && !l.endsWith('=0-0'));
    assert.ok(table.length >= 1, 'the table was read');
    assert.deepEqual([...new Set(table)], table, `no table range read twice: ${table.join(', ')}`);
  });

  test('HttpSource.interrupt() cuts the requests in flight short; later ones go ahead', async () => {
    let release = () => {};
    const held = new Promise((resolve) => { release = () => resolve(undefined); });
    let holding = false;
    const source = new HttpSource(server, { fetch: loggingFetch([], () => (holding ? held : null)) });
    const store = await Store.open(source);
    try {
      holding = true;
      const cut = store.gather([0, 1]);
      await new Promise((resolve) => setTimeout(resolve, 20));
      source.interrupt();
      await assert.rejects(cut, (/** @type {any} */ e) => e.code === 'LOADERX_IO' && /interrupted/.test(e.message));
      holding = false;
      release();
      const again = /** @type {import('../src/node.js').Shaped} */ (await store.gather([0, 1]));
      assert.equal(again.shape[0], 2);
    } finally {
      await store.close();
    }
  });
});

test('NodeSource is a Source', async () => {
  const src = new NodeSource(storeDir(GOOD));
  assert.equal(await src.size('no-such-file'), null);
  await src.close();
});
