// The low-level loader: a Store over any source, driving the wasm Reader. The entry points
// (node.js, browser.js) only pick the wasm build, how a value becomes a source, and (browser)
// whether the store is hosted in a worker.
//
// A source is `{ label, maxGap, size(name), read(name, start, end), close() }`: `size` resolves to
// a file's size or null when it is missing, and `read` to the bytes of [start, end), fewer when
// the file ends early, or null when it is missing. Planning, the store's checks and decoding
// happen in wasm. This file moves bytes and shapes results, and also: checks what a source gives
// before wasm sees it (sourceSize, sourceBytes, sourceCount, emptyChunks), caches ranges
// (RangeCache), splits verify and stats into batches over the table, and computes
// `stats().usedBytes` from the header itself (usedBytes: the format's table and chunk sizes).
import { loaderxError, ioError, argumentError, isLoaderxError, wasmCall, describe, labelOf } from './errors.js';
import { asBytes } from './bytes.js';
import { toIndexArray, verifyOptions, u64 } from './args.js';
import { profileOf, mergeCodecBytes } from './profile.js';
import { batches } from './batches.js';
import { redactUrl } from './redact.js';

/** Decoded bytes per verify step, at most (a single record may exceed it). */
const VERIFY_BYTES = 64 << 20;
/** Records whose table entries stats() reads at a time (16 MiB of table). */
const STATS_SPAN = 1 << 20;
/** Concurrent reads per call, unless the source sets `readConcurrency`. */
const READ_CONCURRENCY = 16;
/** Staging buffers kept for reuse per store, and the largest kept. */
const SPARE_BUFFERS = 4;
const SPARE_BYTES = 64 << 20;

const MODES = { SEQUENTIAL: 0, IID: 1, CYCLIC: 2 };
/** What `verify` takes: which reads are checked against the store's checksums (checksums.lx). */
const VERIFY_MODES = ['off', 'fetched', 'always'];

/** `Atomics.waitAsync` where the platform has it (Chromium, Node 16+; not in the ES2023 typings). */
const waitAsync = /** @type {any} */ (Atomics).waitAsync;

async function mapLimit(items, limit, fn) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const k = next++;
      out[k] = await fn(items[k], k);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

// What a source gives is checked here before wasm sees it: the wasm glue copies `bytes.length`
// bytes from whatever it is handed, so `{length: -1}` or `{length: 2 ** 31}` would trap there.

const isSource = (s) => s != null && typeof s.size === 'function' && typeof s.read === 'function';

/** A file's size from `source.size`: a non-negative integer, or null when it is missing. */
async function sourceSize(source, name) {
  const size = await source.size(name);
  if (size == null) return null;
  if (!Number.isSafeInteger(size) || size < 0) {
    throw loaderxError('LOADERX_IO', `${labelOf(source)}: size(${name}) gave ${describe(size)}, not a size in bytes (or null)`);
  }
  return size;
}

/** The bytes `source.read` gives for [start, end) of `name`: a Uint8Array of at most
 *  `end - start` bytes (an ArrayBuffer or other view is taken as its bytes), or null when the
 *  file is missing. */
async function sourceBytes(source, name, start, end) {
  const got = await source.read(name, start, end);
  if (got == null) return null;
  const bytes = asBytes(got);
  if (!bytes || !Number.isSafeInteger(bytes.length) || bytes.length !== bytes.byteLength || bytes.length > end - start) {
    const what = bytes ? `${bytes.byteLength} bytes` : describe(got);
    throw loaderxError('LOADERX_IO', `${labelOf(source)}: read(${name}, ${start}, ${end}) gave ${what}, not a Uint8Array of at most ${end - start} bytes (or null)`);
  }
  return bytes;
}

/** What `source.readInto` / `readIntoSync` gives: the bytes copied, at most `end - start`
 *  (null, when the file is missing: 0). */
function sourceCount(source, name, start, end, n) {
  if (n == null) return 0;
  if (!Number.isSafeInteger(n) || n < 0 || n > end - start) {
    throw loaderxError('LOADERX_IO', `${labelOf(source)}: readInto(${name}, ${start}, ${end}) gave ${describe(n)}, not a count of at most ${end - start} bytes (or null)`);
  }
  return n;
}

/**
 * LOADERX_IO for a chunk that a source with `sizeWraps` (Blobs) reports as empty while the header
 * says records were written to it and the store holds records. Node's `fs.openAsBlob` gives a file of exactly 4 GiB, as
 * every preallocated chunk is, size 0; such a Blob reads as empty too, so the store would look
 * corrupt when it is not.
 */
function emptyChunks(source, reader, lens) {
  const { tailChunk, tailOffset, length } = reader.header();
  // A store without records reads no chunk bytes (an exported copy is trimmed to its records).
  if (length === 0) return;
  lens.forEach((size, c) => {
    if (size === 0 && (c < tailChunk || tailOffset > 0)) {
      throw loaderxError('LOADERX_IO', `${labelOf(source)}: ${c}.zr is a Blob of 0 bytes, but the store has written ${c < tailChunk ? 'a whole chunk' : `${tailOffset} bytes`} to it. `
        + "Node's fs.openAsBlob reports a file of exactly 4 GiB (every preallocated chunk file) as 0 bytes and reads nothing from it; "
        + 'in Node open the store directory by its path instead (Store.open(dir))');
    }
  });
}

/** Closes a source, if it has a close(). */
async function closeSource(source) {
  if (typeof source?.close === 'function') await source.close();
}

/**
 * Recently read chunk ranges, least recently used first out. Sources that are slow to read (HTTP)
 * set `cacheBytes`; local files rely on the OS cache. Only complete reads are kept, and a range
 * is reused only for the identical request (the same batch read again, as a viewer does).
 */
