// Browser entry: the plain wasm build on this thread, or a store hosted in a worker (threaded when
// the page is cross-origin isolated; see openInWorker). Both have the same async API. Manifests
// open too (manifest.js), each of their stores as a store opens.
import init, * as wasm from '../pkg/web/loaderx_wasm.js';
import { makeApi } from './store.js';
import { makeStepRecords } from './inspect.js';
import { makeFilterRecords } from './filter.js';
import { browserSource } from './sources/index.js';
import { openInWorker } from './worker-client.js';
export { warmWorker } from './worker-client.js';
import { browserLocate, withManifests } from './manifest.js';

await init({ module_or_path: new URL('../pkg/web/loaderx_wasm_bg.wasm', import.meta.url) });
const api = makeApi(wasm, browserSource, openInWorker);
export const Store = withManifests(api.Store, wasm, browserLocate(wasm));
export const { Sampler, Packer, Mask, version, threaded, imageHeader, decodeImage, imageProblem } = api;
export const stepRecords = makeStepRecords(api.Sampler, wasm);
export const filterRecords = makeFilterRecords(wasm);
export * from './common.js';
export { DirectoryHandleSource, filesFromDataTransfer } from './sources/blob.js';
