// Node entry: the plain wasm build, loaded synchronously; paths, URLs, `{name: bytes}` and sources
// open. Large calls on a store directory are shared with a worker thread (node-store.js).
import { readFileSync } from 'node:fs';
import * as wasm from '../pkg/web/loaderx_wasm.js';
import { nodeApi } from './node-store.js';

wasm.initSync({ module: readFileSync(new URL('../pkg/web/loaderx_wasm_bg.wasm', import.meta.url)) });
export const { Store, Sampler, version, threaded } = nodeApi(wasm);
export * from './common.js';
export { NodeSource } from './sources/node.js';
