// The worker behind WorkerStore: loads the threaded wasm build (cross-origin isolated pages) or
// the plain one, opens the store from a source descriptor and answers calls.
import { makeApi } from './store.js';
import { fromDescriptor } from './sources/index.js';

let store = null;
let threaded = false;

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

function pack(value, single) {
  const list = single ? [value] : value;
  const items = list.map((a) => [a, a.shape]);
  const buffers = [...new Set(list.map((a) => a.buffer))];
  return [{ __typed: true, single, items }, buffers];
}

const ops = {
  async open([descriptor, threads]) {
    const api = await load(threads);
    store = await api.Store.open(fromDescriptor(descriptor));
    return [{ length: store.length, schema: store.schema, header: store.header, hasDict: store.hasDict, threaded }, []];
  },
  async gather([indices]) {
    const r = await store.gather(indices);
    return Array.isArray(r) ? pack(r, false) : pack(r, true);
  },
  async get([i]) {
    return pack(await store.get(i), true);
  },
  async gatherBytes([indices]) {
    return pack(await store.gatherBytes(indices), false);
  },
  async lengths([indices]) {
    const r = await store.lengths(indices);
    return [r, [r.buffer]];
  },
  async stats() {
    return [await store.stats(), []];
  },
  async verify(_, id) {
    return [await store.verify({ onProgress: (d, t) => postMessage({ id, progress: [d, t] }) }), []];
  },
  async close() {
    await store?.close();
    return [null, []];
  },
};

onmessage = async ({ data: { id, op, args } }) => {
  try {
    if (!ops[op] || (op !== 'open' && !store)) throw Object.assign(new Error(`unknown call ${op}`), { code: 'LOADERX_ARGUMENT' });
    const [value, transfer] = await ops[op](args, id);
    postMessage({ id, value }, transfer);
  } catch (e) {
    postMessage({ id, error: { code: e.code || 'LOADERX_IO', message: e.message || String(e), index: e.index } });
  }
};
