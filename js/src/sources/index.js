// Turns what a browser user hands over into a source (shared by the page and the worker).
import { HttpSource } from './http.js';
import { BlobSource, DirectoryHandleSource } from './blob.js';
import { MemorySource } from './memory.js';
import { loaderxError, describe } from '../errors.js';

const isSource = (s) => s && typeof s.read === 'function' && typeof s.size === 'function';

/** A URL string, URL, FileList/File[], FileSystemDirectoryHandle, `{name: Blob|bytes}` or source
 *  (`options.timeout` and `options.signal` go to a URL's HttpSource). */
export function browserSource(source, options = {}) {
  if (isSource(source)) return source;
  if (typeof source === 'string' || source instanceof URL) {
    const { timeout, signal } = options ?? {};
    return new HttpSource(new URL(source, globalThis.location?.href), { ...(timeout != null && { timeout }), ...(signal != null && { signal }) });
  }
  if (source && typeof (/** @type {any} */ (source)).then === 'function') {
    throw loaderxError('LOADERX_ARGUMENT', 'cannot open a store from a Promise: did you forget an `await`?');
  }
  if (globalThis.FileSystemDirectoryHandle && source instanceof globalThis.FileSystemDirectoryHandle) return new DirectoryHandleSource(source);
  if ((globalThis.FileList && source instanceof globalThis.FileList) || (Array.isArray(source) && source.every((f) => f instanceof Blob))) {
    return BlobSource.fromFiles(source);
  }
  if (source && typeof source === 'object') {
    const values = source instanceof Map ? [...source.values()] : Object.values(source);
    if (values.length && values.every((v) => v instanceof Blob)) return new BlobSource(source);
    return new MemorySource(source);
  }
  throw loaderxError('LOADERX_ARGUMENT', `cannot open a store from ${describe(source)}: pass a URL, files, a directory handle or {name: bytes}`);
}

/** Rebuilds a source from its structured-clonable descriptor (in a worker). */
export function fromDescriptor(d) {
  switch (d.kind) {
    case 'http': return new HttpSource(d.base, { headers: d.headers, cacheBytes: d.cacheBytes, timeout: d.timeout });
    case 'blobs': return new BlobSource(d.files, d.label);
    case 'dir': return new DirectoryHandleSource(d.handle);
    case 'memory': return new MemorySource(d.files, d.label);
    default: throw loaderxError('LOADERX_ARGUMENT', `unknown source kind ${describe(d.kind)}`);
  }
}
