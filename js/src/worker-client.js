// Stores hosted in a dedicated Web Worker (worker.js): the same async API as Store, with the
// decoding off the calling thread. One worker per build flavour (plain or threaded) hosts every
// store opened with it, so a second store costs no new worker or thread pool; the worker ends
// when its last store closes. Results come back as transferred buffers. Arguments are checked
// here as Store checks them (the same functions), so both give the same errors.
import { loaderxError, ioError, argumentError, labelOf } from './errors.js';
import { toIndexArray, verifyOptions, profileOptions } from './args.js';
import { batches } from './batches.js';
import { freshBytes } from './store.js';

/** Largest output buffer allocated ahead of a gather. */
const SPARE_MAX = 64 << 20;

/** Bytes of the buffer a gather's result came in (0 for anything else). */
function resultBytes(value) {
  if (value?.__typed && value.batch) return value.batch.buffer.byteLength;
  if (value?.__typed && value.single) return value.items[0][0].buffer.byteLength;
  return 0;
}

/** A worker's error fields as a LoaderxError of this realm. */
function revive(err) {
  const { index, file, offset } = err;
  return loaderxError(err.code || 'LOADERX_IO', err.message, { index, file, offset });
}

/** Whether a source can be rebuilt in a worker: it has a descriptor() that gives one. */
function movable(source) {
  try {
    return typeof source?.descriptor === 'function' && source.descriptor() != null;
  } catch {
    return false;
  }
}

/**
 * Where the browser entry opens a store: in a worker when `worker` is true or `threads` is
 * (by default: when the page is cross-origin isolated), else here (null). A source that cannot
 * move to a worker (no `descriptor()`, or one that refuses, as an HttpSource with a custom fetch
 * does) opens here when threads were only the isolated page's default, and is LOADERX_ARGUMENT
 * when `worker` or `threads` was asked for.
 * @param {unknown} source
 * @param {{worker?: unknown, threads?: unknown, verify?: string}} options
 */
export function openInWorker(source, { worker, threads, verify } = {}) {
  const useThreads = Boolean(threads ?? globalThis.crossOriginIsolated);
  if (!worker && !useThreads) return null;
  if (!worker && threads == null && !movable(source)) return null;
  return WorkerStore.open(source, { threads: useThreads, verify });
}

function withShapes(value) {
  if (value?.__typed && value.batch) {
    const { buffer, ctor, offsets, lengths, shapes } = value.batch;
    const C = globalThis[ctor];
    return offsets.map((o, k) => Object.assign(new C(buffer, o, lengths[k]), { shape: shapes[k] }));
  }
  if (value?.__typed) {
    const list = value.items.map(([arr, shape]) => Object.assign(arr, { shape }));
    return value.single ? list[0] : list;
  }
  return value;
}

/** One worker and its pending calls. */
class Host {
  constructor(threads) {
    this.worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
    this.threads = threads;
    this.pending = new Map();
    this.nextId = 1;
    this.stores = 0;
    /**
     * A buffer for the next gather's output, allocated (pages touched) on this thread while the
     * worker decodes, so the worker skips allocating fresh memory (page faults: in Chromium
     * about 1 ms per MiB). Sized as the last gather's result; the worker uses it only when the
     * size is exact, so results look as they always do.
     * @type {Uint8Array | null}
     */
    this.spare = null;
    this.lastBytes = 0;
    /** Whether warmWorker holds this worker for the page's life. */
    this.warmed = false;
    this.preparing = false;
    this.worker.onmessage = ({ data }) => {
      const p = this.pending.get(data.id);
      if (!p) return;
      if (data.progress) {
        // An onProgress that throws fails the call, as it does on the calling thread.
        try {
          p.onProgress?.(...data.progress);
        } catch (e) {
          this.pending.delete(data.id);
          p.reject(ioError(e, p.op));
        }
        return;
      }
      this.pending.delete(data.id);
      if (data.error) p.reject(revive(data.error));
      else {
        if (p.gathers) this.lastBytes = resultBytes(data.value);
        p.resolve(withShapes(data.value));
      }
    };
    this.worker.onerror = (ev) => this.fail(ev.message || 'the loaderx worker failed');
  }

  fail(message, code = 'LOADERX_IO') {
    for (const p of this.pending.values()) p.reject(loaderxError(code, message));
    this.pending.clear();
  }

  /**
   * @param {string} op
   * @param {unknown[]} args
   * @param {Function | null | undefined} [onProgress]
   * @param {AbortSignal | null} [signal]
   */
  call(op, args, onProgress, signal = null) {
    const id = this.nextId++;
    const gathers = op === 'gather' || op === 'gatherBytes';
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onProgress, gathers, op });
      // An abort rejects at once with the signal's reason and tells the worker to stop.
      signal?.addEventListener('abort', () => {
        if (!this.pending.delete(id)) return;
        reject(signal.reason);
        this.worker.postMessage({ id: this.nextId++, op: 'abort', args: [id] });
      }, { once: true });
      try {
        const spare = gathers ? this.spare : null;
        this.spare = null;
        if (spare) this.worker.postMessage({ id, op, args: [...args, spare] }, [spare.buffer]);
        else this.worker.postMessage({ id, op, args });
        if (gathers) this.prepare();
      } catch (e) {
        this.pending.delete(id);
        reject(loaderxError('LOADERX_ARGUMENT', `cannot send these arguments to the worker: ${e.message}`));
      }
    });
  }

  /** Allocates the next spare output buffer soon (after the caller's current task). */
  prepare() {
    if (this.preparing) return;
    this.preparing = true;
    setTimeout(() => {
      this.preparing = false;
      const n = this.lastBytes;
      if (!this.spare && n > 0 && n <= SPARE_MAX && this.stores > 0) this.spare = freshBytes(n);
    }, 0);
  }

  release() {
    if (--this.stores === 0) {
      if (hosts.get(this.threads) === this) hosts.delete(this.threads);
      this.worker.terminate();
      // Every store on this worker is closed: calls still in flight (decoding on the pool while
      // the close went through) were cut by close().
      this.fail('the store is closed', 'LOADERX_CLOSED');
    }
  }
}

