// A Store hosted in a dedicated Web Worker (worker.js): the same async API as Store, with the
// decoding off the calling thread. Results come back as transferred buffers.
import { loaderxError } from './errors.js';

function revive(err) {
  const e = loaderxError(err.code || 'LOADERX_IO', err.message);
  if (err.index != null) e.index = err.index;
  return e;
}

function withShapes(value) {
  if (value && value.__typed) {
    const list = value.items.map(([arr, shape]) => Object.assign(arr, { shape }));
    return value.single ? list[0] : list;
  }
  return value;
}

export class WorkerStore {
  constructor(worker, meta) {
    this.worker = worker;
    this.meta = meta;
    this.pending = new Map();
    this.nextId = 1;
    this.closed = false;
    worker.onmessage = ({ data }) => {
      const p = this.pending.get(data.id);
      if (!p) return;
      if (data.progress) return p.onProgress?.(...data.progress);
      this.pending.delete(data.id);
      if (data.error) p.reject(revive(data.error));
      else p.resolve(withShapes(data.value));
    };
    worker.onerror = (ev) => this.#failAll(ev.message || 'the loaderx worker failed');
  }

  #failAll(message) {
    for (const p of this.pending.values()) p.reject(loaderxError('LOADERX_IO', message));
    this.pending.clear();
  }

  static async open(source, { threads = false } = {}) {
    const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
    const client = new WorkerStore(worker, null);
    try {
      client.meta = await client.#call('open', [source.descriptor(), threads]);
    } catch (e) {
      worker.terminate();
      throw e;
    }
    return client;
  }

  #call(op, args, onProgress) {
    if (this.closed) return Promise.reject(loaderxError('LOADERX_CLOSED', 'the store is closed'));
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
  verify({ onProgress } = {}) { return this.#call('verify', [], onProgress); }

  async close() {
    if (this.closed) return;
    try { await this.#call('close', []); } catch { /* closing anyway */ }
    this.closed = true;
    this.worker.terminate();
    this.#failAll('the store is closed');
  }
}