class RangeCache {
  delete(key) {
    const v = this.map.get(key);
    if (v) {
      this.map.delete(key);
      this.used -= v.byteLength;
    }
  }
  constructor(capacity) {
    this.capacity = capacity;
    this.used = 0;
    this.map = new Map();
  }
  get(key) {
    const v = this.map.get(key);
    if (v) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }
  put(key, bytes) {
    if (bytes.byteLength > this.capacity / 4 || this.map.has(key)) return;
    for (const [k, v] of this.map) {
      if (this.used + bytes.byteLength <= this.capacity) break;
      this.map.delete(k);
      this.used -= v.byteLength;
    }
    this.map.set(key, bytes);
    this.used += bytes.byteLength;
  }
}

/**
 * Builds the public API over one wasm build (`wasm` is its module namespace).
 * `toSource(value, options)` makes a source of what `Store.open` is given (it may throw);
 * `elsewhere(source, options)`, when given, may open the store elsewhere (a worker) and return
 * that promise, or return null to open it here.
 */
/**
 * @param {any} wasm
 * @param {(value: unknown, options: any) => any} [toSource]
 * @param {((source: any, options: {worker?: unknown, threads?: unknown, verify?: string}) => Promise<any> | null) | null} [elsewhere]
 */
export function makeApi(wasm, toSource = (s) => s, elsewhere = null) {
  /** Whether decodes run on the thread pool while this thread goes on (the threaded build, where
   *  `Atomics.waitAsync` can wait for them without blocking). */
  const POOL_DECODE = wasm.isThreaded() && typeof waitAsync === 'function';
  /** Copies the output a decode left in `plan` (in wasm memory) into `out`, and returns `out`. */
  const copyOutput = (plan, out) => {
    const address = plan.outputAddress();
    out.set(new Uint8Array(wasm.wasmMemory().buffer, address, plan.outputLength));
    return out;
  };
  /** The store's file names and side-file size caps, from core's open protocol (one place). */
  const FILES = wasm.Reader.storeFiles();
  /** @type {string[]} */
  const chunkNames = [];
  /** Chunk file `c`'s name, from core. */
  const chunkFile = (c) => (chunkNames[c] ??= wasm.Reader.chunkName(c));

  /** Reads a side file whole (schema.msgpack, dict.zr, delete.journal) once its size is known. */
  async function sideFile(source, name, size) {
    if (size == null) return undefined;
    const cap = name === FILES.journal ? FILES.maxJournal : FILES.maxSide;
    if (size > cap) throw loaderxError('LOADERX_CORRUPT', `${name} is ${size} bytes, larger than any loaderx ${name}`);
    const bytes = await sourceBytes(source, name, 0, size);
    if (bytes == null || bytes.byteLength !== size) throw loaderxError('LOADERX_IO', `${name} changed while it was read`);
    return bytes;
  }

  /** Opens a store on this thread from a source; `verify` is which reads are checked. */
  async function openHere(source, verify = 'fetched') {
    if (!isSource(source)) {
      throw loaderxError('LOADERX_ARGUMENT', `cannot open a store from ${describe(source)}: a source needs size(name) and read(name, start, end)`);
    }
    try {
      // Core's open protocol, in two rounds of concurrent requests (this matters over HTTP): the
      // sizes and the header, then the schema, the dictionary, the delete journal and the chunk
      // sizes. A journal (a native writer killed mid-delete) is applied in memory by the wasm
      // reader: the store reads as the finished deletion; a damaged one is LOADERX_CORRUPT.
      const [metaSize, head, schemaSize, dictSize, journalSize, sumsSize] = await Promise.all([
        sourceSize(source, FILES.meta), sourceBytes(source, FILES.meta, 0, 16), sourceSize(source, FILES.schema),
        sourceSize(source, FILES.dict), sourceSize(source, FILES.journal), sourceSize(source, FILES.checksums),
      ]);
      if (metaSize == null) throw loaderxError('LOADERX_NOT_FOUND', `no loaderx store at ${labelOf(source)}: ${FILES.meta} is missing`);
      const reader = new wasm.Reader(head ?? new Uint8Array(0), metaSize);
      try {
        const chunks = Array.from({ length: reader.tailChunk + 1 }, (_, c) => chunkFile(c));
        const [schema, dict, journal, lens, sums] = await Promise.all([
          sideFile(source, FILES.schema, schemaSize),
          sideFile(source, FILES.dict, dictSize),
          sideFile(source, FILES.journal, journalSize),
          mapLimit(chunks, READ_CONCURRENCY, (n) => sourceSize(source, n)),
          // checksums.lx: its header now, its slots as records are read.
          sumsSize == null ? null : sourceBytes(source, FILES.checksums, 0, Math.min(128, sumsSize)),
        ]);
        if (sumsSize != null) reader.setSidecar(sums ?? new Uint8Array(0), sumsSize);
        reader.setVerify(verify, source.fetched === true);
        if (journal) reader.setJournal(journal);
        if (schema) reader.setSchema(schema);
        if (dict) reader.setDict(dict);
        if (source.sizeWraps) emptyChunks(source, reader, lens);
        reader.setChunkLens(Float64Array.from(lens, (x) => (x == null ? -1 : x)));
        // The files that are there, by name (a store without dict.zr has none to count).
        /** @type {Record<string, number>} */
        const fileBytes = { [FILES.meta]: metaSize };
        if (schemaSize != null) fileBytes[FILES.schema] = schemaSize;
        if (dictSize != null) fileBytes[FILES.dict] = dictSize;
        if (journalSize != null) fileBytes[FILES.journal] = journalSize;
        if (sumsSize != null) fileBytes[FILES.checksums] = sumsSize;
        chunks.forEach((n, k) => { if (lens[k] != null) fileBytes[n] = lens[k]; });
        return new Store(KEY, source, reader, { schema: reader.schema(), fileBytes });
      } catch (e) {
        reader.free();
        throw e;
      }
    } catch (e) {
      // The open error is the one to report: a close() that fails as well does not replace it.
      try { await closeSource(source); } catch { /* already failing */ }
      throw ioError(e, `opening ${labelOf(source)}`);
    }
  }

  class Store {
    #source;
    #reader;
    #info;
    #closed = false;
    #cache;
    /** Table and checksum ranges being read, by `file:start:end` (see #loadRanges). @type {Map<string, Promise<void>>} */
    #loading = new Map();
    /** Gathers in progress (planned or not yet), so #run knows whether another call waits. */
    #active = 0;
    /** Staging buffers free for reuse. */
    #spare = [];

    /** Use `Store.open`. */
    constructor(key, source, reader, info) {
      if (key !== KEY) throw loaderxError('LOADERX_ARGUMENT', 'use Store.open to open a store');
      this.#source = source;
      this.#reader = reader;
      this.#info = info;
      this.#cache = new RangeCache(source.cacheBytes ?? 0);
    }

    /**
     * Opens a store from what the entry point takes (a path, URL, files, `{name: bytes}` or a
     * source). Always a promise: a value that makes no source rejects (LOADERX_ARGUMENT).
     */
    static async open(source, options) {
      const opts = options != null && typeof options === 'object' ? options : {};
      let src;
      try {
        src = toSource(source, opts);
      } catch (e) {
        throw argumentError(e, 'cannot open a store from this value');
      }
      const verify = opts.verify ?? 'fetched';
      if (!VERIFY_MODES.includes(verify)) {
        throw loaderxError('LOADERX_ARGUMENT', `verify must be 'off', 'fetched' or 'always', not ${describe(verify)}`);
      }
      return elsewhere?.(src, { ...opts, verify }) || openHere(src, verify);
    }

    /** Live records. */
    get length() {
      this.#check();
      return this.#reader.length;
    }

    /** `{kind, dtype, itemShape, codec, arrayType, extraDim, itemBytes}` (and `media` for a store of
     * encoded images), or null without schema.msgpack. */
    get schema() {
      return this.#info.schema;
    }

    /** Header fields `{version, tailChunk, tailOffset, length}`. */
    get header() {
      this.#check();
      return wasmCall(() => this.#reader.header());
    }

    /** Whether the store has a zstd dictionary. */
    get hasDict() {
      this.#check();
      return this.#reader.hasDict;
    }

    #check() {
      if (this.#closed) throw loaderxError('LOADERX_CLOSED', 'the store is closed');
    }

    async #guard(what, fn) {
      this.#check();
      try {
        return await fn();
      } catch (e) {
        // A source closed under a call in flight fails its reads: that call was cut by close().
        if (this.#closed) throw loaderxError('LOADERX_CLOSED', 'the store is closed');
        throw ioError(e, what);
      }
    }

    /** Reads ranges `[start, end, …]` of file `name` (concurrently) and hands each to `add`. A
     *  range another call is already loading is awaited, not read again (the overview's stats,
     *  checksums and identity each walk the whole table at once). */
    async #loadRanges(name, ranges, add) {
      const pairs = [];
      for (let k = 0; k < ranges.length; k += 2) pairs.push([ranges[k], ranges[k + 1]]);
      await mapLimit(pairs, READ_CONCURRENCY, ([start, end]) => {
        const key = `${name}:${start}:${end}`;
        let loading = this.#loading.get(key);
        if (!loading) {
          loading = (async () => {
            const bytes = (await sourceBytes(this.#source, name, start, end)) ?? new Uint8Array(0);
            this.#check();
            add(start, bytes);
          })().finally(() => this.#loading.delete(key));
          this.#loading.set(key, loading);
        }
        return loading;
      });
    }

    #loadTable(ranges) {
      return this.#loadRanges(FILES.meta, ranges, (start, bytes) => this.#reader.addTable(start, bytes));
    }

    /** Loads the table pages `missing()` names until none are missing, then returns `then()`
     *  right after, so the caller can plan with no await in between. `alongside`, a load of
     *  other bytes the plan needs, goes in the same round of requests.
     *  @template T
     *  @param {() => Float64Array | number[]} missing
     *  @param {() => T} then
     *  @param {Promise<void> | null} [alongside]
     *  @returns {Promise<T>} */
    async #withTable(missing, then, alongside = null) {
      for (let attempt = 0; ; attempt++) {
        this.#check();
        const ranges = missing();
        if ((ranges.length === 0 && alongside == null) || attempt > 3) return then();
        await Promise.all([ranges.length ? this.#loadTable(ranges) : null, alongside]);
        alongside = null;
      }
    }

    /** Loads ranges of checksums.lx (`[start, end, …]`). */
    #loadSlots(ranges) {
      return this.#loadRanges(FILES.checksums, ranges, (start, bytes) => this.#reader.addSlots(start, bytes));
    }

    /** `#withTable` for the entries of `idx` (checking the indices), with the checksums of
     *  those records where reads are checked (or `allSlots`). */
    #withEntries(idx, then, allSlots = false) {
      const slots = this.#reader.slotRanges(idx, allSlots);
      return this.#withTable(() => this.#reader.tableRanges(idx), then, slots.length ? this.#loadSlots(slots) : null);
    }

    /** Loads the whole live table (in spans, as stats does) and the entry past it; returns that
     *  entry's bytes, or undefined where meta.zr ends first. */
    async #wholeTable() {
      const reader = this.#reader;
      for (let start = 0; start < reader.length; start += STATS_SPAN) {
        const end = Math.min(reader.length, start + STATS_SPAN);
        await this.#withTable(() => reader.tableRangesSpan(start, end), () => null);
      }
      const at = reader.staleRange();
      if (!at) return undefined;
      const bytes = await sourceBytes(this.#source, FILES.meta, at[0], at[1]);
      return bytes?.byteLength === 16 ? bytes : undefined;
    }

    /** Whether a checksum mismatch is damage (core's rule: the table is as the checksums' writer
     *  left it). Otherwise later reads are unchecked. A table too large to hold is not damage. */
    async #damage() {
      const stale = await this.#wholeTable();
      return this.#reader.standing(stale);
    }

    /** A checksum mismatch from wasm, its message naming the store (URL secrets redacted). */
    #checksumError(e) {
      const err = loaderxError('LOADERX_CORRUPT', `${labelOf(this.#source)}: ${e.message}`, { index: e.index, file: e.file, offset: e.offset });
      return Object.assign(err, { checksum: true });
    }

    /** Drops the cached copies of a plan's ranges, so they are read from the source again. */
    #forget(plan) {
      const r = plan.ranges();
      for (let k = 0; k < r.length; k += 3) this.#cache.delete(`${r[k]}:${r[k + 1]}:${r[k + 2]}`);
    }

    /**
     * Reads a plan's ranges, each at its planned position in one buffer, and decodes them.
     * Sources with `readIntoSync` (built-in only: memory, and local files for a call of at most
     * `syncLimit` bytes while no other call is in flight) are read on this thread straight into
     * the plan's input buffer in wasm memory, which saves a staging buffer and a copy. Otherwise
     * the reads go out together (`readConcurrency` at a time), so that they proceed while this
     * thread decodes another call's batch: sources with `readInto` read straight into a staging
     * buffer, others (HTTP, with its range cache) return a piece that is copied in.
     */
    async #run(plan, into) {
      const r = plan.ranges();
      const jobs = [];
      let at = 0;
      for (let k = 0; k < r.length; k += 3) {
        jobs.push([r[k], r[k + 1], r[k + 2], at]);
        at += r[k + 2] - r[k + 1];
      }
      const source = this.#source;
      if (source.readIntoSync && (source.syncLimit == null || (at <= source.syncLimit && this.#active <= 1))) {
        const memory = wasm.wasmMemory();
        const address = plan.inputAddress();
        // The view is taken after the allocation, and nothing calls into wasm between taking it
        // and decoding, so memory cannot grow (which would detach it) in between.
        const data = new Uint8Array(memory.buffer, address, at);
        const got = new Float64Array(jobs.length);
        jobs.forEach(([chunk, start, end, offset], k) => {
          const name = chunkFile(chunk);
          got[k] = sourceCount(source, name, start, end, source.readIntoSync(name, start, end, data, offset));
        });
        return this.#decode(plan, got, null, into);
      }
      const data = this.#staging(at);
      // Fetched ranges enter the cache once their records decoded (and matched their checksums).
      const fresh = [];
      const got = await mapLimit(jobs, source.readConcurrency ?? READ_CONCURRENCY, async ([chunk, start, end, offset]) => {
        const name = chunkFile(chunk);
        if (source.readInto) return sourceCount(source, name, start, end, await source.readInto(name, start, end, data, offset));
        const key = `${chunk}:${start}:${end}`;
        let bytes = this.#cache.get(key);
        if (!bytes) {
          bytes = (await sourceBytes(source, name, start, end)) ?? new Uint8Array(0);
          if (bytes.byteLength === end - start) fresh.push([key, bytes]);
        }
        data.set(bytes, offset);
        return bytes.byteLength;
      });
      this.#check();
      try {
        const out = await this.#decode(plan, Float64Array.from(got), data, into);
        for (const [key, bytes] of fresh) this.#cache.put(key, bytes);
        return out;
      } finally {
        this.#unstage(data);
      }
    }

    /**
     * Decodes a plan from `data`, or from its input buffer when `data` is null, into `into` when
     * it is exactly the output's size (a buffer allocated ahead, see worker-client.js), else into
     * a new buffer. The threaded build decodes on its pool and returns to the event loop
     * meanwhile (so a worker takes the next call's message and reads while the pool decodes),
     * waking on the job's flag.
     */
    async #decode(plan, got, data, into) {
      const reader = this.#reader;
      let n = 0;
      for (const len of plan.outLengths()) n += len;
      const fits = into != null && into.byteOffset === 0 && into.buffer.byteLength === n;
      if (!POOL_DECODE) {
        if (!fits) return data ? reader.decode(plan, data, got) : reader.decodeInput(plan, got);
        if (data) plan.setInput(data);
        reader.decodeInputKept(plan, got);
        return copyOutput(plan, into);
      }
      if (data) plan.setInput(data);
      const job = reader.decodeStart(plan, got);
      try {
        // Without a buffer allocated ahead, one is allocated, and its pages touched, while the
        // pool decodes: fresh memory costs page faults (about 1 ms per MiB in Chromium).
        const out = fits ? into : freshBytes(n);
        const flag = job.flagAddress();
        const wait = waitAsync(new Int32Array(wasm.wasmMemory().buffer, flag, 1), 0, 0);
        if (wait.async) await wait.value;
        this.#check();
        reader.decodeFinish(plan, job);
        return copyOutput(plan, out);
      } finally {
        job.free();
      }
    }

    /** A staging buffer of `n` bytes, reused across calls (a fresh one costs page faults). */
    #staging(n) {
      const k = this.#spare.findIndex((b) => b.byteLength >= n);
      if (k < 0) return new Uint8Array(n);
      return this.#spare.splice(k, 1)[0].subarray(0, n);
    }

    /** Returns a staging buffer once its bytes are in wasm memory (kept: at most SPARE_BUFFERS,
     *  each at most SPARE_BYTES). */
    #unstage(data) {
      const whole = new Uint8Array(data.buffer);
      if (whole.byteLength <= SPARE_BYTES && this.#spare.length < SPARE_BUFFERS) this.#spare.push(whole);
    }

    async #gather(indices, typed, into) {
      const idx = toIndexArray(indices);
      this.#active++;
      try {
        const planOf = () => this.#reader.plan(idx, (this.#source.maxGap ?? 0), false, typed);
        let plan = await this.#withEntries(idx, planOf);
        try {
          let out;
          try {
            out = await this.#run(plan, into);
          } catch (e) {
            if (!e?.checksum) throw e;
            // A mismatch: fetched bytes are read once more (a transfer may have damaged them);
            // then it is damage only if the table is as the checksums' writer left it.
            let failed = e;
            if (this.#source.fetched === true) {
              this.#forget(plan);
              try {
                out = await this.#run(plan, into);
                failed = null;
              } catch (again) {
                if (!again?.checksum) throw again;
                failed = again;
              }
            }
            if (failed) {
              if (await this.#damage()) throw this.#checksumError(failed);
              plan.free();
              plan = await this.#withEntries(idx, planOf);
              out = await this.#run(plan, into);
            }
          }
          return { out, lens: plan.outLengths() };
        } finally {
          plan.free();
        }
      } finally {
        this.#active--;
      }
    }

    /** Logical lengths in bytes (Float64Array). */
    async lengths(indices) {
      return this.#guard('reading lengths', async () => {
        const idx = toIndexArray(indices);
        return this.#withEntries(idx, () => this.#reader.lengths(idx));
      });
    }

    /**
     * Records as typed arrays. Dense stores give one typed array with `shape` `[n, ...itemShape]`;
     * ragged stores (and stores without a schema) give an array of typed arrays, each with `shape`.
     */
    async gather(indices) {
      return this[GATHER_INTO]('gather', indices, undefined);
    }

    /**
     * `gather` or `gatherBytes` (by `method`), decoding into `into` when it is a Uint8Array of
     * exactly the output's size (the worker host hands in buffers allocated ahead); else as they do.
     */
    async [GATHER_INTO](method, indices, into) {
      if (method === 'gatherBytes') {
        return this.#guard('gather', async () => {
          const { out, lens } = await this.#gather(indices, false, into);
          return split(out, lens, Uint8Array, (n) => [n]);
        });
      }
      return this.#guard('gather', async () => {
        const { out, lens } = await this.#gather(indices, true, into);
        const s = this.#info.schema;
        if (!s) return split(out, lens, Uint8Array, (n) => [n]);
        const C = globalThis[s.arrayType];
        const tail = s.extraDim == null ? s.itemShape : [...s.itemShape, s.extraDim];
        if (s.kind === 'dense') {
          const arr = new C(out.buffer, out.byteOffset, out.byteLength / C.BYTES_PER_ELEMENT);
          arr.shape = [lens.length, ...tail];
          return arr;
        }
        const perRow = tail.reduce((a, b) => a * b, 1);
        return split(out, lens, C, (n) => [perRow ? n / C.BYTES_PER_ELEMENT / perRow : 0, ...tail]);
      });
    }

    /** One record: like `gather([i])`, unwrapped (a dense record has shape `itemShape`). */
    async get(i) {
      const r = await this.gather([i]);
      if (Array.isArray(r)) return r[0];
      r.shape = r.shape.slice(1);
      return r;
    }

    /** Records as their decoded bytes (Uint8Array each), before any dtype conversion. */
    async gatherBytes(indices) {
      return this[GATHER_INTO]('gatherBytes', indices, undefined);
    }

    /** Gathered batches in order, for `for await` (see batches.js). */
    batches(options) {
      return batches(this, options);
    }

    /**
     * Decodes every record and checks lengths and bounds. Resolves to
     * `{ok, checked, length, bad: [{index, code, message}], unlisted}`: a table that ends in blank
     * (never written) entries is one entry of `bad`, its first record, and the rest of the run
     * is counted in `unlisted` (core's rule, as every front end reports it). `onProgress(done, total)` is called
     * after each batch (at most `batchSize` records and about VERIFY_BYTES decoded bytes), the
     * last time with `(total, total)`. Bad options are LOADERX_ARGUMENT, checked first.
     */
    async verify(options) {
      const { onProgress, batchSize } = verifyOptions(options);
      return this.#guard('verify', async () => {
        const reader = this.#reader;
        const total = reader.length;
        const bad = [];
        const mismatched = [];
        const counts = [0, 0, 0];
        const blankFrom = await this.#blankTail(total);
        for (let start = 0, end = 0; start < blankFrom; start = end) {
          end = Math.min(blankFrom, start + batchSize);
          let idx = new Float64Array(end - start).map((_, k) => start + k);
          let plan;
          try {
            plan = await this.#withEntries(idx, () => {
              // Keep the decoded batch well under the wasm output cap: big records (up to
              // 1 MiB each, twice that as float32 from float16) get fewer per batch.
              const lens = reader.lengths(idx);
              let n = 1;
              for (let sum = lens[0]; n < lens.length && sum + lens[n] <= VERIFY_BYTES; n++) sum += lens[n];
              if (n < idx.length) {
                idx = idx.subarray(0, n);
                end = start + n;
              }
              return reader.plan(idx, (this.#source.maxGap ?? 0), true, true);
            }, true);
          } catch (e) {
            if (!isLoaderxError(e) || e.code !== 'LOADERX_CORRUPT') throw e;
            // The table itself cannot be read: every record in the batch is lost.
            for (let i = start; i < end; i++) bad.push({ index: i, code: e.code, message: e.message });
            onProgress?.(end, total);
            continue;
          }
          try {
            await this.#run(plan);
            for (const e of plan.bad()) (e.checksum ? mismatched : bad).push({ index: e.index, code: e.code, message: e.message });
            plan.checksumCounts().forEach((n, k) => { counts[k] += n; });
          } finally {
            plan.free();
          }
          onProgress?.(end, total);
        }
        let unlisted = 0;
        if (blankFrom < total) {
          // One problem for the whole blank run (core's rule), the rest counted, not listed.
          const message = wasm.blankTailProblem(`${redactUrl(labelOf(this.#source))}/${FILES.meta}`, blankFrom, total);
          bad.push({ index: blankFrom, code: 'LOADERX_CORRUPT', message });
          unlisted = total - blankFrom - 1;
          onProgress?.(total, total);
        }
        // An empty store has no batch; report it done all the same.
        if (total === 0) onProgress?.(0, 0);
        // Checksum mismatches are damage only where the table is as the checksums' writer left
        // it; otherwise those records are unverified (another writer changed the store).
        let unverified = 0;
        if (mismatched.length) {
          if (await this.#damage()) bad.push(...mismatched);
          else unverified = mismatched.length;
        }
        bad.sort((a, b) => a.index - b.index);
        const checksums = {
          verified: counts[0], mismatched: unverified ? 0 : counts[1], uncovered: counts[2], unverified,
        };
        return { ok: bad.length === 0, checked: total, length: total, bad, unlisted, checksums };
      });
    }

    /**
     * Where the run of blank (never written) table entries that ends the table starts: `total`
     * when the last entry is written. Core's backward scan (`loaderx_core::verify`): a header
     * whose record count is damaged can claim 2^24 records nobody wrote.
     */
    async #blankTail(total) {
      const reader = this.#reader;
      let from = total;
      for (let w = wasm.blankScanWindow(from); w; w = wasm.blankScanWindow(from)) {
        const [lo, hi] = w;
        let end;
        try {
          end = await this.#withTable(() => reader.tableRangesSpan(lo, hi), () => reader.writtenEnd(lo, hi));
        } catch (e) {
          // The table cannot be read there: the record loop reports those records.
          if (!isLoaderxError(e) || e.code !== 'LOADERX_CORRUPT') throw e;
          return from;
        }
        if (end >= 0) return end;
        from = lo;
      }
      return 0;
    }

    /**
     * Storage usage: `{records, liveBytes, logicalBytes, chunkBytes, reclaimable,
     * compressionRatio, usedBytes, usedFileBytes, fileBytes, apparentBytes, hasDict}`. Reads the
     * live table. `usedFileBytes` is what each file holds (core's rule: the live table of
     * meta.zr, the written part of each chunk, all of the other files; never more than the
     * file), `usedBytes` their sum; `apparentBytes` is the sum of the files' sizes, which counts
     * the unwritten (sparse) space preallocated chunks and meta.zr reserve.
     */
    async stats() {
      return this.#guard('stats', async () => {
        const reader = this.#reader;
        // The table in spans of STATS_SPAN records, so a store of any length fits the cache.
        let live = 0;
        let logical = 0;
        for (let start = 0; start < reader.length; start += STATS_SPAN) {
          const end = Math.min(reader.length, start + STATS_SPAN);
          const [l, g] = await this.#withTable(() => reader.tableRangesSpan(start, end), () => reader.entrySums(start, end));
          live += l;
          logical += g;
        }
        const s = reader.stats(live, logical);
        const fileBytes = { ...this.#info.fileBytes };
        const apparentBytes = Object.values(fileBytes).reduce((a, b) => a + b, 0);
        // What each file holds, by core's rule (its apparent size counts preallocated space).
        /** @type {Record<string, number>} */
        const usedFileBytes = {};
        for (const [name, size] of Object.entries(fileBytes)) usedFileBytes[name] = reader.fileUsed(name, size);
        return {
          ...s,
          compressionRatio: s.liveBytes ? s.logicalBytes / s.liveBytes : 1,
          usedBytes: Object.values(usedFileBytes).reduce((a, b) => a + b, 0),
          usedFileBytes,
          fileBytes,
          apparentBytes,
          hasDict: reader.hasDict,
        };
      });
    }

    /** Whole-store statistics (see profile.js and common.d.ts `Profile`). */
    async profile(options) {
      return profileOf(wasm, this, options);
    }

    /** Records, stored and decoded bytes per codec, from the table (no record is read). */
    async codecBytes() {
      return this.#guard('codecBytes', async () => {
        const reader = this.#reader;
        const parts = [];
        for (let start = 0; start < reader.length; start += STATS_SPAN) {
          const end = Math.min(reader.length, start + STATS_SPAN);
          parts.push(JSON.parse(await this.#withTable(() => reader.tableRangesSpan(start, end), () => reader.codecSums(start, end))));
        }
        return mergeCodecBytes(parts);
      });
    }

    /**
     * The identity exclusion masks are made for (`sha256:<hex>`; core's `mask::Identity`): the
     * schema, the table, and the content digest, or without checksums the bytes of a few records
     * spread over the store. Equal to the native engine's (`loaderx.mask.identity`).
     */
    async maskIdentity() {
      return this.#guard('maskIdentity', async () => {
        const reader = this.#reader;
        const id = new wasm.MaskIdentity(reader);
        try {
          for (let start = 0; start < reader.length; start += STATS_SPAN) {
            const end = Math.min(reader.length, start + STATS_SPAN);
            await this.#withTable(() => reader.tableRangesSpan(start, end), () => wasmCall(() => id.table(reader, start, end)));
          }
          const digest = await this.digest();
          if (digest) id.digest(digest);
          else {
            const picks = wasm.maskSamples(reader.length);
            const { out, lens } = await this.#gather(picks, false);
            let at = 0;
            for (const n of lens) {
              id.record(out.subarray(at, at + n));
              at += n;
            }
          }
          return identityText(id.finish());
        } finally {
          id.free();
        }
      });
    }

    /** Which reads are checked against the store's checksums: 'off', 'fetched' or 'always'. */
    get verifyMode() {
      this.#check();
      return this.#reader.verifyMode;
    }

    /** Changes which reads are checked ('off', 'fetched' or 'always'; LOADERX_ARGUMENT else). */
    setVerify(mode) {
      this.#check();
      if (!VERIFY_MODES.includes(mode)) {
        throw loaderxError('LOADERX_ARGUMENT', `verify must be 'off', 'fetched' or 'always', not ${describe(mode)}`);
      }
      this.#reader.setVerify(mode, this.#source.fetched === true);
    }

    /**
     * The digest of the store's content (`sha256:…`), from its schema, dictionary, table and
     * checksums (checksums.lx), never its records: the same for stores that read back the same,
     * wherever their records lie. Null unless checksums cover every record and the table is as
     * their writer left it. Reads the whole table and checksums.
     */
    async digest() {
      return (await this.checksums()).digest;
    }

    /**
     * What the store's checksums cover, from its table and checksums.lx (no record is read):
     * `{present, covered, total, digest}`, `covered` being the records a checksum covers of
     * `total`, `digest` as `digest()` gives it.
     */
    async checksums() {
      return this.#guard('reading the checksums', async () => {
        const reader = this.#reader;
        const total = reader.length;
        if (!reader.hasChecksums) return { present: false, covered: 0, total, digest: null };
        const stale = await this.#wholeTable();
        for (let start = 0; start < total; start += STATS_SPAN) {
          const end = Math.min(total, start + STATS_SPAN);
          const ranges = reader.slotRangesSpan(start, end);
          if (ranges.length) await this.#loadSlots(ranges);
        }
        return { present: true, covered: reader.coveredCount(), total, digest: reader.contentDigest(stale) ?? null };
      });
    }

    /** `Store(<where it was opened from, URL secrets redacted>, <n> records)`. */
    toString() {
      return `Store(${redactUrl(labelOf(this.#source))}, ${this.#closed ? 'closed' : `${this.#reader.length} records`})`;
    }
    [Symbol.for('nodejs.util.inspect.custom')]() {
      return this.toString();
    }

    /** Releases the files and the wasm memory. Later calls reject with LOADERX_CLOSED. A source
     *  whose close() fails leaves the store closed all the same, and rejects (LOADERX_IO). */
    async close() {
      if (this.#closed) return;
      this.#closed = true;
      this.#reader.free();
      try {
        await closeSource(this.#source);
      } catch (e) {
        throw ioError(e, `closing ${labelOf(this.#source)}`);
      }
    }
  }

  /** Endless batches of indices; the same arguments give the same batches in every front end. */
  class Sampler {
    static Mode = MODES;
    #inner;

    /**
     * @param {number|bigint} length index space 0..length-1
     * @param {number|bigint} batchSize indices per batch
     * @param {number|string} mode 0/'SEQUENTIAL', 1/'IID', 2/'CYCLIC'
     * @param {number|bigint} [seed=42]
     */
    constructor(length, batchSize, mode, seed = 42) {
      const m = typeof mode === 'string' ? MODES[mode.toUpperCase()] : mode;
      if (!Number.isInteger(m) || m < 0 || m > 255) {
        throw loaderxError('LOADERX_ARGUMENT', `unknown sampler mode ${describe(mode)}: expected 0 (SEQUENTIAL), 1 (IID) or 2 (CYCLIC)`);
      }
      const args = [u64(length, 'length'), u64(batchSize, 'batchSize'), m, u64(seed, 'seed')];
      this.#inner = wasmCall(() => new wasm.Sampler(...args));
    }

    /** The wasm sampler, or LOADERX_CLOSED once freed. */
    #live() {
      if (!this.#inner) throw loaderxError('LOADERX_CLOSED', 'the sampler is freed');
      return this.#inner;
    }

    /** The batch at the current step (Float64Array); advances the step. */
    next() {
      return wasmCall(() => this.#live().next());
    }

    /** Batch `step` without moving the cursor. */
    batchAt(step) {
      return wasmCall(() => this.#live().batchAt(u64(step, 'step')));
    }

    /** Makes the next `next()` return batch `step`. */
    seek(step) {
      wasmCall(() => this.#live().seek(u64(step, 'step')));
    }

    get step() {
      return Number(this.#live().step);
    }

    get batchLength() {
      return this.#live().batchLength;
    }

    /** Releases the wasm memory; later calls throw LOADERX_CLOSED (freeing again does nothing). */
    free() {
      const inner = this.#inner;
      this.#inner = null;
      inner?.free();
    }
  }

  /**
   * Packed rows of token documents, planned by loaderx-core exactly as the Python loader's
   * `DataLoader.packed` plans them: the same lengths and options give the same segments.
   */
  class Packer {
    #inner;

    /**
     * @param {ArrayLike<number>} lengths tokens of each document
     * @param {{seqLen: number, packing?: 'concat'|'best_fit', bins?: number, mode?: number|string, seed?: number|bigint}} options
     */
    constructor(lengths, options) {
      const { seqLen, packing = 'concat', bins = 128, mode = 'CYCLIC', seed = 42 } = options ?? {};
      const m = typeof mode === 'string' ? MODES[mode.toUpperCase()] : mode;
      if (!Number.isInteger(m) || m < 0 || m > 2) {
        throw loaderxError('LOADERX_ARGUMENT', `unknown sampler mode ${describe(mode)}: expected 0 (SEQUENTIAL), 1 (IID) or 2 (CYCLIC)`);
      }
      /** @type {[string, unknown][]} */
      const counts = [['seqLen', seqLen], ['bins', bins]];
      for (const [name, v] of counts) {
        if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v >= 2 ** 31) {
          throw loaderxError('LOADERX_ARGUMENT', `${name} must be a positive integer below 2^31, got ${describe(v)}`);
        }
      }
      const lens = Uint32Array.from(lengths, (n) => {
        if (!Number.isInteger(n) || n < 0 || n >= 2 ** 32) throw loaderxError('LOADERX_ARGUMENT', `document lengths must be integers in 0..2^32, got ${describe(n)}`);
        return n;
      });
      this.#inner = wasmCall(() => new wasm.Packer(lens, seqLen, packing, bins, m, u64(seed, 'seed')));
    }

    #live() {
      if (!this.#inner) throw loaderxError('LOADERX_CLOSED', 'the packer is freed');
      return this.#inner;
    }

    /**
     * The segments of rows `first .. first + rows`, in row then column order: tokens
     * `offset .. offset + len` of document `doc` at columns `col .. col + len` of `row`.
     * @returns {{row: number, col: number, len: number, doc: number, offset: number}[]}
     */
    segments(first, rows) {
      const flat = wasmCall(() => this.#live().segments(u64(first, 'first'), u64(rows, 'rows')));
      const out = [];
      for (let k = 0; k < flat.length; k += 5) {
        out.push({ row: flat[k], col: flat[k + 1], len: flat[k + 2], doc: flat[k + 3], offset: flat[k + 4] });
      }
      return out;
    }

    /** Rows of epoch `epoch` (best_fit), or undefined (concat). */
    epochRows(epoch) {
      return wasmCall(() => this.#live().epochRows(u64(epoch, 'epoch')));
    }

    get tokens() {
      return this.#live().tokens;
    }

    get documents() {
      return this.#live().documents;
    }

    /** Releases the wasm memory; later calls throw LOADERX_CLOSED (freeing again does nothing). */
    free() {
      const inner = this.#inner;
      this.#inner = null;
      inner?.free();
    }
  }

  /** Bytes as the wasm functions take them (a Uint8Array or anything viewed as one). */
  const imageBytes = (bytes) => {
    if (bytes instanceof Uint8Array) return bytes;
    if (ArrayBuffer.isView(bytes)) return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (bytes instanceof ArrayBuffer) return new Uint8Array(bytes);
    throw argumentError(`an encoded image must be a Uint8Array or ArrayBuffer, got ${describe(bytes)}`);
  };
  const pixelLimit = (options) => {
    const max = options?.maxPixels ?? wasm.defaultMaxPixels();
    if (typeof max !== 'number' || !(max > 0)) throw argumentError(`maxPixels must be a positive number, got ${describe(max)}`);
    return max;
  };
  /** `{media, width, height, orientation}` of an encoded image (JPEG, PNG, WebP), from its header. */
  /**
   * An exclusion mask (core's `mask`): which records of one store training skips, with that
   * store's identity. `new Mask(bytes)` reads a mask file (a damaged one is LOADERX_CORRUPT);
   * `await Mask.build(store, indices)` makes one; `await mask.check(store)` refuses
   * (LOADERX_ARGUMENT) a store it was not made for.
   */
  class Mask {
    #inner;

    /** @param {ArrayBufferView | ArrayBuffer} bytes a mask file */
    constructor(bytes) {
      this.#inner = wasmCall(() => new wasm.MaskFile(asBytes(bytes)));
    }

    /** @param {{length: number, maskIdentity: () => Promise<string>}} store @param {Iterable<number>} indices */
    static async build(store, indices) {
      const id = identityBytes(await store.maskIdentity());
      const inner = wasmCall(() => wasm.MaskFile.build(store.length, id, Float64Array.from(indices)));
      try {
        return new Mask(inner.toBytes());
      } finally {
        inner.free();
      }
    }

    /** @param {{length: number, maskIdentity: () => Promise<string>}} store */
    async check(store) {
      const id = identityBytes(await store.maskIdentity());
      wasmCall(() => this.#inner.check(store.length, id));
    }

    /** The records at positions `indices` of the kept records. */
    select(indices) { return wasmCall(() => this.#inner.select(toIndexArray(indices))); }
    isExcluded(index) { return this.#inner.isExcluded(index); }
    toBytes() { return this.#inner.toBytes(); }
    get length() { return this.#inner.length; }
    get excluded() { return this.#inner.excluded; }
    get kept() { return this.#inner.kept; }
    get identity() { return this.#inner.identity; }
    free() { this.#inner.free(); }
  }

  const imageHeader = (bytes) => wasmCall(() => wasm.imageHeader(imageBytes(bytes)));
  /** Decodes every pixel: `{width, height, rgb}` (rows of RGB, display orientation). */
  const decodeImage = (bytes, options) => wasmCall(() => wasm.decodeImage(imageBytes(bytes), pixelLimit(options)));
  /** Why an encoded image does not decode, or undefined when it does. */
  const imageProblem = (bytes, options) => wasm.imageProblem(imageBytes(bytes), pixelLimit(options)) ?? undefined;

  return { Store, Sampler, Packer, Mask, version: wasm.version(), threaded: wasm.isThreaded(), imageHeader, decodeImage, imageProblem };
}


/** Only `Store.open` constructs stores. */
const KEY = Symbol('loaderx store');

/** The Store method the worker calls to gather into a buffer allocated ahead. */
export const GATHER_INTO = Symbol('loaderx gather into');

/** `sha256:<hex>` of a 32-byte identity. @param {Uint8Array} id */
export const identityText = (id) => `sha256:${Array.from(id, (b) => b.toString(16).padStart(2, '0')).join('')}`;

/** The 32 bytes of a `sha256:<hex>` identity. @param {string} text */
export function identityBytes(text) {
  const m = /^sha256:([0-9a-f]{64})$/.exec(text);
  if (!m) throw loaderxError('LOADERX_ARGUMENT', `not a store identity: ${String(text)}`);
  return Uint8Array.from(m[1].match(/../g) ?? [], (h) => Number.parseInt(h, 16));
}

/** A new buffer of `n` bytes with its pages touched (so later writes take no page faults). */
export function freshBytes(n) {
  const out = new Uint8Array(n);
  for (let at = 0; at < n; at += 4096) out[at] = 0;
  return out;
}

function split(out, lens, C, shapeOf) {
  const res = new Array(lens.length);
  let at = 0;
  for (let k = 0; k < lens.length; k++) {
    const n = lens[k];
    const arr = new C(out.buffer, out.byteOffset + at, n / C.BYTES_PER_ELEMENT);
    arr.shape = shapeOf(n);
    res[k] = arr;
    at += n;
  }
  return res;
}
