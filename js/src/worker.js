// The worker behind WorkerStore: loads the threaded wasm build (cross-origin isolated pages) or
// the plain one once, then opens stores from source descriptors and answers calls on them.
import { makeApi, GATHER_INTO } from './store.js';
import { loaderxError, ioError } from './errors.js';
import { fromDescriptor } from './sources/index.js';

/** The loaded build, loaded once even when opens arrive together. */
let api = null;
let threaded = false;
const stores = new Map();
/** Each open store's source, by store id (`interrupt`). */
const sources = new Map();
/** Calls that can be aborted (profiles), by call id. */
const aborts = new Map();
let nextStore = 1;

async function load(threads) {
  if (threads && globalThis.crossOriginIsolated) {
    const mod = await import('../pkg/threads/loaderx_wasm.js');
    await mod.default({ module_or_path: new URL('../pkg/threads/loaderx_wasm_bg.wasm', import.meta.url) });
    await mod.initThreadPool(navigator.hardwareConcurrency || 2);
    threaded = true;
    return makeApi(mod);
  }
  const mod = await import('../pkg/web/loaderx_wasm.js');
  await mod.default({ module_or_path: new URL('../pkg/web/loaderx_wasm_bg.wasm', import.meta.url) });
  return makeApi(mod);
}

/**
 * Typed arrays for postMessage. A list of views on one buffer (a batch) travels as that buffer
 * plus offsets, so the receiving side rebuilds the views instead of cloning each one.
 */
function pack(value, single) {
  const list = single ? [value] : value;
  const buffers = [...new Set(list.map((a) => a.buffer))];
  if (!single && buffers.length === 1 && list.length) {
    const ctor = list[0].constructor.name;
    const offsets = list.map((a) => a.byteOffset), lengths = list.map((a) => a.length), shapes = list.map((a) => a.shape);
    return [{ __typed: true, batch: { buffer: buffers[0], ctor, offsets, lengths, shapes } }, buffers];
  }
  const items = list.map((a) => [a, a.shape]);
  return [{ __typed: true, single, items }, buffers];
}

function store(id) {
  const s = stores.get(id);
  if (!s) throw loaderxError('LOADERX_CLOSED', 'the store is closed');
  return s;
}

const ops = {
  // Loads the build ahead of the first open (a page that knows it will open a store).
  async warm([threads]) {
    api ??= load(threads).catch((e) => { api = null; throw e; });
    await api;
    return [{ threaded }, []];
  },
  async open([descriptor, threads, verify]) {
    api ??= load(threads).catch((e) => { api = null; throw e; });
    const source = fromDescriptor(descriptor);
    const s = await (await api).Store.open(source, { verify });
    const id = nextStore++;
    stores.set(id, s);
    sources.set(id, source);
    return [{ id, length: s.length, schema: s.schema, header: s.header, hasDict: s.hasDict, threaded, verifyMode: s.verifyMode }, []];
  },
  async digest([id]) {
    return [await store(id).digest(), []];
  },
  async checksums([id]) {
    return [await store(id).checksums(), []];
  },
  async setVerify([id, mode]) {
    store(id).setVerify(mode);
    return [null, []];
  },
  // `spare`: a buffer the page allocated ahead for the output (used when the size is exact).
  async gather([id, indices, spare]) {
    const r = await store(id)[GATHER_INTO]('gather', indices, spare);
    return Array.isArray(r) ? pack(r, false) : pack(r, true);
  },
  async get([id, i]) {
    return pack(await store(id).get(i), true);
  },
  async gatherBytes([id, indices, spare]) {
    return pack(await store(id)[GATHER_INTO]('gatherBytes', indices, spare), false);
  },
  async lengths([id, indices]) {
    const r = await store(id).lengths(indices);
    return [r, [r.buffer]];
  },
  async maskIdentity([id]) {
    return [await store(id).maskIdentity(), []];
  },
  async codecBytes([id]) {
    return [await store(id).codecBytes(), []];
  },
  async stats([id]) {
    return [await store(id).stats(), []];
  },
  async verify([id, batchSize], call) {
    const onProgress = (d, t) => postMessage({ id: call, progress: [d, t] });
    return [await store(id).verify({ onProgress, ...(batchSize === undefined ? {} : { batchSize }) }), []];
  },
  async profile([id, bins, batchSize], call) {
    const controller = new AbortController();
    aborts.set(call, controller);
    try {
      const onProgress = (d, t, pass) => postMessage({ id: call, progress: [d, t, pass] });
      return [await store(id).profile({ bins, batchSize, onProgress, signal: controller.signal }), []];
    } finally {
      aborts.delete(call);
    }
  },
  // Stops the call `call` (a profile) at its next batch; it then fails with the abort.
  async abort([call]) {
    aborts.get(call)?.abort();
    return [null, []];
  },
  // Cuts the store's HTTP requests in flight short (a viewer opening another store over a slow
  // link: the old one's whole-table reads must not delay the new one's first page).
  async interrupt([id]) {
    sources.get(id)?.interrupt?.();
    return [null, []];
  },
  async close([id]) {
    const s = stores.get(id);
    stores.delete(id);
    sources.delete(id);
    await s?.close();
    return [null, []];
  },
};

globalThis.onmessage = async ({ data: { id, op, args } }) => {
  try {
    if (!Object.hasOwn(ops, op)) throw loaderxError('LOADERX_ARGUMENT', `unknown call ${String(op)}`);
    const [value, transfer] = await ops[op](args, id);
    postMessage({ id, value }, transfer);
  } catch (e) {
    // Whatever was thrown, the page gets a LoaderxError's fields (a thrown string or undefined too).
    const err = ioError(e, String(op));
    const num = (x) => (typeof x === 'number' ? x : undefined);
    const file = typeof err.file === 'string' ? err.file : undefined;
    postMessage({ id, error: { code: err.code, message: err.message, index: num(err.index), file, offset: num(err.offset) } });
  }
};