const hosts = new Map();

/**
 * Starts the worker (and loads its wasm build, threaded where the page is cross-origin isolated)
 * before the first store is opened, and keeps it for the page's life: a viewer calls it at load,
 * so opening a store later costs no worker start. Resolves to `{threaded}`.
 * @param {{threads?: boolean}} [options]
 */
export async function warmWorker({ threads } = {}) {
  const useThreads = Boolean(threads ?? globalThis.crossOriginIsolated);
  let host = hosts.get(useThreads);
  if (!host) {
    host = new Host(useThreads);
    hosts.set(useThreads, host);
  }
  if (!host.warmed) {
    host.warmed = true;
    host.stores++; // held for the page's life
  }
  return /** @type {Promise<{threaded: boolean}>} */ (host.call('warm', [useThreads]));
}

export class WorkerStore {
  #host;
  #meta;
  #closed = false;

  constructor(host, meta) {
    this.#host = host;
    this.#meta = meta;
  }

  static async open(source, { threads = false, verify = 'fetched' } = {}) {
    if (typeof source?.descriptor !== 'function') {
      throw loaderxError('LOADERX_ARGUMENT', `${labelOf(source)} cannot be opened in a worker: its source has no descriptor() to rebuild it there`);
    }
    let descriptor;
    try {
      descriptor = source.descriptor();
    } catch (e) {
      throw argumentError(e, `${labelOf(source)} cannot be opened in a worker`);
    }
    let host = hosts.get(threads);
    if (!host) {
      try {
        host = new Host(threads);
      } catch (e) {
        throw ioError(e, 'starting the loaderx worker');
      }
      hosts.set(threads, host);
    }
    host.stores++;
    try {
      return new WorkerStore(host, await host.call('open', [descriptor, threads, verify]));
    } catch (e) {
      host.release();
      throw e;
    }
  }

  /**
   * Calls `op` in the worker with `args()` (built once the store is known to be open: a bad
   * argument to a closed store is LOADERX_CLOSED, as with Store).
   * @param {string} op
   * @param {() => unknown[]} args
   * @param {Function | null} [onProgress]
   * @param {AbortSignal | null} [signal]
   */
  #call(op, args, onProgress, signal = null) {
    if (this.#closed) return Promise.reject(loaderxError('LOADERX_CLOSED', 'the store is closed'));
    let payload;
    try {
      payload = [this.#meta.id, ...args()];
    } catch (e) {
      return Promise.reject(ioError(e, op));
    }
    return this.#host.call(op, payload, onProgress, signal);
  }

  #indices(indices) {
    return toIndexArray(indices);
  }

  #check() {
    if (this.#closed) throw loaderxError('LOADERX_CLOSED', 'the store is closed');
  }

  get length() { this.#check(); return this.#meta.length; }
  get schema() { return this.#meta.schema; }
  get header() { this.#check(); return this.#meta.header; }
  get hasDict() { this.#check(); return this.#meta.hasDict; }
  /** Whether the worker decodes on a wasm thread pool. */
  get threaded() { return this.#meta.threaded; }

  gather(indices) { return this.#call('gather', () => [this.#indices(indices)]); }
  get(i) { return this.#call('get', () => [this.#indices([i])[0]]); }
  gatherBytes(indices) { return this.#call('gatherBytes', () => [this.#indices(indices)]); }
  lengths(indices) { return this.#call('lengths', () => [this.#indices(indices)]); }
  stats() { return this.#call('stats', () => []); }
  codecBytes() { return this.#call('codecBytes', () => []); }
  maskIdentity() { return this.#call('maskIdentity', () => []); }
  digest() { return this.#call('digest', () => []); }
  checksums() { return this.#call('checksums', () => []); }
  get verifyMode() { this.#check(); return this.#meta.verifyMode; }
  setVerify(mode) {
    this.#check();
    if (!['off', 'fetched', 'always'].includes(mode)) {
      throw loaderxError('LOADERX_ARGUMENT', `verify must be 'off', 'fetched' or 'always', not ${String(mode)}`);
    }
    this.#meta = { ...this.#meta, verifyMode: mode };
    // Mode changes apply to calls made after this one (the worker takes messages in order).
    this.#call('setVerify', () => [mode]).catch(() => {});
  }
  /** Gathered batches in order, for `for await` (see batches.js). */
  batches(options) { return batches(this, options); }
  verify(options) {
    let opts;
    try {
      opts = verifyOptions(options);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#call('verify', () => [opts.batchSize], opts.onProgress);
  }

  /** Whole-store statistics, computed in the worker (see Store.profile). */
  profile(options) {
    let opts;
    try {
      opts = profileOptions(options);
      opts.signal?.throwIfAborted();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#call('profile', () => [opts.bins, opts.batchSize], opts.onProgress, opts.signal);
  }

  /** Cuts this store's HTTP requests in flight short (they fail with LOADERX_IO); later calls
   *  read as before. A viewer opening another store calls it on the one it replaces. */
  interrupt() {
    if (this.#closed) return;
    this.#call('interrupt', () => []).catch(() => {});
  }

  async close() {
    if (this.#closed) return;
    try { await this.#call('close', () => []); } catch { /* closing anyway */ }
    this.#closed = true;
    this.#host.release();
  }
}
