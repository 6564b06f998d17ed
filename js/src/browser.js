// Browser entry: the plain wasm build on this thread, or a store hosted in a worker (threaded
// when the page is cross-origin isolated). Both have the same async API.
import init, * as wasm from '../pkg/web/loaderx_wasm.js';
import { makeApi } from './store.js';
import { argumentError } from './errors.js';
import { browserSource } from './sources/index.js';
import { WorkerStore } from './worker-client.js';

await init({ module_or_path: new URL('../pkg/web/loaderx_wasm_bg.wasm', import.meta.url) });
const api = makeApi(wasm);

export class Store extends api.Store {
  /**
   * @param source URL, FileList/File[], FileSystemDirectoryHandle, `{name: Blob|bytes}` or a source.
   * @param {{worker?: boolean, threads?: boolean}} [options] `worker` hosts the store in a Web
   *   Worker (decoding off this thread); `threads` (default: when cross-origin isolated) decodes on
   *   a wasm thread pool there. Options that are not an object are ignored.
   *   Always a promise: a value that makes no source rejects (LOADERX_ARGUMENT), never throws.
   */
  static async open(source, options) {
    const opts = options != null && typeof options === 'object' ? options : {};
    const threads = Boolean(opts.threads ?? globalThis.crossOriginIsolated);
    let src;
    try {
      src = browserSource(source);
    } catch (e) {
      throw argumentError(e, 'cannot open a store from this value');
    }
    if (opts.worker || threads) return WorkerStore.open(src, { threads });
    return super.open(src);
  }
}
export const { Sampler } = api;
/** The loaderx version of the wasm build inside (the same as the package's). */
export const version = wasm.version();
export { HttpSource } from './sources/http.js';
export { BlobSource, DirectoryHandleSource, filesFromDataTransfer } from './sources/blob.js';
export { MemorySource } from './sources/memory.js';
export { loaderxError } from './errors.js';
