// The Node Store: store.js's Store on this thread, with each large call shared with a worker
// thread (node-worker.js). The worker gathers the later records of the call from its own store
// on the same directory while this thread gathers the earlier ones, and the two outputs are
// joined in request order. Decoding zstd in wasm is most of a call's time and cannot go faster
// on one thread; this puts the machine's second core on it.
//
// Invariants:
// - A call gives what the Store on this thread gives, byte for byte and in the same shapes: each
//   record decodes on its own, and the parts are joined in request order.
// - And the same errors: a call whose part fails (a bad index, a corrupt record, a read) is run
//   again whole on this thread, and that run's result or error is the call's. Only a worker that
//   stops (it crashed, or was terminated) is reported as such: LOADERX_IO on every call waiting
//   on it; its stores go on without it.
// - Shared: a plain NodeSource (a directory; not a subclass, whose reads may differ from the
//   worker's), when the worker's store has the same header, schema and dictionary. Calls under
//   the source's `workerMin` decoded bytes never touch the worker (messaging would cost more
//   than it saves: below about 1 MiB here), and neither do memory, HTTP and custom sources. The
//   first call that reaches `workerMin` starts the worker and runs here.
// - Each thread decodes its part into a buffer kept for reuse (fresh memory costs page faults);
//   the worker returns its part in a new buffer with room left in front for this thread's part,
//   which becomes the result. A buffer kept is used by one call at a time.
// - One worker serves every store of the process. It is ref'd only while a call waits on it, so
//   an unclosed store keeps no process alive, and the last store closed terminates it. It runs
//   with this process's node options, less `--input-type`.
// - Both threads spin briefly instead of sleeping where the other is about to answer (Host.wait,
//   node-worker.js SPIN_NEXT): this VM takes about 1 ms to wake an idle vCPU.
import { resolve } from 'node:path';
import { MessageChannel, Worker, receiveMessageOnPort } from 'node:worker_threads';
import { makeApi, GATHER_INTO } from './store.js';
import { Spares, joinParts, partOf } from './node-parts.js';
import { batches } from './batches.js';
import { toIndexArray } from './args.js';
import { NodeSource, nodeSource } from './sources/node.js';
import { loaderxError, argumentError, ioError } from './errors.js';

/** The part of a call's decoded bytes gathered on this thread at first; later calls move it
 *  toward where both parts finish together (by each side's measured rate), within the bounds. */
const SHARE_FIRST = 0.5;
const SHARE_BOUNDS = [0.1, 0.9];
/** Weight of the latest call in the share. */
const SHARE_STEP = 0.25;
/** Largest call (decoded bytes) shared: a call over wasm's cap on one call's output (512 MiB;
 *  float16 records typed as float32 give 2 output bytes per decoded byte) must fail as a whole,
 *  as it does on this thread, not succeed in two parts under the cap. */
const SHARE_MAX = (512 << 20) / 2;
/** How long this thread spins for the worker's part once its own is done (Host.wait): a part
 *  of its own time, at most SPIN_MAX ms. */
const SPIN_PART = 0.5;
const SPIN_MAX = 5;
/** A wait (ms) longer than taking a reply that was already in (reading the message). */
const WAITED = 0.3;
/** Steps the split point moves in (of a call's records), so that a batch size keeps its parts'
 *  sizes from call to call and their output buffers are reused (node-parts.js Spares). */
const SPLIT_STEPS = 32;

/** Errors of a worker that stopped (as opposed to errors of the work it was given). */
const stopped = new WeakSet();

/** The worker and the calls waiting on it. */
class Host {
  /** The worker the next store connects to (a new one once it stopped). @type {Host | null} */
  static current = null;

  static get() {
    if (!Host.current || Host.current.error) Host.current = new Host();
    return Host.current;
  }

  constructor() {
    // Calls and replies go through a port of our own, so that `wait` can take a reply
    // synchronously (receiveMessageOnPort).
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    this.worker = new Worker(new URL('./node-worker.js', import.meta.url), { workerData: { port: port2 }, transferList: [port2], execArgv: workerArgv() });
    this.worker.unref();
    this.port.unref();
    /** @type {Map<number, {resolve: (v: any) => void, reject: (e: any) => void}>} */
    this.pending = new Map();
    this.nextId = 1;
    /** Stores connected, and the id the next one gets in the worker. */
    this.stores = 0;
    this.nextStore = 1;
    /** Why the worker stopped, once it has: later calls reject with it. @type {Error | null} */
    this.error = null;
    this.port.on('message', (m) => this.settle(m));
    this.port.on('close', () => this.fail('the loaderx worker closed its port'));
    this.worker.on('error', (e) => this.fail(`the loaderx worker failed: ${e?.message ?? e}`));
    this.worker.on('exit', (code) => this.fail(`the loaderx worker exited (code ${code})`));
  }

