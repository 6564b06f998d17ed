// Node entry: the plain wasm build, loaded synchronously; paths, URLs, `{name: bytes}` and sources
// open, stores and manifests alike (manifest.js). Large calls on a store directory are shared
// with a worker thread (node-store.js).
import { readFileSync } from 'node:fs';
import * as wasm from '../pkg/web/loaderx_wasm.js';
import { nodeApi } from './node-store.js';
import { makeStepRecords } from './inspect.js';
import { makeFilterRecords } from './filter.js';
import { withManifests } from './manifest.js';
import { nodeLocate } from './manifest-node.js';

wasm.initSync({ module: readFileSync(new URL('../pkg/web/loaderx_wasm_bg.wasm', import.meta.url)) });
const api = nodeApi(wasm);
export const Store = withManifests(api.Store, wasm, nodeLocate(wasm));
export const { Sampler, Packer, Mask, version, threaded, imageHeader, decodeImage, imageProblem } = api;
export const stepRecords = makeStepRecords(api.Sampler, wasm);
export const filterRecords = makeFilterRecords(wasm);
export * from './common.js';
export { NodeSource } from './sources/node.js';
