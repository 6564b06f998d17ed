// Node entry: the plain wasm build, loaded synchronously; paths, URLs, `{name: bytes}` and sources open.
import { readFileSync } from 'node:fs';
import * as wasm from '../pkg/web/loaderx_wasm.js';
import { makeApi } from './store.js';
import { nodeSource } from './sources/node.js';

wasm.initSync({ module: readFileSync(new URL('../pkg/web/loaderx_wasm_bg.wasm', import.meta.url)) });
export const { Store, Sampler, version, threaded } = makeApi(wasm, nodeSource);
export * from './common.js';
export { NodeSource } from './sources/node.js';
