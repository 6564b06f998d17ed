// Stores hosted in a dedicated Web Worker (worker.js): the same async API as Store, with the
// decoding off the calling thread. One worker per build flavour (plain or threaded) hosts every
// store opened with it, so a second store costs no new worker or thread pool; the worker ends
// when its last store closes. Results come back as transferred buffers.
import { loaderxError } from './errors.js';

function revive(err) {
  const e = loaderxError(err.code || 'LOADERX_IO', err.message);
  if (err.index != null) e.index = err.index;
  return e;
}

function withShapes(value) {
  if (value && value.__typed && value.batch) {
    const { buffer, ctor, offsets, lengths, shapes } = value.batch;
    const C = globalThis[ctor];
    return offsets.map((o, k) => Object.assign(new C(buffer, o, lengths[k]), { shape: shapes[k] }));
  }
  if (value && value.__typed) {
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
    this.worker.onmessage = ({ data }) => {
      const p = this.pending.get(data.id);
      if (!p) return;
      if (data.progress) return p.onProgress?.(...data.progress);
      this.pending.delete(data.id);
      if (data.error) p.reject(revive(data.error));
      else p.resolve(withShapes(data.value));
    };
    this.worker.onerror = (ev) => this.fail(ev.message || 'the loaderx worker failed');
  }

  fail(message) {
    for (const p of this.pending.values()) p.reject(loaderxError('LOADERX_IO', message));
    this.pending.clear();
  }

  call(op, args, onProgress) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onProgress });
      try {
        this.worker.postMessage({ id, op, args });
      } catch (e) {
        this.pending.delete(id);
        reject(loaderxError('LOADERX_ARGUMENT', `cannot send these arguments to the worker: ${e.message}`));
      }
    });
  }

  release() {
    if (--this.stores === 0) {
      if (hosts.get(this.threads) === this) hosts.delete(this.threads);
      this.worker.terminate();
      this.fail('the worker has ended');
    }
  }
}

const hosts = new Map();

export class WorkerStore {
  constructor(host, meta) {
    this.host = host;
    this.meta = meta;
    this.closed = false;
  }

  static async open(source, { threads = false } = {}) {
    let host = hosts.get(threads);
    if (!host) {
      host = new Host(threads);
      hosts.set(threads, host);
    }
    host.stores++;
    try {
      return new WorkerStore(host, await host.call('open', [source.descriptor(), threads]));
    } catch (e) {
      host.release();
      throw e;
    }
  }

  #call(op, args, onProgress) {
    if (this.closed) return Promise.reject(loaderxError('LOADERX_CLOSED', 'the store is closed'));
    return this.host.call(op, [this.meta.id, ...args], onProgress);
  }

  get length() { return this.meta.length; }
  get schema() { return this.meta.schema; }
  get header() { return this.meta.header; }
  get hasDict() { return this.meta.hasDict; }
  /** Whether the worker decodes on a wasm thread pool. */
  get threaded() { return this.meta.threaded; }

  gather(indices) { return this.#call('gather', [Array.from(indices, Number)]); }
  get(i) { return this.#call('get', [i]); }
  gatherBytes(indices) { return this.#call('gatherBytes', [Array.from(indices, Number)]); }
  lengths(indices) { return this.#call('lengths', [Array.from(indices, Number)]); }
  stats() { return this.#call('stats', []); }
  verify({ onProgress, batchSize } = {}) { return this.#call('verify', [batchSize], onProgress); }

  async close() {
    if (this.closed) return;
    try { await this.#call('close', []); } catch { /* closing anyway */ }
    this.closed = true;
    this.host.release();
  }
}
