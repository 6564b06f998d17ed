// Node entry: the plain (single-threaded) wasm build, and directory paths as sources.
import { readFileSync } from 'node:fs';
import * as wasm from '../pkg/web/loaderx_wasm.js';
import { makeApi } from './store.js';
import { argumentError } from './errors.js';
import { NodeSource } from './sources/node.js';
import { HttpSource } from './sources/http.js';
import { MemorySource } from './sources/memory.js';

wasm.initSync({ module: readFileSync(new URL('../pkg/web/loaderx_wasm_bg.wasm', import.meta.url)) });
const api = makeApi(wasm);

/** Opens a store from a directory path, an http(s) URL, a source object, or `{name: bytes}`. */
function toSource(source) {
  if (source instanceof URL || (typeof source === 'string' && /^https?:\/\//i.test(source))) return new HttpSource(source);
  if (typeof source === 'string') return new NodeSource(source);
  if (source && typeof source.read === 'function' && typeof source.size === 'function') return source;
  if (source && typeof source === 'object') return new MemorySource(source);
  return new NodeSource(String(source));
}

export class Store extends api.Store {
  /** Always a promise: a value that makes no source rejects (LOADERX_ARGUMENT), never throws. */
  static async open(source) {
    let src;
    try {
      src = toSource(source);
    } catch (e) {
      throw argumentError(e, 'cannot open a store from this value');
    }
    return super.open(src);
  }
}
export const { Sampler } = api;
export const threaded = false;
/** The loaderx version of the wasm build inside (the same as the package's). */
export const version = wasm.version();
export { NodeSource, HttpSource, MemorySource };
export { loaderxError } from './errors.js';