  /** Sends `msg`: `[id, reply]`, the reply resolving to the worker's value. The worker is ref'd
   *  while a call waits.
   * @returns {[number, Promise<any>]} */
  send(msg) {
    const id = this.nextId++;
    if (this.error) return [id, Promise.reject(this.error)];
    const reply = new Promise((resolve, reject) => {
      try {
        this.port.postMessage({ id, ...msg });
      } catch (e) {
        reject(ioError(e, 'sending a call to the loaderx worker'));
        return;
      }
      if (this.pending.size === 0) this.#ref(true);
      this.pending.set(id, { resolve, reject });
    });
    return [id, reply];
  }

  /** `send`'s reply alone. */
  call(msg) {
    return this.send(msg)[1];
  }

  /** Keeps the process alive (or not) for the worker's replies. */
  #ref(on) {
    for (const h of [this.worker, this.port]) if (on) h.ref(); else h.unref();
  }

  /**
   * Takes the worker's replies on this thread, without returning to the event loop, until call
   * `id` is settled or `until` (`now()`) passes. A thread that waits in the event loop sleeps,
   * and on this VM an idle vCPU takes about 1 ms to wake (docs/benchmarks.md, wake_probe), as
   * long as a part's whole imbalance: spinning briefly keeps it awake. A reply not in by then is
   * awaited as usual (a worker that stopped is seen there).
   */
  wait(id, until) {
    while (this.pending.has(id) && performance.now() < until) {
      const got = receiveMessageOnPort(this.port);
      if (got) this.settle(got.message);
    }
  }

  /** Settles the replies already in. A caller whose calls never leave microtasks (sync reads,
   *  cached table pages: `await` after `await`) never lets the event loop deliver them. */
  drain() {
    for (let got = receiveMessageOnPort(this.port); got; got = receiveMessageOnPort(this.port)) this.settle(got.message);
  }

  settle({ id, value, error }) {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (this.pending.size === 0) this.#ref(false);
    if (error) p.reject(loaderxError(error.code || 'LOADERX_IO', error.message));
    else p.resolve(value);
  }

  /** The worker stopped: every waiting call, and every later one, rejects (`code`). */
  fail(message, code = 'LOADERX_IO') {
    if (!this.error) {
      this.error = loaderxError(code, message);
      stopped.add(this.error);
    }
    for (const p of this.pending.values()) p.reject(this.error);
    this.pending.clear();
    if (Host.current === this) Host.current = null;
  }

  /** A store closed; the last one terminates the worker. */
  release() {
    if (--this.stores > 0) return;
    this.fail('the store is closed', 'LOADERX_CLOSED');
    this.port.close();
    this.worker.terminate().catch(() => {});
  }
}

/** This process's node options for the worker, less `--input-type` (which a worker refuses:
 *  `node --input-type=module -e ...` would fail to start it). */
function workerArgv() {
  return process.execArgv.filter((a, k, all) => !a.startsWith('--input-type') && all[k - 1] !== '--input-type');
}

/** Whether what the worker opened is the store this thread opened. */
function sameStore(seen, store) {
  return JSON.stringify([seen.header, seen.hasDict, seen.schema]) === JSON.stringify([store.header, store.hasDict, store.schema]);
}

/**
 * The Node API over the plain wasm build: `Store` as above; `Sampler`, `version` and `threaded`
 * as store.js makes them.
 * @param {any} wasm
 */
