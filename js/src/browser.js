// Browser entry: the plain wasm build on this thread, or a store hosted in a worker (threaded when
// the page is cross-origin isolated; see openInWorker). Both have the same async API.
import init, * as wasm from '../pkg/web/loaderx_wasm.js';
import { makeApi } from './store.js';
import { browserSource } from './sources/index.js';
import { openInWorker } from './worker-client.js';

await init({ module_or_path: new URL('../pkg/web/loaderx_wasm_bg.wasm', import.meta.url) });
export const { Store, Sampler, version, threaded } = makeApi(wasm, browserSource, openInWorker);
export * from './common.js';
export { DirectoryHandleSource, filesFromDataTransfer } from './sources/blob.js';