export function nodeApi(wasm) {
  const here = makeApi(wasm, nodeSource);

  class Store {
    #inner;
    /** The directory's source when calls may be shared, else null. @type {NodeSource | null} */
    #source;
    /** The directory as an absolute path when opened (the worker resolves no relative path). */
    #dir = '';
    #closed = false;
    /** The worker once connected (also after it stopped), and this store's id there. @type {Host | null} */
    #host = null;
    #remote = 0;
    /** Connecting (once): resolves to whether calls are shared. @type {Promise<boolean> | null} */
    #connecting = null;
    #shared = false;
    /** Mean decoded bytes per record of the calls measured, so small calls skip measuring. */
    #perRecord = Infinity;
    /** The part of a shared call's bytes gathered here. */
    #share = SHARE_FIRST;
    /** Output bytes per decoded byte, by method, as last seen (to size the parts' buffers). */
    #ratio = { gather: 1, gatherBytes: 1 };
    #spares = new Spares();

    /** Use `Store.open`. */
    constructor(key, inner, source) {
      if (key !== KEY) throw loaderxError('LOADERX_ARGUMENT', 'use Store.open to open a store');
      this.#inner = inner;
      this.#source = source;
      if (source) this.#dir = resolve(source.dir);
    }

    /**
     * Opens a store as store.js's Store.open does (`options.timeout` and `options.signal` go to
     * the HttpSource of a URL; other options are ignored). A store
     * directory shares its large calls with the worker, which it connects to at its first call
     * of at least `workerMin` bytes (that call runs on this thread).
     */
    static async open(value, options) {
      let source;
      try {
        source = nodeSource(value, options != null && typeof options === 'object' ? options : {});
      } catch (e) {
        throw argumentError(e, 'cannot open a store from this value');
      }
      const inner = await here.Store.open(source, options);
      return new Store(KEY, inner, Object.getPrototypeOf(source) === NodeSource.prototype ? source : null);
    }

    get length() { return this.#inner.length; }
    get schema() { return this.#inner.schema; }
    get header() { return this.#inner.header; }
    get hasDict() { return this.#inner.hasDict; }

    /** Connects to the worker (once): resolves to whether calls are shared from now on. */
    #connect() {
      this.#connecting ??= (async () => {
        const host = Host.get();
        host.stores++;
        this.#host = host;
        this.#remote = host.nextStore++;
        const seen = await host.call({ op: 'open', store: this.#remote, dir: this.#dir, verify: this.#inner.verifyMode });
        this.#shared = !this.#closed && sameStore(seen, this.#inner);
        return this.#shared;
      })();
      // A store the worker cannot share stops measuring its calls.
      this.#connecting.then((shared) => { if (!shared) this.#source = null; }, () => { this.#source = null; });
      return this.#connecting;
    }

    /**
     * A call's indices `all` as `[all, here, there, bytesHere, bytesThere]` when it is shared
     * (`there`, the later records, go to the worker), else null. A call that reaches
     * `workerMin` before the worker is connected starts connecting, and runs here.
     */
    async #split(all) {
      const source = this.#source;
      if (!source || this.#closed || this.#host?.error) return null;
      const min = source.workerMin;
      if (all.length < 2 || !(min < Infinity) || all.length * this.#perRecord < min / 2) return null;
      const lens = await this.#inner.lengths(all);
      let total = 0;
      for (const n of lens) total += n;
      this.#perRecord = total / all.length;
      if (total < min || total > SHARE_MAX) return null;
      if (!this.#shared) {
        this.#connect().catch(() => {});
        this.#host?.drain();
        return null;
      }
      let k = 0;
      for (let sum = 0; k < all.length && sum + lens[k] / 2 <= total * this.#share; k++) sum += lens[k];
      const step = Math.max(1, Math.floor(all.length / SPLIT_STEPS));
      k = Math.min(all.length - 1, Math.max(1, Math.round(k / step) * step));
      let here = 0;
      for (let j = 0; j < k; j++) here += lens[j];
      return [all, all.subarray(0, k), all.slice(k), here, total - here];
    }

    /** Moves the share toward where both parts take equal time at these rates (bytes per ms). */
    #balance(here, there) {
      if (!(here > 0 && there > 0)) return;
      const target = here / (here + there);
      const share = this.#share + SHARE_STEP * (target - this.#share);
      this.#share = Math.min(SHARE_BOUNDS[1], Math.max(SHARE_BOUNDS[0], share));
    }

    /** `gather` or `gatherBytes` (`method`), shared with the worker when it is large. */
    async #gather(method, indices) {
      if (!this.#source || this.#closed) return this.#inner[method](indices);
      // Converted once (a generator gives its indices once), failing as the Store's call does.
      let all;
      try {
        all = toIndexArray(indices);
      } catch (e) {
        throw ioError(e, 'gather');
      }
      let parts = null;
      try {
        parts = await this.#split(all);
      } catch {
        // Bad indices, say: the call on this thread gives the error it always gives.
      }
      const host = this.#host;
      if (!parts || !host) return this.#inner[method](all);
      const [, mine, theirs, bytesHere, bytesThere] = parts;
      // Each part's output size as the last call's ratio predicts it: the worker leaves room for
      // this thread's part in the buffer it returns, and both decode into kept buffers.
      const ratio = this.#ratio[method];
      const before = Math.round(bytesHere * ratio);
      const t0 = performance.now();
      let tHere = 0;
      const msg = { op: 'gather', store: this.#remote, method, indices: theirs, before, expect: Math.round(bytesThere * ratio) };
      const [id, there] = host.send(msg);
      there.catch(() => {}); // settled below, after this thread's part
      const spare = this.#spares.take(before);
      const here = this.#inner[GATHER_INTO](method, mine, spare).then((v) => { tHere = performance.now() - t0; return v; });
      await here.catch(() => {});
      const spun = performance.now();
      host.wait(id, spun + Math.min(SPIN_MAX, SPIN_PART * tHere));
      // When the reply came in while this thread waited for it, that is when the worker's part
      // was done, start and reply latency included.
      const waited = host.pending.has(id) ? 0 : performance.now() - spun;
      const [a, b] = await Promise.allSettled([here, there]);
      // The spare is free again once joinParts has copied this thread's part out of it.
      queueMicrotask(() => this.#spares.give(spare));
      if (a.status === 'fulfilled' && b.status === 'fulfilled') {
        const { start, end } = partOf(a.value);
        if (bytesHere > 0) this.#ratio[method] = (end - start) / bytesHere;
        const joining = performance.now();
        const out = joinParts(a.value, b.value);
        // This thread's time includes copying its part into the result. A reply that was in
        // before this thread's part was done says nothing of when the worker's was: then the
        // worker's own count of its time is taken (threads' clocks do not agree to a ms).
        const tThere = waited > WAITED ? tHere + waited : b.value.took;
        this.#balance(bytesHere / (tHere + performance.now() - joining), bytesThere / tThere);
        return out;
      }
      if (this.#closed) throw loaderxError('LOADERX_CLOSED', 'the store is closed');
      if (b.status === 'rejected' && stopped.has(b.reason)) throw b.reason;
      return this.#inner[method](all);
    }

    /**
     * Records as typed arrays. Dense stores give one typed array with `shape` `[n, ...itemShape]`;
     * ragged stores (and stores without a schema) give an array of typed arrays, each with `shape`.
     */
    gather(indices) {
      return this.#gather('gather', indices);
    }

    /** Records as their decoded bytes (Uint8Array each), before any dtype conversion. */
    gatherBytes(indices) {
      return this.#gather('gatherBytes', indices);
    }

    /** One record: like `gather([i])`, unwrapped. */
    get(i) {
      return this.#inner.get(i);
    }

    /** Logical lengths in bytes (Float64Array). */
    lengths(indices) {
      return this.#inner.lengths(indices);
    }

    /** Gathered batches in order, for `for await` (see batches.js). */
    batches(options) {
      return batches(this, options);
    }

    /** Decodes every record and checks lengths and bounds (see store.js). */
    verify(options) {
      return this.#inner.verify(options);
    }

    /** Storage usage (see store.js). */
    /** Which reads are checked against the store's checksums. */
    get verifyMode() { return this.#inner.verifyMode; }

    /** Changes which reads are checked. Calls are not shared with the worker from then on (its
     *  store was opened with the mode before). */
    setVerify(mode) {
      this.#inner.setVerify(mode);
      this.#source = null;
      this.#shared = false;
    }

    /** The store's content digest, or null (see store.js). */
    digest() {
      return this.#inner.digest();
    }

    /** What the store's checksums cover (see store.js). */
    checksums() {
      return this.#inner.checksums();
    }

    stats() {
      return this.#inner.stats();
    }

    /** Whole-store statistics (see profile.js), read on this thread. */
    profile(options) {
      return this.#inner.profile(options);
    }

    /** The identity exclusion masks are made for (see store.js). */
    maskIdentity() {
      return this.#inner.maskIdentity();
    }

    /** Records, stored and decoded bytes per codec (see store.js). */
    codecBytes() {
      return this.#inner.codecBytes();
    }

    /** `Store(<where it was opened from, URL secrets redacted>, <n> records)`. */
    toString() {
      return this.#inner.toString();
    }
    [Symbol.for('nodejs.util.inspect.custom')]() {
      return this.toString();
    }

    /** Releases the files, the wasm memory and this store's share of the worker. Later calls
     *  reject with LOADERX_CLOSED. */
    async close() {
      if (this.#closed) return;
      this.#closed = true;
      this.#shared = false;
      const host = this.#host;
      try {
        await this.#inner.close();
      } finally {
        if (host) {
          if (host.stores > 1) host.call({ op: 'close', store: this.#remote }).catch(() => {});
          host.release();
        }
      }
    }
  }

  return { ...here, Store };
}

/** Only `Store.open` constructs stores. */
const KEY = Symbol('loaderx node store');

/** The worker the next store connects to, or null (for tests: they stop it to see calls fail). */
export const currentHost = () => Host.current;
